/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_align.c - ep_alloc_aligned(): every power of two up to the page in
 * a pack and up to the pack size for a large allocation, the code running
 * and the staging buffer lined up; aligned first fit wasting only the pad
 * (the chunks skipped reused by the next ep_alloc()); reuse after a free;
 * EP_F_RANDOMIZE; 16-byte chunks; several threads; bad alignments.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execpack.h"
#include "testutil.h"

static struct ep_pool *make_pool(size_t pack_size, unsigned flags, size_t chunk)
{
	return tu_pool((struct ep_config){ .backend = EP_BACKEND_MEMFD, .pack_size = pack_size,
					   .flags = flags, .chunk_size = chunk });
}

static size_t used(struct ep_pool *p)
{
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	return st.used_bytes;
}

/* An aligned "return imm" of size bytes: exec on align, rw lined up with
 * it modulo min(align, page), the code run; its exec. */
static void *jit_aligned(struct ep_pool *p, size_t size, size_t align, uint32_t imm)
{
	struct ep_image img;
	int rc = ep_alloc_aligned(p, size, align, &img);
	size_t m = align < tu_page() ? align : tu_page();

	ck_assert_msg(rc == 0, "size %zu align %zu: %s", size, align, ep_strerror(rc));
	ck_assert_msg((uintptr_t)img.exec % (align ? align : 1) == 0, "align %zu: exec %p", align,
		      img.exec);
	ck_assert_msg(m == 0 || ((uintptr_t)img.rw - (uintptr_t)img.exec) % m == 0,
		      "align %zu: rw %p exec %p", align, img.rw, img.exec);
	ck_assert_uint_eq(((uintptr_t)img.rw - (uintptr_t)img.exec) % EP_STAGE_ALIGN, 0);
	ck_assert_uint_ge(img.size, size);
	tu_emit_sized(img.rw, size, imm);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_uint_eq(tu_as_fn(img.exec)(), imm);
	return img.exec;
}

/* _i: bit 0 EP_F_RANDOMIZE, bit 1 16-byte chunks.  Each power of two from
 * 1 to the page, with a 64-byte allocation before it to push it off. */
START_TEST(test_each_power_in_pack)
{
	struct ep_pool *p = make_pool(256 << 10, (_i & 1) ? EP_F_RANDOMIZE : 0, (_i & 2) ? 16 : 0);
	uint32_t k = 1;

	for (size_t align = 1; align <= tu_page(); align *= 2, k++) {
		void *small = tu_jit_ret(p, 64, k, NULL);
		void *x = jit_aligned(p, 100, align, k + 1000);

		ck_assert_ptr_nonnull(small);
		ck_assert_uint_eq(tu_as_fn(small)(), k);
		ck_assert_int_eq(ep_free(p, x), 0);
		ck_assert_int_eq(ep_free(p, small), 0);
	}
	ck_assert_uint_eq(used(p), 0);
	ep_pool_destroy(p);
}
END_TEST

/* Large (bigger than the pack): every power of two up to the pack size. */
START_TEST(test_each_power_large)
{
	size_t pack = 64 << 10;
	struct ep_pool *p = make_pool(pack, _i ? EP_F_RANDOMIZE : 0, 0);
	struct ep_image img;
	uint32_t k = 1;

	for (size_t align = 1; align <= pack; align *= 2, k++) {
		void *x = jit_aligned(p, pack + 100, align, k);

		ck_assert_int_eq(ep_free(p, x), 0);
	}
	ck_assert_int_eq(ep_alloc_aligned(p, pack + 100, 2 * pack, &img), -EINVAL);
	ep_pool_destroy(p);
}
END_TEST

/* The case: a 64-byte allocation, then a page-aligned one in the
 * same pack: only their own chunks are used, and the chunks between them
 * go to the next small allocations. */
START_TEST(test_pad_not_lost)
{
	size_t page = tu_page();
	struct ep_pool *p = make_pool(256 << 10, 0, 0);
	void *a = tu_jit_ret(p, 64, 1, NULL);

	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq((uintptr_t)a % page, 0); /* (a new pack starts on a page) */
	void *b = jit_aligned(p, 64, page, 2);

	ck_assert_ptr_eq(b, (unsigned char *)a + page);
	ck_assert_uint_eq(used(p), 128);
	/* the skipped chunks are free: first fit puts the next ones there */
	for (size_t i = 1; i < page / 64; i++) {
		void *c = tu_jit_ret(p, 64, 3, NULL);

		ck_assert_ptr_eq(c, (unsigned char *)a + 64 * i);
	}
	ck_assert_uint_eq(used(p), page + 64);
	ck_assert_ptr_eq(tu_jit_ret(p, 64, 4, NULL), (unsigned char *)b + 64);
	ep_pool_destroy(p);
}
END_TEST

/* Freed, the same aligned address is found again; a taken one is passed
 * by the next aligned request. */
START_TEST(test_free_and_reuse)
{
	struct ep_pool *p = make_pool(256 << 10, 0, 0);
	void *a = tu_jit_ret(p, 64, 1, NULL);
	void *x = jit_aligned(p, 3000, 1024, 2);
	void *y = jit_aligned(p, 3000, 1024, 3);

	ck_assert_ptr_eq(x, (unsigned char *)a + 1024);
	ck_assert_ptr_eq(y, (unsigned char *)a + 4096);
	ck_assert_int_eq(ep_free(p, x), 0);
	ck_assert_ptr_eq(jit_aligned(p, 2000, 1024, 4), x);
	ck_assert_ptr_eq(jit_aligned(p, 900, 1024, 5), (unsigned char *)x + 2048);
	ck_assert_uint_eq(used(p), 64 + 2048 + 3008 + 960);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_bad_align)
{
	size_t page = tu_page();
	struct ep_pool *p = make_pool(256 << 10, 0, 0);
	struct ep_image img;
	const size_t bad[] = { 3, 48, 100, 4097, (size_t)1 << 63 | 1 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(ep_alloc_aligned(p, 64, bad[i], &img), -EINVAL);
	ck_assert_int_eq(ep_alloc_aligned(p, 64, 2 * page, &img), -EINVAL); /* past the page */
	ck_assert_int_eq(ep_alloc_aligned(p, 0, 64, &img), -EINVAL);
	ck_assert_int_eq(ep_alloc_aligned(p, 64, 64, NULL), -EINVAL);
	ck_assert_int_eq(ep_alloc_aligned(NULL, 64, 64, &img), -EINVAL);
	ck_assert_uint_eq(used(p), 0);
	/* 0: as ep_alloc() */
	ck_assert_int_eq(ep_alloc_aligned(p, 64, 0, &img), 0);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ep_pool_destroy(p);
}
END_TEST

/* Aligned requests fill a pack past its end: a new pack takes them. */
START_TEST(test_fills_packs)
{
	size_t page = tu_page(), pack = 16 * page;
	struct ep_pool *p = make_pool(pack, 0, 0);
	void *x[40];

	for (int i = 0; i < 40; i++)
		x[i] = jit_aligned(p, 100, page, (uint32_t)i);
	ck_assert_uint_eq(used(p), 40 * 128);
	for (int i = 0; i < 40; i++)
		ck_assert_int_eq(ep_free(p, x[i]), 0);
	ep_pool_destroy(p);
}
END_TEST

struct worker {
	struct ep_pool *pool;
	unsigned seed;
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	void *live[16] = { 0 };

	for (int i = 0; i < 200; i++) {
		int slot = rand_r(&w->seed) % 16;
		size_t align = (size_t)1 << (rand_r(&w->seed) % 13), size = 1 + rand_r(&w->seed) % 3000;

		if (align > tu_page())
			align = tu_page();
		if (live[slot])
			ck_assert_int_eq(ep_free(w->pool, live[slot]), 0);
		live[slot] = jit_aligned(w->pool, size, align, (uint32_t)i);
	}
	for (int i = 0; i < 16; i++)
		if (live[i])
			ck_assert_int_eq(ep_free(w->pool, live[i]), 0);
	return NULL;
}

START_TEST(test_threads)
{
	struct ep_pool *p = make_pool(256 << 10, (_i & 1) ? EP_F_RANDOMIZE : 0, 0);
	pthread_t t[4];
	struct worker w[4];

	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ p, 77u + (unsigned)i };
		ck_assert_int_eq(pthread_create(&t[i], NULL, worker_run, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
	ck_assert_uint_eq(used(p), 0);
	ep_pool_destroy(p);
}
END_TEST

int main(void)
{
	tu_need_pool();
	Suite *s = suite_create("align");
	TCase *tc = tcase_create("align");

	tcase_add_loop_test(tc, test_each_power_in_pack, 0, 4);
	tcase_add_loop_test(tc, test_each_power_large, 0, 2);
	tcase_add_test(tc, test_pad_not_lost);
	tcase_add_test(tc, test_free_and_reuse);
	tcase_add_test(tc, test_bad_align);
	tcase_add_test(tc, test_fills_packs);
	tcase_add_loop_test(tc, test_threads, 0, 2);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
