/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * remote.c - ep_free() from a thread that does not own the heap, without
 * taking the heap's lock: the owner keeps allocating meanwhile.
 *
 * The freeing thread
 *   1. pins the pack (p->pins), then reads the region's address and checks
 *      that the address freed lies in it: from here until it unpins, the
 *      pack is not reused for another region (see "Pins" below), so the
 *      states it reads are that region's;
 *   2. claims the allocation: PLAIN -> FREEING on its first chunk's state
 *      (alloc-state.h; one CAS, so of two frees of one address only one
 *      goes on, and a free that finds anything but PLAIN changes nothing);
 *   3. takes the allocation's extent from the state byte it claimed, or for
 *      a long one reads it from the maps as a seqlock reader (the owner may
 *      be changing the bits around it);
 *   4. refills its chunks with traps through the RW alias, which needs no
 *      lock and cannot fail (the path is taken only for such backends,
 *      alias_io: so a claim is never undone), gives back its charge against
 *      the limit and counts the free in the heap's remote counts (the stats
 *      read them);
 *   5. marks it done, queues the pack on the heap's remote list, unpins.
 * The pin also holds fork() off: the fork handler closes the heap's gate,
 * then waits until no pack is pinned; a free that pins, then finds the gate
 * closed, unpins and takes the lock (which fork() holds).
 * The chunks stay used until the owner, holding its lock, gives them back
 * on its next allocation (ep__remote_drain(), FREEING -> NONE): nothing can
 * be allocated over code still being refilled.  An allocation with a record
 * (REC), a large mapping, a copy not yet made after fork(), a backend
 * without alias_io or Valgrind take the lock.
 *
 * Pins, against a free of an address whose pack was released and its
 * struct reused for a new region meanwhile (a double free): the free
 * increments p->pins, then loads p->r.exec; the release stores NULL there
 * (pack.c), and a later reuse of the struct first loads p->pins and takes
 * the pack only if it is 0.  All four accesses are seq_cst, so if the free
 * read the old address, the reuse sees its pin, and waits for another
 * spare or makes a new struct until the free has unpinned: a claim made
 * with the old address always lands on the old region's states (NONE once
 * released), never on an allocation of the new one.  A free that reads the
 * new address checks the address freed against it: in it, the address is
 * the new allocation's (no allocator can tell such a double free from a
 * correct one); outside, it goes to the lock, which finds nothing.
 *
 * The owner's exit against a free queued here (a store then a load on each
 * side): the free pushes on h->remote, then reads whether the heap has lost
 * its thread (h->orphaned); the exiting thread sets that flag on each of
 * its heaps, then drains what is queued (thread.c).  All four accesses are seq_cst, so at least
 * one of the two sees the other's store and the chunks come back.
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <sched.h>

#include "alloc-state.h"
#include "limit.h"
#include "lock.h"
#include "lookup.h"
#include "pack.h"
#include "records.h"
#include "region.h"
#include "remote.h"
#include "track.h"
#include "wait.h"

/* ep__alloc_end() (lookup.c) on maps the owner may be changing: retried
 * while the pack's seq is odd or moved (pack-seq.h), for as long as it
 * takes. */
static size_t racy_end(struct ep__pack *p, size_t pos)
{
	for (;;) {
		unsigned s = ep__pack_read_begin(p);

		if (s & 1) {
			ep__pack_read_wait(p, s);
			continue;
		}
		/* (commit.c grows it) */
		size_t nchunks = ep__load_relaxed(&p->nchunks);
		size_t e = ep__pack_end_racy(p, pos, nchunks);

		if (ep__pack_read_ok(p, s))
			return e;
	}
}

static void queue(struct ep__heap *h, struct ep__pack *p, size_t c)
{
	size_t w = c / 64;

	EP_YIELD("remote done");
	ep__or_release(&p->done[w], (uint64_t)1 << (c % 64));
	ep__or_release(&p->done_sum[w / 64], (uint64_t)1 << (w % 64));
	EP_YIELD("remote queued");
	if (ep__xchg_seq_cst(&p->queued, 1))
		return; /* on the list, and its maps not yet read */
	struct ep__pack *head = ep__load_relaxed(&h->remote);

	do {
		EP_YIELD("remote push");
		p->rnext = head;
	} while (!ep__cas_weak_seq_cst(&h->remote, &head, p));
}

int ep__remote_free(struct ep__pack *p, void *exec)
{
	struct ep__heap *h = p->heap;
	uintptr_t x = (uintptr_t)exec;
	unsigned shift = p->shift; /* (the pack's for ever, released or not) */

	if (!h->ops->alias_io || ep__under_valgrind() || (x & p->cmask))
		return 1;
	int rc = 1;

	EP_YIELD("remote pin");
	ep__add_seq_cst(&p->pins, 1);
	EP_YIELD("remote pinned");
	if (ep__load_seq_cst(&h->remote_gated))
		goto unpin; /* fork() under way: the lock waits for it */
	uintptr_t base = (uintptr_t)ep__load_seq_cst(&p->r.exec);

	/* (a released pack reads NULL: the lock's path finds nothing) */
	if (x < base || (x - base) >> shift >= ep__load_relaxed(&p->nchunks) ||
	    ep__load_relaxed(&p->r.gen) != ep__fork_generation())
		goto unpin;
	size_t c = (x - base) >> shift, n;

	if ((rc = ep__st_claim_free(p, c, &n)))
		goto unpin; /* a record (1: the lock's path), or not live */
	/* (its state byte keeps the length unless it is long) */
	size_t len = (n ? n : racy_end(p, c) - c) << shift;

	EP_YIELD("remote refill");
	ep__alias_fill(p->r.guards, h->fill, (unsigned char *)p->r.rw + (c << shift), len,
		       h->fill_ctx);
	ep__sync_icache((void *)x, len);
	ep__uncharge(h, len);
	EP_YIELD("remote counts");
	ep__add_release(&h->remote_used_out, len);
	ep__add_release(&h->remote_frees, 1);
	queue(h, p, c);
unpin:
	EP_YIELD("remote unpin");
	/* a fork() waits for this (ep__remote_gate()): wake it if it sleeps
	 * (seq_cst both, against its store of the flag then load) */
	if (ep__sub_seq_cst(&p->pins, 1) == 0 &&
	    ep__load_seq_cst(&h->remote_gate_sleeps))
		ep__futex_wake(&p->pins);
	/* the heap's thread has exited: nobody would give the chunks back
	 * soon, so this free does, under the lock */
	if (rc == 0 && ep__heap_orphaned(h)) {
		ep__lock(&h->lock);
		ep__remote_drain(h);
		ep__unlock(&h->lock);
	}
	return rc;
}

/*
 * What other threads freed without the lock (remote.c) and refilled: give
 * it back.  A pack is taken off the list before its maps are read, so a
 * free that lands meanwhile queues the pack again.
 */
void ep__remote_drain(struct ep__heap *h)
{
	EP_YIELD("drain");
	struct ep__pack *p = ep__xchg_acquire(&h->remote, NULL);

	while (p) {
		struct ep__pack *next = p->rnext;
		size_t nsum = EP__BITMAP_WORDS(EP__BITMAP_WORDS(p->nchunks));

		EP_YIELD("drain pack");
		ep__store_seq_cst(&p->queued, 0);
		for (size_t i = 0; i < nsum; i++) {
			uint64_t sum = ep__xchg_acquire(&p->done_sum[i], 0);

			for (; sum; sum &= sum - 1) {
				size_t w = i * 64 + (size_t)__builtin_ctzll(sum);
				uint64_t d = ep__xchg_acquire(&p->done[w], 0);

				for (; d; d &= d - 1) {
					size_t c = w * 64 + (size_t)__builtin_ctzll(d);

					ep__pack_give_back(h, p, c, ep__alloc_end(p, c) - c,
							   EP__GIVE_COUNTED_FREE);
				}
			}
		}
		p = next;
	}
}

/* No lock-free free is under way once every pack is unpinned: a free pins
 * its pack, then reads the gate (seq_cst both, as the gate's store and the
 * loads of the pins here).  With the heap's lock, so every pack struct is
 * on one of the two lists.  A free may be in a caller's fill: a spin, then
 * a sleep that the free's unpin wakes (it reads remote_gate_sleeps after
 * its seq_cst unpin, as this sets it before its seq_cst loads). */
static void wait_unpinned(struct ep__heap *h, struct ep__pack *p)
{
	unsigned n;

	for (unsigned spins = 0; (n = ep__load_seq_cst(&p->pins)); spins++) {
		if (EP_SPIN(spins, "remote gate"))
			continue;
		ep__store_seq_cst(&h->remote_gate_sleeps, 1);
		while ((n = ep__load_seq_cst(&p->pins)))
			ep__futex_wait(&p->pins, n, NULL);
		break;
	}
}

void ep__remote_gate(struct ep__heap *h)
{
	ep__store_seq_cst(&h->remote_gated, 1);
	for (struct ep__pack *p = h->head; p; p = p->next)
		wait_unpinned(h, p);
	for (struct ep__pack *p = h->spare_packs; p; p = p->next)
		wait_unpinned(h, p);
	ep__store_relaxed(&h->remote_gate_sleeps, 0);
}

void ep__remote_ungate(struct ep__heap *h)
{
	ep__store_release(&h->remote_gated, 0);
}

/*
 * A child that ran no fork handler, before any other of its threads calls
 * (fork.c): a free that a vanished thread had under way holds no gate and
 * no pin here (its claim stays: those chunks are not reused in this
 * process, and hold traps: region.c), and no step of a vanished lock
 * holder keeps an allocation BUSY.
 */
void ep__remote_reset(struct ep__heap *h)
{
	ep__store_relaxed(&h->remote_gated, 0);
	for (struct ep__pack *p = h->head; p; p = p->next) {
		ep__store_relaxed(&p->pins, 0);
		for (size_t w = 0; w < EP__BITMAP_WORDS(p->nchunks); w++)
			for (uint64_t st = p->start[w]; st; st &= st - 1) {
				size_t c = w * 64 + (size_t)__builtin_ctzll(st);
				uintptr_t key = (uintptr_t)p->r.exec + (c << p->shift);

				/* (a free from another thread would wait for that
				 * holder for ever) */
				if (ep__st_get(p, c) == EP__ST_BUSY)
					ep__st_unbusy(p, c, ep__hash_find(h, key) ? EP__ST_REC
										  : EP__ST_PLAIN);
			}
	}
	for (struct ep__pack *p = h->spare_packs; p; p = p->next)
		ep__store_relaxed(&p->pins, 0);
}
