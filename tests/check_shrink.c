/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_shrink.c - ep_shrink(): chunks given back before and after
 * ep_finalize(), refilled with traps, reused by first fit; the limit charge
 * and statistics; what ep_write() and ep_finalize() cover afterwards; large
 * allocations; names; calls from another thread; and every bad input.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "execpack.h"
#include "testutil.h"

static struct ep_pool *make_pool(size_t pack_size, size_t limit, unsigned flags)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .pack_size = pack_size, .limit = limit, .flags = flags };
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(&cfg, &p);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	return p;
}

static size_t used(struct ep_pool *p)
{
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	return st.used_bytes;
}

static void assert_traps(const void *exec, size_t len)
{
	const unsigned char *b = exec;

	for (size_t i = 0; i < len; i++)
		ck_assert_msg(b[i] == tu_trap_byte(b + i), "byte %zu is %#x, not a trap", i, b[i]);
}

START_TEST(test_shrink_before_finalize)
{
	struct ep_pool *p = make_pool(0, 0, 0);
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(p, 1000, &img), 0);
	ck_assert_uint_eq(used(p), 1024);
	/* the assembler wrote nops everywhere; the function is 100 bytes */
	tu_fill_nops(img.rw, img.size);
	tu_emit_sized(img.rw, 100, 42);
	ck_assert_int_eq(ep_shrink(p, img.exec, 100), 0);
	ck_assert_uint_eq(used(p), 128);
	/* ep_write covers the kept chunks only */
	unsigned char b = tu_nop_byte((char *)img.exec + 127);

	ck_assert_int_eq(ep_write(p, (char *)img.exec + 127, &b, 1), 0);
	ck_assert_int_eq(ep_write(p, (char *)img.exec + 128, &b, 1), -EINVAL);
	ck_assert_int_eq(ep_write(p, (char *)img.exec + 120, "12345678", 9), -EINVAL);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 42);
	/* the staging buffer's nops past the kept chunks were never copied */
	assert_traps((char *)img.exec + 128, 1024 - 128);
	/* and the chunks given back are the next first fit */
	void *next = tu_jit_ret(p, 800, 7, NULL);

	ck_assert_ptr_eq(next, (char *)img.exec + 128);
	ck_assert_int_eq(tu_as_fn(next)(), 7);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 42);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_shrink_after_finalize)
{
	struct ep_pool *p = make_pool(0, 0, 0);
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(p, 2000, &img), 0);
	tu_fill_nops(img.rw, img.size); /* code everywhere, as if emitted */
	tu_emit_sized(img.rw, 70, 9);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_uint_eq(used(p), 2048);
	ck_assert_int_eq(ep_shrink(p, img.exec, 70), 0);
	ck_assert_uint_eq(used(p), 128);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 9);
	/* never anything but traps past the kept chunks */
	assert_traps((char *)img.exec + 128, 2048 - 128);
	ck_assert(tu_is_nops((char *)img.exec + 127, 1));
	ck_assert_int_eq(ep_write(p, (char *)img.exec + 128, "x", 1), -EINVAL);
	/* shrink again, then free */
	ck_assert_int_eq(ep_shrink(p, img.exec, 100), 0); /* within the last chunk kept */
	ck_assert_uint_eq(used(p), 128);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 9);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ck_assert_uint_eq(used(p), 0);
	ck_assert_int_eq(ep_free(p, img.exec), -EINVAL);
	ck_assert_int_eq(ep_shrink(p, img.exec, 64), -EINVAL);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_shrink_bad_inputs)
{
	struct ep_pool *p = make_pool(0, 0, 0);
	struct ep_image img;
	int local;

	ck_assert_int_eq(ep_alloc(p, 500, &img), 0);
	ck_assert_int_eq(ep_shrink(NULL, img.exec, 10), -EINVAL);
	ck_assert_int_eq(ep_shrink(p, NULL, 10), -EINVAL);
	ck_assert_int_eq(ep_shrink(p, img.exec, 0), -EINVAL);           /* use ep_free */
	ck_assert_int_eq(ep_shrink(p, img.exec, img.size + 1), -EINVAL); /* never grows */
	ck_assert_int_eq(ep_shrink(p, img.exec, SIZE_MAX), -EINVAL);
	ck_assert_int_eq(ep_shrink(p, (char *)img.exec + 64, 10), -EINVAL); /* not its start */
	ck_assert_int_eq(ep_shrink(p, (char *)img.exec + 1, 10), -EINVAL);
	ck_assert_int_eq(ep_shrink(p, &local, 10), -EINVAL);                /* not the pool's */
	ck_assert_uint_eq(used(p), 512);
	/* the whole size, or one within the last chunk: nothing to give back */
	ck_assert_int_eq(ep_shrink(p, img.exec, img.size), 0);
	ck_assert_int_eq(ep_shrink(p, img.exec, 449), 0);
	ck_assert_uint_eq(used(p), 512);
	ck_assert_int_eq(ep_shrink(p, img.exec, 200), 0);
	ck_assert_uint_eq(used(p), 256);
	/* never grows back, even to what it had */
	ck_assert_int_eq(ep_shrink(p, img.exec, 300), -EINVAL);
	ck_assert_int_eq(ep_shrink(p, img.exec, 256), 0);
	/* another pool's allocation */
	struct ep_pool *q = make_pool(0, 0, 0);

	ck_assert_int_eq(ep_shrink(q, img.exec, 10), -EINVAL);
	ep_pool_destroy(q);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ck_assert_uint_eq(used(p), 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_shrink_limit)
{
	struct ep_pool *p = make_pool(0, 4096, 0);
	struct ep_image a, b;

	ck_assert_int_eq(ep_alloc(p, 4096, &a), 0);
	ck_assert_int_eq(ep_alloc(p, 64, &b), -EPERM);
	ck_assert_int_eq(ep_shrink(p, a.exec, 1000), 0); /* 1024 charged now */
	ck_assert_int_eq(ep_alloc(p, 3072, &b), 0);
	ck_assert_int_eq(ep_alloc(p, 64, &b), -EPERM);
	ck_assert_int_eq(ep_free(p, a.exec), 0);
	ck_assert_int_eq(ep_alloc(p, 1024, &a), 0); /* the free gave back 1024, not 4096 */
	ck_assert_int_eq(ep_alloc(p, 64, &a), -EPERM);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_shrink_randomized)
{
	struct ep_pool *p = make_pool(0, 0, EP_F_RANDOMIZE);
	void *execs[300];
	size_t want = 0;

	for (int i = 0; i < 300; i++) {
		struct ep_image img;

		ck_assert_int_eq(ep_alloc(p, 300, &img), 0);
		tu_emit_sized(img.rw, 20, (uint32_t)i);
		ck_assert_int_eq(ep_shrink(p, img.exec, 20), 0);
		if (i % 2)
			ck_assert_int_eq(ep_finalize(p, img.exec), 0);
		ck_assert_int_eq(ep_shrink(p, img.exec, 20), 0);
		if (i % 2 == 0)
			ck_assert_int_eq(ep_finalize(p, img.exec), 0);
		/* exec stays where it was: the offset in the first chunk counts */
		size_t off = (uintptr_t)img.exec % 64, keep = (off + 20 + 63) / 64 * 64;

		ck_assert_int_eq(ep_shrink(p, img.exec, keep - off + 1), -EINVAL);
		ck_assert_int_eq(ep_shrink(p, img.exec, keep - off), 0);
		execs[i] = img.exec;
		want += keep;
	}
	ck_assert_uint_eq(used(p), want);
	for (int i = 0; i < 300; i++)
		ck_assert_int_eq(tu_as_fn(execs[i])(), i);
	for (int i = 0; i < 300; i++)
		ck_assert_int_eq(ep_free(p, execs[i]), 0);
	ck_assert_uint_eq(used(p), 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_shrink_large)
{
	size_t pack = 64 * 1024, page = tu_page();
	struct ep_pool *p = make_pool(pack, 256 * 1024, 0);
	struct ep_image img, other;
	struct ep_stats st;

	ck_assert_int_eq(ep_alloc(p, 200 * 1024, &img), 0);
	tu_fill_nops(img.rw, img.size);
	tu_emit_sized(img.rw, 10000, 11);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(ep_alloc(p, 200 * 1024, &other), -EPERM);
	ck_assert_int_eq(ep_shrink(p, img.exec, 10000), 0);
	/* the mapping stays; whole pages past the size are traps and uncharged */
	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.large_allocs, 1);
	size_t whole = (200 * 1024 + page - 1) / page * page;

	ck_assert_uint_eq(st.large_bytes, whole);
	size_t keep = (10000 + page - 1) / page * page;

	assert_traps((char *)img.exec + keep, whole - keep);
	ck_assert(tu_is_nops((char *)img.exec + keep - 1, 1));
	ck_assert_int_eq(tu_as_fn(img.exec)(), 11);
	ck_assert_int_eq(ep_write(p, (char *)img.exec + keep, "x", 1), -EINVAL);
	ck_assert_int_eq(ep_alloc(p, 200 * 1024, &other), 0);
	ck_assert_int_eq(ep_free(p, other.exec), 0);
	/* before finalize: only the kept pages are copied in */
	ck_assert_int_eq(ep_alloc(p, 100 * 1024, &other), 0);
	tu_fill_nops(other.rw, other.size);
	tu_emit_sized(other.rw, 5000, 12);
	ck_assert_int_eq(ep_shrink(p, other.exec, 5000), 0);
	ck_assert_int_eq(ep_finalize(p, other.exec), 0);
	size_t kept = (5000 + page - 1) / page * page;

	assert_traps((char *)other.exec + kept, 100 * 1024 - kept);
	ck_assert_int_eq(tu_as_fn(other.exec)(), 12);
	ck_assert_int_eq(ep_free(p, other.exec), 0);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.large_allocs, 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_shrink_named)
{
	struct ep_pool *p = make_pool(0, 0, 0);
	struct ep_image img;
	char name[64];
	size_t off;

	ck_assert_int_eq(ep_alloc(p, 1000, &img), 0);
	tu_emit_sized(img.rw, 100, 3);
	ck_assert_int_eq(ep_set_name(p, img.exec, "shrunk"), 0);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(ep_symbolize((char *)img.exec + 500, name, sizeof(name), &off), 0);
	ck_assert_int_eq(ep_shrink(p, img.exec, 100), 0);
	ck_assert_int_eq(ep_symbolize((char *)img.exec + 10, name, sizeof(name), &off), 0);
	ck_assert_str_eq(name, "shrunk");
	ck_assert_uint_eq(off, 10);
	/* the bytes given back are no longer named */
	ck_assert_int_eq(ep_symbolize((char *)img.exec + 500, name, sizeof(name), &off), -ENOENT);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 3);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ep_pool_destroy(p);
}
END_TEST

struct shrink_arg {
	struct ep_pool *pool;
	void *exec;
	int rc;
};

static void *shrink_thread(void *v)
{
	struct shrink_arg *a = v;
	int rc;
	/* this thread has a heap of its own first */
	void *mine = tu_jit_ret(a->pool, 300, 1, &rc);

	if (rc == 0)
		rc = ep_shrink(a->pool, mine, 10);
	a->rc = rc ? rc : ep_shrink(a->pool, a->exec, 64);
	if (mine)
		ep_free(a->pool, mine);
	return NULL;
}

START_TEST(test_shrink_other_thread)
{
	struct ep_pool *p = make_pool(0, 0, 0);
	struct ep_image img;
	pthread_t t;

	ck_assert_int_eq(ep_alloc(p, 4000, &img), 0);
	tu_emit_sized(img.rw, 64, 8);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	size_t before = used(p);
	struct shrink_arg a = { .pool = p, .exec = img.exec };

	ck_assert_int_eq(pthread_create(&t, NULL, shrink_thread, &a), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(a.rc, 0);
	ck_assert_uint_eq(used(p), before - (4032 - 64));
	ck_assert_int_eq(tu_as_fn(img.exec)(), 8);
	assert_traps((char *)img.exec + 64, 4032 - 64);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ck_assert_uint_eq(used(p), 0);
	ep_pool_destroy(p);
}
END_TEST

/* ---- shrink against lock-free frees from other threads ---- */

#define NRACE 2000

struct race {
	struct ep_pool *pool;
	void *execs[NRACE];
	int free_rc[NRACE], shrink_rc[NRACE];
	int reverse; /* the shrinks from the other end: they meet the frees */
	int n;       /* programs raced over: NRACE, a quarter with EP_TEST_QUICK=1 */
	pthread_barrier_t go;
};

static void *race_free(void *v)
{
	struct race *r = v;

	pthread_barrier_wait(&r->go);
	for (int i = 0; i < r->n; i += 2)
		r->free_rc[i] = ep_free(r->pool, r->execs[i]);
	return NULL;
}

static void *race_shrink(void *v)
{
	struct race *r = v;

	pthread_barrier_wait(&r->go);
	for (int k = 0; k < r->n; k++) {
		int i = r->reverse ? r->n - 1 - k : k;

		r->shrink_rc[i] = ep_shrink(r->pool, r->execs[i], 64);
	}
	return NULL;
}

START_TEST(test_shrink_races_remote_free)
{
	static struct race r;
	pthread_t f, s;

	r.pool = make_pool(0, 0, 0);
	const char *q = getenv("EP_TEST_QUICK");

	r.reverse = _i;
	r.n = q && *q && strcmp(q, "0") != 0 ? NRACE / 4 : NRACE;
	for (int i = 0; i < r.n; i++) {
		struct ep_image img;

		/* a 6-byte function at the start of 300 bytes asked for */
		ck_assert_int_eq(ep_alloc(r.pool, 300, &img), 0);
		tu_emit_ret_imm(img.rw, (uint32_t)i);
		ck_assert_int_eq(ep_finalize(r.pool, img.exec), 0);
		r.execs[i] = img.exec;
	}
	ck_assert_int_eq(pthread_barrier_init(&r.go, NULL, 2), 0);
	ck_assert_int_eq(pthread_create(&f, NULL, race_free, &r), 0);
	ck_assert_int_eq(pthread_create(&s, NULL, race_shrink, &r), 0);
	ck_assert_int_eq(pthread_join(f, NULL), 0);
	ck_assert_int_eq(pthread_join(s, NULL), 0);
	pthread_barrier_destroy(&r.go);
	size_t live = 0;

	for (int i = 0; i < r.n; i++) {
		if (i % 2) {
			/* nobody frees these: shrunk, still running, traps after */
			ck_assert_int_eq(r.shrink_rc[i], 0);
			ck_assert_int_eq(tu_as_fn(r.execs[i])(), i);
			assert_traps((char *)r.execs[i] + 64, 320 - 64);
			live += 64;
			continue;
		}
		/* a free and a shrink of one address at once (a race in the
		 * program): one of them may fail, never both, never corrupting */
		ck_assert_msg(r.free_rc[i] == 0 || r.free_rc[i] == -EINVAL, "free %d", r.free_rc[i]);
		ck_assert_msg(r.shrink_rc[i] == 0 || r.shrink_rc[i] == -EINVAL, "shrink %d",
			      r.shrink_rc[i]);
		ck_assert(r.free_rc[i] == 0 || r.shrink_rc[i] == 0);
		if (r.free_rc[i]) {
			ck_assert_int_eq(tu_as_fn(r.execs[i])(), i);
			live += 64;
		}
	}
	ck_assert_uint_eq(used(r.pool), live);
	for (int i = 0; i < r.n; i++)
		if (i % 2 || r.free_rc[i])
			ck_assert_int_eq(ep_free(r.pool, r.execs[i]), 0);
	ck_assert_uint_eq(used(r.pool), 0);
	ep_pool_destroy(r.pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("shrink");
	TCase *tc = tcase_create("shrink");

	tcase_add_test(tc, test_shrink_before_finalize);
	tcase_add_test(tc, test_shrink_after_finalize);
	tcase_add_test(tc, test_shrink_bad_inputs);
	tcase_add_test(tc, test_shrink_limit);
	tcase_add_test(tc, test_shrink_randomized);
	tcase_add_test(tc, test_shrink_large);
	tcase_add_test(tc, test_shrink_named);
	tcase_add_test(tc, test_shrink_other_thread);
	tcase_add_loop_test(tc, test_shrink_races_remote_free, 0, 2);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
