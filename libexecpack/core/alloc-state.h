/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * alloc-state.h - the one rule of a pack allocation's life.
 *
 * Each chunk of a pack has a state byte; the byte of an allocation's first
 * chunk is the allocation's state:
 *
 *   NONE     no allocation starts here (never allocated, or given back);
 *   REC      live, with a record in the heap's table (staged, named, given
 *            unwind info, placed at a random offset, a patch window open
 *            or its staging buffer kept);
 *   PLAIN    live, finalized, no record: its chunks say all there is;
 *   BUSY     a call holding the heap's lock is working on a PLAIN one;
 *   FREEING  an ep_free() without the heap's lock (remote.c) owns it.
 *
 * Every transition there is, and where it is made:
 *
 *   NONE -> REC        ep__st_born(): ep_alloc            (heap lock)
 *   PLAIN -> BUSY      ep__st_enter(): any call, one CAS  (heap lock)
 *   REC, BUSY -> REC, PLAIN
 *                      ep__st_leave(): the call is done; REC -> PLAIN is
 *                      ep_finalize() or the end of a patch window
 *                      dropping the record, BUSY -> REC a call giving
 *                      it one (a name, a window)          (heap lock)
 *   REC -> BUSY        ep__st_settle(): an entered allocation whose
 *                      record goes, just before its lookup entry goes
 *                      (then ep__st_leave() to PLAIN)    (heap lock)
 *   REC, BUSY -> NONE  ep__st_gone(): a free, its chunks given back
 *                      first                              (heap lock)
 *   PLAIN -> FREEING   ep__st_claim_free(): a lock-free free, one CAS, the
 *                      pack pinned (remote.c)             (no lock)
 *   FREEING -> NONE    ep__st_gone(): the owner gives the chunks back
 *                      (remote.c's drain)                 (heap lock)
 *   BUSY -> REC, PLAIN ep__st_unbusy(): in a child that ran no fork
 *                      handler, for a holder that vanished at the fork
 *                      (every lock the child's, no other thread running)
 * (ep__st_resize() changes the length only, of a REC or BUSY allocation,
 * with the heap's lock.)  There is no other: a claim is never undone, as
 * the lock-free free's remaining steps cannot fail (remote.c).
 *
 * The invariant every path keeps: only a thread that holds the heap's lock
 * changes a REC, BUSY or FREEING state, and only the one CAS PLAIN ->
 * FREEING is made without it.  So
 *   - no call acts on an allocation another call is freeing: a lock holder
 *     that finds FREEING (or NONE) fails with -EINVAL and changes nothing;
 *     a lock-free free that finds BUSY spins briefly for the holder's
 *     step to end, then takes the lock's path, which sleeps (a holder
 *     never waits for a lock-free free: no cycle);
 *   - a free never runs twice: only one CAS out of PLAIN can win, and a
 *     lock holder frees only what it found REC or made BUSY itself;
 *   - a double free changes nothing: it finds NONE or FREEING and fails
 *     without a store, so an allocation that reused the chunk meanwhile
 *     is never disturbed (one at the same address is the caller's); a
 *     lock-free one reads the states of the region it checked the address
 *     against, as the pack it pinned is not reused for another region
 *     meanwhile (remote.c), so it never claims a new region's allocation;
 *   - a claimed allocation is freed: FREEING leads only to NONE;
 *   - a record exists only for a REC allocation, so a lock-free free
 *     (PLAIN only) never leaves a record behind.
 * Large allocations have no state byte: every call on them takes the heap's
 * lock, and their record is their life.
 *
 * A patch window (patch.c) is one more state of a finalized allocation's
 * life, made of the transitions above: REC with a->patch->win set.
 *   ep_patch_begin:  ep__st_enter() (PLAIN -> BUSY, or REC), a record,
 *                    the window opened, ep__st_leave() to REC (heap lock)
 *   commit, abort:   ep__st_enter() (REC), the window closed (commit's
 *                    words written first), ep__st_leave() to REC, or to
 *                    PLAIN if nothing else keeps the record (heap lock)
 *   free:            the window closed, then ep__st_gone() (heap lock)
 * Being REC, an allocation with a window is never claimed by a lock-free
 * free: that free takes the lock, so no chunk under a window is refilled
 * or given back while it is open; ep_shrink() refuses a cut into it.
 * ep_lookup() (info.c) reads these bytes without the lock: the first
 * chunk of the allocation holding a chunk is the nearest one at or before
 * it whose byte is not NONE.
 *
 * A byte other than NONE is only ever on an allocation's first chunk, so
 * a live state says that an allocation starts there.  The byte's top five
 * bits keep the allocation's length in chunks where it is at most 31 (0:
 * longer, the maps say): a free finds its extent in the byte it reads
 * anyway, not in two bitmaps.  The length is set at birth and by a lock
 * holder that shrinks the allocation; every transition keeps it.
 */
#ifndef EP_ALLOC_STATE_H
#define EP_ALLOC_STATE_H

#include <errno.h>
#include <stdbool.h>

#include "atomic.h"
#include "interleave.h"
#include "types.h"
#include "wait.h"

enum ep__st {
	EP__ST_NONE = 0,
	EP__ST_REC,
	EP__ST_PLAIN,
	EP__ST_BUSY,
	EP__ST_FREEING,
};

#define EP__ST_MASK 7u      /* the state; the bits above, the length */
#define EP__ST_LEN_SHIFT 3
#define EP__ST_LEN_MAX 31u

/* The whole byte: state and length. */
static inline unsigned char ep__st_byte(const struct ep__pack *p, size_t c)
{
	return ep__load_acquire(&p->state[c]);
}

static inline unsigned char ep__st_get(const struct ep__pack *p, size_t c)
{
	return ep__st_byte(p, c) & EP__ST_MASK;
}

/* The length in chunks a byte keeps; 0: longer than it can keep. */
static inline size_t ep__st_len(unsigned char byte)
{
	return byte >> EP__ST_LEN_SHIFT;
}

static inline unsigned char ep__st_len_bits(size_t n)
{
	return (unsigned char)(n <= EP__ST_LEN_MAX ? n << EP__ST_LEN_SHIFT : 0);
}

/* The byte with its state replaced, its length kept. */
static inline unsigned char ep__st_with(unsigned char byte, unsigned state)
{
	return (unsigned char)((byte & ~EP__ST_MASK) | state);
}

/* Whether a call may act on the allocation at c (a lock holder's look). */
static inline bool ep__st_live(const struct ep__pack *p, size_t c)
{
	unsigned char s = ep__st_get(p, c);

	return s == EP__ST_REC || s == EP__ST_PLAIN;
}

/* Heap lock held: a new allocation of n chunks (a record from the start). */
static inline void ep__st_born(struct ep__pack *p, size_t c, size_t n)
{
	EP_YIELD("state born");
	ep__store_release(&p->state[c], ep__st_len_bits(n) | EP__ST_REC);
}

/* Heap lock held: this call acts on the allocation at c until
 * ep__st_leave() or ep__st_gone().  -EINVAL: it is not live. */
static inline int ep__st_enter(struct ep__pack *p, size_t c)
{
	EP_YIELD("state enter");
	unsigned char s = ep__st_byte(p, c);

	if ((s & EP__ST_MASK) == EP__ST_REC)
		return 0;
	if ((s & EP__ST_MASK) == EP__ST_PLAIN &&
	    ep__cas_acquire(&p->state[c], &s, ep__st_with(s, EP__ST_BUSY)))
		return 0;
	return -EINVAL; /* freed, never allocated, or a lock-free free owns it */
}

/* The state an entered allocation goes back to as it was: REC if it has a
 * record. */
static inline enum ep__st ep__st_as_is(const struct ep__alloc *a)
{
	return a->norec ? EP__ST_PLAIN : EP__ST_REC;
}

/* Heap lock held: the call is done; to: EP__ST_REC if it has a record,
 * else EP__ST_PLAIN.  (REC or BUSY until this store: nobody else writes
 * the byte.) */
static inline void ep__st_leave(struct ep__pack *p, size_t c, enum ep__st to)
{
	EP_YIELD("state leave");
	unsigned char s = ep__st_with(ep__st_byte(p, c), to);

	ep__store_release(&p->state[c], s);
}

/* Heap lock held, the allocation entered: it loses its record and will
 * leave PLAIN.  REC -> BUSY first, so that a lock-free reader never sees
 * REC while the entry info.c keeps for it is gone. */
static inline void ep__st_settle(struct ep__pack *p, size_t c)
{
	EP_YIELD("state settle");
	ep__store_release(&p->state[c], ep__st_with(ep__st_byte(p, c), EP__ST_BUSY));
}

/* Heap lock held, the allocation entered: it is n chunks long now. */
static inline void ep__st_resize(struct ep__pack *p, size_t c, size_t n)
{
	EP_YIELD("state resize");
	ep__store_release(&p->state[c], ep__st_len_bits(n) | ep__st_get(p, c));
}

/* A child that ran no fork handler, before any other of its threads goes
 * on: the holder that left the allocation at c BUSY vanished at the fork;
 * to: EP__ST_REC if it has a record, else EP__ST_PLAIN (remote.c). */
static inline void ep__st_unbusy(struct ep__pack *p, size_t c, enum ep__st to)
{
	unsigned char s = ep__st_with(ep__st_byte(p, c), to);

	ep__store_release(&p->state[c], s);
}

/* Heap lock held: its chunks were given back. */
static inline void ep__st_gone(struct ep__pack *p, size_t c)
{
	EP_YIELD("state gone");
	ep__store_release(&p->state[c], EP__ST_NONE);
}

/*
 * No lock, p pinned (remote.c): claim the allocation at c for a free, for
 * good.  0: claimed (FREEING),
 * and *n its length as the byte keeps it (ep__st_len()); 1: it has a
 * record, or BUSY for longer than a short spin: free it under the heap's
 * lock, whose wait sleeps (the BUSY holder holds that lock; it may be in a
 * caller's fill); -EINVAL: not live.
 */
static inline int ep__st_claim_free(struct ep__pack *p, size_t c, size_t *n)
{
	for (unsigned spins = 0;; spins++) {
		EP_YIELD("state claim");
		unsigned char s = ep__st_byte(p, c);

		if ((s & EP__ST_MASK) == EP__ST_REC)
			return 1;
		if ((s & EP__ST_MASK) == EP__ST_PLAIN) {
			if (ep__cas_acq_rel(&p->state[c], &s, ep__st_with(s, EP__ST_FREEING))) {
				*n = ep__st_len(s);
				return 0;
			}
			continue;
		}
		if ((s & EP__ST_MASK) != EP__ST_BUSY)
			return -EINVAL;
		if (!EP_SPIN(spins, "state busy"))
			return 1;
	}
}

#endif /* EP_ALLOC_STATE_H */
