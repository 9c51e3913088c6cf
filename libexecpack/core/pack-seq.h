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
#include "lock.h"
#include "types.h"
#include "wait.h"

/* With the heap's lock: the pack's maps change (see struct ep__pack). */
static inline void ep__pack_write_begin(struct ep__pack *p)
{
	EP_YIELD("pack seq");
	/* (who: a reader in a handler that interrupted this very thread
	 * must not wait for it, info.c) */
	ep__store_relaxed(&p->seq_writer, ep__self());
	ep__store_relaxed(&p->seq, p->seq + 1);
	ep__fence_release();
	EP_YIELD("pack seq odd");
}

/* A reader asleep in ep__pack_read_wait() is woken.  Only a compiler
 * barrier between the store and the load, on every allocation and free:
 * the sleeper's ep__barrier_all() is the other half (wait.h). */
static inline void ep__pack_write_end(struct ep__pack *p)
{
	ep__store_release(&p->seq, p->seq + 1);
	ep__signal_fence();
	if (__builtin_expect(ep__load_relaxed(&p->seq_sleepers) != 0, 0))
		ep__futex_wake_cold(&p->seq);
}

/* Without the lock: the count a read of the maps starts from (odd: the
 * owner is between its two calls). */
static inline unsigned ep__pack_read_begin(const struct ep__pack *p)
{
	return ep__load_acquire(&p->seq);
}

/*
 * Without the lock: wait while the count is s (odd: the owner is inside a
 * few bitmap stores, for long only when it was preempted there).  Spins,
 * then sleeps until ep__pack_write_end() wakes it; where no barrier on
 * every thread can be had, the sleep is timed instead.
 */
static inline void ep__pack_read_wait(struct ep__pack *p, unsigned s)
{
	for (unsigned spins = 0; ep__load_acquire(&p->seq) == s; spins++) {
		if (EP_SPIN(spins, "pack seq"))
			continue;
		ep__add_seq_cst(&p->seq_sleepers, 1);
		bool woken = ep__barrier_all(); /* (then the count is read again) */
		struct timespec ts = { 0, 50 * 1000 };

		if (ep__load_acquire(&p->seq) == s)
			ep__futex_wait(&p->seq, s, woken ? NULL : &ts);
		ep__sub_relaxed(&p->seq_sleepers, 1);
	}
}

/* Whether the maps read since ep__pack_read_begin() gave s were not being
 * changed meanwhile (the fence pairs with ep__pack_write_begin()'s). */
static inline bool ep__pack_read_ok(const struct ep__pack *p, unsigned s)
{
	ep__fence_acquire();
	return !(s & 1) && ep__load_relaxed(&p->seq) == s;
}

/*
 * In a child made without fork()'s handlers, every lock of the library
 * held (fork.c): a count that a vanished owner left odd is made even, or
 * every reader would wait for it for ever.  Its maps stay as that owner
 * left them (libexecpack(7): what was under way).
 */
static inline void ep__pack_seq_reset(struct ep__pack *p)
{
	unsigned s = ep__load_relaxed(&p->seq);

	if (!(s & 1))
		return;
	ep__store_release(&p->seq, s + 1);
	if (ep__load_seq_cst(&p->seq_sleepers))
		ep__futex_wake_cold(&p->seq);
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
