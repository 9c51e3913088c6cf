/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_stage.c - the staging buffer lined up with the code (EP_STAGE_ALIGN,
 * a page for large allocations) over random sizes, both fill modes and
 * EP_F_RANDOMIZE; ep_add(); ep_finalize_size(); ep_pool_trim() and packs
 * committed as they fill, each one, with the statistics and resident
 * memory dropping; and every bad input.
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

static int user_fills;

/* A caller's fill: the same traps, through the caller-fill path. */
static void user_fill(void *dst, size_t len, void *ctx)
{
	(void)ctx;
	__atomic_fetch_add(&user_fills, 1, __ATOMIC_RELAXED);
	TU_FILL(dst, len, NULL);
}

static size_t g_chunk; /* ep_config.chunk_size of the pools made next; 0: 64 */

static struct ep_pool *make_pool(size_t pack_size, size_t limit, unsigned flags, int fill)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .pack_size = pack_size, .limit = limit, .flags = flags,
				 .fill = fill ? user_fill : NULL, .chunk_size = g_chunk };
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(&cfg, &p);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	return p;
}

static struct ep_stats stats(struct ep_pool *p)
{
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	return st;
}

/* _i: bit 0 a caller's fill, bit 1 EP_F_RANDOMIZE, _i / 4 the chunk size
 * (64, 32, 16: an allocation may start off an EP_STAGE_ALIGN boundary) */
START_TEST(test_stage_aligned)
{
	size_t pack = 256 << 10, page = tu_page();

	g_chunk = (size_t)64 >> (_i / 4);
	struct ep_pool *p = make_pool(pack, 0, (_i & 2) ? EP_F_RANDOMIZE : 0, _i & 1);
	g_chunk = 0;
	unsigned seed = 12345u + (unsigned)_i;
	enum { N = 600 };
	void *live[N];
	size_t nlive = 0;

	user_fills = 0;
	for (int i = 0; i < N; i++) {
		/* mostly small (stashed buffers), some past the stash, a few large */
		unsigned r = (unsigned)rand_r(&seed);
		size_t size = r % 16 == 0   ? pack + 1 + r % (3 * page)
			      : r % 4 == 0 ? 4096 + r % (64 << 10)
					   : 1 + r % 2048;
		struct ep_image img;

		ck_assert_int_eq(ep_alloc(p, size, &img), 0);
		uintptr_t rw = (uintptr_t)img.rw, x = (uintptr_t)img.exec;

		ck_assert_msg((rw - x) % EP_STAGE_ALIGN == 0, "size %zu: rw %p exec %p", size,
			      img.rw, img.exec);
		if (size > pack)
			ck_assert_msg((rw - x) % page == 0, "large %zu: rw %p exec %p", size, img.rw,
				      img.exec);
		/* the buffer holds the fill and the code runs from it */
		ck_assert(tu_is_trap(img.rw, img.size < 256 ? img.size : 256));
		tu_emit_sized(img.rw, size < TU_RET_LEN ? TU_RET_LEN : size, (uint32_t)i);
		if (i % 3 == 0) {
			ck_assert_int_eq(ep_free(p, img.exec), 0); /* the buffer back to the stash */
			continue;
		}
		ck_assert_int_eq(ep_finalize(p, img.exec), 0);
		ck_assert_uint_eq(tu_as_fn(img.exec)(), (uint32_t)i);
		live[nlive++] = img.exec;
		if (nlive > 40) {
			ck_assert_int_eq(ep_free(p, live[0]), 0);
			memmove(live, live + 1, --nlive * sizeof(*live));
		}
	}
	if (_i & 1)
		ck_assert_int_gt(user_fills, 0);
	while (nlive)
		ck_assert_int_eq(ep_free(p, live[--nlive]), 0);
	ep_pool_destroy(p);
}
END_TEST

static unsigned char code_buf[3 << 20] __attribute__((aligned(64)));

/* _i: bit 0 a caller's fill, bit 1 EP_F_RANDOMIZE */
START_TEST(test_add)
{
	struct ep_pool *p = make_pool(0, 0, (_i & 2) ? EP_F_RANDOMIZE : 0, _i & 1);
	const size_t sizes[] = { 1, 13, 64, 65, 100, 300, 512, 1000, 4096, 70000 };
	void *x[sizeof(sizes) / sizeof(sizes[0])];
	size_t used = 0;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i] < TU_RET_LEN ? TU_RET_LEN : sizes[i];

		tu_emit_sized(code_buf, len, (uint32_t)(1000 + i));
		ck_assert_int_eq(ep_add(p, code_buf, len, &x[i]), 0);
		if (!(_i & 2))
			ck_assert_uint_eq((uintptr_t)x[i] % EP_STAGE_ALIGN, 0);
		ck_assert_uint_eq(tu_as_fn(x[i])(), 1000 + i);
		ck_assert(memcmp(x[i], code_buf, len) == 0);
		/* ep_lookup(): finalized code, no staging buffer */
		struct ep_info info;

		ck_assert_int_eq(ep_lookup((char *)x[i] + len - 1, &info), 0);
		ck_assert_ptr_eq(info.exec, x[i]);
		ck_assert_ptr_eq(info.pool, p);
		ck_assert_ptr_null(info.rw);
		ck_assert(info.flags & EP_INFO_FINALIZED);
		ck_assert_uint_ge(info.size, len);
		/* the slack of its chunks is traps */
		uintptr_t end = ((uintptr_t)x[i] + len + 63) & ~(uintptr_t)63;

		ck_assert(tu_is_trap((char *)x[i] + len, end - (uintptr_t)x[i] - len));
		used += ((_i & 2) ? len + 48 + 63 : len + 63) / 64 * 64;
		ck_assert_uint_eq(stats(p).used_bytes, used);
		ck_assert_uint_eq(stats(p).live_allocs, i + 1);
	}
	/* finalized: no second finalize, a name and ep_write work on it */
	ck_assert_int_eq(ep_finalize(p, x[4]), -EINVAL);
	ck_assert_int_eq(ep_set_name(p, x[4], "added"), 0);
	char name[32];
	size_t off = 99;

	ck_assert_int_eq(ep_symbolize((char *)x[4] + 5, name, sizeof(name), &off), 0);
	ck_assert_str_eq(name, "added");
	ck_assert_uint_eq(off, 5);
	ck_assert_int_eq(tu_patch_ret_imm(p, tu_ret_at(x[4], 100), 77), 0);
	ck_assert_uint_eq(tu_as_fn(x[4])(), 77);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		ck_assert_int_eq(ep_free(p, x[i]), 0);
	ck_assert_uint_eq(stats(p).used_bytes, 0);
	ck_assert_uint_eq(stats(p).live_allocs, 0);
	/* freed: traps again, and a double free is refused */
	ck_assert_int_eq(ep_free(p, x[0]), -EINVAL);
	ep_pool_destroy(p);
}
END_TEST

/* ep_add() copies only the program: the slack of its chunks holds the fill
 * because every chunk given back was refilled, whatever was written there. */
START_TEST(test_add_slack_after_reuse)
{
	struct ep_pool *p = make_pool(0, 0, 0, _i);
	unsigned char nops[256];
	void *x, *y;

	for (int round = 0; round < 3; round++) {
		struct ep_image img;

		/* a program that fills all its chunks, patched past its end */
		ck_assert_int_eq(ep_alloc(p, 256, &img), 0);
		tu_fill_nops(img.rw, 256);
		ck_assert_int_eq(ep_finalize(p, img.exec), 0);
		tu_fill_nops(nops, sizeof(nops));
		ck_assert_int_eq(ep_write(p, (char *)img.exec + 100, nops + 100, 156), 0);
		ck_assert(!tu_is_trap((char *)img.exec + 100, 156));
		ck_assert_int_eq(ep_free(p, img.exec), 0);
		/* and shrunk after finalize: the tail given back is refilled too */
		tu_emit_sized(code_buf, 20, 3);
		ck_assert_int_eq(ep_add(p, code_buf, 20, &x), 0);
		ck_assert_ptr_eq(x, img.exec);
		ck_assert_uint_eq(tu_as_fn(x)(), 3);
		ck_assert(tu_is_trap((char *)x + 20, 256 - 20));
		ck_assert_int_eq(ep_free(p, x), 0);
		ck_assert_int_eq(ep_alloc(p, 256, &img), 0);
		tu_fill_nops(img.rw, 256);
		ck_assert_int_eq(ep_finalize(p, img.exec), 0);
		ck_assert_int_eq(ep_shrink(p, img.exec, 64), 0);
		ck_assert_int_eq(ep_add(p, code_buf, 20, &y), 0);
		ck_assert_ptr_eq(y, (char *)img.exec + 64);
		ck_assert(tu_is_trap((char *)y + 20, 192 - 20));
		ck_assert_int_eq(ep_free(p, y), 0);
		ck_assert_int_eq(ep_free(p, img.exec), 0);
	}
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_add_large)
{
	size_t pack = 64 << 10, len = 3 * pack + 100;
	struct ep_pool *p = make_pool(pack, 0, 0, 0);
	void *x;

	tu_emit_sized(code_buf, len, 4242);
	ck_assert_int_eq(ep_add(p, code_buf, len, &x), 0);
	ck_assert_uint_eq((uintptr_t)x % tu_page(), 0);
	ck_assert_uint_eq(tu_ret_imm_of(tu_ret_at(x, len)), 4242);
	if (!RUNNING_ON_VALGRIND) /* (its translator gives up on a long run of no-ops) */
		ck_assert_uint_eq(tu_as_fn(x)(), 4242);
	ck_assert_uint_eq(stats(p).large_allocs, 1);
	ck_assert(tu_is_trap((char *)x + len, 50));
	struct ep_info info;

	ck_assert_int_eq(ep_lookup((char *)x + len - 1, &info), 0);
	ck_assert_ptr_eq(info.exec, x);
	ck_assert_ptr_null(info.rw);
	ck_assert_uint_eq(info.flags & (EP_INFO_FINALIZED | EP_INFO_LARGE),
			  EP_INFO_FINALIZED | EP_INFO_LARGE);
	ck_assert_int_eq(ep_set_name(p, x, "big"), 0);
	ck_assert_int_eq(ep_free(p, x), 0);
	ck_assert_uint_eq(stats(p).large_allocs, 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_add_bad_inputs)
{
	struct ep_pool *p = make_pool(0, 4096, 0, 0);
	void *x = (void *)1;

	tu_emit_sized(code_buf, 64, 1);
	ck_assert_int_eq(ep_add(NULL, code_buf, 64, &x), -EINVAL);
	ck_assert_ptr_null(x);
	ck_assert_int_eq(ep_add(p, NULL, 64, &x), -EINVAL);
	ck_assert_int_eq(ep_add(p, code_buf, 0, &x), -EINVAL);
	ck_assert_int_eq(ep_add(p, code_buf, 64, NULL), -EINVAL);
	x = (void *)1;
	/* the limit: never more than it */
	ck_assert_int_eq(ep_add(p, code_buf, 8192, &x), -EPERM);
	ck_assert_ptr_null(x);
	void *a, *b;

	ck_assert_int_eq(ep_add(p, code_buf, 4000, &a), 0);
	ck_assert_int_eq(ep_add(p, code_buf, 128, &b), -EPERM);
	ck_assert_int_eq(ep_free(p, a), 0);
	ck_assert_int_eq(ep_add(p, code_buf, 128, &b), 0);
	ck_assert_uint_eq(tu_as_fn(b)(), 1);
	ck_assert_uint_eq(stats(p).used_bytes, 128);
	ep_pool_destroy(p);
}
END_TEST

struct other {
	struct ep_pool *pool;
	void *x;
	int rc;
};

static void *free_other(void *arg)
{
	struct other *o = arg;

	o->rc = ep_free(o->pool, o->x);
	return NULL;
}

/* Freed by another thread (the lock-free free of a plain allocation). */
START_TEST(test_add_other_thread)
{
	struct ep_pool *p = make_pool(0, 0, 0, 0);
	struct other o = { p, NULL, -1 };
	pthread_t t;

	tu_emit_sized(code_buf, 200, 9);
	ck_assert_int_eq(ep_add(p, code_buf, 200, &o.x), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, free_other, &o), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(o.rc, 0);
	ck_assert_uint_eq(stats(p).live_allocs, 0);
	ck_assert(tu_is_trap(o.x, 256));
	ep_pool_destroy(p);
}
END_TEST

/* _i: bit 0 EP_F_RANDOMIZE, bit 1 a large allocation */
START_TEST(test_finalize_size)
{
	size_t pack = 64 << 10, page = tu_page();
	struct ep_pool *p = make_pool(pack, 0, (_i & 1) ? EP_F_RANDOMIZE : 0, 0);
	size_t ask = (_i & 2) ? 3 * pack : 1000, size = (_i & 2) ? pack + 10 : 100;
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(p, ask, &img), 0);
	struct ep_stats before = stats(p);

	tu_fill_nops(img.rw, img.size); /* the assembler padded: never copied */
	tu_emit_sized(img.rw, size, 31);
	/* named before: the name ends at size too */
	ck_assert_int_eq(ep_set_name(p, img.exec, "short"), 0);
	ck_assert_int_eq(ep_finalize_size(p, img.exec, 0), -EINVAL);
	ck_assert_int_eq(ep_finalize_size(p, img.exec, img.size + 1), -EINVAL);
	ck_assert_int_eq(ep_finalize_size(p, img.exec, size), 0);
	ck_assert_uint_eq(tu_as_fn(img.exec)(), 31);
	/* past size: the fill, not the staging buffer's nops */
	size_t keep_end = (((uintptr_t)img.exec + size + ((_i & 2) ? page : 64) - 1) &
			   ~(uintptr_t)(((_i & 2) ? page : 64) - 1)) - (uintptr_t)img.exec;

	ck_assert(tu_is_trap((char *)img.exec + size, keep_end - size));
	struct ep_stats after = stats(p);

	if (_i & 2) {
		ck_assert_uint_eq(after.large_allocs, 1);
	} else {
		ck_assert_uint_lt(after.used_bytes, before.used_bytes);
		ck_assert_uint_eq(after.used_bytes, ((uintptr_t)img.exec % 64 + size + 63) / 64 * 64);
		/* the chunks given back are the next first fit */
		void *next = tu_jit_ret(p, 64, 8, NULL);

		ck_assert_uint_eq((uintptr_t)next & ~(uintptr_t)63,
				  ((uintptr_t)img.exec & ~(uintptr_t)63) + after.used_bytes);
		ck_assert_int_eq(ep_free(p, next), 0);
	}
	/* once only, and a name covers no more than size */
	ck_assert_int_eq(ep_finalize_size(p, img.exec, size), -EINVAL);
	ck_assert_int_eq(ep_finalize(p, img.exec), -EINVAL);
	char name[16];
	size_t off;

	ck_assert_int_eq(ep_symbolize((char *)img.exec + size - 1, name, sizeof(name), &off), 0);
	ck_assert_str_eq(name, "short");
	ck_assert_int_eq(ep_symbolize((char *)img.exec + size, name, sizeof(name), &off), -ENOENT);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ck_assert_int_eq(ep_finalize_size(p, img.exec, size), -EINVAL);
	ck_assert_int_eq(ep_finalize_size(NULL, img.exec, size), -EINVAL);
	ck_assert_int_eq(ep_finalize_size(p, NULL, size), -EINVAL);
	ck_assert_uint_eq(stats(p).used_bytes, 0);
	ep_pool_destroy(p);
}
END_TEST

/* Resident bytes of the process (VmRSS). */
static size_t rss(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	size_t kb = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %zu kB", &kb) == 1)
			break;
	fclose(f);
	return kb << 10;
}

/* Every pack commits as it fills, the second as the first. */
START_TEST(test_commit_each_pack)
{
	size_t pack = 1 << 20;
	struct ep_pool *p = make_pool(pack, 0, 0, 0);
	enum { N = 2000 };
	static void *x[N];
	size_t n = 0;

	/* a pack and a bit: 16 KiB programs */
	while (stats(p).packs < 2) {
		ck_assert_int_lt(n, N);
		x[n] = tu_jit_ret(p, 16 << 10, (uint32_t)n, NULL);
		ck_assert_ptr_nonnull(x[n]);
		n++;
	}
	struct ep_stats st = stats(p);

	/* the second pack holds one program: a few pages of it committed */
	ck_assert_uint_lt(st.pack_bytes, pack + pack / 4);
	/* (16 KiB of no-ops a call: Valgrind's translator gives up on them) */
	if (!RUNNING_ON_VALGRIND)
		ck_assert_uint_eq(tu_as_fn(x[n - 1])(), (uint32_t)(n - 1));
	for (size_t i = 0; i < n; i++) {
		ck_assert_uint_eq(tu_ret_imm_of(tu_ret_at(x[i], 16 << 10)), (uint32_t)i);
		ck_assert_int_eq(ep_free(p, x[i]), 0);
	}
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_trim)
{
	size_t pack = 2 << 20, released = 1;
	struct ep_pool *p = make_pool(pack, 0, 0, 0);
	enum { N = 3000 };
	static void *x[N];

	ck_assert_int_eq(ep_pool_trim(NULL, &released), -EINVAL);
	ck_assert_uint_eq(released, 0);
	ck_assert_int_eq(ep_pool_trim(p, NULL), 0);
	size_t rss0 = rss();

	/* about 3 MiB of code, all freed: the packs stay for reuse */
	for (int i = 0; i < N; i++) {
		x[i] = tu_jit_ret(p, 1000, (uint32_t)i, NULL);
		ck_assert_ptr_nonnull(x[i]);
	}
	size_t rss1 = rss();
	/* the first 100 stay, the rest go: packs empty or half used */
	for (int i = N - 1; i >= 100; i--)
		ck_assert_int_eq(ep_free(p, x[i]), 0);
	struct ep_stats before = stats(p);

	ck_assert_int_ge(before.packs, 2);
	ck_assert_int_eq(ep_pool_trim(p, &released), 0);
	struct ep_stats after = stats(p);

	ck_assert_uint_eq(after.packs, 1);
	ck_assert_uint_ge(released, before.pack_bytes - after.pack_bytes);
	/* what stays is about the 100 programs' 100 KiB */
	ck_assert_uint_lt(after.pack_bytes, 200 << 10);
	ck_assert_uint_eq(after.used_bytes, before.used_bytes);
	if (!RUNNING_ON_VALGRIND) {
		size_t rss2 = rss();

		ck_assert_msg(rss1 > rss0 + (2 << 20) && rss2 + (2 << 20) < rss1,
			      "RSS %zu -> %zu -> %zu KiB", rss0 >> 10, rss1 >> 10, rss2 >> 10);
	}
	for (int i = 0; i < 100; i++)
		ck_assert_uint_eq(tu_as_fn(x[i])(), (uint32_t)i);
	/* nothing left to give back; then the pack commits again as it fills */
	ck_assert_int_eq(ep_pool_trim(p, &released), 0);
	ck_assert_uint_eq(released, 0);
	for (int i = 100; i < N; i++) {
		x[i] = tu_jit_ret(p, 1000, (uint32_t)i, NULL);
		ck_assert_ptr_nonnull(x[i]);
	}
	for (int i = 0; i < N; i++) {
		ck_assert_uint_eq(tu_as_fn(x[i])(), (uint32_t)i);
		ck_assert(tu_is_trap((char *)x[i] + 1000, 24));
	}
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(ep_free(p, x[i]), 0);
	ck_assert_int_eq(ep_pool_trim(p, &released), 0);
	ck_assert_uint_gt(released, 0);
	ck_assert_uint_eq(stats(p).packs, 0);
	ck_assert_uint_eq(stats(p).pack_bytes, 0);
	/* and the pool works on */
	void *y = tu_jit_ret(p, 100, 5, NULL);

	ck_assert_ptr_nonnull(y);
	ck_assert_uint_eq(tu_as_fn(y)(), 5);
	ep_pool_destroy(p);
}
END_TEST

/* A pack cut back that is not the newest grows again for first fit. */
START_TEST(test_trim_middle_pack)
{
	size_t pack = 256 << 10;
	struct ep_pool *p = make_pool(pack, 0, 0, 0);
	enum { N = 600 };
	static void *x[N];
	int n = 0;

	while (stats(p).packs < 3) {
		ck_assert_int_lt(n, N);
		x[n] = tu_jit_ret(p, 4000, (uint32_t)n, NULL);
		ck_assert_ptr_nonnull(x[n]);
		n++;
	}
	/* empty the first pack's upper half, and the third pack */
	int per = (int)(pack / 4032);

	for (int i = per / 2; i < per; i++)
		ck_assert_int_eq(ep_free(p, x[i]), 0);
	for (int i = 2 * per; i < n; i++)
		ck_assert_int_eq(ep_free(p, x[i]), 0);
	n = 2 * per;
	size_t released = 0, bytes = stats(p).pack_bytes;

	ck_assert_int_eq(ep_pool_trim(p, &released), 0);
	ck_assert_uint_eq(stats(p).packs, 2);
	ck_assert_uint_le(stats(p).pack_bytes, pack + pack / 2 + tu_page());
	ck_assert_uint_ge(released, pack / 2);
	ck_assert_uint_le(stats(p).pack_bytes, bytes - pack / 2);
	/* no room committed anywhere: the first pack grows again, first fit */
	for (int i = per / 2; i < per; i++) {
		x[i] = tu_jit_ret(p, 4000, (uint32_t)i, NULL);
		ck_assert_ptr_nonnull(x[i]);
		ck_assert_uint_lt((uintptr_t)x[i] - (uintptr_t)x[0], pack);
	}
	for (int i = 0; i < n; i++) {
		ck_assert_uint_eq(tu_as_fn(x[i])(), (uint32_t)i);
		ck_assert_int_eq(ep_free(p, x[i]), 0);
	}
	ep_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stage");
	TCase *tc = tcase_create("stage");

	tcase_add_loop_test(tc, test_stage_aligned, 0, 12);
	tcase_add_loop_test(tc, test_add, 0, 4);
	tcase_add_loop_test(tc, test_add_slack_after_reuse, 0, 2);
	tcase_add_test(tc, test_add_large);
	tcase_add_test(tc, test_add_bad_inputs);
	tcase_add_test(tc, test_add_other_thread);
	tcase_add_loop_test(tc, test_finalize_size, 0, 4);
	tcase_add_test(tc, test_commit_each_pack);
	tcase_add_test(tc, test_trim);
	tcase_add_test(tc, test_trim_middle_pack);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
