/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * backend-memfd.h - the dual-mapping machinery shared by the memfd and
 * hugetlb backends (they differ only in how the file is made).  Regions of
 * base pages are anonymous shared memory where they can be (kind->anon),
 * which perf takes for anonymous memory, so that it reads the perf map for
 * them; a memfd otherwise.
 */
#ifndef EP_BACKEND_MEMFD_H
#define EP_BACKEND_MEMFD_H

#include <stddef.h>

#include "backend.h"
#include "memfd-shared.h"

/* EXECPACK_DEBUG set and not "0": views a debugger can plant breakpoints
 * in (the memfd backend; AUTO passes over hugetlb for it). */
int ep__memfd_debug_wanted(void);

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
/* The other way: [commit, committed) inaccessible, its pages given back. */
int ep__memfd_uncommit(struct ep__region *r, size_t commit);
/* The same for [off, off+len) inside it, and back (fill, then exec). */
int ep__memfd_hole(struct ep__region *r, size_t off, size_t len);
int ep__memfd_unhole(struct ep__region *r, size_t off, size_t len, ep_fill_fn fill, void *ctx);
int ep__memfd_map(const struct ep__memfd_kind *kind, size_t size, ep_fill_fn fill,
		  void *fill_ctx, struct ep__region *out);
void ep__memfd_unmap(const struct ep__memfd_kind *kind, struct ep__region *r);
int ep__memfd_write(struct ep__region *r, size_t off, const void *src, size_t len);
int ep__memfd_fill(struct ep__region *r, size_t off, size_t len, ep_fill_fn fill, void *ctx);
int ep__memfd_privatize(const struct ep__memfd_kind *kind, struct ep__region *r);
/* At a backend's open: whether base-page regions can be anonymous shared
 * memory here (maps a region of pack bytes, kept as kind->spare; one
 * page, unmapped, near kind->near, or where pack is not a multiple of
 * pages or past the default), and kind->anon set so.  0, or -errno and why: -EADDRNOTAVAIL
 * where nothing is free near kind->near; any other error means a memfd may
 * still do. */
int ep__memfd_probe_anon(struct ep__memfd_kind *kind, size_t pack, char *why, size_t whylen);
/* The probe's region as a new pack of size bytes, commit of them filled
 * (fill) and executable: 1 and *out set, or 0 where there is none to take
 * (another size, a data region, a code range, made before a fork). */
int ep__memfd_spare_take(struct ep__memfd_kind *kind, size_t size, size_t commit,
			 ep_fill_fn fill, void *ctx, struct ep__region *out);
/* Unmaps the probe's region if it is still there (close, code range). */
void ep__memfd_spare_drop(struct ep__memfd_kind *kind);

#endif /* EP_BACKEND_MEMFD_H */
