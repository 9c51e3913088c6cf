/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * backend-memfd.h - the dual-mapping machinery shared by the memfd and
 * hugetlb backends (they differ only in how the file is made).
 */
#ifndef EP_BACKEND_MEMFD_H
#define EP_BACKEND_MEMFD_H

#include <stddef.h>

#include "backend.h"

struct ep__memfd_kind {
	const char *name;   /* for messages: "memfd", "hugetlb" */
	unsigned mfd_flags; /* extra memfd_create flags (MFD_HUGETLB | size) */
	size_t align;       /* page size of the file */
	const char *dir;    /* a hugetlbfs mount to create files in, or NULL */
	int commit;         /* allocate every page when the file is made (fallocate) */
	const void *near;   /* ep_config.near: exec views within rel32 reach, or NULL */
	size_t margin;      /* the pool's pack size, kept free of the reach (near.c) */
	unsigned guards;    /* EP_GUARD_* of its regions (guard.h) */
	const char *pkey_off; /* why not EP_GUARD_PKEY, or NULL */
};

/* A sized, sealed file of the kind; returns the fd or -errno (+ why).  With
 * kind->commit, a page that cannot be had is -ENOSPC (or -ENOMEM) here. */
int ep__memfd_open(const struct ep__memfd_kind *kind, size_t size, char *why, size_t whylen);
/* Map fd twice (RW alias, filled, then RX view). */
int ep__memfd_map_fd(const struct ep__memfd_kind *kind, int fd, size_t size,
		     ep_fill_fn fill, void *fill_ctx, struct ep__region *out,
		     char *why, size_t whylen);
/* ... with only the first commit bytes filled and executable. */
int ep__memfd_map_fd_part(const struct ep__memfd_kind *kind, int fd, size_t size,
			  size_t commit, ep_fill_fn fill, void *fill_ctx,
			  struct ep__region *out, char *why, size_t whylen);
int ep__memfd_map_part(const struct ep__memfd_kind *kind, size_t size, size_t commit,
		       ep_fill_fn fill, void *fill_ctx, struct ep__region *out);
/* Grow a region's committed prefix (fill, then exec). */
int ep__memfd_commit(struct ep__region *r, size_t commit, ep_fill_fn fill, void *ctx);
int ep__memfd_map(const struct ep__memfd_kind *kind, size_t size, ep_fill_fn fill,
		  void *fill_ctx, struct ep__region *out);
void ep__memfd_unmap(struct ep__region *r);
int ep__memfd_write(struct ep__region *r, size_t off, const void *src, size_t len);
int ep__memfd_fill(struct ep__region *r, size_t off, size_t len, ep_fill_fn fill, void *ctx);
int ep__memfd_privatize(const struct ep__memfd_kind *kind, struct ep__region *r);

#endif /* EP_BACKEND_MEMFD_H */
