/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * remote.c - ep_free() from a thread that does not own the heap, without
 * taking the heap's lock: the owner keeps allocating meanwhile.
 *
 * The freeing thread
 *   1. claims the allocation: sets its start chunk's bit in the pack's
 *      freeing map (an atomic or; whoever frees it, with or without the lock,
 *      claims it first, so of two frees of one address only one goes on);
 *   2. checks, against the pack's seq, that a plain finalized allocation with
 *      no record starts there (used and start set, recs clear), and reads its
 *      extent from the maps as the owner does;
 *   3. gives back its charge against the limit and counts the free in the
 *      heap's remote counts (the stats read them), refills its chunks with
 *      traps through the backend, which needs no lock for that;
 *   4. marks it done and queues the pack on the heap's remote list.
 * The chunks stay used until the owner, holding its lock, gives them back on
 * its next allocation (ep__heap_drain()): nothing can be allocated over code
 * still being refilled.  Whatever does not fit this path (a record, a large
 * mapping, a copy not yet made after fork(), Valgrind) takes the lock.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>

#include "pool.h"
#include "track.h"

static inline bool bit(const uint64_t *map, size_t i)
{
	return (__atomic_load_n(&map[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1u;
}

/* alloc_end() of heap.c, on maps the owner may be changing (see valid()). */
static size_t racy_end(const struct ep__pack *p, size_t pos)
{
	size_t nchunks = __atomic_load_n(&p->nchunks, __ATOMIC_RELAXED); /* (commit.c grows it) */

	for (size_t i = pos + 1; i < nchunks; i = (i / 64 + 1) * 64) {
		size_t w = i / 64;
		uint64_t stop = (__atomic_load_n(&p->start[w], __ATOMIC_RELAXED) |
				 ~__atomic_load_n(&p->used[w], __ATOMIC_RELAXED)) &
				(~(uint64_t)0 << (i % 64));

		if (stop) {
			size_t e = w * 64 + (size_t)__builtin_ctzll(stop);

			return e < nchunks ? e : nchunks;
		}
	}
	return nchunks;
}

/*
 * Whether a plain allocation of base's pack starts at chunk c, and where it
 * ends: read as a seqlock reader, retried while the owner is changing the
 * maps.  false sends the caller to the lock.
 */
static bool valid(const struct ep__pack *p, uintptr_t base, size_t c, size_t *end)
{
	for (int tries = 0; tries < 8; tries++) {
		unsigned s = __atomic_load_n(&p->seq, __ATOMIC_ACQUIRE);

		if (s & 1) {
			sched_yield();
			continue;
		}
		bool ok = (uintptr_t)__atomic_load_n(&p->r.exec, __ATOMIC_RELAXED) == base &&
			  bit(p->used, c) && bit(p->start, c) && !bit(p->recs, c);
		size_t e = ok ? racy_end(p, c) : 0;

		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&p->seq, __ATOMIC_RELAXED) != s)
			continue;
		*end = e;
		return ok;
	}
	return false;
}

static void queue(struct ep__sub *h, struct ep__pack *p, size_t c)
{
	size_t w = c / 64;

	__atomic_fetch_or(&p->done[w], (uint64_t)1 << (c % 64), __ATOMIC_RELEASE);
	__atomic_fetch_or(&p->done_sum[w / 64], (uint64_t)1 << (w % 64), __ATOMIC_RELEASE);
	if (__atomic_exchange_n(&p->queued, 1, __ATOMIC_SEQ_CST))
		return; /* on the list, and its maps not yet read */
	struct ep__pack *head = __atomic_load_n(&h->remote, __ATOMIC_RELAXED);

	do
		p->rnext = head;
	while (!__atomic_compare_exchange_n(&h->remote, &head, p, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
}

int ep__remote_free(struct ep__pack *p, void *exec)
{
	struct ep__sub *h = p->heap;
	uintptr_t x = (uintptr_t)exec;
	uintptr_t base = (uintptr_t)__atomic_load_n(&p->r.exec, __ATOMIC_RELAXED);

	if (!h->ops->threadsafe || ep__under_valgrind() || (x & (CHUNK - 1)) || x < base ||
	    x - base >= __atomic_load_n(&p->nchunks, __ATOMIC_RELAXED) * CHUNK ||
	    __atomic_load_n(&p->r.gen, __ATOMIC_RELAXED) != ep__fork_generation())
		return 1;
	size_t c = (x - base) / CHUNK, end;
	int rc = 1;

	__atomic_add_fetch(&h->rf_inflight, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&h->rf_gate, __ATOMIC_SEQ_CST))
		goto out; /* fork() under way: the lock waits for it */
	if (!ep__pack_claim(p, c)) {
		rc = -EINVAL; /* freed, or being freed */
		goto out;
	}
	if (!valid(p, base, c, &end)) {
		ep__pack_unclaim(p, c);
		goto out;
	}
	size_t len = (end - c) * CHUNK;

	if (h->ops->fill(h->be, &p->r, c * CHUNK, len, h->fill, h->fill_ctx)) {
		ep__pack_unclaim(p, c);
		goto out; /* the lock's path says why */
	}
	ep__sync_icache((void *)x, len);
	if (h->limit)
		__atomic_fetch_sub(&h->root->charged, len, __ATOMIC_RELEASE);
	__atomic_fetch_add(&h->rused_out, len, __ATOMIC_RELEASE);
	__atomic_fetch_add(&h->rfrees, 1, __ATOMIC_RELEASE);
	queue(h, p, c);
	rc = 0;
out:
	__atomic_sub_fetch(&h->rf_inflight, 1, __ATOMIC_RELEASE);
	/* the heap's thread has exited: nobody would give the chunks back
	 * soon, so this free does, under the lock */
	if (rc == 0 && ep__heap_orphaned(h)) {
		ep__lock(&h->lock);
		ep__heap_drain(h);
		ep__unlock(&h->lock);
	}
	return rc;
}

void ep__remote_gate(struct ep__sub *h)
{
	__atomic_store_n(&h->rf_gate, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&h->rf_inflight, __ATOMIC_SEQ_CST))
		sched_yield();
}

void ep__remote_ungate(struct ep__sub *h)
{
	__atomic_store_n(&h->rf_gate, 0, __ATOMIC_RELEASE);
}
