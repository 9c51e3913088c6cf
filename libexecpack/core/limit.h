/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * limit.h - the pool's limit on bytes reserved (ep_config.limit).
 */
#ifndef EP_LIMIT_H
#define EP_LIMIT_H

#include <errno.h>

#include "atomic.h"
#include "interleave.h"
#include "types.h"

/*
 * The limit counts what is reserved, exactly: a charge is taken when the
 * reservation exists (chunks found, a mapping made) and only if it fits
 * (compare-exchange, never an add that is undone, which would make another
 * thread's charge fail that fits), and given back before ep_free() returns.
 */
static inline int ep__charge(struct ep_pool *root, size_t bytes)
{
	EP_YIELD("limit charge");
	size_t was = ep__load_relaxed(&root->charged);

	do {
		if (bytes > root->limit || was > root->limit - bytes)
			return -EPERM;
	} while (!ep__cas_weak_acquire(&root->charged, &was, was + bytes));
	return 0;
}

static inline void ep__uncharge(struct ep__heap *h, size_t bytes)
{
	EP_YIELD("limit uncharge");
	if (h->limit)
		ep__sub_release(&h->root->charged, bytes);
}

#endif /* EP_LIMIT_H */
