/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bitmap.c - first-fit search over a pack's chunk bitmap.
 *
 * Word-at-a-time bit operations with count-trailing-zeros, and a summary
 * over the map (struct ep__fit, below), a secondary index that finds the
 * first run of n clear bits in a few word operations however fragmented
 * the pack is: the pool searches with it rather than scanning the words
 * (a 2 MiB pack has 32768 chunks, 512 words).
 */
#include "bitmap.h"

static inline uint64_t mask_from(size_t bit)
{
	return ~(uint64_t)0 << (bit % 64);
}

/* First set bit of (word ^ flip) at or after start: flip 0 finds a set bit,
 * flip ~0 a clear one. */
static size_t find_next(const uint64_t *map, size_t nbits, size_t start,
			uint64_t flip)
{
	if (start >= nbits)
		return nbits;
	size_t w = start / 64;
	uint64_t word = (map[w] ^ flip) & mask_from(start);
	const size_t nwords = EP__BITMAP_WORDS(nbits);

	for (;;) {
		if (word) {
			size_t idx = w * 64 + (size_t)__builtin_ctzll(word);
			return idx < nbits ? idx : nbits;
		}
		if (++w >= nwords)
			return nbits;
		word = map[w] ^ flip;
	}
}

size_t ep__bitmap_next_zero_far(const uint64_t *map, size_t nbits, size_t start)
{
	return find_next(map, nbits, start, ~(uint64_t)0);
}

size_t ep__bitmap_next_set_far(const uint64_t *map, size_t nbits, size_t start)
{
	return find_next(map, nbits, start, 0);
}

size_t ep__bitmap_prev_set(const uint64_t *map, size_t pos)
{
	size_t w = pos / 64;
	/* keep bits 0..pos%64 of the first word */
	uint64_t word = map[w] & (~(uint64_t)0 >> (63 - pos % 64));

	for (;;) {
		if (word)
			return w * 64 + 63 - (size_t)__builtin_clzll(word);
		if (w == 0)
			return SIZE_MAX;
		word = map[--w];
	}
}

void ep__bitmap_set_far(uint64_t *map, size_t pos, size_t n)
{
	while (n) {
		size_t bit = pos % 64, take = 64 - bit;

		if (take > n)
			take = n;
		uint64_t m = (take == 64) ? ~(uint64_t)0 : (((uint64_t)1 << take) - 1) << bit;

		__atomic_store_n(&map[pos / 64], map[pos / 64] | m, __ATOMIC_RELAXED);
		pos += take;
		n -= take;
	}
}

void ep__bitmap_clear_far(uint64_t *map, size_t pos, size_t n)
{
	while (n) {
		size_t bit = pos % 64, take = 64 - bit;

		if (take > n)
			take = n;
		uint64_t m = (take == 64) ? ~(uint64_t)0 : (((uint64_t)1 << take) - 1) << bit;

		__atomic_store_n(&map[pos / 64], map[pos / 64] & ~m, __ATOMIC_RELAXED);
		pos += take;
		n -= take;
	}
}

/* ---- the first-fit summary ------------------------------------------------ */

#include <stdlib.h>
#include <string.h>

/* Bits of word i, with bits past nbits as used. */
static inline uint64_t leaf_word(const struct ep__fit *fit, const uint64_t *map, size_t i)
{
	uint64_t w = map[i];
	size_t first = i * 64;

	if (fit->nbits - first < 64)
		w |= ~(uint64_t)0 << (fit->nbits - first);
	return w;
}

static inline size_t pre_of(uint64_t w)
{
	return w ? (size_t)__builtin_ctzll(w) : 64;
}

static inline size_t suf_of(uint64_t w)
{
	return w ? (size_t)__builtin_clzll(w) : 64;
}

/* Longest run of clear bits in w. */
static uint8_t run_in(uint64_t w)
{
	if (w == 0)
		return 64;
	if (w == ~(uint64_t)0)
		return 0; /* (a full word: most of a busy pack) */
	/* By binary lifting: r[k] has bit p set where a run of 2^k clear bits
	 * starts at p; then the longest length is built greedily from the
	 * largest step down.  A fixed dozen steps, instead of a loop over the
	 * runs whose count the branch predictor cannot guess. */
	uint64_t r[6];

	r[0] = ~w;
#pragma GCC unroll 6
	for (int k = 1; k < 6; k++)
		r[k] = r[k - 1] & (r[k - 1] >> (1u << (k - 1)));
	uint64_t at = ~(uint64_t)0; /* where a run of len clear bits starts */
	uint32_t len = 0;

#pragma GCC unroll 6
	for (int k = 5; k >= 0; k--) {
		uint64_t c = at & (r[k] >> len);
		uint64_t none = (uint64_t)(c == 0);

		len += (uint32_t)(1 - none) << k;
		at = c | (at & (0 - none)); /* (masks, not branches) */
	}
	return (uint8_t)len;
}

/* reach[i]: the longest run starting in word i (w) and ending in it or in
 * the next word, at most 64.  With the word's top bit set no run goes on
 * into the next word, and reach is the word's own run. */
static size_t reach_of(const struct ep__fit *fit, const uint64_t *map, size_t i, uint64_t w)
{
	size_t r = fit->run[i];

	if ((int64_t)w >= 0 && i + 1 < fit->nwords) {
		size_t c = suf_of(w) + pre_of(leaf_word(fit, map, i + 1));

		if (c > r)
			r = c;
	}
	return r > EP__FIT_MAX ? EP__FIT_MAX : r;
}

/* reach[i] becomes b: bit i set in ge(a+1..b), or cleared in ge(b+1..a). */
static void set_reach(struct ep__fit *fit, size_t i, size_t b)
{
	size_t a = fit->reach[i], gw = fit->gw, sw = fit->sw;

	if (a == b)
		return;
	fit->reach[i] = (uint8_t)b;
	uint64_t bit = (uint64_t)1 << (i % 64), sbit = (uint64_t)1 << (i / 64 % 64);
	uint64_t *g = fit->ge + i / 64, *sum = fit->ge_sum + i / 64 / 64;

	if (b > a) {
		for (size_t t = a; t < b; t++) {
			g[t * gw] |= bit;
			sum[t * sw] |= sbit;
		}
		return;
	}
	for (size_t t = b; t < a; t++)
		if (!(g[t * gw] &= ~bit))
			sum[t * sw] &= ~sbit;
}

int ep__fit_init(struct ep__fit *fit, const uint64_t *map, size_t nbits)
{
	size_t words = EP__BITMAP_WORDS(nbits) ? EP__BITMAP_WORDS(nbits) : 1;
	size_t gw = EP__BITMAP_WORDS(words), sw = EP__BITMAP_WORDS(gw);
	size_t bwords = (size_t)EP__FIT_MAX * (gw + sw) + gw;
	size_t bytes = bwords * sizeof(uint64_t) + 3 * words;

	memset(fit, 0, sizeof(*fit));
	fit->nbits = nbits;
	fit->nwords = words;
	fit->gw = gw;
	fit->sw = sw;
	/* one block: ge, ge_sum, dirty, then the bytes per word */
	fit->ge = calloc(1, bytes);
	if (!fit->ge)
		return -1;
	fit->ge_sum = fit->ge + EP__FIT_MAX * gw;
	fit->dirty = fit->ge_sum + EP__FIT_MAX * sw;
	fit->run = (uint8_t *)(fit->dirty + gw);
	fit->pre = fit->run + words;
	fit->reach = fit->pre + words;
	for (size_t i = 0; i < words; i++) {
		uint64_t w = leaf_word(fit, map, i);

		fit->run[i] = run_in(w);
		fit->pre[i] = (uint8_t)pre_of(w);
	}
	for (size_t i = 0; i < words; i++)
		set_reach(fit, i, reach_of(fit, map, i, leaf_word(fit, map, i)));
	return 0;
}

void ep__fit_destroy(struct ep__fit *fit)
{
	free(fit->ge);
	memset(fit, 0, sizeof(*fit));
}

void ep__fit_mark_far(struct ep__fit *fit, size_t pos, size_t n)
{
	if (n == 0)
		return;
	size_t lo = pos / 64, hi = (pos + n - 1) / 64;

	for (size_t i = lo; i <= hi; i++)
		ep__fit_mark_leaf(fit, i);
}

/* Word i changed: its run, its reach and the previous word's, when a run
 * of that one may continue into it and the clear bits word i starts with
 * are not as many as when that reach was last computed (pre[i]).  A
 * previous word still to be flushed is right once its own turn comes, in
 * whichever order. */
static void leaf_update(struct ep__fit *fit, const uint64_t *map, size_t i)
{
	uint64_t w = leaf_word(fit, map, i);
	uint8_t pre = (uint8_t)pre_of(w);

	fit->run[i] = run_in(w);
	set_reach(fit, i, reach_of(fit, map, i, w));
	if (i && pre != fit->pre[i]) {
		uint64_t prev = leaf_word(fit, map, i - 1);

		if ((int64_t)prev >= 0)
			set_reach(fit, i - 1, reach_of(fit, map, i - 1, prev));
	}
	fit->pre[i] = pre;
}

void ep__fit_mark_clear(struct ep__fit *fit, const uint64_t *map, size_t pos, size_t n)
{
	size_t i = pos / 64;

	if (n == 0 || i != (pos + n - 1) / 64 || ep__bitmap_test(fit->dirty, i)) {
		ep__fit_mark(fit, pos, n);
		return;
	}
	uint64_t w = leaf_word(fit, map, i);
	size_t b = pos % 64, e = b + n;
	/* the run the clear bits are part of: from past the set bit below
	 * them to the set bit above them */
	uint64_t below = b ? w << (64 - b) : 0, above = e < 64 ? w >> e : 0;
	size_t lo = b - (below ? (size_t)__builtin_clzll(below) : b);
	size_t hi = e + (above ? (size_t)__builtin_ctzll(above) : 64 - e);
	uint8_t pre = (uint8_t)pre_of(w);

	if (hi - lo > fit->run[i])
		fit->run[i] = (uint8_t)(hi - lo);
	set_reach(fit, i, reach_of(fit, map, i, w));
	if (i && pre != fit->pre[i]) {
		uint64_t prev = leaf_word(fit, map, i - 1);

		if ((int64_t)prev >= 0 && !ep__bitmap_test(fit->dirty, i - 1))
			set_reach(fit, i - 1, reach_of(fit, map, i - 1, prev));
	}
	fit->pre[i] = pre;
}

void ep__fit_flush(struct ep__fit *fit, const uint64_t *map)
{
	if (fit->ndirty <= EP__FIT_LIST) {
		for (size_t k = 0; k < fit->ndirty; k++) {
			size_t i = fit->list[k];

			fit->dirty[i / 64] &= ~((uint64_t)1 << (i % 64));
			leaf_update(fit, map, i);
		}
		fit->ndirty = 0;
		return;
	}
	for (size_t dw = 0; dw < fit->gw; dw++) {
		uint64_t d = fit->dirty[dw];

		fit->dirty[dw] = 0;
		for (; d; d &= d - 1)
			leaf_update(fit, map, dw * 64 + (size_t)__builtin_ctzll(d));
	}
	fit->ndirty = 0;
}

/* The lowest word i >= from whose reach is at least n (1 <= n <= 64), or
 * nwords: in ge(n), then in its summary past that word. */
static size_t first_reach(const struct ep__fit *fit, size_t from, size_t n)
{
	const uint64_t *g = fit->ge + (n - 1) * fit->gw, *sum = fit->ge_sum + (n - 1) * fit->sw;

	if (from >= fit->nwords)
		return fit->nwords;
	size_t w = from / 64;
	uint64_t x = g[w] & (~(uint64_t)0 << (from % 64));

	if (x)
		return w * 64 + (size_t)__builtin_ctzll(x);
	if (++w >= fit->gw)
		return fit->nwords;
	size_t s = w / 64;
	uint64_t y = sum[s] & (~(uint64_t)0 << (w % 64));

	while (!y) {
		if (++s >= fit->sw)
			return fit->nwords;
		y = sum[s];
	}
	w = s * 64 + (size_t)__builtin_ctzll(y);
	return w * 64 + (size_t)__builtin_ctzll(g[w]);
}

/* Lowest p with bits p..p+n-1 of w all clear (1 <= n <= 64), or 64: shift
 * and AND, doubling the length each step, instead of a loop over the runs
 * (whose branches the processor cannot predict). */
static inline size_t word_find_zeros(uint64_t w, size_t n)
{
	uint64_t m = ~w; /* bit p: a run of len clear bits starts at p */
	size_t len = 1;

	while (2 * len <= n) {
		m &= m >> len;
		len *= 2;
	}
	if (len < n)
		m &= m >> (n - len);
	return m ? (size_t)__builtin_ctzll(m) : 64;
}

/* A run longer than 64 bits starts at the top of a word whose reach is 64
 * (a clear word included): only those are looked at, each run once.
 * *best gets the longest run seen, which is the map's longest when none
 * fits and a run of 64 exists. */
static size_t find_long(const struct ep__fit *fit, const uint64_t *map, size_t n, size_t *best)
{
	*best = 0;
	for (size_t i = 0; (i = first_reach(fit, i, EP__FIT_MAX)) < fit->nwords;) {
		size_t s = i * 64 + 64 - suf_of(leaf_word(fit, map, i));
		size_t e = ep__bitmap_next_set(map, fit->nbits, s);

		if (e - s >= n)
			return s;
		if (e - s > *best)
			*best = e - s;
		i = e / 64; /* past i: the run reached the end of word i */
	}
	return fit->nbits;
}

/* Whether some word's reach is at least n. */
static bool any_reach(const struct ep__fit *fit, size_t n)
{
	const uint64_t *sum = fit->ge_sum + (n - 1) * fit->sw;

	for (size_t s = 0; s < fit->sw; s++)
		if (sum[s])
			return true;
	return false;
}

/* The largest reach of all, at most 64: ge(n) shrinks as n grows, so by
 * bisection. */
static size_t top_max(const struct ep__fit *fit)
{
	size_t lo = 0, hi = EP__FIT_MAX; /* any_reach(lo) (or lo == 0), !any_reach(hi + 1) */

	while (lo < hi) {
		size_t mid = (lo + hi + 1) / 2;

		if (any_reach(fit, mid))
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

size_t ep__fit_longest(const struct ep__fit *fit, const uint64_t *map)
{
	size_t top = top_max(fit), best;

	if (top < EP__FIT_MAX)
		return top; /* exact: a longer run would have a reach of 64 */
	find_long(fit, map, SIZE_MAX, &best);
	return best;
}

size_t ep__fit_find(const struct ep__fit *fit, const uint64_t *map, size_t n, size_t *longest)
{
	if (n >= 1 && n <= EP__FIT_MAX && n <= fit->nbits) {
		size_t i = first_reach(fit, 0, n);

		if (i < fit->nwords) {
			/* the lowest run inside word i, or else the one from its
			 * top into the next word */
			uint64_t w = leaf_word(fit, map, i);
			size_t p = word_find_zeros(w, n);

			return i * 64 + (p < 64 ? p : 64 - suf_of(w));
		}
		if (longest)
			*longest = top_max(fit); /* (below n, so exact) */
		return fit->nbits;
	}
	if (n > EP__FIT_MAX && n <= fit->nbits) {
		size_t best, at = find_long(fit, map, n, &best);

		if (at == fit->nbits && longest)
			*longest = best > top_max(fit) ? best : top_max(fit);
		return at;
	}
	if (longest)
		*longest = ep__fit_longest(fit, map);
	return fit->nbits;
}
