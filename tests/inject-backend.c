/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * inject-backend.c - a backend wrapper for test builds (EP_TEST_HOOKS) that
 * makes chosen backend calls fail, to check that every failure inside the
 * library leaves the pool consistent.
 */
#include <errno.h>
#include <stddef.h>

#include "backend.h"
#include "inject-backend.h"

int ep_inject_countdown = -1; /* fail the call when it reaches 0; <0: never */
int ep_inject_errno = ENOMEM;
unsigned ep_inject_fired;

static const struct ep__backend_ops *real;

static int should_fail(void)
{
	if (ep_inject_countdown < 0)
		return 0;
	if (ep_inject_countdown-- == 0) {
		ep_inject_fired++;
		return 1;
	}
	return 0;
}

static int w_map(struct ep__backend *be, size_t size, ep_fill_fn fill, void *ctx,
		 struct ep__region *out)
{
	return should_fail() ? -ep_inject_errno : real->map(be, size, fill, ctx, out);
}

static int w_map_part(struct ep__backend *be, size_t size, size_t commit, size_t held,
		      ep_fill_fn fill, void *ctx, struct ep__region *out)
{
	return should_fail() ? -ep_inject_errno
			     : real->map_part(be, size, commit, held, fill, ctx, out);
}

static int w_commit(struct ep__backend *be, struct ep__region *r, size_t commit,
		    ep_fill_fn fill, void *ctx)
{
	return should_fail() ? -ep_inject_errno : real->commit(be, r, commit, fill, ctx);
}

static int w_write(struct ep__backend *be, struct ep__region *r, size_t off, const void *src,
		   size_t len)
{
	return should_fail() ? -ep_inject_errno : real->write(be, r, off, src, len);
}

static int w_fill(struct ep__backend *be, struct ep__region *r, size_t off, size_t len,
		  ep_fill_fn fill, void *ctx)
{
	return should_fail() ? -ep_inject_errno : real->fill(be, r, off, len, fill, ctx);
}

static int w_privatize(struct ep__backend *be, struct ep__region *r)
{
	return should_fail() ? -ep_inject_errno : real->privatize(be, r);
}

static void w_unmap(struct ep__backend *be, struct ep__region *r)
{
	real->unmap(be, r);
}

static void w_close(struct ep__backend *be)
{
	real->close(be);
}

static size_t w_page_size(const struct ep__backend *be)
{
	return real->page_size(be);
}

static size_t w_default_pack_size(const struct ep__backend *be)
{
	return real->default_pack_size(be);
}

static struct ep__backend_ops wrapped;

const struct ep__backend_ops *ep__test_wrap_backend(const struct ep__backend_ops *ops)
{
	real = ops;
	wrapped = (struct ep__backend_ops){
		.name = ops->name,
		.threadsafe = ops->threadsafe,
		.data = ops->data,
		.open = ops->open,
		.close = w_close,
		.page_size = w_page_size,
		.default_pack_size = w_default_pack_size,
		.map = w_map,
		.unmap = w_unmap,
		.map_part = ops->map_part ? w_map_part : NULL,
		.commit = ops->commit ? w_commit : NULL,
		.uncommit = ops->uncommit,
		.write = w_write,
		.fill = w_fill,
		.privatize = ops->privatize ? w_privatize : NULL,
		.guards = ops->guards,
		.set_range = ops->set_range,
	};
	return &wrapped;
}
