/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * backend-hugetlb.c - packs on real huge pages, dual-mapped like memfd.
 *
 * The huge pages are those vm.nr_hugepages reserves (2 MiB on x86-64 and on
 * 4 KiB arm64 kernels, 32 MiB on 16 KiB ones; pages.c), or the page size of
 * the hugetlbfs mount in ep_config.path.  One pack is one huge page: a single iTLB entry covers every program in
 * it.  The file is a MFD_HUGETLB memfd, or a file in a hugetlbfs mount when
 * ep_config.path names one.  Every page of a new file is allocated
 * (fallocate) before anything touches it: a mapping's reservation does not
 * cover a cgroup's fault-time limit (hugetlb.2MB.max), under which the
 * first touch would die of SIGBUS.  So "no huge page left" is an error at
 * ep_alloc() time: -ENOSPC for a pool that asked for hugetlb, base pages
 * from then on for one that let AUTO choose.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "backend-memfd.h"
#include "code-range.h"
#include "guard.h"
#include "internal.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif
#ifndef MFD_HUGE_SHIFT
#define MFD_HUGE_SHIFT 26
#endif
#define HUGETLBFS_MAGIC_NR 0x958458f6

struct ep__backend {
	struct ep__memfd_kind kind;
	struct ep__memfd_kind small; /* AUTO only: base pages when huge run out */
	size_t huge;                 /* the huge page size */
	bool fallback;
	char *dir;
};

/* region->handle: which kind of file backs the region */
#define REGION_HUGE 0
#define REGION_SMALL 1

static long read_long(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* The counter of huge pages of size huge named what. */
static long huge_count(size_t huge, const char *what)
{
	char path[96];

	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%zukB/%s", huge >> 10,
		 what);
	return read_long(path);
}

static void explain_no_pages(char *why, size_t whylen, size_t huge, int err)
{
	long total = huge_count(huge, "nr_hugepages");
	long avail = huge_count(huge, "free_hugepages");
	long rsvd = huge_count(huge, "resv_hugepages");

	if (total <= 0)
		ep__why(why, whylen, "hugetlb: no free huge pages (vm.nr_hugepages=%ld)",
			total < 0 ? 0 : total);
	else if (avail - (rsvd > 0 ? rsvd : 0) <= 0)
		ep__why(why, whylen, "hugetlb: no free huge pages (all %ld of vm.nr_hugepages in use)",
			total);
	else if (err == ENOSPC)
		ep__why(why, whylen, "hugetlb: cannot allocate a huge page though %ld are free "
			"(a cgroup's hugetlb.<size>.max, or the mount's size limit)", avail);
	else
		ep__why(why, whylen, "hugetlb: cannot map a huge page: %s", ep__errno_text(err));
}

/* The errors that mean "no huge page for us now" (mmap or fallocate). */
static bool no_huge_page(int rc)
{
	return rc == -ENOMEM || rc == -ENOSPC;
}

static int hugetlb_open(const struct ep_config *cfg, struct ep__backend **out, char *why,
			size_t whylen)
{
	/* AUTO with EXECPACK_DEBUG=1: the memfd backend's views, which a
	 * debugger can write (a private copy of a huge page would need a
	 * spare huge page for every breakpoint) */
	if (cfg->backend == EP_BACKEND_AUTO && ep__memfd_debug_wanted()) {
		ep__why(why, whylen, "hugetlb: EXECPACK_DEBUG=1 wants views on base pages");
		return -ENODEV;
	}
	struct ep__backend *be = calloc(1, sizeof(*be));

	if (!be)
		return -ENOMEM;
	be->huge = ep__huge_page_size();
	if (cfg->path) {
		struct statfs sfs;

		if (statfs(cfg->path, &sfs) < 0) {
			int e = errno;

			ep__why(why, whylen, "hugetlb: %s: %s", cfg->path, ep__errno_text(e));
			free(be);
			return -e;
		}
		if ((unsigned long)sfs.f_type != HUGETLBFS_MAGIC_NR) {
			ep__why(why, whylen, "hugetlb: %s is not a hugetlbfs mount", cfg->path);
			free(be);
			return -EINVAL;
		}
		/* the mount's pagesize= option, whatever the default size */
		be->huge = (size_t)sfs.f_bsize;
		if (be->huge < ep__page_size() || (be->huge & (be->huge - 1))) {
			ep__why(why, whylen, "hugetlb: %s has %ld KiB pages", cfg->path,
				(long)sfs.f_bsize / 1024);
			free(be);
			return -EINVAL;
		}
	}
	be->kind = (struct ep__memfd_kind){ .name = "hugetlb", .align = be->huge, .commit = 1 };
	be->small = (struct ep__memfd_kind){ .name = "hugetlb", .align = ep__page_size() };
	if (cfg->near) {
		be->kind.near = be->small.near = cfg->near;
		be->kind.margin = be->small.margin = cfg->pack_size ? cfg->pack_size : be->huge;
	}
	int rc = ep__guards_open(cfg, "hugetlb", &be->kind.guards, &be->kind.pkey_off, why, whylen);

	if (rc) {
		free(be);
		return rc;
	}
	be->small.guards = be->kind.guards;
	be->small.pkey_off = be->kind.pkey_off;
	/* A pool that asked for hugetlb gets huge pages or an error; one that
	 * let AUTO choose keeps working on base pages once they run out. */
	be->fallback = cfg->backend == EP_BACKEND_AUTO;
	if (cfg->path) {
		be->dir = strdup(cfg->path);
		if (!be->dir) {
			free(be);
			return -ENOMEM;
		}
		be->kind.dir = be->dir;
	} else {
		/* the size's log2 in the flags: the default size might differ */
		be->kind.mfd_flags = MFD_HUGETLB |
				     ((unsigned)__builtin_ctzll(be->huge) << MFD_HUGE_SHIFT);
	}

	/* Probe: create and map one huge page now, so AUTO and explicit pools
	 * learn at ep_pool_create() whether huge pages can be had at all.
	 * Under AUTO the mapping's reservation answers without the page:
	 * its first packs are on base pages, and a huge page that the cgroup
	 * then refuses sends it to base pages still (hugetlb_map()); so no
	 * fallocate(), which would clear a whole huge page only to free it. */
	struct ep__memfd_kind probe = be->kind;

	if (be->fallback)
		probe.commit = 0;
	int fd = ep__memfd_open(&probe, be->huge, why, whylen);
	struct ep__region r;

	rc = fd;
	if (fd >= 0) {
		rc = ep__memfd_map_fd(&probe, fd, be->huge, NULL, NULL, &r, why, whylen);
		close(fd);
	}
	if (rc) {
		if (no_huge_page(rc)) {
			explain_no_pages(why, whylen, be->huge, -rc);
			rc = -ENOSPC;
		}
		free(be->dir);
		free(be);
		return rc;
	}
	ep__memfd_unmap(&probe, &r);
	/* AUTO's base-page regions; its first pack is one (hugetlb_map_part()) */
	(void)ep__memfd_probe_anon(&be->small,
				   !be->fallback ? 0 : cfg->pack_size ? cfg->pack_size : be->huge,
				   NULL, 0);
	*out = be;
	return 0;
}

static void hugetlb_close(struct ep__backend *be)
{
	ep__memfd_spare_drop(&be->small);
	ep__crange_close(be->kind.crange);
	free(be->dir);
	free(be);
}

static size_t hugetlb_page_size(const struct ep__backend *be)
{
	return be->huge;
}

static size_t hugetlb_default_pack_size(const struct ep__backend *be)
{
	return be->huge;
}

static int hugetlb_map(struct ep__backend *be, size_t size, ep_fill_fn fill, void *ctx,
		       struct ep__region *out)
{
	int rc = ep__memfd_map(&be->kind, size, fill, ctx, out);

	if (rc == 0) {
		out->handle = REGION_HUGE;
		return 0;
	}
	if (rc == EP__CRANGE_FULL) /* (not for want of a huge page) */
		return -ENOMEM;
	if (no_huge_page(rc) && be->fallback) {
		rc = ep__memfd_map(&be->small, size, fill, ctx, out);
		out->handle = REGION_SMALL;
		return ep__crange_rc(rc);
	}
	return no_huge_page(rc) ? -ENOSPC : rc; /* no huge page left: say so */
}

/*
 * Under AUTO a heap's packs are 4 KiB-paged and committed as they fill
 * (commit.c) until the heap has committed one pack's worth of code: a huge
 * page saves iTLB misses only for more code than a few dozen 4 KiB pages
 * hold, and costs its whole 2 MiB at once, resident, in every process that
 * JITs a little.  A pool that asked for hugetlb gets huge pages at once.
 */
static int hugetlb_map_part(struct ep__backend *be, size_t size, size_t commit, size_t held,
			    ep_fill_fn fill, void *ctx, struct ep__region *out)
{
	if (!be->fallback || held >= size)
		return hugetlb_map(be, size, fill, ctx, out);
	if (ep__memfd_spare_take(&be->small, size, commit, fill, ctx, out)) {
		out->handle = REGION_SMALL;
		return 0;
	}
	int rc = ep__memfd_map_part(&be->small, size, commit, fill, ctx, out);

	out->handle = REGION_SMALL;
	return ep__crange_rc(rc);
}

static int hugetlb_commit(struct ep__backend *be, struct ep__region *r, size_t commit,
			  ep_fill_fn fill, void *ctx)
{
	(void)be;
	return ep__memfd_commit(r, commit, fill, ctx);
}

/* Only a 4 KiB-paged region (AUTO's small packs): a huge page is one. */
static int hugetlb_uncommit(struct ep__backend *be, struct ep__region *r, size_t commit)
{
	(void)be;
	return r->handle == REGION_SMALL ? ep__memfd_uncommit(r, commit) : -EOPNOTSUPP;
}

static void hugetlb_unmap(struct ep__backend *be, struct ep__region *r)
{
	ep__memfd_unmap(r->handle == REGION_SMALL ? &be->small : &be->kind, r);
}

static int hugetlb_write(struct ep__backend *be, struct ep__region *r, size_t off,
			 const void *src, size_t len)
{
	(void)be;
	return ep__memfd_write(r, off, src, len);
}

static int hugetlb_fill(struct ep__backend *be, struct ep__region *r, size_t off, size_t len,
			ep_fill_fn fill, void *ctx)
{
	(void)be;
	return ep__memfd_fill(r, off, len, fill, ctx);
}

/* The private copy after fork() needs a spare huge page per region; an
 * AUTO pool copies onto base pages when there is none, as map() does. */
static int hugetlb_privatize(struct ep__backend *be, struct ep__region *r)
{
	int rc = ep__memfd_privatize(r->handle == REGION_SMALL ? &be->small : &be->kind, r);

	if (no_huge_page(rc) && r->handle == REGION_HUGE && be->fallback) {
		rc = ep__memfd_privatize(&be->small, r);
		if (rc == 0)
			r->handle = REGION_SMALL;
		return rc;
	}
	return no_huge_page(rc) && r->handle == REGION_HUGE ? -ENOSPC : rc;
}

static unsigned hugetlb_guards(const struct ep__backend *be, const char **pkey_off)
{
	*pkey_off = be->kind.pkey_off;
	return be->kind.guards;
}

static void hugetlb_set_range(struct ep__backend *be, struct ep__crange *cr)
{
	ep__memfd_spare_drop(&be->small); /* (not in the range) */
	be->kind.crange = be->small.crange = cr;
}

const struct ep__backend_ops ep__backend_hugetlb = {
	.name = "hugetlb",
	.threadsafe = 1,
	.data = 1,
	.alias_io = 1,
	.open = hugetlb_open,
	.close = hugetlb_close,
	.page_size = hugetlb_page_size,
	.default_pack_size = hugetlb_default_pack_size,
	.map = hugetlb_map,
	.unmap = hugetlb_unmap,
	.map_part = hugetlb_map_part,
	.commit = hugetlb_commit,
	.uncommit = hugetlb_uncommit,
	.write = hugetlb_write,
	.fill = hugetlb_fill,
	.privatize = hugetlb_privatize,
	.guards = hugetlb_guards,
	.set_range = hugetlb_set_range,
};
