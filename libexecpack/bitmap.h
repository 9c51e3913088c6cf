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

#define EP__BITMAP_WORDS(nbits) (((nbits) + 63) / 64)

/*
 * The calls below are inline for the common case (a program of up to 4 KiB
 * is a run of at most 64 chunks, usually inside one word), out of line for
 * the rest: the calls themselves were a tenth of a small alloc/free cycle.
 */
size_t ep__bitmap_next_zero_far(const uint64_t *map, size_t nbits, size_t start);
size_t ep__bitmap_next_set_far(const uint64_t *map, size_t nbits, size_t start);
void ep__bitmap_set_far(uint64_t *map, size_t pos, size_t n);
void ep__bitmap_clear_far(uint64_t *map, size_t pos, size_t n);

/* Index of the first clear (set) bit at or after start; nbits when none. */
static inline size_t ep__bitmap_next_zero(const uint64_t *map, size_t nbits, size_t start)
{
	if (start >= nbits)
		return nbits;
	uint64_t w = ~map[start / 64] & (~(uint64_t)0 << (start % 64));

	if (w) {
		size_t i = (start & ~(size_t)63) + (size_t)__builtin_ctzll(w);

		return i < nbits ? i : nbits;
	}
	return ep__bitmap_next_zero_far(map, nbits, (start | 63) + 1);
}

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
		__atomic_store_n(&map[pos / 64], map[pos / 64] | m, __ATOMIC_RELAXED);
	else
		ep__bitmap_set_far(map, pos, n);
}

static inline void ep__bitmap_clear(uint64_t *map, size_t pos, size_t n)
{
	uint64_t m;

	if (ep__bitmap_word_mask(pos, n, &m))
		__atomic_store_n(&map[pos / 64], map[pos / 64] & ~m, __ATOMIC_RELAXED);
	else
		ep__bitmap_clear_far(map, pos, n);
}

static inline bool ep__bitmap_test(const uint64_t *map, size_t pos)
{
	return (map[pos / 64] >> (pos % 64)) & 1u;
}



/*
 * A summary over a bitmap that finds the lowest run of n clear bits in a
 * few word operations, however fragmented the map is.  Per 64-bit word i
 * it keeps run[i], the longest clear run inside the word, and reach[i],
 * the longest clear run that starts in word i and ends in it or the next
 * one, capped at 64: the lowest word with reach >= n holds the first fit
 * of any n <= 64.  That word is found in one bitmap per n: bit i of
 * ge(n) is set while reach[i] >= n, and a bit per word of ge(n) says
 * which of its words are not zero, so a search is two or three
 * count-trailing-zeros, and a change of reach[i] from a to b flips bit i
 * in the |a - b| bitmaps between.  A run longer than 64 starts where
 * reach is 64, so those words are the only candidates for a larger
 * request.  After changing bits [pos, pos+n) of the map, call
 * ep__fit_mark() for that range, and ep__fit_flush() before a search.
 */
#define EP__FIT_MAX 64 /* reach is capped here: one bitmap per n in 1..64 */

/* Dirty leaves listed for the flush (most changes touch one or two words;
 * beyond this many, the flush scans the dirty bitmap). */
#define EP__FIT_LIST 8

struct ep__fit {
	size_t nbits;
	size_t nwords;
	size_t gw, sw;                    /* words of one ge(n), of its summary */
	uint64_t *ge;                     /* ge(n) at ge + (n - 1) * gw */
	uint64_t *ge_sum;                 /* its nonzero words at ge_sum + (n - 1) * sw */
	uint8_t *run;                     /* per word */
	uint8_t *pre;                     /* per word: its clear bits from bit 0 */
	uint8_t *reach;                   /* per word */
	uint64_t *dirty;                  /* words changed since the last flush */
	size_t ndirty;
	uint32_t list[EP__FIT_LIST];      /* the first dirty words */
};

int ep__fit_init(struct ep__fit *fit, const uint64_t *map, size_t nbits);
void ep__fit_destroy(struct ep__fit *fit);
/*
 * The summary is brought up to date lazily: ep__fit_mark() notes that bits
 * [pos, pos+n) of the map changed, ep__fit_flush() recomputes what they
 * touched.  A word changed many times between two searches is recomputed
 * once.  ep__fit_longest() and ep__fit_find() need a flushed summary.
 */
static inline void ep__fit_mark_leaf(struct ep__fit *fit, size_t leaf)
{
	if (!ep__bitmap_test(fit->dirty, leaf)) {
		fit->dirty[leaf / 64] |= (uint64_t)1 << (leaf % 64);
		if (fit->ndirty < EP__FIT_LIST)
			fit->list[fit->ndirty] = (uint32_t)leaf;
		fit->ndirty++;
	}
}
void ep__fit_mark_far(struct ep__fit *fit, size_t pos, size_t n);
static inline void ep__fit_mark(struct ep__fit *fit, size_t pos, size_t n)
{
	size_t leaf = pos / 64;

	if (n == 0 || leaf != (pos + n - 1) / 64)
		ep__fit_mark_far(fit, pos, n);
	else
		ep__fit_mark_leaf(fit, leaf);
}
/* The same as ep__fit_mark() after bits [pos, pos+n) were cleared; a
 * word with no other change pending is brought up to date at once,
 * without recomputing its longest run: a clear makes one run longer and
 * leaves the others as they were. */
void ep__fit_mark_clear(struct ep__fit *fit, const uint64_t *map, size_t pos, size_t n);
void ep__fit_flush(struct ep__fit *fit, const uint64_t *map);
/* Longest clear run anywhere in the map. */
size_t ep__fit_longest(const struct ep__fit *fit, const uint64_t *map);
/* Lowest index of a run of n clear bits (first fit); nbits when none, and
 * then, where longest is not NULL, the longest clear run in *longest. */
size_t ep__fit_find(const struct ep__fit *fit, const uint64_t *map, size_t n, size_t *longest);
#endif /* EP_BITMAP_H */
