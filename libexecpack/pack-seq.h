/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pack-seq.h - the sequence count over a pack's maps (struct ep__pack's
 * seq): pack.c and commit.c change used and start between
 * ep__pack_write_begin() and ep__pack_write_end(), with the heap's lock;
 * readers without the lock (remote.c, info.c) scan the maps between
 * ep__pack_read_begin() and ep__pack_read_ok(), and retry while it was odd
 * or has moved.  Below pack.h, so that commit.c, which pack.c calls, needs
 * nothing of pack.c.
 */
#ifndef EP_PACK_SEQ_H
#define EP_PACK_SEQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "atomic.h"
#include "interleave.h"
#include "types.h"

/* With the heap's lock: the pack's maps change (see struct ep__pack). */
static inline void ep__pack_write_begin(struct ep__pack *p)
{
	EP_YIELD("pack seq");
	ep__store_relaxed(&p->seq, p->seq + 1);
	ep__fence_release();
}

static inline void ep__pack_write_end(struct ep__pack *p)
{
	ep__store_release(&p->seq, p->seq + 1);
}

/* Without the lock: the count a read of the maps starts from (odd: the
 * owner is between its two calls). */
static inline unsigned ep__pack_read_begin(const struct ep__pack *p)
{
	return ep__load_acquire(&p->seq);
}

/* Whether the maps read since ep__pack_read_begin() gave s were not being
 * changed meanwhile (the fence pairs with ep__pack_write_begin()'s). */
static inline bool ep__pack_read_ok(const struct ep__pack *p, unsigned s)
{
	ep__fence_acquire();
	return !(s & 1) && ep__load_relaxed(&p->seq) == s;
}

/*
 * Without the lock, between ep__pack_read_begin() and ep__pack_read_ok():
 * the end (chunk) of the allocation at chunk pos of the first nchunks, as
 * ep__alloc_end() (lookup.c) finds it with the lock.  One pass over both
 * maps: it stops at a start bit or a clear used bit.  Its answer counts
 * only where ep__pack_read_ok() then says so.
 */
static inline size_t ep__pack_end_racy(const struct ep__pack *p, size_t pos, size_t nchunks)
{
	for (size_t i = pos + 1; i < nchunks; i = (i / 64 + 1) * 64) {
		size_t w = i / 64;
		uint64_t stop = (ep__load_relaxed(&p->start[w]) | ~ep__load_relaxed(&p->used[w])) &
				(~(uint64_t)0 << (i % 64));

		if (stop) {
			size_t e = w * 64 + (size_t)__builtin_ctzll(stop);

			return e < nchunks ? e : nchunks;
		}
	}
	return nchunks;
}

#endif /* EP_PACK_SEQ_H */
