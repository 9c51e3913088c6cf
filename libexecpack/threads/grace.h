/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * grace.h - memory that lock-free readers may still hold (grace.c).
 *
 * ep_lookup() reads pack and heap structs that it found through the route
 * table (route.h), without a lock and from any thread or signal handler, so
 * ep_pool_destroy() cannot free them at once: it unpublishes them (clears
 * their routes), then retires them here, and they are freed once every
 * reader that may have seen them has left.
 *
 * Readers count themselves in one of two counters (the epoch's parity) for
 * the whole of their read: ep__grace_enter() increments, then a full fence,
 * then the reads; ep__grace_leave() decrements.  A retired object is freed
 * once each counter has been seen at zero at some moment after it was
 * retired.  Why that is enough: a reader that holds the object loaded its
 * route before the route was cleared, so it incremented its counter before
 * the retirement (the reader's increment, fence, load against the
 * unpublisher's clear, fence, counter load: a Dekker pair), and that
 * counter stays above zero until it leaves.  Readers that come later find
 * no route to the object.  The epoch flips at every reclaim, so new
 * readers go to the other counter and the old one drains even under a
 * steady stream of lookups.
 *
 * Nothing waits for readers without bound: a reclaim that finds readers
 * keeps the object for the next one (a pool's creation or destruction).
 * A reader that never leaves (a handler that jumped out of a lookup
 * through a nested signal) keeps what was retired after it for good: a
 * leak, never a use after free.
 */
#ifndef EP_GRACE_H
#define EP_GRACE_H

#include "atomic.h"
#include "interleave.h"

struct ep__grace {
	struct ep__grace *next;
	void (*free)(struct ep__grace *); /* frees the object around the node */
	unsigned seen; /* bit i: counter i seen at zero since the retirement */
};

extern _Atomic unsigned long ep__grace_epoch;
extern _Atomic long ep__grace_readers[2];

/* A lock-free reader starts: the counter to give ep__grace_leave(). */
static inline unsigned ep__grace_enter(void)
{
	unsigned i = (unsigned)(ep__load_relaxed(&ep__grace_epoch) & 1);

	ep__add_seq_cst(&ep__grace_readers[i], 1);
	ep__fence_seq_cst(); /* (the increment before every load of the read) */
	EP_YIELD("grace enter");
	return i;
}

static inline void ep__grace_leave(unsigned i)
{
	EP_YIELD("grace leave");
	ep__sub_release(&ep__grace_readers[i], 1);
}

/* After the object's routes are cleared: free it (n->free) once no reader
 * can hold it; maybe at once.  Not async-signal-safe. */
void ep__grace_retire(struct ep__grace *n, void (*free_fn)(struct ep__grace *));
/* Free what no reader can hold any more; spin_max: polls for readers to
 * leave first (0: look once). */
void ep__grace_reclaim(unsigned spin_max);

#endif /* EP_GRACE_H */
