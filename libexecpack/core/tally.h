/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tally.h - raising a heap's monotonic counts (struct ep__tally), which
 * ep_pool_stats() reads without a lock (api.c says in which order).
 */
#ifndef EP_TALLY_H
#define EP_TALLY_H

#include <stdint.h>

#include "atomic.h"
#include "interleave.h"

/* Only the heap's lock holder raises a count: a load and a release store. */
static inline void ep__tally(uint64_t *c, uint64_t n)
{
	EP_YIELD("tally");
	ep__store_release(c, *c + n);
}

#endif /* EP_TALLY_H */
