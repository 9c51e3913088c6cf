/*
 * bitmap.c - first-fit search over a pack's chunk bitmap.
 *
 * A 2 MiB pack has 32768 chunks, i.e. 512 words: scanning whole words with
 * count-trailing-zeros keeps a search cheap even when the pack is nearly
 * full, so no secondary index is kept here (the pool keeps per-pack hints).
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

size_t ep__bitmap_next_zero(const uint64_t *map, size_t nbits, size_t start)
{
	return find_next(map, nbits, start, ~(uint64_t)0);
}

size_t ep__bitmap_next_set(const uint64_t *map, size_t nbits, size_t start)
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

size_t ep__bitmap_find_zero_area(const uint64_t *map, size_t nbits,
				 size_t start, size_t n)
{
	if (n == 0 || n > nbits)
		return nbits;
	for (;;) {
		size_t lo = ep__bitmap_next_zero(map, nbits, start);

		if (lo >= nbits || nbits - lo < n)
			return nbits;
		/* the run ends at the next set bit; only look as far as needed */
		size_t hi = ep__bitmap_next_set(map, lo + n, lo);

		if (hi >= lo + n)
			return lo;
		start = hi + 1;
	}
}

void ep__bitmap_set(uint64_t *map, size_t pos, size_t n)
{
	while (n) {
		size_t bit = pos % 64, take = 64 - bit;

		if (take > n)
			take = n;
		uint64_t m = (take == 64) ? ~(uint64_t)0 : (((uint64_t)1 << take) - 1) << bit;

		map[pos / 64] |= m;
		pos += take;
		n -= take;
	}
}

void ep__bitmap_clear(uint64_t *map, size_t pos, size_t n)
{
	while (n) {
		size_t bit = pos % 64, take = 64 - bit;

		if (take > n)
			take = n;
		uint64_t m = (take == 64) ? ~(uint64_t)0 : (((uint64_t)1 << take) - 1) << bit;

		map[pos / 64] &= ~m;
		pos += take;
		n -= take;
	}
}
