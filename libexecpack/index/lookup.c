/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lookup.c - from an address to the live allocation it belongs to, in one
 * heap (the heap itself was found from the address by route.h): one hash
 * probe, then the ranges and the pack's maps.  Called with the heap's lock.
 */
#include "config.h"

#include "alloc-state.h"
#include "lookup.h"
#include "ranges.h"
#include "records.h"

/* The allocation that starts at chunk pos runs to the next start bit or
 * free chunk, whichever is first. */
size_t ep__alloc_end(const struct ep__pack *p, size_t pos)
{
	/* one pass over both maps: stop at a start bit or a clear used bit
	 * (bits past nchunks are clear in used, so the scan stops there) */
	for (size_t i = pos + 1; i < p->nchunks; i = (i / 64 + 1) * 64) {
		size_t w = i / 64;
		uint64_t stop = (p->start[w] | ~p->used[w]) & (~(uint64_t)0 << (i % 64));

		if (stop) {
			size_t e = w * 64 + (size_t)__builtin_ctzll(stop);

			return e < p->nchunks ? e : p->nchunks;
		}
	}
	return p->nchunks;
}
struct ep__alloc *ep__alloc_view(struct ep__pack *p, size_t pos, size_t n, struct ep__alloc *v)
{
	/* (the fields a pack allocation's paths read; the rest stay unset) */
	v->hnext = NULL;
	v->key = (uintptr_t)p->r.exec + (pos << p->shift);
	v->exec = (void *)v->key;
	v->pack = p;
	v->chunk = pos;
	v->reserved = (n ? n : ep__alloc_end(p, pos) - pos) << p->shift;
	v->offset = 0;
	v->staging = NULL;
	v->stash_class = -1;
	v->norec = 1;
	v->diag = NULL;
	v->patch = NULL;
	v->info = 0;
	return v;
}
/* The live allocation whose handed-out bytes contain addr, or NULL; *v may
 * be filled in and returned (a view: no record). */
struct ep__alloc *ep__alloc_containing(const struct ep__heap *h, uintptr_t addr,
					  struct ep__alloc *v)
{
	const struct ep__range *r = ep__range_find(h, addr);
	struct ep__alloc *a;

	if (!r)
		return NULL;
	if (r->large) {
		a = r->large;
	} else {
		size_t c = (addr - r->lo) >> r->pack->shift;

		if (!ep__bitmap_test(r->pack->used, c))
			return NULL;
		size_t s = ep__bitmap_prev_set(r->pack->start, c);

		if (s == SIZE_MAX)
			return NULL;
		a = ep__hash_find(h, r->lo + (s << r->pack->shift));
		if (!a) {
			if (!ep__st_live(r->pack, s))
				return NULL; /* an ep_free() under way (remote.c) */
			a = ep__alloc_view(r->pack, s, ep__st_len(ep__st_byte(r->pack, s)), v);
		}
	}
	uintptr_t lo = (uintptr_t)a->exec, hi = a->key + a->reserved;

	return addr >= lo && addr < hi ? a : NULL;
}
/* ep__alloc_exact() without a usable pack hint (lookup.h). */
struct ep__alloc *ep__alloc_exact_slow(const struct ep__heap *h, const void *exec,
				       struct ep__alloc *v)
{
	/* Usually exec is the key itself (or, with EP_F_RANDOMIZE, inside the
	 * first chunk): one hash probe, then for a chunk-aligned address with
	 * no record, its start bit.  A hash hit is only trusted for a record
	 * with exactly this address. */
	uintptr_t x = (uintptr_t)exec, key = x & ~(uintptr_t)h->cmask;
	struct ep__alloc *a = ep__hash_find(h, key);

	if (a && a->exec == exec)
		return a;
	if (!a && x == key) {
		const struct ep__range *r = ep__range_find(h, x);

		if (!r)
			return NULL;
		if (r->large) /* always a record, keyed by the mapping's start */
			return r->large->exec == exec ? r->large : NULL;
		size_t c = (x - r->lo) >> r->pack->shift;

		return ep__bitmap_test(r->pack->start, c) && ep__st_live(r->pack, c)
			       ? ep__alloc_view(r->pack, c, ep__st_len(ep__st_byte(r->pack, c)), v)
			       : NULL;
	}
	a = ep__alloc_containing(h, x, v);
	return a && a->exec == exec ? a : NULL;
}
