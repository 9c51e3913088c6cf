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
#include "atomic.h"
#include "bitmap.h"
#include "small.h"

static inline uint64_t mask_from(size_t bit)
{
	return ~(uint64_t)0 << (bit % 64);
}

size_t ep__bitmap_next_set_far(const uint64_t *map, size_t nbits, size_t start)
{
	if (start >= nbits)
		return nbits;
	size_t w = start / 64;
	uint64_t word = map[w] & mask_from(start);
	const size_t nwords = EP__BITMAP_WORDS(nbits);

	for (;;) {
		if (word) {
			size_t idx = w * 64 + (size_t)__builtin_ctzll(word);
			return idx < nbits ? idx : nbits;
		}
		if (++w >= nwords)
			return nbits;
		word = map[w];
	}
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

		ep__store_relaxed(&map[pos / 64], map[pos / 64] | m);
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

		ep__store_relaxed(&map[pos / 64], map[pos / 64] & ~m);
		pos += take;
		n -= take;
	}
}

/* ---- the first-fit summary ------------------------------------------------ */

#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

/* Bits of word i, with bits past nbits as used. */
static inline uint64_t leaf_word(const struct ep__fit *fit, const uint64_t *map, size_t i)
{
	uint64_t w = map[i];

	if (i == fit->nwords - 1)
		w |= fit->tail;
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

/* Longest run of clear bits in w: a step a run, from the lowest up (a
 * busy word has few runs: fewer instructions than binary lifting's fixed
 * dozen steps, in the same time; doc/performance.md). */
static uint8_t run_in(uint64_t w)
{
	uint64_t x = ~w; /* the clear bits, as ones */
	size_t best = 0;

	if (x == ~(uint64_t)0)
		return 64;
	while (x) {
		x >>= __builtin_ctzll(x); /* a run from bit 0 */
		/* (below 64: x is not all ones, neither ~w nor anything
		 * shifted right) */
		size_t len = (size_t)__builtin_ctzll(~x);

		if (len > best)
			best = len;
		x >>= len;
	}
	return (uint8_t)best;
}

/* reach of word i (bits w) from its run: the longest run starting in it
 * and ending in it or in the next word, at most 64.  With the word's top
 * bit set no run goes on into the next word. */
static inline size_t reach_of(const struct ep__fit *fit, const uint64_t *map, size_t i, uint64_t w)
{
	size_t r = fit->run[i];

	if ((int64_t)w >= 0 && i + 1 < fit->nwords) {
		size_t c = suf_of(w) + pre_of(leaf_word(fit, map, i + 1));

		if (c > r)
			r = c;
	}
	return r > EP__FIT_MAX ? EP__FIT_MAX : r;
}

/* ---- the tree of byte maxima: FAN entries a node, compared at once ----
 * Entries are at most 64.  Without SIMD: with each byte's top bit forced
 * on, a subtraction of another byte (or of n) never borrows from its
 * neighbour, and the top bit then says which was larger. */
#define ONES 0x0101010101010101ull
#define HIGH 0x8080808080808080ull

static inline uint64_t lane(const uint8_t *p)
{
	uint64_t x;

	memcpy(&x, p, sizeof(x));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	return x;
}

/* Bytewise maximum of two lanes. */
static inline uint64_t lane_max(uint64_t x, uint64_t y)
{
	uint64_t ge = (((x | HIGH) - y) & HIGH) >> 7; /* 1 where x >= y */
	uint64_t m = ge * 0xff;

	return (x & m) | (y & ~m);
}

#define FAN EP__FIT_FAN

/* Largest of the entries of a node (byte-wise maximum instructions where
 * there are: this runs whenever a word's reach falls). */
static inline uint8_t node_max(const uint8_t *p)
{
#if defined(__SSE2__)
	__m128i x = _mm_max_epu8(_mm_loadu_si128((const __m128i *)(const void *)p),
				 _mm_loadu_si128((const __m128i *)(const void *)(p + 16)));

	x = _mm_max_epu8(x, _mm_srli_si128(x, 8));
	x = _mm_max_epu8(x, _mm_srli_si128(x, 4));
	x = _mm_max_epu8(x, _mm_srli_si128(x, 2));
	x = _mm_max_epu8(x, _mm_srli_si128(x, 1));
	return (uint8_t)_mm_cvtsi128_si32(x);
#elif defined(__aarch64__)
	return vmaxvq_u8(vmaxq_u8(vld1q_u8(p), vld1q_u8(p + 16)));
#else
	uint64_t x = lane(p);

	for (size_t k = 8; k < FAN; k += 8)
		x = lane_max(x, lane(p + k));
	x = lane_max(x, x >> 32);
	x = lane_max(x, x >> 16);
	x = lane_max(x, x >> 8);
	return (uint8_t)x;
#endif
}

/* The first entry at or after from, up to the end of from's node, that is
 * at least n (1 <= n <= 64); SIZE_MAX when none. */
static inline size_t node_find(const uint8_t *lv, size_t from, size_t n)
{
	size_t at = from & ~(size_t)(FAN - 1);
#if defined(__SSE2__)
	/* (entries and n are at most 64: a signed compare) */
	const __m128i *q = (const __m128i *)(const void *)(lv + at);
	__m128i t = _mm_set1_epi8((char)(n - 1));
	uint32_t hit = (uint32_t)_mm_movemask_epi8(_mm_cmpgt_epi8(_mm_loadu_si128(q), t)) |
		       (uint32_t)_mm_movemask_epi8(_mm_cmpgt_epi8(_mm_loadu_si128(q + 1), t)) << 16;

	hit &= ~(uint32_t)0 << (from % FAN);
	return hit ? at + (size_t)__builtin_ctz(hit) : SIZE_MAX;
#else
	for (size_t k = from % FAN / 8 * 8; k < FAN; k += 8) {
		uint64_t hit = ((lane(lv + at + k) | HIGH) - ONES * n) & HIGH;

		if (k == from % FAN / 8 * 8)
			hit &= ~(uint64_t)0 << (from % 8 * 8);
		if (hit)
			return at + k + (size_t)__builtin_ctzll(hit) / 8;
	}
	return SIZE_MAX;
#endif
}

/* reach[i] becomes b; each level above changes only while the maximum of
 * the node it stands for changes. */
static void set_reach(struct ep__fit *fit, size_t i, size_t b)
{
	size_t a = fit->reach[i];

	if (a == b)
		return;
	fit->reach[i] = (uint8_t)b;
	for (size_t k = 1; k < fit->nlevels; k++) {
		size_t j = i / FAN, old = fit->level[k][j], now;

		if (b >= old)
			now = b;
		else if (a == old)
			now = node_max(fit->level[k - 1] + j * FAN); /* the maximum fell */
		else
			now = old;
		if (now == old)
			return;
		fit->level[k][j] = (uint8_t)now;
		a = old;
		b = now;
		i = j;
	}
}

int ep__fit_init(struct ep__fit *fit, const uint64_t *map, size_t nbits)
{
	size_t words = EP__BITMAP_WORDS(nbits) ? EP__BITMAP_WORDS(nbits) : 1;
	size_t bytes = words, n = (words + FAN - 1) / FAN * FAN;

	memset(fit, 0, sizeof(*fit));
	for (;;) {
		if (fit->nlevels == EP__FIT_LEVELS)
			return -1;
		fit->len[fit->nlevels++] = n;
		bytes += n;
		if (n == FAN)
			break;
		n = (n / FAN + FAN - 1) / FAN * FAN;
	}
	fit->nbits = nbits;
	fit->nwords = words;
	fit->tail = nbits % 64 ? ~(uint64_t)0 << (nbits % 64) : 0;
	if (!nbits)
		fit->tail = ~(uint64_t)0;
	/* one block: the levels, then the runs */
	uint8_t *b = ep__small_get(bytes);

	if (!b)
		return -1;
	for (size_t k = 0; k < fit->nlevels; k++) {
		fit->level[k] = b;
		b += fit->len[k];
	}
	fit->reach = fit->level[0];
	fit->run = b;
	for (size_t i = 0; i < words; i++)
		fit->run[i] = run_in(leaf_word(fit, map, i));
	for (size_t i = 0; i < words; i++)
		set_reach(fit, i, reach_of(fit, map, i, leaf_word(fit, map, i)));
	return 0;
}

void ep__fit_destroy(struct ep__fit *fit)
{
	size_t bytes = fit->nwords;

	for (size_t k = 0; k < fit->nlevels; k++)
		bytes += fit->len[k];
	ep__small_put(fit->level[0], bytes);
	memset(fit, 0, sizeof(*fit));
}

/* Word i's first run changed: the reach of the word below, whose top run
 * may go on into it. */
static inline void first_run_changed(struct ep__fit *fit, const uint64_t *map, size_t i)
{
	if (i) {
		uint64_t prev = leaf_word(fit, map, i - 1);

		if ((int64_t)prev >= 0)
			set_reach(fit, i - 1, reach_of(fit, map, i - 1, prev));
	}
}

/* Words lo..hi changed and their runs are exact again: their reach, and
 * the reach of the word below. */
static void words_changed(struct ep__fit *fit, const uint64_t *map, size_t lo, size_t hi)
{
	first_run_changed(fit, map, lo);
	for (size_t i = lo; i <= hi; i++)
		set_reach(fit, i, reach_of(fit, map, i, leaf_word(fit, map, i)));
}

void ep__fit_mark(struct ep__fit *fit, const uint64_t *map, size_t pos, size_t n)
{
	if (n == 0)
		return;
	size_t lo = pos / 64, hi = (pos + n - 1) / 64;

	for (size_t i = lo; i <= hi; i++)
		fit->run[i] = run_in(leaf_word(fit, map, i));
	words_changed(fit, map, lo, hi);
}

/* The run [*lo, *hi) of word w (bit positions) that bits [b, e) are part
 * of, or were part of before they were set: bounded by the set bits
 * nearest them, or by the word's ends. */
static inline void run_around(uint64_t w, size_t b, size_t e, size_t *lo, size_t *hi)
{
	uint64_t below = b ? w << (64 - b) : 0, above = e < 64 ? w >> e : 0;

	*lo = b - (below ? (size_t)__builtin_clzll(below) : b);
	*hi = e + (above ? (size_t)__builtin_ctzll(above) : 64 - e);
}

/* The run from bit lo of word i (bits w) changed, and run[i] is exact
 * again: the word's reach, and the word below's when the run is the
 * word's first. */
static inline void run_changed(struct ep__fit *fit, const uint64_t *map, size_t i, uint64_t w,
			       size_t lo)
{
	set_reach(fit, i, reach_of(fit, map, i, w));
	if (lo == 0)
		first_run_changed(fit, map, i);
}

void ep__fit_mark_set(struct ep__fit *fit, const uint64_t *map, size_t pos, size_t n)
{
	size_t i = pos / 64, lo, hi;

	if (n == 0 || i != (pos + n - 1) / 64) {
		ep__fit_mark(fit, map, pos, n);
		return;
	}
	uint64_t w = leaf_word(fit, map, i);

	run_around(w, pos % 64, pos % 64 + n, &lo, &hi);
	/* Taken from a run shorter than the word's longest, with set bits on
	 * both sides: the longest, the top run and the first run of the word
	 * are as they were, and so every reach.  (Rare: first fit lands on
	 * the first word that fits, and nearly always takes its longest.) */
	if (hi - lo < fit->run[i] && lo && hi < 64)
		return;
	if (hi - lo >= fit->run[i])
		fit->run[i] = run_in(w);
	run_changed(fit, map, i, w, lo);
}

size_t ep__fit_mark_clear(struct ep__fit *fit, const uint64_t *map, size_t pos, size_t n)
{
	size_t i = pos / 64, lo, hi;

	if (n == 0 || i != (pos + n - 1) / 64) {
		ep__fit_mark(fit, map, pos, n);
		return 0;
	}
	uint64_t w = leaf_word(fit, map, i);

	/* the run the clear bits are now part of; every other run of the
	 * word is as it was */
	run_around(w, pos % 64, pos % 64 + n, &lo, &hi);
	if (hi - lo > fit->run[i])
		fit->run[i] = (uint8_t)(hi - lo);
	run_changed(fit, map, i, w, lo);
	/* (a set bit on each side: the run is all inside the word) */
	return lo && hi < 64 ? hi - lo : 0;
}

/* The lowest word i >= from whose reach is at least n (1 <= n <= 64), or
 * nwords: up the tree from from's node until a node holds one, then down
 * to its first such leaf (a node's maximum is exact, so each step down
 * finds one). */
static size_t first_reach(const struct ep__fit *fit, size_t from, size_t n)
{
	size_t k = 0, at;

	if (from >= fit->nwords)
		return fit->nwords;
	while ((at = node_find(fit->level[k], from, n)) == SIZE_MAX) {
		from = from / FAN + 1;
		if (++k == fit->nlevels || from >= fit->len[k])
			return fit->nwords;
	}
	while (k--)
		at = node_find(fit->level[k], at * FAN, n);
	return at < fit->nwords ? at : fit->nwords;
}

/* The lowest word whose reach is at least n (1 <= n <= 64), or nwords:
 * down from the top, one node a level. */
static size_t first_word(const struct ep__fit *fit, size_t n)
{
	size_t k = fit->nlevels - 1, at = node_find(fit->level[k], 0, n);

	if (at == SIZE_MAX)
		return fit->nwords;
	while (k--)
		at = node_find(fit->level[k], at * FAN, n);
	return at;
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

/* The largest reach of all, at most 64: the top node's maximum. */
static size_t top_max(const struct ep__fit *fit)
{
	return node_max(fit->level[fit->nlevels - 1]);
}

size_t ep__fit_longest(const struct ep__fit *fit, const uint64_t *map)
{
	size_t top = top_max(fit), best;

	if (top < EP__FIT_MAX)
		return top; /* a longer run would have a reach of 64 */
	find_long(fit, map, SIZE_MAX, &best);
	return best;
}

size_t ep__fit_find(const struct ep__fit *fit, const uint64_t *map, size_t n, size_t *longest)
{
	if (n >= 1 && n <= EP__FIT_MAX && n <= fit->nbits) {
		size_t i = first_word(fit, n);

		if (i < fit->nwords) {
			/* the lowest run inside word i, or else the one from
			 * its top into the next word (reach is exact) */
			uint64_t w = leaf_word(fit, map, i);
			size_t p = word_find_zeros(w, n);

			return i * 64 + (p < 64 ? p : 64 - suf_of(w));
		}
		if (longest)
			*longest = top_max(fit); /* (exact, below n) */
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

/* The lowest i >= from with (base + i) % a == 0. */
static inline size_t align_up(size_t from, size_t a, size_t base)
{
	return from + ((a - ((base + from) & (a - 1))) & (a - 1));
}

/*
 * Aligned first fit: only the starts on the alignment are candidates.  A
 * run of n starting at s makes the reach of word s / 64 at least min(n,
 * 64), so the summary skips the words that cannot hold one; in a word
 * that may, each aligned start is tried against the next used bit, and a
 * failed one moves past that bit.  The free bits skipped stay free.
 */
size_t ep__fit_find_aligned(const struct ep__fit *fit, const uint64_t *map, size_t n, size_t a,
			    size_t base)
{
	size_t m = n < EP__FIT_MAX ? n : EP__FIT_MAX, s = align_up(0, a, base);

	if (n == 0)
		return fit->nbits;
	while (s < fit->nbits && n <= fit->nbits - s) {
		size_t w = first_reach(fit, s / 64, m);

		if (w >= fit->nwords)
			break;
		if (w * 64 > s) {
			s = align_up(w * 64, a, base);
			if (s >= fit->nbits || n > fit->nbits - s)
				break;
		}
		size_t e = ep__bitmap_next_set(map, fit->nbits, s);

		if (e - s >= n)
			return s;
		s = align_up(e + 1, a, base);
	}
	return fit->nbits;
}
