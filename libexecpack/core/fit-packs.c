/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fit-packs.c - first fit across a heap's packs: the packs in creation
 * order (slots) under a max tree of bounds of their longest free runs.
 */
#include "config.h"

#include <stdlib.h>
#include <errno.h>

#include "fit-packs.h"
#include "small.h"

/*
 * First fit over hundreds of packs walked them all in creation order; the
 * walk was what grew with the live set.  The packs now also sit in slots
 * in creation order under a max tree (the per-pack summary's idea, one
 * level up): the first slot whose leaf is at least n is found in
 * O(log packs).  A leaf is an upper bound of its pack's longest free run,
 * kept cheap on the hot path: a give-back raises it to the run it
 * creates (so it stays exact if it was), a take leaves it as it is, and a
 * search that finds a pack cannot fit after all lowers it to the truth and
 * goes on; each take makes at most one leaf stale, so the misses are paid
 * for in advance.
 */
void ep__fits_set(struct ep__heap *h, size_t slot, uint32_t v)
{
	size_t i = h->cap_slots + slot;

	h->fits[i] = v;
	for (i /= 2; i; i /= 2) {
		uint32_t l = h->fits[2 * i], r = h->fits[2 * i + 1];
		uint32_t m = l > r ? l : r;

		if (h->fits[i] == m)
			break; /* the nodes above depend on nothing else */
		h->fits[i] = m;
	}
}
/* The first slot whose bound is at least n; SIZE_MAX when none. */
size_t ep__fits_first(const struct ep__heap *h, size_t n)
{
	if (!h->cap_slots || h->fits[1] < n)
		return SIZE_MAX;
	size_t i = 1;

	while (i < h->cap_slots)
		i = h->fits[2 * i] >= n ? 2 * i : 2 * i + 1;
	return i - h->cap_slots;
}
/*
 * Room for one more slot, made before a pack is mapped so that adding it
 * cannot fail: released packs' slots are squeezed out (order kept), and
 * the arrays doubled when the live packs fill more than half of them.
 */
int ep__slots_reserve(struct ep__heap *h)
{
	if (h->nslots < h->cap_slots)
		return 0;
	size_t cap = h->cap_slots ? h->cap_slots : 8;

	if (h->npacks >= cap / 2)
		cap *= 2;
	struct ep__pack **bs = ep__small_get(cap * sizeof(*bs));
	uint32_t *fits = ep__small_get(2 * cap * sizeof(*fits));

	if (!bs || !fits) {
		ep__small_put(bs, cap * sizeof(*bs));
		ep__small_put(fits, 2 * cap * sizeof(*fits));
		return -ENOMEM;
	}
	size_t k = 0;

	for (size_t i = 0; i < h->nslots; i++) {
		struct ep__pack *p = h->by_slot[i];

		if (!p)
			continue;
		fits[cap + k] = ep__fits_get(h, i);
		p->slot = k;
		bs[k++] = p;
	}
	for (size_t i = cap - 1; i >= 1; i--)
		fits[i] = fits[2 * i] > fits[2 * i + 1] ? fits[2 * i] : fits[2 * i + 1];
	ep__small_put(h->by_slot, h->cap_slots * sizeof(*bs));
	ep__small_put(h->fits, 2 * h->cap_slots * sizeof(*fits));
	h->by_slot = bs;
	h->fits = fits;
	h->cap_slots = cap;
	h->nslots = k;
	return 0;
}
void ep__slot_add(struct ep__heap *h, struct ep__pack *p)
{
	p->slot = h->nslots++;
	h->by_slot[p->slot] = p;
	h->npacks++;
	ep__fits_set(h, p->slot, (uint32_t)p->nchunks);
}
void ep__slot_remove(struct ep__heap *h, struct ep__pack *p)
{
	ep__fits_set(h, p->slot, 0);
	h->by_slot[p->slot] = NULL;
	h->npacks--;
	while (h->nslots && !h->by_slot[h->nslots - 1])
		h->nslots--; /* the newest went: its slot is reused */
}
/*
 * After chunks [pos, pos+n) of p were freed: the run they are part of is
 * the only new one, so the bound becomes the larger of the two.  That run
 * is run chunks long where the pack's summary measured it (inside one
 * word; else run is 0).  Otherwise its ends are looked for in two words
 * on each side only (a scan would cost as much as the free stretch is
 * long); an end not found there is taken to be the pack's end, and no run
 * is longer than the free chunks, so the bound stays a bound.
 */
void ep__fits_raise(struct ep__heap *h, struct ep__pack *p, size_t pos, size_t n, size_t run)
{
	uint32_t b = ep__fits_get(h, p->slot);

	if (b >= p->free_chunks)
		return;
	if (run) {
		if (run > b)
			ep__fits_set(h, p->slot, (uint32_t)run);
		return;
	}
	size_t lo = 0, hi = p->nchunks, end = pos + n;

	if (pos) {
		size_t w = (pos - 1) / 64;
		uint64_t m = p->used[w] & (~(uint64_t)0 >> (63 - (pos - 1) % 64));

		if (!m && w) {
			w--;
			m = p->used[w];
		}
		if (m)
			lo = w * 64 + 64 - (size_t)__builtin_clzll(m);
	}
	if (end < p->nchunks) {
		size_t w = end / 64;
		uint64_t m = p->used[w] & (~(uint64_t)0 << (end % 64));

		if (!m && w + 1 < EP__BITMAP_WORDS(p->nchunks)) {
			w++;
			m = p->used[w];
		}
		if (m)
			hi = w * 64 + (size_t)__builtin_ctzll(m);
	}
	run = hi - lo < p->free_chunks ? hi - lo : p->free_chunks;
	if (run > b)
		ep__fits_set(h, p->slot, (uint32_t)run);
}
