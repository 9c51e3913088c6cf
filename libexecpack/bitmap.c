/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bitmap.c - first-fit search over a pack's chunk bitmap.
 *
 * Word-at-a-time bit operations with count-trailing-zeros, and a summary
 * tree over the map (struct ep__fit, below), a secondary index that finds
 * the first run of n clear bits in O(log nbits) however fragmented the
 * pack is: the pool searches with it rather than scanning the words (a
 * 2 MiB pack has 32768 chunks, 512 words).
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

/* ---- the summary tree ----------------------------------------------------- */

#include <stdlib.h>
#include <string.h>

/* Bits of leaf word i, with bits past nbits (and padding leaves) as used. */
static uint64_t leaf_word(const struct ep__fit *fit, const uint64_t *map, size_t i)
{
	size_t first = i * 64;

	if (first >= fit->nbits)
		return ~(uint64_t)0;
	uint64_t w = map[i];

	if (fit->nbits - first < 64)
		w |= ~(uint64_t)0 << (fit->nbits - first);
	return w;
}

static void leaf_set(struct ep__fit_node *nd, uint64_t w)
{
	if (w == 0) {
		nd->pre = nd->suf = nd->max = 64;
		return;
	}
	nd->pre = (uint32_t)__builtin_ctzll(w);
	nd->suf = (uint32_t)__builtin_clzll(w);
	/* Longest run of ones in z = ~w (shorter than 64, as w != 0) by
	 * binary lifting: r[k] has bit p set where a run of 2^k ones starts at
	 * p; then the longest length is built greedily from the largest step
	 * down.  A fixed dozen steps, instead of a loop over the runs whose
	 * count the branch predictor cannot guess. */
	uint64_t r[6];

	r[0] = ~w;
#pragma GCC unroll 6
	for (int k = 1; k < 6; k++)
		r[k] = r[k - 1] & (r[k - 1] >> (1u << (k - 1)));
	uint64_t at = ~(uint64_t)0; /* where a run of len ones starts */
	uint32_t len = 0;

#pragma GCC unroll 6
	for (int k = 5; k >= 0; k--) {
		uint64_t c = at & (r[k] >> len);
		uint64_t none = (uint64_t)(c == 0);

		len += (uint32_t)(1 - none) << k;
		at = c | (at & (0 - none)); /* (masks, not branches) */
	}
	nd->max = len;
}

/* Recompute a node from its children; returns whether it changed. */
static inline __attribute__((always_inline)) bool node_pull(struct ep__fit_node *nodes, size_t node, uint32_t half)
{
	const struct ep__fit_node *l = &nodes[2 * node], *r = l + 1;
	struct ep__fit_node *nd = &nodes[node];
	uint32_t cross = l->suf + r->pre;
	uint32_t m = l->max > r->max ? l->max : r->max;
	uint32_t pre = l->pre == half ? half + r->pre : l->pre;
	uint32_t suf = r->suf == half ? half + l->suf : r->suf;

	if (cross > m)
		m = cross;
	if (pre == nd->pre && suf == nd->suf && m == nd->max)
		return false;
	nd->pre = pre;
	nd->suf = suf;
	nd->max = m;
	return true;
}

int ep__fit_init(struct ep__fit *fit, const uint64_t *map, size_t nbits)
{
	size_t words = EP__BITMAP_WORDS(nbits), leaves = 1;

	while (leaves < words)
		leaves *= 2;
	fit->nbits = nbits;
	fit->nleaves = leaves;
	fit->node = calloc(2 * leaves, sizeof(*fit->node));
	fit->dirty = calloc(EP__BITMAP_WORDS(leaves), sizeof(uint64_t));
	fit->ndirty = 0;
	if (!fit->node || !fit->dirty) {
		ep__fit_destroy(fit);
		return -1;
	}
	for (size_t i = 0; i < leaves; i++)
		leaf_set(&fit->node[leaves + i], leaf_word(fit, map, i));
	uint32_t half = 64;

	for (size_t lvl = leaves / 2; lvl >= 1; lvl /= 2, half *= 2)
		for (size_t node = lvl; node < 2 * lvl; node++)
			node_pull(fit->node, node, half);
	return 0;
}

void ep__fit_destroy(struct ep__fit *fit)
{
	free(fit->node);
	free(fit->dirty);
	fit->node = NULL;
	fit->dirty = NULL;
}

void ep__fit_mark_far(struct ep__fit *fit, size_t pos, size_t n)
{
	if (n == 0)
		return;
	size_t lo = pos / 64, hi = (pos + n - 1) / 64;

	for (size_t i = lo; i <= hi; i++)
		ep__fit_mark_leaf(fit, i);
}

/* A leaf's word changed: recompute it and its ancestors. */
static void leaf_update(struct ep__fit *fit, const uint64_t *map, size_t i)
{
	size_t node = fit->nleaves + i;

	leaf_set(&fit->node[node], leaf_word(fit, map, i));
	/* ancestors only change while their children do */
	for (uint32_t half = 64; node > 1; half *= 2) {
		node /= 2;
		if (!node_pull(fit->node, node, half))
			break;
	}
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
	const size_t words = EP__BITMAP_WORDS(fit->nleaves);

	for (size_t dw = 0; dw < words; dw++) {
		uint64_t d = fit->dirty[dw];

		fit->dirty[dw] = 0;
		for (; d; d &= d - 1)
			leaf_update(fit, map, dw * 64 + (size_t)__builtin_ctzll(d));
	}
	fit->ndirty = 0;
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

size_t ep__fit_find(const struct ep__fit *fit, const uint64_t *map, size_t n)
{
	const struct ep__fit_node *nd = fit->node;

	if (n == 0 || nd[1].max < n)
		return fit->nbits;
	size_t node = 1, start = 0, half = fit->nleaves * 32;

	/* Go left while the left half holds a long enough run, else right;
	 * the choice is a conditional move, not a branch (it is a coin toss
	 * for the predictor).  A run across the middle ends the walk. */
	while (node < fit->nleaves) {
		size_t l = 2 * node;
		bool right = nd[l].max < n;

		/* (& rather than &&: no branch on the coin toss) */
		if (__builtin_expect(right & ((size_t)nd[l].suf + nd[l + 1].pre >= n), 0))
			return start + half - nd[l].suf;
		node = l + right;
		start += right ? half : 0;
		half /= 2;
	}
	/* a leaf whose longest run is long enough: the run lies inside the word
	 * (bits past nbits are set in leaf_word) */
	size_t at = word_find_zeros(leaf_word(fit, map, node - fit->nleaves), n);

	return at < 64 && start + at < fit->nbits ? start + at : fit->nbits;
}
