/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_grain.c - ep_config.chunk_size: 16-, 32- and 64-byte chunks.
 * Allocations start on a chunk and take whole chunks (the statistics count
 * them in bytes), 15-byte thunks cost 16 bytes each, frees refill exactly
 * their chunks with the trap fill (by address), shrink gives back whole
 * small chunks, frees from another thread (without the owner's lock),
 * lengths on either side of what a state byte keeps (31 chunks), names,
 * EP_F_RANDOMIZE, the limit, and the values refused.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execpack.h"
#include "testutil.h"

static const size_t grains[] = { 16, 32, 64 };

static struct ep_pool *grain_pool(size_t chunk, size_t pack, size_t limit, unsigned flags)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD, .pack_size = pack,
				 .limit = limit, .flags = flags, .chunk_size = chunk };
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(&cfg, &p);

	ck_assert_msg(rc == 0, "ep_pool_create(chunk_size %zu): %s", chunk, ep_strerror(rc));
	return p;
}

static struct ep_stats stats(struct ep_pool *p)
{
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	return st;
}

static size_t round_to(size_t n, size_t g)
{
	return (n + g - 1) / g * g;
}

/* size bytes that return imm from their start, no-ops after. */
static void *jit(struct ep_pool *p, size_t size, uint32_t imm, struct ep_image *img)
{
	struct ep_image local;

	if (!img)
		img = &local;
	int rc = ep_alloc(p, size, img);

	ck_assert_msg(rc == 0, "ep_alloc(%zu): %s", size, ep_strerror(rc));
	ck_assert_uint_ge(img->size, size);
	tu_fill_nops(img->rw, img->size);
	tu_emit_ret_imm(img->rw, imm);
	ck_assert_int_eq(ep_finalize(p, img->exec), 0);
	return img->exec;
}

START_TEST(test_bad_values)
{
	static const size_t bad[] = { 1, 8, 24, 48, 128, 4096, SIZE_MAX };
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *p = NULL;
	char why[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cfg.chunk_size = bad[i];
		ck_assert_int_eq(ep_pool_create(&cfg, &p), -EINVAL);
		ck_assert_ptr_null(p);
		ck_assert_int_eq(ep_backend_probe(EP_BACKEND_MEMFD, &cfg, why, sizeof(why)), -EINVAL);
	}
	/* a caller's config that ends before the field: 64 */
	struct {
		struct ep_config c;
		char tail[32];
	} old;
	struct ep_image a, b;

	memset(&old, 0, sizeof(old));
	memset((char *)&old.c + offsetof(struct ep_config, chunk_size), 0xff, sizeof(size_t));
	old.c.sz = offsetof(struct ep_config, chunk_size);
	old.c.backend = EP_BACKEND_MEMFD;
	ck_assert_int_eq(ep_pool_create(&old.c, &p), 0);
	ck_assert_int_eq(ep_alloc(p, 1, &a), 0);
	ck_assert_int_eq(ep_alloc(p, 1, &b), 0);
	ck_assert_uint_eq(a.size, EP_CHUNK_SIZE);
	ck_assert_uint_eq(stats(p).used_bytes, 2 * EP_CHUNK_SIZE);
	ep_pool_destroy(p);
}
END_TEST

/* Every size from 1 to 300: on a chunk, whole chunks, packed one after
 * another, counted in bytes, running; freed: trap fill, nothing used. */
START_TEST(test_sizes)
{
	size_t g = grains[_i];
	struct ep_pool *p = grain_pool(g, 0, 0, 0);
	static void *ex[300];
	size_t total = 0;
	struct ep_image img;

	for (size_t n = 1; n <= 300; n++) {
		ex[n - 1] = jit(p, n, (uint32_t)n, &img);
		ck_assert_uint_eq((uintptr_t)img.exec % g, 0);
		ck_assert_uint_eq(img.size, round_to(n, g));
		total += round_to(n, g);
		ck_assert_uint_eq(stats(p).used_bytes, total);
		if (n > 1)
			ck_assert_ptr_eq(ex[n - 1], (char *)ex[n - 2] + round_to(n - 1, g));
	}
	for (size_t n = 1; n <= 300; n++)
		ck_assert_int_eq(tu_as_fn(ex[n - 1])(), (int)n);
	/* every other one freed: its chunks, exactly, hold the trap fill */
	for (size_t n = 1; n <= 300; n += 2) {
		ck_assert_int_eq(ep_free(p, ex[n - 1]), 0);
		ck_assert(tu_is_trap(ex[n - 1], round_to(n, g)));
		total -= round_to(n, g);
	}
	ck_assert_uint_eq(stats(p).used_bytes, total);
	for (size_t n = 2; n <= 300; n += 2)
		ck_assert_int_eq(tu_as_fn(ex[n - 1])(), (int)n);
	/* first fit reuses the holes: a 1-byte program goes into the first */
	void *again = jit(p, 1, 7, NULL);

	ck_assert_ptr_eq(again, ex[0]);
	for (size_t n = 2; n <= 300; n += 2)
		ck_assert_int_eq(ep_free(p, ex[n - 1]), 0);
	ck_assert_int_eq(ep_free(p, again), 0);
	ck_assert_uint_eq(stats(p).used_bytes, 0);
	ck_assert_uint_eq(stats(p).live_allocs, 0);
	ep_pool_destroy(p);
}
END_TEST

/* The figure: 15-byte thunks cost a 16-byte chunk each. */
START_TEST(test_thunks)
{
	size_t g = grains[_i], n = 20000;
	struct ep_pool *p = grain_pool(g, 0, 0, 0);
	void **ex = calloc(n, sizeof(*ex));

	ck_assert_ptr_nonnull(ex);
	for (size_t i = 0; i < n; i++)
		ex[i] = jit(p, 15, (uint32_t)i, NULL);
	struct ep_stats st = stats(p);

	ck_assert_uint_eq(st.used_bytes, n * g);
	/* (committed in steps: at most one step past what is used) */
	ck_assert_uint_le(st.pack_bytes, round_to(n * g, 4096) + (size_t)128 * 4096);
	printf("chunk_size %zu: %zu thunks of 15 bytes: used_bytes/thunk %.2f, "
	       "pack_bytes/thunk %.2f\n",
	       g, n, (double)st.used_bytes / (double)n, (double)st.pack_bytes / (double)n);
	if (g == 16)
		ck_assert_uint_le(st.used_bytes / n, 20);
	for (size_t i = 0; i < n; i += 997)
		ck_assert_int_eq(tu_as_fn(ex[i])(), (int)i);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(ep_free(p, ex[i]), 0);
	ck_assert_uint_eq(stats(p).used_bytes, 0);
	free(ex);
	ep_pool_destroy(p);
}
END_TEST

/* ep_add() and ep_finalize_size() on the pool's grain. */
START_TEST(test_add)
{
	size_t g = grains[_i];
	struct ep_pool *p = grain_pool(g, 0, 0, 0);
	unsigned char code[40];
	void *x[8];
	struct ep_image img;

	tu_fill_nops(code, sizeof(code));
	tu_emit_ret_imm(code, 9);
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(ep_add(p, code, 15, &x[i]), 0);
		ck_assert_uint_eq((uintptr_t)x[i] % g, 0);
		if (i)
			ck_assert_ptr_eq(x[i], (char *)x[i - 1] + g);
	}
	ck_assert_uint_eq(stats(p).used_bytes, 8 * g);
	ck_assert_int_eq(tu_as_fn(x[7])(), 9);
	ck_assert_int_eq(ep_alloc(p, 200, &img), 0);
	memcpy(img.rw, code, sizeof(code));
	ck_assert_int_eq(ep_finalize_size(p, img.exec, 17), 0);
	ck_assert_uint_eq(stats(p).used_bytes, 8 * g + round_to(17, g));
	ck_assert_int_eq(tu_as_fn(img.exec)(), 9);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(ep_free(p, x[i]), 0);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ck_assert_uint_eq(stats(p).used_bytes, 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_shrink)
{
	size_t g = grains[_i];
	struct ep_pool *p = grain_pool(g, 0, 1 << 20, 0);
	struct ep_image img, next;

	ck_assert_int_eq(ep_alloc(p, 1000, &img), 0);
	ck_assert_uint_eq(stats(p).used_bytes, round_to(1000, g));
	tu_fill_nops(img.rw, img.size);
	tu_emit_ret_imm(img.rw, 5);
	/* before finalize: whole chunks past 20 bytes go */
	ck_assert_int_eq(ep_shrink(p, img.exec, 20), 0);
	ck_assert_uint_eq(stats(p).used_bytes, round_to(20, g));
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 5);
	/* the next allocation starts at the next chunk */
	ck_assert_int_eq(ep_alloc(p, 1, &next), 0);
	ck_assert_ptr_eq(next.exec, (char *)img.exec + round_to(20, g));
	ck_assert_int_eq(ep_free(p, next.exec), 0);
	/* after finalize: traps from the cut */
	ck_assert_int_eq(ep_shrink(p, img.exec, 1), 0);
	ck_assert_uint_eq(stats(p).used_bytes, g);
	ck_assert(tu_is_trap((char *)img.exec + g, round_to(20, g) - g));
	ck_assert_int_eq(ep_shrink(p, img.exec, g + 1), -EINVAL); /* never grows */
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ck_assert_uint_eq(stats(p).used_bytes, 0);
	ep_pool_destroy(p);
}
END_TEST

/* Lengths around what a state byte keeps (31 chunks), freed by another
 * thread (no lock of the owner's heap) and by the owner, between
 * neighbours that must stay intact. */
struct remote {
	struct ep_pool *p;
	void *ex[64];
	int n, rc;
};

static void *free_all(void *arg)
{
	struct remote *r = arg;

	for (int i = 0; i < r->n; i += 2)
		if (!r->rc)
			r->rc = ep_free(r->p, r->ex[i]);
	return NULL;
}

START_TEST(test_state_lengths_remote)
{
	size_t g = grains[_i];
	struct ep_pool *p = grain_pool(g, 0, 0, 0);
	static const size_t lens[] = { 1, 30, 31, 32, 33, 62, 64 }; /* in chunks */
	struct remote r = { .p = p };
	size_t sizes[64];

	for (int rep = 0; rep < 4; rep++) {
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			/* a program of lens[k] chunks (exactly, or a byte into the
			 * last), then a one-chunk neighbour */
			sizes[r.n] = lens[k] * g - (rep & 1);
			r.ex[r.n] = jit(p, sizes[r.n], (uint32_t)r.n, NULL);
			r.n++;
			sizes[r.n] = 1;
			r.ex[r.n] = jit(p, 1, (uint32_t)r.n, NULL);
			r.n++;
		}
	}
	size_t before = stats(p).used_bytes, gone = 0;
	pthread_t t;

	for (int i = 0; i < r.n; i += 2)
		gone += round_to(sizes[i], g);
	ck_assert_int_eq(pthread_create(&t, NULL, free_all, &r), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(r.rc == 0, "free from another thread: %s", ep_strerror(r.rc));
	for (int i = 0; i < r.n; i += 2) {
		ck_assert(tu_is_trap(r.ex[i], round_to(sizes[i], g)));
		ck_assert_int_eq(ep_free(p, r.ex[i]), -EINVAL); /* once only */
	}
	for (int i = 1; i < r.n; i += 2)
		ck_assert_int_eq(tu_as_fn(r.ex[i])(), i);
	/* (the owner's next call gives the chunks back) */
	void *x = jit(p, 1, 99, NULL);

	ck_assert_uint_eq(stats(p).used_bytes, before - gone + g);
	ck_assert_int_eq(ep_free(p, x), 0);
	/* the freed space reused exactly: each hole takes its length again */
	for (int i = 0; i < r.n; i += 2) {
		void *y = jit(p, sizes[i], 1000 + (uint32_t)i, NULL);

		ck_assert_ptr_eq(y, r.ex[i]);
	}
	for (int i = 1; i < r.n; i += 2)
		ck_assert_int_eq(ep_free(p, r.ex[i]), 0);
	for (int i = 0; i < r.n; i += 2)
		ck_assert_int_eq(ep_free(p, r.ex[i]), 0);
	ck_assert_uint_eq(stats(p).used_bytes, 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_names_and_limit)
{
	size_t g = grains[_i];
	struct ep_pool *p = grain_pool(g, 0, 10 * g, 0);
	void *a = jit(p, 3, 1, NULL), *b = jit(p, g + 1, 2, NULL);
	struct ep_image img;
	char name[64];
	size_t off = 0;

	/* the limit counts chunks: 3 used, 7 left */
	ck_assert_int_eq(ep_alloc(p, 8 * g, &img), -EPERM);
	ck_assert_int_eq(ep_alloc(p, 7 * g, &img), 0);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ck_assert_int_eq(ep_set_name(p, b, "grain_b"), 0);
	ck_assert_int_eq(ep_symbolize((char *)b + g, name, sizeof(name), &off), 0);
	ck_assert_str_eq(name, "grain_b");
	ck_assert_uint_eq(off, g);
	ck_assert_int_eq(ep_symbolize((char *)b + 2 * g, name, sizeof(name), &off), -ENOENT);
	ck_assert_int_eq(ep_free(p, a), 0);
	ck_assert_int_eq(ep_free(p, b), 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_randomize)
{
	size_t g = grains[_i];
	struct ep_pool *p = grain_pool(g, 0, 0, EP_F_RANDOMIZE);
	unsigned seen = 0;

	for (int i = 0; i < 200; i++) {
		struct ep_image img;
		void *x = jit(p, 15, (uint32_t)i, &img);
		uintptr_t off = (uintptr_t)x % g;

		/* 16-byte steps inside the first chunk: none for 16 */
		ck_assert_uint_eq((uintptr_t)x % 16, 0);
		ck_assert_uint_ge(img.size, 15);
		seen |= 1u << (off / 16);
		ck_assert_int_eq(tu_as_fn(x)(), i);
		if (i % 3)
			ck_assert_int_eq(ep_free(p, x), 0);
	}
	ck_assert_uint_eq(seen, (1u << (g / 16)) - 1); /* every offset taken */
	ep_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("grain");
	TCase *tc = tcase_create("grain");
	int n = (int)(sizeof(grains) / sizeof(grains[0]));

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_bad_values);
	tcase_add_loop_test(tc, test_sizes, 0, n);
	tcase_add_loop_test(tc, test_thunks, 0, n);
	tcase_add_loop_test(tc, test_add, 0, n);
	tcase_add_loop_test(tc, test_shrink, 0, n);
	tcase_add_loop_test(tc, test_state_lengths_remote, 0, n);
	tcase_add_loop_test(tc, test_names_and_limit, 0, n);
	tcase_add_loop_test(tc, test_randomize, 0, n);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
