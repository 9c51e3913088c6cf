/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bitmap.h - the chunk bitmap of a pack: one bit per 64-byte chunk.
 *
 * Word-at-a-time operations on arrays of uint64_t.  Bit i lives in word
 * i / 64 at position i % 64.  All functions take the bitmap length in bits
 * and never touch bits at or beyond it.
 */
#ifndef EP_BITMAP_H
#define EP_BITMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "atomic.h"

#define EP__BITMAP_WORDS(nbits) (((nbits) + 63) / 64)

/*
 * The calls below are inline for the common case (a program of up to 4 KiB
 * is a run of at most 64 chunks, usually inside one word), out of line for
 * the rest: the calls themselves were a tenth of a small alloc/free cycle.
 */
size_t ep__bitmap_next_set_far(const uint64_t *map, size_t nbits, size_t start);
void ep__bitmap_set_far(uint64_t *map, size_t pos, size_t n);
void ep__bitmap_clear_far(uint64_t *map, size_t pos, size_t n);

/* Index of the first set bit at or after start; nbits when none. */
static inline size_t ep__bitmap_next_set(const uint64_t *map, size_t nbits, size_t start)
{
	if (start >= nbits)
		return nbits;
	uint64_t w = map[start / 64] & (~(uint64_t)0 << (start % 64));

	if (w) {
		size_t i = (start & ~(size_t)63) + (size_t)__builtin_ctzll(w);

		return i < nbits ? i : nbits;
	}
	return ep__bitmap_next_set_far(map, nbits, (start | 63) + 1);
}

/* Index of the last set bit at or before pos; SIZE_MAX when none. */
size_t ep__bitmap_prev_set(const uint64_t *map, size_t pos);

/* Bits [pos, pos+n) as a mask of word pos / 64, when they lie inside it. */
static inline bool ep__bitmap_word_mask(size_t pos, size_t n, uint64_t *m)
{
	size_t bit = pos % 64;

	if (n == 0 || n > 64 - bit)
		return false;
	*m = (n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1) << bit;
	return true;
}

static inline void ep__bitmap_set(uint64_t *map, size_t pos, size_t n)
{
	uint64_t m;

	/* (stores are atomic: a remote free reads the maps without the lock) */
	if (ep__bitmap_word_mask(pos, n, &m))
		ep__store_relaxed(&map[pos / 64], map[pos / 64] | m);
	else
		ep__bitmap_set_far(map, pos, n);
}

static inline void ep__bitmap_clear(uint64_t *map, size_t pos, size_t n)
{
	uint64_t m;

	if (ep__bitmap_word_mask(pos, n, &m))
		ep__store_relaxed(&map[pos / 64], map[pos / 64] & ~m);
	else
		ep__bitmap_clear_far(map, pos, n);
}

static inline bool ep__bitmap_test(const uint64_t *map, size_t pos)
{
	return (map[pos / 64] >> (pos % 64)) & 1u;
}



/*
 * A summary over a bitmap that finds the lowest run of n clear bits in
 * a few word operations, however fragmented the map is. Per 64-bit word
 * i it keeps run[i], the longest clear run inside the word, and
 * reach[i], the longest clear run that starts in word i and ends in it
 * or the next one, capped at 64: the lowest word with reach >= n holds
 * the first fit of any n <= 64. That word is found in a tree of byte
 * maxima with 32 children a node: level 0 is reach, each level above
 * holds the maximum of 32 entries of the one below, and the top level
 * is one node. "The first entry >= n" in a node is two compares and
 * masks with SSE2 (four 64-bit words of SWAR elsewhere: "the first byte
 * >= n" of one in four operations), so a 2 MiB pack (512 words, two
 * levels) is searched in two node reads, top down. A change of reach[i]
 * goes up the tree only while it changes a node's maximum. A run longer
 * than 64 starts where reach is 64, so those words are the only
 * candidates for a larger request.
 *
 * Every stored run, reach and maximum is exact: after setting bits [pos,
 * pos+n) (an allocation) call ep__fit_mark_set(), after clearing them (a
 * free) ep__fit_mark_clear(), or after any change ep__fit_mark().  Each
 * recomputes the words the bits are in and the word below them (whose run
 * may go on into them), so a search never lands on a word that cannot fit
 * and never has to look again.
 */
#define EP__FIT_MAX 64 /* reach is capped here */
#define EP__FIT_FAN 32   /* entries a node: two SIMD registers' worth */
#define EP__FIT_LEVELS 8 /* 32^8 words: far past any pack */

struct ep__fit {
	size_t nbits;
	size_t nwords;
	size_t nlevels;                 /* the top one is one node */
	uint8_t *level[EP__FIT_LEVELS]; /* level[0] is reach; each whole nodes */
	size_t len[EP__FIT_LEVELS];     /* entries of each, a multiple of the fan */
	uint8_t *run;                   /* per word */
	uint8_t *reach;                 /* level[0] */
	uint64_t tail;                  /* the bits past nbits in the last word */
};

int ep__fit_init(struct ep__fit *fit, const uint64_t *map, size_t nbits);
void ep__fit_destroy(struct ep__fit *fit);
/* Bits [pos, pos+n) of the map changed: their words made exact. */
void ep__fit_mark(struct ep__fit *fit, const uint64_t *map, size_t pos, size_t n);
/* The same after bits [pos, pos+n) were set: inside one word, without
 * recomputing anything where the bits came from a run that was not the
 * word's longest, first or last. */
void ep__fit_mark_set(struct ep__fit *fit, const uint64_t *map, size_t pos, size_t n);
/* The same after bits [pos, pos+n) were cleared: inside one word, without
 * recomputing the word's longest run (a clear makes one run longer and
 * leaves the others as they were).  The length of the clear run the bits
 * are now part of when that run lies inside their word, else 0. */
size_t ep__fit_mark_clear(struct ep__fit *fit, const uint64_t *map, size_t pos, size_t n);
/* Longest clear run anywhere in the map (exact). */
size_t ep__fit_longest(const struct ep__fit *fit, const uint64_t *map);
/* Lowest index of a run of n clear bits (first fit); nbits when none, and
 * then, where longest is not NULL, the longest clear run (for n > 64 or
 * past the map: at least the longest) in *longest. */
size_t ep__fit_find(const struct ep__fit *fit, const uint64_t *map, size_t n, size_t *longest);
/* Lowest index i of a run of n clear bits with (base + i) % a == 0 (a a
 * power of two; aligned first fit); nbits when none. */
size_t ep__fit_find_aligned(const struct ep__fit *fit, const uint64_t *map, size_t n, size_t a,
			    size_t base);
#endif /* EP_BITMAP_H */
