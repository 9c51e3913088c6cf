/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pack.c - a heap's packs: getting, mapping, releasing and keeping them,
 * first fit within and across them (as the kernel's bpf_prog_pack: packs
 * in creation order), taking chunks and giving them back.
 *
 * No metadata lives in executable memory: each pack has out-of-band maps,
 * "used" (chunk is allocated) and "start" (an allocation begins here), a
 * first-fit summary of used (bitmap.h) and a state byte per chunk
 * (alloc-state.h).
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc-state.h"
#include "code-range.h"
#include "commit.h"
#include "fit-packs.h"
#include "meta.h"
#include "pack.h"
#include "ranges.h"
#include "region.h"
#include "route.h"
#include "small.h"
#include "tally.h"

/*
 * Kept for reuse (struct ep__pack): a stale lock-free free may still read
 * it (remote.c), and sees no region address.  Its maps are clear (a pack is
 * released empty, every chunk given back and its state NONE); no stale code
 * address stays for memcheck's leak scan.
 */
static void pack_spare(struct ep__heap *h, struct ep__pack *p)
{
	EP_YIELD("pack spare");
	ep__store_seq_cst(&p->r.exec, NULL);
	ep__store_relaxed(&p->r.gen, 0);
	p->r.rw = NULL;
	p->r.size = p->r.committed = 0;
	p->r.handle = 0;
	p->r.sealed = 0;
	p->next = h->spare_packs;
	h->spare_packs = p;
}
/* A new region for p (the address last: a lock-free free pins p, then
 * reads it, then the rest). */
static void pack_publish(struct ep__pack *p, const struct ep__region *r)
{
	p->r.rw = r->rw;
	p->r.size = r->size;
	p->r.committed = r->committed;
	p->r.handle = r->handle;
	p->r.sealed = r->sealed;
	p->r.guards = r->guards;
	p->r.pack = 1;
	ep__store_relaxed(&p->r.gen, r->gen);
	ep__store_release(&p->r.exec, r->exec);
}
static void pack_release(struct ep__heap *h, struct ep__pack *p)
{
	ep__slot_remove(h, p);
	ep__range_remove(h, &p->r);
	ep__route_clear((uintptr_t)p->r.exec, p->r.size);
	if (p->prev)
		p->prev->next = p->next;
	else
		h->head = p->next;
	if (p->next)
		p->next->prev = p->prev;
	else
		h->tail = p->prev;
	/* (bytes before packs: ep_pool_stats() reads them the other way;
	 * its holes' were counted when they were made) */
	ep__tally(&h->tally.commit_out, p->r.committed - ep__pack_holes_forget(h, p));
	ep__tally(&h->tally.packs_out, 1);

	/* the address goes first, seq_cst: against a free's pin then read of
	 * it (remote.c); the mapping is dropped through a copy */
	struct ep__region r = p->r;

	EP_YIELD("pack unpublish");
	ep__store_seq_cst(&p->r.exec, NULL);
	ep__region_drop(h, &r);
	ep__fit_destroy(&p->fit);
	pack_spare(h, p);
}
/* The bytes of a pack's maps: used, start, done, done_sum, then the
 * state, a byte a chunk. */
static size_t pack_meta_bytes(const struct ep__heap *h)
{
	size_t nchunks = h->pack_size >> h->shift, words = EP__BITMAP_WORDS(nchunks);

	return (3 * words + EP__BITMAP_WORDS(words)) * sizeof(uint64_t) + nchunks;
}

void ep__pack_free(struct ep__pack *p)
{
	free(p->holes);
	ep__fit_destroy(&p->fit);
	ep__meta_put(p->used, pack_meta_bytes(p->heap)); /* (one block: see pack_get) */
	ep__small_put(p, sizeof(*p));
}
/* A pack struct with clear maps: a spare, or a new one. */
static struct ep__pack *pack_get(struct ep__heap *h)
{
	size_t nchunks = h->pack_size >> h->shift, words = EP__BITMAP_WORDS(nchunks);
	size_t sum = EP__BITMAP_WORDS(words);
	struct ep__pack *p, **pp = &h->spare_packs;

	/* a spare that a lock-free free still pins may be read as its old
	 * region by that free: not reused until it unpins (remote.c) */
	EP_YIELD("pack reuse");
	for (; (p = *pp); pp = &p->next) {
		if (ep__load_seq_cst(&p->pins) == 0) {
			*pp = p->next;
			p->next = p->prev = NULL;
			return p; /* (its maps are clear: see pack_spare()) */
		}
	}
	p = ep__small_get(sizeof(*p));
	if (!p)
		return NULL;
	/* (meta.c: only what the committed chunks use becomes resident) */
	p->used = ep__meta_get(pack_meta_bytes(h));
	if (!p->used) {
		ep__small_put(p, sizeof(*p));
		return NULL;
	}
	p->start = p->used + words;
	p->done = p->start + words;
	p->done_sum = p->done + words;
	p->state = (unsigned char *)(p->done_sum + sum);
	p->heap = h;
	p->shift = h->shift;
	p->cmask = h->cmask;
	p->nchunks = nchunks;
	return p;
}
static int pack_new(struct ep__heap *h, size_t n, struct ep__pack **out)
{
	struct ep__pack *p = pack_get(h);
	struct ep__region r = { .handle = -1 };
	int rc = -ENOMEM;

	if (!p)
		return -ENOMEM;
	p->free_chunks = 0;
	p->cached = 0;
	if (ep__range_reserve(h) || ep__slots_reserve(h))
		goto fail;
	/* counted before its bytes are (ep_pool_stats(): pack_bytes never
	 * exceeds packs times the pack size) */
	ep__tally(&h->tally.packs_in, 1);
	if ((rc = ep__pack_map(h, p, n, &r))) /* (commit.c: sets nchunks) */
		goto uncount;
	if (ep__fit_init(&p->fit, p->used, p->nchunks) || (rc = ep__region_seal(h, &r))) {
		ep__tally(&h->tally.commit_out, r.committed);
		rc = rc ? rc : -ENOMEM;
		h->ops->unmap(h->be, &r);
		goto uncount;
	}
	if ((rc = ep__route_set((uintptr_t)r.exec, r.size, ep__route_pack(p)))) {
		ep__tally(&h->tally.commit_out, r.committed);
		ep__region_drop(h, &r);
		goto uncount;
	}
	r.gen = ep__fork_generation();
	pack_publish(p, &r);
	p->free_chunks = p->nchunks;
	ep__range_insert(h, &p->r, p, NULL);
	ep__slot_add(h, p);
	p->prev = h->tail;
	if (h->tail)
		h->tail->next = p;
	else
		h->head = p;
	h->tail = p;
	*out = p;
	return 0;
uncount:
	ep__tally(&h->tally.packs_out, 1);
fail:
	ep__fit_destroy(&p->fit);
	pack_spare(h, p);
	return rc;
}
/* A grow's failure that a new pack does not share: no room in that pack
 * (-ENOSPC), or the process refuses more exec there (PR_SET_MDWE). */
static bool grow_failed_only_here(int rc)
{
	return rc == 0 || rc == -ENOSPC || rc == -EACCES || rc == -EPERM;
}

/*
 * First fit over packs in creation order; *pos gets the chunk index.  The
 * max tree over the packs finds the first that may fit n (see ep__fits_set()),
 * and that pack's summary (bitmap.h) the lowest fitting run, however
 * fragmented the pack is.
 */
int ep__pack_find(struct ep__heap *h, size_t n, struct ep__pack **outp, size_t *pos)
{
	unsigned gen = ep__fork_generation();
	size_t slot;

	while ((slot = ep__fits_first(h, n)) != SIZE_MAX) {
		struct ep__pack *p = h->by_slot[slot];

		if (p->free_chunks < n) {
			ep__fits_set(h, slot, (uint32_t)p->free_chunks); /* still a bound */
			continue;
		}
		if (p->r.gen != gen && ep__own_region_slow(h, &p->r)) {
			/* inherited across fork, and no copy of its own can be
			 * made (sealed, say): its free chunks may hold what the
			 * other process writes there, so none is handed out */
			ep__fits_set(h, slot, 0);
			continue;
		}
		size_t longest = 0, at;

		if ((at = ep__fit_find(&p->fit, p->used, n, &longest)) >= p->fit.nbits) {
			ep__fits_set(h, slot, (uint32_t)longest);
			continue;
		}
		*outp = p;
		*pos = at;
		return 0;
	}
	/* No room in what is committed: holes come back (commit.c), or a
	 * pack grows, the newest first, then one that ep_pool_trim() cut back,
	 * then search again. */
	if (h->hole_packs && ep__pack_unhole(h, n))
		return ep__pack_find(h, n, outp, pos);
	struct ep__pack *g = h->tail;
	int grc = g ? ep__pack_grow(h, g, n) : -ENOSPC;

	for (g = grc ? h->head : g; grc && g; g = g->next) {
		if (!grow_failed_only_here(grc))
			return grc; /* (memory ran out: a new pack would not do better) */
		if (g != h->tail && g->r.committed < g->r.size && !(grc = ep__pack_grow(h, g, n)))
			break;
	}
	if (!grow_failed_only_here(grc))
		return grc;
	if (g) {
		ep__fits_set(h, g->slot, (uint32_t)g->free_chunks);
		return ep__pack_find(h, n, outp, pos);
	}
	/* a code range with no room for a pack: fail before a backend makes
	 * a file for it (heap.c then looks in the other heaps' packs) */
	if (h->crange && !ep__crange_room(h->crange, h->pack_size))
		return -ENOMEM;
	int rc = pack_new(h, n, outp);

	*pos = 0;
	return rc;
}
/*
 * Aligned first fit (ep_alloc_aligned(3)): the packs in creation order,
 * each searched for its first free run that starts on the alignment and
 * holds n chunks; the free chunks before it stay free.  The packs are
 * walked one by one (an aligned request is rare beside ep_alloc(), and a
 * pack's bound says nothing about where its runs start), their bounds left
 * as they are.  With none, n + a - 1 chunks of plain first fit (a grown or
 * new pack included) always hold an aligned run of n.
 */
int ep__pack_find_aligned(struct ep__heap *h, size_t n, size_t a, struct ep__pack **outp,
			  size_t *pos)
{
	unsigned gen = ep__fork_generation();
	size_t most = h->pack_size >> h->shift, at, want = n + a - 1;
	struct ep__pack *p;
	int rc;

	for (size_t slot = 0; slot < h->nslots; slot++) {
		p = h->by_slot[slot];
		if (!p || ep__fits_get(h, slot) < n || p->free_chunks < n)
			continue;
		if (p->r.gen != gen && ep__own_region_slow(h, &p->r))
			continue; /* (as in ep__pack_find()) */
		at = ep__fit_find_aligned(&p->fit, p->used, n, a,
					  (uintptr_t)p->r.exec >> h->shift);
		if (at < p->fit.nbits) {
			*outp = p;
			*pos = at;
			return 0;
		}
	}
	if ((rc = ep__pack_find(h, want < most ? want : most, &p, &at)))
		return rc;
	/* (capped at a whole pack: a new one starts on a page, so on a) */
	at = ep__fit_find_aligned(&p->fit, p->used, n, a, (uintptr_t)p->r.exec >> h->shift);
	if (at >= p->fit.nbits) {
		if (!p->cached && p->free_chunks == p->nchunks)
			ep__pack_emptied(h, p); /* made for this request */
		return -ENOMEM;
	}
	*outp = p;
	*pos = at;
	return 0;
}
void ep__pack_take(struct ep__heap *h, struct ep__pack *p, size_t pos, size_t n)
{
	EP_YIELD("empty packs");
	if (p->cached) {
		p->cached = 0;
		if (h->cached_pack == p)
			h->cached_pack = NULL;
		ep__sub_relaxed(&h->root->empty_packs, 1);
	}
	ep__pack_write_begin(p);
	ep__bitmap_set(p->start, pos, 1);
	ep__bitmap_set(p->used, pos, n);
	ep__pack_write_end(p);
	ep__st_born(p, pos, n); /* (a record from the start: ep__heap_alloc() gives it one) */
	ep__fit_mark_set(&p->fit, p->used, pos, n);
	p->free_chunks -= n;
	ep__tally(&h->tally.used_in, n << p->shift);
}
/* Chunks [pos, pos+n) are free again; the allocation starting at pos is
 * gone unless it only shrank (EP__GIVE_TAIL).  A lock-free free counted
 * itself (EP__GIVE_COUNTED_FREE; remote.c). */
void ep__pack_give_back(struct ep__heap *h, struct ep__pack *p, size_t pos, size_t n,
			enum ep__give how)
{
	bool counted = how == EP__GIVE_COUNTED_FREE, tail = how == EP__GIVE_TAIL;

	ep__pack_write_begin(p);
	ep__bitmap_clear(p->used, pos, n);
	if (!tail)
		ep__bitmap_clear(p->start, pos, 1);
	ep__pack_write_end(p);
	if (!tail)
		ep__st_gone(p, pos);
	size_t run = ep__fit_mark_clear(&p->fit, p->used, pos, n);

	p->free_chunks += n;
	ep__fits_raise(h, p, pos, n, run);
	if (!counted)
		ep__tally(&h->tally.used_out, n << p->shift);
	if (p->free_chunks == p->nchunks)
		ep__pack_emptied(h, p);
	/* (the one test on this path: long free runs' pages go, commit.c) */
	if (h->tally.used_out - h->hole_mark >= EP_PURGE_AT_ONCE)
		ep__heap_holes(h);
}

/*
 * Purge (ep_config.purge_delay_ms): the kept empty pack p, committed past
 * its first page, goes back to that page at once when more than
 * EP_PURGE_AT_ONCE is committed (a burst of code freed: PCRE2 freeing its
 * patterns makes no call after); else a deadline is set, and an emptied
 * pack of the heap after it (one in PURGE_EVERY: no clock on every free of
 * one-at-a-time churn, whose pack stays at its first page anyway) cuts
 * every kept empty pack of the heap back.  With the heap's lock.
 */
#define PURGE_EVERY 16u
static void purge(struct ep__heap *h, struct ep__pack *p)
{
	if (p->r.committed > EP_PURGE_AT_ONCE) {
		(void)ep__pack_uncommit(h, p);
		return;
	}
	if (!h->purge_at) {
		h->purge_at = ep__now_ns() + (uint64_t)h->purge_ms * 1000000u;
		h->purge_tick = 0;
		return;
	}
	if (++h->purge_tick % PURGE_EVERY && h->purge_ms)
		return;
	if (ep__now_ns() < h->purge_at)
		return;
	h->purge_at = 0;
	for (struct ep__pack *q = h->head; q; q = q->next)
		if (q->cached && !q->r.sealed)
			(void)ep__pack_uncommit(h, q);
}

/*
 * An empty pack is kept against alloc/free churn: one per heap while its
 * thread runs (a thread that JITs and frees one program at a time would
 * otherwise map, fill and unmap a pack for each), one per pool otherwise;
 * a heap's is given back when its thread exits (ep__pack_trim()).  A data
 * heap, which no thread owns and every thread uses, keeps one for good
 * (a linker allocates and frees data with each module).  Others are
 * released; a sealed one cannot be.
 */
void ep__pack_emptied(struct ep__heap *h, struct ep__pack *p)
{
	size_t none = 0;

	EP_YIELD("empty packs");
	if (p->hole_chunks)
		(void)ep__pack_uncommit(h, p); /* (no pack is kept with holes in it) */
	if (p->r.sealed) {
		ep__add_relaxed(&h->root->empty_packs, 1);
		p->cached = 1;
	} else if (!h->cached_pack && (!ep__heap_orphaned(h) || h->data)) {
		ep__add_relaxed(&h->root->empty_packs, 1);
		p->cached = 1;
		h->cached_pack = p;
	} else if (ep__cas_relaxed(&h->root->empty_packs, &none, 1)) {
		p->cached = 1;
		if (!h->cached_pack)
			h->cached_pack = p;
	} else {
		pack_release(h, p);
		return;
	}
	if (h->purge_ms >= 0 && p->r.committed > EP__COMMIT_FIRST && !p->r.sealed)
		purge(h, p);
}
/* The heap's thread has exited: its empty pack goes, unless it is the last
 * one the pool keeps.  With the heap's lock. */
void ep__pack_trim(struct ep__heap *h)
{
	struct ep__pack *p = h->cached_pack;

	EP_YIELD("empty packs");
	if (p && ep__load_relaxed(&h->root->empty_packs) > 1) {
		p->cached = 0;
		h->cached_pack = NULL;
		ep__sub_relaxed(&h->root->empty_packs, 1);
		pack_release(h, p);
	}
}
/*
 * ep_pool_trim(): the heap's empty packs go, the sealed ones excepted (their
 * views stay for good), and every other pack gives back its committed part
 * past its last used chunk (commit.c).  With the heap's lock.  Bytes given
 * back.
 */
size_t ep__pack_trim_all(struct ep__heap *h)
{
	size_t n = 0;

	for (struct ep__pack *p = h->head, *next; p; p = next) {
		next = p->next;
		if (p->cached && !p->r.sealed) {
			EP_YIELD("empty packs");
			p->cached = 0;
			if (h->cached_pack == p)
				h->cached_pack = NULL;
			ep__sub_relaxed(&h->root->empty_packs, 1);
			n += p->r.committed;
			pack_release(h, p);
		} else if (p->free_chunks < p->nchunks) {
			n += ep__pack_uncommit(h, p);
		}
	}
	return n;
}
