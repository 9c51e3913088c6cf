/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * backend-memfd.c - dual mapping of anonymous memory.
 *
 * Each region is anonymous shared memory (or, where that cannot be made
 * executable, a sealed memfd) mapped twice, MAP_SHARED: once read+exec
 * (what callers see) and once read+write at an unrelated address (the alias
 * that never leaves the library).  No mapping is ever writable and
 * executable at once, which also keeps this working under
 * PR_SET_MDWE(PR_MDWE_REFUSE_EXEC_GAIN).  The hugetlb backend reuses all of
 * this with a different memfd flavour (ep__memfd_* below).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend-memfd.h"
#include "code-range.h"
#include "guard.h"
#include "internal.h"

/* ---- the plain memfd backend ------------------------------------------------ */

struct ep__backend {
	struct ep__memfd_kind kind;
	size_t page;
};


static void memfd_unmap(struct ep__backend *be, struct ep__region *r)
{
	ep__memfd_unmap(&be->kind, r);
	if (be->kind.debug && r->handle >= 0)
		close(r->handle);
	r->handle = -1;
}

/* Probe once at open: a pool that cannot get executable memory should fail
 * at ep_pool_create() with its reason, not at the first ep_alloc(). */
static int open_kind(const struct ep_config *cfg, struct ep__backend **out, char *why,
		     size_t whylen, int debug)
{
	struct ep__backend *be = calloc(1, sizeof(*be));

	if (!be)
		return -ENOMEM;
	be->page = ep__page_size();
	be->kind = (struct ep__memfd_kind){ .name = "memfd", .align = be->page };
	if (cfg && cfg->near) {
		be->kind.near = cfg->near;
		be->kind.margin = cfg->pack_size ? cfg->pack_size : EP__DEFAULT_PACK_SIZE;
	}

	int rc = ep__guards_open(cfg, "memfd", &be->kind.guards, &be->kind.pkey_off, why, whylen);

	if (rc) {
		free(be);
		return rc;
	}
	/* anonymous shared memory; a memfd where it cannot be made executable,
	 * or seen twice (under Valgrind), or where a debugger is to write into
	 * private views of it */
	be->kind.debug = debug;
	rc = be->kind.debug ? -EINVAL
			    : ep__memfd_probe_anon(&be->kind,
						   cfg && cfg->pack_size ? cfg->pack_size
									 : EP__DEFAULT_PACK_SIZE,
						   why, whylen);
	if (rc == 0 || rc == -EADDRNOTAVAIL) {
		if (rc)
			free(be);
		else
			*out = be;
		return rc;
	}
	int fd = ep__memfd_open(&be->kind, be->page, why, whylen);

	if (fd < 0) {
		free(be);
		return fd;
	}
	struct ep__region r;

	rc = ep__memfd_map_fd(&be->kind, fd, be->page, NULL, NULL, &r, why, whylen);
	close(fd);
	if (rc) {
		free(be);
		return rc;
	}
	memfd_unmap(be, &r);
	*out = be;
	return 0;
}

static int memfd_open(const struct ep_config *cfg, struct ep__backend **out, char *why,
		      size_t whylen)
{
	return open_kind(cfg, out, why, whylen, 0);
}

static void memfd_close(struct ep__backend *be)
{
	ep__memfd_spare_drop(&be->kind);
	ep__crange_close(be->kind.crange);
	free(be);
}

static size_t memfd_page_size(const struct ep__backend *be)
{
	return be->page;
}

static size_t memfd_default_pack_size(const struct ep__backend *be)
{
	(void)be;
	return EP__DEFAULT_PACK_SIZE;
}

static int memfd_map(struct ep__backend *be, size_t size, ep_fill_fn fill, void *ctx,
		     struct ep__region *out)
{
	return ep__crange_rc(ep__memfd_map(&be->kind, size, fill, ctx, out));
}

static int memfd_map_part(struct ep__backend *be, size_t size, size_t commit, size_t held,
			  ep_fill_fn fill, void *ctx, struct ep__region *out)
{
	(void)held;
	if (ep__memfd_spare_take(&be->kind, size, commit, fill, ctx, out))
		return 0;
	return ep__crange_rc(ep__memfd_map_part(&be->kind, size, commit, fill, ctx, out));
}

static int memfd_commit(struct ep__backend *be, struct ep__region *r, size_t commit,
			ep_fill_fn fill, void *ctx)
{
	(void)be;
	return ep__memfd_commit(r, commit, fill, ctx);
}

static int memfd_uncommit(struct ep__backend *be, struct ep__region *r, size_t commit)
{
	(void)be;
	return ep__memfd_uncommit(r, commit);
}

static int memfd_write(struct ep__backend *be, struct ep__region *r, size_t off,
		       const void *src, size_t len)
{
	(void)be;
	return ep__memfd_write(r, off, src, len);
}

static int memfd_fill(struct ep__backend *be, struct ep__region *r, size_t off, size_t len,
		      ep_fill_fn fill, void *ctx)
{
	(void)be;
	return ep__memfd_fill(r, off, len, fill, ctx);
}

static int memfd_hole(struct ep__backend *be, struct ep__region *r, size_t off, size_t len)
{
	(void)be;
	return ep__memfd_hole(r, off, len);
}

static int memfd_unhole(struct ep__backend *be, struct ep__region *r, size_t off, size_t len,
			ep_fill_fn fill, void *ctx)
{
	(void)be;
	return ep__memfd_unhole(r, off, len, fill, ctx);
}

static int memfd_privatize(struct ep__backend *be, struct ep__region *r)
{
	return ep__memfd_privatize(&be->kind, r);
}

static unsigned memfd_guards(const struct ep__backend *be, const char **pkey_off)
{
	*pkey_off = be->kind.pkey_off;
	return be->kind.guards;
}

static void memfd_set_range(struct ep__backend *be, struct ep__crange *cr)
{
	ep__memfd_spare_drop(&be->kind); /* (not in the range) */
	be->kind.crange = cr;
}

const struct ep__backend_ops ep__backend_memfd = {
	.name = "memfd",
	.threadsafe = 1,
	.data = 1,
	.alias_io = 1,
	.open = memfd_open,
	.close = memfd_close,
	.page_size = memfd_page_size,
	.default_pack_size = memfd_default_pack_size,
	.map = memfd_map,
	.unmap = memfd_unmap,
	.map_part = memfd_map_part,
	.commit = memfd_commit,
	.uncommit = memfd_uncommit,
	/* (not the debug table's: its private exec view would need a sync) */
	.hole = memfd_hole,
	.unhole = memfd_unhole,
	.write = memfd_write,
	.fill = memfd_fill,
	.privatize = memfd_privatize,
	.guards = memfd_guards,
	.set_range = memfd_set_range,
};

/* ---- the same with views a debugger can write (EXECPACK_DEBUG=1) --------------
 * Its own table, which config.c picks, so that the plain backend's copies
 * and fills test nothing for it. */

static int memfd_debug_open(const struct ep_config *cfg, struct ep__backend **out, char *why,
			    size_t whylen)
{
	return open_kind(cfg, out, why, whylen, 1);
}

static int memfd_debug_commit(struct ep__backend *be, struct ep__region *r, size_t commit,
			      ep_fill_fn fill, void *ctx)
{
	size_t had = r->committed;
	int rc = ep__memfd_commit(r, commit, fill, ctx);

	(void)be;
	if (!rc && commit > had)
		ep__memfd_debug_sync(r, had, commit - had);
	return rc;
}

static int memfd_debug_write(struct ep__backend *be, struct ep__region *r, size_t off,
			     const void *src, size_t len)
{
	int rc = ep__memfd_write(r, off, src, len);

	(void)be;
	if (!rc)
		ep__memfd_debug_sync(r, off, len);
	return rc;
}

static int memfd_debug_fill(struct ep__backend *be, struct ep__region *r, size_t off,
			    size_t len, ep_fill_fn fill, void *ctx)
{
	int rc = ep__memfd_fill(r, off, len, fill, ctx);

	(void)be;
	if (!rc)
		ep__memfd_debug_sync(r, off, len);
	return rc;
}

const struct ep__backend_ops ep__backend_memfd_debug = {
	.name = "memfd",
	.threadsafe = 1,
	.data = 1,
	.open = memfd_debug_open,
	.close = memfd_close,
	.page_size = memfd_page_size,
	.default_pack_size = memfd_default_pack_size,
	.map = memfd_map,
	.unmap = memfd_unmap,
	.map_part = memfd_map_part,
	.commit = memfd_debug_commit,
	.uncommit = memfd_uncommit,
	.write = memfd_debug_write,
	.fill = memfd_debug_fill,
	.privatize = memfd_privatize,
	.guards = memfd_guards,
	.set_range = memfd_set_range,
};
