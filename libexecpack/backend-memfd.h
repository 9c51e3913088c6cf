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

#include <errno.h>
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
	struct ep__crange *crange; /* ep_config.code_range: exec views inside it, or NULL */
	int anon;           /* base pages: anonymous shared memory rather than a
			     * memfd, where exec can be added by mprotect() */
	int debug;          /* EXECPACK_DEBUG=1: exec views are private mappings
			     * of the memfd, which a debugger can write */
	unsigned guards;    /* EP_GUARD_* of its regions (guard.h) */
	const char *pkey_off; /* why not EP_GUARD_PKEY, or NULL */
};

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
int ep__memfd_map(const struct ep__memfd_kind *kind, size_t size, ep_fill_fn fill,
		  void *fill_ctx, struct ep__region *out);
void ep__memfd_unmap(const struct ep__memfd_kind *kind, struct ep__region *r);
int ep__memfd_write(struct ep__region *r, size_t off, const void *src, size_t len);
int ep__memfd_fill(struct ep__region *r, size_t off, size_t len, ep_fill_fn fill, void *ctx);
int ep__memfd_privatize(const struct ep__memfd_kind *kind, struct ep__region *r);
/* At a backend's open: whether base-page regions can be anonymous shared
 * memory here (maps and unmaps one page, near kind->near if set), and
 * kind->anon set so.  0, or -errno and why: -EADDRNOTAVAIL where nothing
 * is free near kind->near; any other error means a memfd may still do. */
int ep__memfd_probe_anon(struct ep__memfd_kind *kind, char *why, size_t whylen);

/* ---- between the files of the machinery (memfd-*.c) ---- */

/* vm.memfd_noexec, or -1 (for messages). */
int ep__memfd_noexec_sysctl(void);
/* Where views go and how they go away (memfd-place.c). */
/* A random, align-aligned address hint for an RW alias, or NULL. */
void *ep__memfd_alias_hint(size_t align);
/* Where a new exec view goes: *want NULL (anywhere) or a PROT_NONE
 * reservation to map over (code range, or near kind->near); and back. */
int ep__memfd_place(const struct ep__memfd_kind *kind, size_t size, void **want);
void ep__memfd_unplace(const struct ep__memfd_kind *kind, void *exec, size_t size);
/* Regions of anonymous shared memory (memfd-anon.c). */
int ep__memfd_anon_map(const struct ep__memfd_kind *kind, size_t size, size_t commit,
		       ep_fill_fn fill, void *fill_ctx, struct ep__region *out);
int ep__memfd_anon_privatize(const struct ep__memfd_kind *kind, struct ep__region *r);
/* Whether an anonymous region failed because exec cannot be added here
 * (PR_SET_MDWE, a policy): a memfd may still do. */
static inline int ep__memfd_exec_refused(int rc)
{
	return rc == -EACCES || rc == -EPERM;
}
/* EXECPACK_DEBUG views: the bytes an alias store changed, into the exec
 * view's pages that a debugger copied (memfd-debug.c). */
void ep__memfd_debug_sync(struct ep__region *r, size_t off, size_t len);

#endif /* EP_BACKEND_MEMFD_H */
