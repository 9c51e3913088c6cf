/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_bitmap.c - the chunk bitmap against a naive bit-array model on
 * random operation sequences, plus the edge cases of word boundaries.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bitmap.h"
#include "small.h"

/*
 * The first-fit trees take their block from the library's small blocks
 * (meta.c), which this test, linking bitmap.c alone, makes with calloc():
 * every block given back must come back with the size it was taken at
 * (meta.c files it by that size), and none may stay out.
 */
static struct {
	void *p;
	size_t size;
} g_out[64];

void *ep__small_get(size_t size)
{
	void *p = calloc(1, size ? size : 1);

	for (size_t i = 0; p && i < 64; i++)
		if (!g_out[i].p) {
			g_out[i].p = p;
			g_out[i].size = size;
			return p;
		}
	ck_abort_msg("more than 64 blocks out");
	return NULL;
}

void ep__small_put(void *p, size_t size)
{
	if (!p)
		return;
	for (size_t i = 0; i < 64; i++)
		if (g_out[i].p == p) {
			ck_assert_uint_eq(size, g_out[i].size);
			g_out[i].p = NULL;
			free(p);
			return;
		}
	ck_abort_msg("a block given back that was never taken");
}

static void no_block_out(void)
{
	for (size_t i = 0; i < 64; i++)
		ck_assert_msg(!g_out[i].p, "a block of %zu bytes was never given back", g_out[i].size);
}

#define MAXBITS 4200

/* Operations per random run: fewer with EP_TEST_QUICK=1 (Valgrind, the
 * arm64 stage's emulated machine), where each costs 10-50 times more. */
static int ops(int full)
{
	const char *q = getenv("EP_TEST_QUICK");

	return q && *q && strcmp(q, "0") != 0 ? full / 8 : full;
}

/* more words than one word of a summary's summary covers (64 * 64) */
#define BIGBITS (64 * 64 * 66 + 5)

static uint64_t map[EP__BITMAP_WORDS(BIGBITS) + 1];
static bool model[BIGBITS];

static size_t model_find(size_t nbits, size_t start, size_t n)
{
	if (n == 0 || n > nbits)
		return nbits;
	for (size_t i = start; i + n <= nbits; i++) {
		size_t j = 0;

		while (j < n && !model[i + j])
			j++;
		if (j == n)
			return i;
	}
	return nbits;
}

static unsigned rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static void check_same(size_t nbits)
{
	for (size_t i = 0; i < nbits; i++)
		ck_assert_msg(ep__bitmap_test(map, i) == model[i], "bit %zu differs", i);
}

START_TEST(test_random_vs_model)
{
	unsigned seed = 12345u + (unsigned)_i;
	const size_t sizes[] = { 1, 63, 64, 65, 127, 128, 500, MAXBITS };

	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t nbits = sizes[si];

		memset(map, 0, sizeof(map));
		memset(model, 0, sizeof(model));
		for (int op = 0, nops = ops(4000); op < nops; op++) {
			size_t start = rnd(&seed) % nbits;
			size_t n = 1 + rnd(&seed) % (rnd(&seed) % 4 == 0 ? nbits : 70);
			size_t got = model_find(nbits, start, n);

			if (rnd(&seed) % 2 && got < nbits) {
				ep__bitmap_set(map, got, n);
				for (size_t k = 0; k < n; k++)
					model[got + k] = true;
			} else {
				size_t len = 1 + rnd(&seed) % 90;

				if (start + len > nbits)
					len = nbits - start;
				ep__bitmap_clear(map, start, len);
				for (size_t k = 0; k < len; k++)
					model[start + k] = false;
			}
			/* next_set / prev_set against the model */
			size_t ns = start;

			while (ns < nbits && !model[ns])
				ns++;
			ck_assert_uint_eq(ep__bitmap_next_set(map, nbits, start), ns);
			size_t ps = start + 1;

			while (ps > 0 && !model[ps - 1])
				ps--;
			ck_assert_uint_eq(ep__bitmap_prev_set(map, start), ps ? ps - 1 : SIZE_MAX);
		}
		check_same(nbits);
	}
}
END_TEST

START_TEST(test_word_boundaries)
{
	memset(map, 0, sizeof(map));
	ep__bitmap_set(map, 60, 10); /* crosses the first word boundary */
	ck_assert(ep__bitmap_test(map, 59) == false);
	for (size_t i = 60; i < 70; i++)
		ck_assert(ep__bitmap_test(map, i));
	ck_assert(ep__bitmap_test(map, 70) == false);
	/* first fit across the boundary, by the summary */
	struct ep__fit fit;
	size_t longest = 0;

	ck_assert_int_eq(ep__fit_init(&fit, map, 200), 0);
	ck_assert_uint_eq(ep__fit_find(&fit, map, 60, NULL), 0);
	ck_assert_uint_eq(ep__fit_find(&fit, map, 61, NULL), 70);
	ck_assert_uint_eq(ep__fit_find(&fit, map, 131, &longest), 200); /* 70..199 = 130 */
	ck_assert_uint_eq(longest, 130);
	ck_assert_uint_eq(ep__fit_find(&fit, map, 130, NULL), 70);
	ck_assert_uint_eq(ep__fit_find(&fit, map, 0, NULL), 200);
	ep__fit_destroy(&fit);
	ck_assert_uint_eq(ep__bitmap_prev_set(map, 200), 69);
	ck_assert_uint_eq(ep__bitmap_prev_set(map, 59), SIZE_MAX);
	ep__bitmap_clear(map, 60, 10);
	for (size_t i = 0; i < EP__BITMAP_WORDS(200); i++)
		ck_assert_uint_eq(map[i], 0);
	ep__bitmap_set(map, 0, 128); /* exactly two whole words */
	ck_assert_uint_eq(map[0], UINT64_MAX);
	ck_assert_uint_eq(map[1], UINT64_MAX);
	ck_assert_uint_eq(map[2], 0);
	ck_assert_uint_eq(ep__bitmap_next_set(map, 129, 128), 129);
	ck_assert_uint_eq(ep__bitmap_next_set(map, 200, 100), 100);
}
END_TEST

static size_t model_longest(size_t nbits)
{
	size_t best = 0, run = 0;

	for (size_t i = 0; i < nbits; i++) {
		run = model[i] ? 0 : run + 1;
		if (run > best)
			best = run;
	}
	return best;
}

/* A failed search's figure for the longest run: exact where n fits in
 * a word's reach, else at least the longest. */
static void check_longest(size_t longest, size_t n, size_t nbits)
{
	if (n <= EP__FIT_MAX)
		ck_assert_uint_eq(longest, model_longest(nbits));
	else
		ck_assert_uint_ge(longest, model_longest(nbits));
}

/* fit, updated, against fresh, built from the same map. */
static void check_tree(const struct ep__fit *fit, const struct ep__fit *fresh)
{
	ck_assert_uint_eq(fresh->nlevels, fit->nlevels);
	for (size_t i = 0; i < fit->nwords; i++) {
		ck_assert_uint_eq(fit->run[i], fresh->run[i]);
		ck_assert_uint_eq(fit->reach[i], fresh->reach[i]);
	}
	for (size_t k = 0; k < fit->nlevels; k++) {
		ck_assert_uint_eq(fresh->len[k], fit->len[k]);
		for (size_t j = fit->nwords; k == 0 && j < fit->len[0]; j++)
			ck_assert_uint_eq(fit->level[0][j], 0);
		for (size_t j = 0; k && j < fit->len[k]; j++) {
			uint8_t m = 0;

			for (size_t c = EP__FIT_FAN * j; c < EP__FIT_FAN * (j + 1) && c < fit->len[k - 1];
			     c++)
				if (fit->level[k - 1][c] > m)
					m = fit->level[k - 1][c];
			ck_assert_uint_eq(fit->level[k][j], m);
		}
	}
}

/* The summary tree must give exactly the plain first-fit answer. */
START_TEST(test_fit_tree_vs_model)
{
	unsigned seed = 999u + (unsigned)_i;
	const size_t sizes[] = { 1, 64, 100, 128, 129, 640, 1000, 4160, MAXBITS };

	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t nbits = sizes[si];
		struct ep__fit fit;

		memset(map, 0, sizeof(map));
		memset(model, 0, sizeof(model));
		ck_assert_int_eq(ep__fit_init(&fit, map, nbits), 0);
		ck_assert_uint_eq(ep__fit_longest(&fit, map), nbits);
		for (int op = 0, nops = ops(3000); op < nops; op++) {
			/* short runs, runs across words and runs longer than
			 * a word (found another way) */
			unsigned kind = rnd(&seed) % 10;
			size_t n = 1 + rnd(&seed) % (kind < 2 ? nbits : kind < 4 ? 200 : 40);
			size_t longest = SIZE_MAX;

			size_t got = ep__fit_find(&fit, map, n, &longest);

			ck_assert_uint_eq(got, model_find(nbits, 0, n));
			if (got == nbits)
				check_longest(longest, n, nbits);
			if (rnd(&seed) % 8 == 0)
				ck_assert_uint_eq(ep__fit_longest(&fit, map), model_longest(nbits));
			/* one to three changes before the next search */
			for (unsigned c = 1 + rnd(&seed) % 3; c--;) {
				if (rnd(&seed) % 3 && got < nbits) {
					ep__bitmap_set(map, got, n);
					/* (the pool's path, and the plain one) */
					if (rnd(&seed) % 4)
						ep__fit_mark_set(&fit, map, got, n);
					else
						ep__fit_mark(&fit, map, got, n);
					for (size_t k = 0; k < n; k++)
						model[got + k] = true;
					got = nbits;
					continue;
				}
				size_t start = rnd(&seed) % nbits,
				       len = 1 + rnd(&seed) % (rnd(&seed) % 4 ? 50 : 300);

				if (start + len > nbits)
					len = nbits - start;
				ep__bitmap_clear(map, start, len);
				/* (the plain mark too: the pool's path for a clear
				 * across words) */
				for (size_t k = 0; k < len; k++)
					model[start + k] = false;
				if (rnd(&seed) % 4) {
					size_t run = ep__fit_mark_clear(&fit, map, start, len);

					/* a length it gives is the run's, bounded
					 * by used bits inside the word; 0 only
					 * where the run may go past the word */
					size_t lo = start, hi = start + len;

					while (lo && !model[lo - 1])
						lo--;
					while (hi < nbits && !model[hi])
						hi++;
					if (run)
						ck_assert_uint_eq(run, hi - lo);
					else
						ck_assert(lo % 64 == 0 || hi % 64 == 0 ||
							  lo / 64 != (hi - 1) / 64);
				} else {
					ep__fit_mark(&fit, map, start, len);
				}
			}
		}
		/* the updated summary is the one built from scratch, and
		 * each node is its children's maximum */
		struct ep__fit fresh;

		ck_assert_int_eq(ep__fit_init(&fresh, map, nbits), 0);
		check_tree(&fit, &fresh);
		ep__fit_destroy(&fresh);
		ep__fit_destroy(&fit);
	}
}
END_TEST

/*
 * A map of more than 4096 words, used but for runs in its last 8000 bits
 * (past the first 4096 words) and a few anywhere: a tree of three levels,
 * whose searches go up and down more than one node.
 */
START_TEST(test_fit_big_vs_model)
{
	unsigned seed = 4242u + (unsigned)_i;
	const size_t nbits = BIGBITS;
	struct ep__fit fit;

	memset(map, 0, sizeof(map));
	memset(model, 0, sizeof(model));
	ep__bitmap_set(map, 0, nbits);
	memset(model, 1, nbits);
	for (int k = 0; k < 6; k++) {
		size_t at = nbits - 8000 + rnd(&seed) % 7800, len = 1 + rnd(&seed) % 150;

		ep__bitmap_clear(map, at, len);
		memset(model + at, 0, len);
	}
	ck_assert_int_eq(ep__fit_init(&fit, map, nbits), 0);
	for (int op = 0, nops = ops(400); op < nops; op++) {
		size_t n = 1 + rnd(&seed) % (rnd(&seed) % 5 ? 64 : 160), longest = SIZE_MAX;

		size_t got = ep__fit_find(&fit, map, n, &longest);

		ck_assert_uint_eq(got, model_find(nbits, 0, n));
		if (got == nbits)
			check_longest(longest, n, nbits);
		if (got < nbits && rnd(&seed) % 2) {
			ep__bitmap_set(map, got, n);
			ep__fit_mark_set(&fit, map, got, n);
			memset(model + got, 1, n);
		} else {
			size_t at = rnd(&seed) % 10 ? nbits - 8000 + rnd(&seed) % 7800
						    : rnd(&seed) % (nbits - 200);
			size_t len = 1 + rnd(&seed) % 100;

			ep__bitmap_clear(map, at, len);
			ep__fit_mark_clear(&fit, map, at, len);
			memset(model + at, 0, len);
		}
	}
	ck_assert_uint_eq(ep__fit_longest(&fit, map), model_longest(nbits));
	ep__fit_destroy(&fit);
}
END_TEST

/* A one-word map's longest clear run, for words with many short runs
 * (alternating bits), one long one, runs at either end, and at random. */
START_TEST(test_word_longest_run)
{
	uint64_t words[64 + 6] = { 0, ~(uint64_t)0, 0x5555555555555555ull, 0xaaaaaaaaaaaaaaaaull,
				   1, (uint64_t)1 << 63 };
	unsigned seed = 4242;
	size_t nw = 6;

	for (size_t k = 0; k < 64; k++) /* bits k..63 clear, k > 0 set below */
		words[nw++] = k ? ~(uint64_t)0 >> (64 - k) : 1;
	for (int r = 0; r < 20000; r++) {
		uint64_t w = words[r % nw];
		struct ep__fit fit;
		size_t best = 0, run = 0;

		if (r >= (int)nw) /* random words, denser or sparser */
			w = ((uint64_t)rnd(&seed) << 32 | rnd(&seed)) &
			    (r % 3 ? (uint64_t)rnd(&seed) << 32 | rnd(&seed) : ~(uint64_t)0);
		for (size_t i = 0; i < 64; i++) {
			run = (w >> i) & 1 ? 0 : run + 1;
			best = run > best ? run : best;
		}
		map[0] = w;
		ck_assert_int_eq(ep__fit_init(&fit, map, 64), 0);
		ck_assert_msg(ep__fit_longest(&fit, map) == best, "word %016llx: %zu, not %zu",
			      (unsigned long long)w, ep__fit_longest(&fit, map), best);
		ep__fit_destroy(&fit);
	}
	map[0] = 0;
}
END_TEST

/* Aligned first fit against the model: the lowest start i with (base + i)
 * a multiple of a and n clear bits from it, over random maps. */
START_TEST(test_fit_aligned_vs_model)
{
	unsigned seed = 4242u + (unsigned)_i;
	const size_t sizes[] = { 64, 100, 640, 4160, MAXBITS };

	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t nbits = sizes[si];

		for (int round = 0, nr = ops(60); round < nr; round++) {
			struct ep__fit fit;

			memset(map, 0, sizeof(map));
			memset(model, 0, sizeof(model));
			for (size_t i = 0; i < nbits; i++)
				if (rnd(&seed) % 100 < (unsigned)(round % 4) * 25 + 10) {
					model[i] = true;
					ep__bitmap_set(map, i, 1);
				}
			ck_assert_int_eq(ep__fit_init(&fit, map, nbits), 0);
			for (int q = 0; q < 20; q++) {
				size_t a = (size_t)1 << rnd(&seed) % 9, base = rnd(&seed) % 1024;
				size_t n = 1 + rnd(&seed) % (rnd(&seed) % 4 ? 20 : 200), want = nbits;

				for (size_t i = 0; i + n <= nbits && want == nbits; i++) {
					size_t j = 0;

					while ((base + i) % a == 0 && j < n && !model[i + j])
						j++;
					if (j == n)
						want = i;
				}
				ck_assert_msg(ep__fit_find_aligned(&fit, map, n, a, base) == want,
					      "nbits %zu n %zu a %zu base %zu: want %zu", nbits, n, a,
					      base, want);
			}
			ep__fit_destroy(&fit);
		}
	}
}
END_TEST

static Suite *bitmap_suite(void)
{
	Suite *s = suite_create("bitmap");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, NULL, no_block_out);
	tcase_add_loop_test(tc, test_random_vs_model, 0, 8);
	tcase_add_loop_test(tc, test_fit_big_vs_model, 0, 4);
	tcase_add_test(tc, test_word_boundaries);
	tcase_add_test(tc, test_word_longest_run);
	tcase_add_loop_test(tc, test_fit_tree_vs_model, 0, 6);
	tcase_add_loop_test(tc, test_fit_aligned_vs_model, 0, 2);
	/* a case takes 0.1 s alone, but once overran Check's default 4 s on a
	 * loaded machine */
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(bitmap_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
