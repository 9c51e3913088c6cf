/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * memfd-shared.h - what the files of the dual-mapping machinery
 * (backend-memfd.c, memfd-*.c) share: the kind of file a backend maps, and
 * the calls between those files.  Below backend-memfd.h, whose entry points
 * call into memfd-*.c: an inline here calls nothing above it, so that no
 * file of the machinery calls back up into the one that calls it.
 */
#ifndef EP_MEMFD_SHARED_H
#define EP_MEMFD_SHARED_H

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
	/* The open's probe region (ep__memfd_probe_anon()): one pack of
	 * anonymous shared memory, its first page executable and untouched,
	 * kept for the first pack rather than unmapped and mapped again. */
	struct ep__region spare;
	unsigned spare_gen; /* the fork generation it was made in */
	int spare_held;     /* atomic: spare is there to take */
};

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

#endif /* EP_MEMFD_SHARED_H */
