/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_data.c - ep_alloc_data(): read-only data never writable nor
 * executable after ep_finalize(), read-write data writable and never
 * executable; data and code of a pool with a code range (and near) within
 * rel32 of each other; stats, limit, free, trim and reuse; ep_lookup(),
 * ep_write(), ep_shrink(), names; a fork child's view; no W+X mapping;
 * bad input.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "execpack.h"
#include "testutil.h"

#define PACK ((size_t)64 << 10)
#define RANGE ((size_t)64 << 20)
#define REL32 ((uintptr_t)1 << 31)

static struct ep_pool *make_pool(size_t range, const void *near, size_t limit)
{
	return tu_pool((struct ep_config){ .backend = EP_BACKEND_MEMFD, .pack_size = PACK,
					   .code_range = range, .near = near, .limit = limit });
}

/* What a child dies of (its signal), or 0 when it exits normally. */
static int child_signal(void (*fn)(void *), void *arg)
{
	pid_t pid = fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		fn(arg);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static void store_to(void *p)
{
	*(volatile unsigned char *)p = 0x5a;
}

static void call_at(void *p)
{
	tu_as_fn(p)();
}

static void *data(struct ep_pool *p, size_t size, unsigned kind, unsigned char byte)
{
	struct ep_image img;
	int rc = ep_alloc_data(p, size, 0, kind, &img);

	ck_assert_msg(rc == 0, "ep_alloc_data(%zu, %u): %s", size, kind, ep_strerror(rc));
	ck_assert_ptr_nonnull(img.rw);
	ck_assert_uint_ge(img.size, size);
	memset(img.rw, byte, size);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	return img.exec;
}

static int all_bytes(const void *p, size_t len, unsigned char byte)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++)
		if (b[i] != byte)
			return 0;
	return 1;
}

START_TEST(test_read_only)
{
	/* _i: a pack allocation, a large one */
	struct ep_pool *p = make_pool(RANGE, NULL, 0);
	size_t size = _i ? 3 * PACK : 200;
	char perms[8];
	struct ep_image img;

	ck_assert_int_eq(ep_alloc_data(p, size, 0, EP_DATA_RO, &img), 0);
	ck_assert_ptr_ne(img.rw, img.exec);
	ck_assert(all_bytes(img.rw, size, 0)); /* data's fill is zeros */
	memset(img.rw, 0x11, size);
	ck_assert_int_eq(ep_write(p, (char *)img.exec + 8, "ab", 2), 0); /* staged */
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert(all_bytes(img.exec, 8, 0x11));
	ck_assert_int_eq(memcmp((char *)img.exec + 8, "ab", 2), 0);
	ck_assert(all_bytes((char *)img.exec + 10, size - 10, 0x11));
	ck_assert_int_eq(tu_mapping_perms(img.exec, perms, NULL, 0), 0);
	ck_assert_msg(perms[0] == 'r' && perms[1] == '-' && perms[2] == '-', "RO data mapped %s",
		      perms);
	ck_assert_int_eq(child_signal(store_to, img.exec), SIGSEGV);
	ck_assert_int_eq(child_signal(call_at, img.exec), SIGSEGV);
	/* changed only through the library, as code is */
	ck_assert_int_eq(ep_write(p, (char *)img.exec + 1, "z", 1), 0);
	ck_assert_int_eq(((char *)img.exec)[1], 'z');
	ck_assert_int_eq(ep_finalize(p, img.exec), -EINVAL); /* once only */
	ck_assert_int_eq(tu_count_wx_mappings(), 0);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_read_write)
{
	struct ep_pool *p = make_pool(RANGE, NULL, 0);
	size_t size = _i ? 3 * PACK : 200;
	char perms[8];
	unsigned char *d = data(p, size, EP_DATA_RW, 0x22);

	ck_assert(all_bytes(d, size, 0x22));
	ck_assert_int_eq(tu_mapping_perms(d, perms, NULL, 0), 0);
	ck_assert_msg(perms[0] == 'r' && perms[1] == 'w' && perms[2] == '-', "RW data mapped %s",
		      perms);
	memset(d, 0x33, size); /* written in place */
	ck_assert(all_bytes(d, size, 0x33));
	ck_assert_int_eq(child_signal(store_to, d), 0);
	ck_assert_int_eq(child_signal(call_at, d), SIGSEGV);
	ck_assert_int_eq(ep_write(p, d + 4, "xy", 2), 0);
	ck_assert_int_eq(memcmp(d + 4, "xy", 2), 0);
	ck_assert_int_eq(tu_count_wx_mappings(), 0);
	ck_assert_int_eq(ep_free(p, d), 0);
	ep_pool_destroy(p);
}
END_TEST

struct span {
	uintptr_t lo, hi;
};

static void span_add(struct span *s, const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p, b = a + len;

	if (!s->lo || a < s->lo)
		s->lo = a;
	if (b > s->hi)
		s->hi = b;
}

static int near_target(void)
{
	return 7;
}

/* Code and data of both kinds, packed and large, interleaved: all of it
 * within one rel32 span (_i: with near as well). */
START_TEST(test_reach)
{
	const void *near = _i ? (const void *)(uintptr_t)near_target : NULL;
	struct ep_pool *p = make_pool(RANGE, near, 0);
	struct span s = { 0, 0 };
	void *execs[90];
	int rc;

	for (int i = 0; i < 90; i++) {
		size_t len = i % 15 == 14 ? 2 * PACK + 100 : 500 + (size_t)i * 37;

		if (i % 3 == 0) {
			execs[i] = tu_jit_ret(p, len, (uint32_t)i, &rc);
			ck_assert_msg(rc == 0, "code %d: %s", i, ep_strerror(rc));
		} else {
			execs[i] = data(p, len, i % 3 == 1 ? EP_DATA_RO : EP_DATA_RW,
					(unsigned char)i);
		}
		span_add(&s, execs[i], len);
	}
	ck_assert_msg(s.hi - s.lo <= RANGE, "code and data span %zu bytes",
		      (size_t)(s.hi - s.lo));
	ck_assert_uint_lt(s.hi - s.lo, REL32);
	if (near) {
		uintptr_t n = (uintptr_t)near;

		ck_assert_uint_lt(s.hi > n ? s.hi - n : n - s.lo, REL32);
	}
	for (int i = 0; i < 90; i += 3)
		ck_assert_int_eq(tu_as_fn(execs[i])(), i);
	for (int i = 0; i < 90; i++)
		ck_assert_int_eq(ep_free(p, execs[i]), 0);
	ep_pool_destroy(p);
}
END_TEST

/* Without a code range, near alone: every data allocation within rel32 of near. */
START_TEST(test_near_only)
{
	uintptr_t n = (uintptr_t)near_target;
	struct ep_pool *p = make_pool(0, (const void *)n, 0);

	for (int i = 0; i < 20; i++) {
		size_t len = i == 19 ? 2 * PACK + 100 : 300;
		void *d = data(p, len, i & 1 ? EP_DATA_RO : EP_DATA_RW, 1);
		uintptr_t a = (uintptr_t)d;

		ck_assert_uint_lt(a > n ? a + len - n : n - a, REL32);
	}
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_stats_limit)
{
	struct ep_pool *p = make_pool(RANGE, NULL, 3 * PACK);
	struct ep_stats st;
	struct ep_image img;
	int rc;

	void *code = tu_jit_ret(p, 1000, 1, &rc);

	ck_assert_int_eq(rc, 0);
	void *ro = data(p, PACK, EP_DATA_RO, 1);
	void *rw = data(p, PACK / 2, EP_DATA_RW, 2);

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 3);
	ck_assert_uint_ge(st.used_bytes, 1000 + PACK + PACK / 2);
	ck_assert_uint_ge(st.packs, 3); /* code, RO and RW never share a pack */
	/* the limit counts data too: 1000 + 64K + 32K charged of 192K */
	ck_assert_int_eq(ep_alloc_data(p, PACK + PACK / 2, 0, EP_DATA_RW, &img), -EPERM);
	ck_assert_int_eq(ep_alloc(p, PACK + PACK / 2, &img), -EPERM);
	ck_assert_int_eq(ep_free(p, ro), 0);
	ck_assert_int_eq(ep_alloc_data(p, PACK + PACK / 2, 0, EP_DATA_RW, &img), 0);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ck_assert_int_eq(ep_free(p, rw), 0);
	ck_assert_int_eq(ep_free(p, code), 0);
	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_free_trim_reuse)
{
	struct ep_pool *p = make_pool(RANGE, NULL, 0);
	struct ep_stats st;
	struct ep_image img;
	void *d[200];
	size_t released = 0;

	for (int i = 0; i < 200; i++)
		d[i] = data(p, 1000, EP_DATA_RO, (unsigned char)i);
	void *first = d[0];

	for (int i = 0; i < 200; i++) {
		ck_assert(all_bytes(d[i], 1000, (unsigned char)i));
		ck_assert_int_eq(ep_free(p, d[i]), 0);
	}
	ck_assert_int_eq(ep_free(p, d[0]), -EINVAL); /* freed */
	ck_assert_int_eq(ep_pool_trim(p, &released), 0);
	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ck_assert_uint_eq(st.packs, 0);
	ck_assert_uint_gt(released, 0);
	/* a freed allocation's bytes are zeros again for the next one */
	ck_assert_int_eq(ep_alloc_data(p, 1000, 0, EP_DATA_RO, &img), 0);
	ck_assert(all_bytes(img.rw, 1000, 0));
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert(all_bytes(img.exec, 1000, 0));
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	/* reuse in a pack kept: the same first chunk comes back */
	void *a = data(p, 64, EP_DATA_RW, 1), *b = data(p, 64, EP_DATA_RW, 2);

	ck_assert_int_eq(ep_free(p, a), 0);
	void *c = data(p, 64, EP_DATA_RW, 3);

	ck_assert_ptr_eq(c, a);
	(void)first;
	ck_assert_int_eq(ep_free(p, b), 0);
	ck_assert_int_eq(ep_free(p, c), 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_lookup_name_shrink)
{
	struct ep_pool *p = make_pool(RANGE, NULL, 0);
	struct ep_image img;
	struct ep_info info;
	char buf[64];
	size_t off = 0;

	ck_assert_int_eq(ep_alloc_data(p, 4096, 256, EP_DATA_RO, &img), 0);
	ck_assert_uint_eq((uintptr_t)img.exec % 256, 0);
	ck_assert_int_eq(ep_set_name(p, img.exec, "rodata"), 0);
	ck_assert_int_eq(ep_finalize_size(p, img.exec, 1024), 0);
	ck_assert_int_eq(ep_lookup((char *)img.exec + 100, &info), 0);
	ck_assert_ptr_eq(info.pool, p);
	ck_assert_ptr_eq(info.exec, img.exec);
	ck_assert_str_eq(info.name, "rodata");
	ck_assert_int_eq(ep_symbolize((char *)img.exec + 100, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "rodata");
	ck_assert_uint_eq(off, 100);
	ck_assert_int_eq(ep_shrink(p, img.exec, 128), 0);
	ck_assert_int_eq(ep_lookup(img.exec, &info), 0);
	ck_assert_uint_le(info.size, 1024);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ck_assert_int_eq(ep_lookup(img.exec, &info), -ENOENT);
	ep_pool_destroy(p);
}
END_TEST

/* An emptied data pack is kept against churn, beside the code heap's
 * (a linker frees and allocates data with each module), until trim. */
START_TEST(test_pack_kept)
{
	struct ep_pool *p = make_pool(RANGE, NULL, 0);
	struct ep_stats st;
	int rc;
	void *code = tu_jit_ret(p, 100, 1, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(ep_free(p, code), 0);
	void *d = data(p, 100, EP_DATA_RO, 1);

	ck_assert_int_eq(ep_free(p, d), 0);
	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.packs, 2);
	void *again = data(p, 100, EP_DATA_RO, 2);

	ck_assert_ptr_eq(again, d); /* the same pack, not a new mapping */
	ck_assert_int_eq(ep_free(p, again), 0);
	ck_assert_int_eq(ep_pool_trim(p, NULL), 0);
	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.packs, 0);
	ep_pool_destroy(p);
}
END_TEST

struct fork_args {
	struct ep_pool *p;
	unsigned char *ro, *rw;
};

static void in_child(void *arg)
{
	struct fork_args *f = arg;
	struct ep_image img;

	if (!all_bytes(f->ro, 500, 0x44) || !all_bytes(f->rw, 500, 0x55))
		_exit(1);
	f->rw[0] = 0x66; /* the child's own copy */
	if (ep_write(f->p, f->ro, "c", 1) || f->ro[0] != 'c')
		_exit(2);
	if (ep_alloc_data(f->p, 100, 0, EP_DATA_RW, &img) || ep_finalize(f->p, img.exec))
		_exit(3);
	if (ep_free(f->p, f->rw) || ep_free(f->p, img.exec))
		_exit(4);
	_exit(0);
}

START_TEST(test_fork)
{
	struct ep_pool *p = make_pool(RANGE, NULL, 0);
	struct fork_args f = { p, data(p, 500, EP_DATA_RO, 0x44), data(p, 500, EP_DATA_RW, 0x55) };
	pid_t pid = fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		in_child(&f);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x", st);
	/* the parent's data is its own */
	ck_assert(all_bytes(f.ro, 500, 0x44));
	ck_assert(all_bytes(f.rw, 500, 0x55));
	ck_assert_int_eq(ep_free(p, f.ro), 0);
	ck_assert_int_eq(ep_free(p, f.rw), 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_bad_input)
{
	struct ep_pool *p = make_pool(0, NULL, 0);
	struct ep_image img;

	ck_assert_int_eq(ep_alloc_data(p, 100, 0, 0, &img), -EINVAL);
	ck_assert_int_eq(ep_alloc_data(p, 100, 0, 3, &img), -EINVAL);
	ck_assert_int_eq(ep_alloc_data(p, 100, 48, EP_DATA_RO, &img), -EINVAL);
	ck_assert_int_eq(ep_alloc_data(p, 100, 1u << 30, EP_DATA_RO, &img), -EINVAL);
	ck_assert_int_eq(ep_alloc_data(p, 100, 0, EP_DATA_RW, NULL), -EINVAL);
	ck_assert_int_eq(ep_alloc_data(NULL, 100, 0, EP_DATA_RW, &img), -EINVAL);
	ck_assert_int_eq(ep_alloc_data(p, 0, 0, EP_DATA_RW, &img), -EINVAL);
	/* a pool with neither range nor near still has data, placed anywhere */
	ck_assert_int_eq(ep_alloc_data(p, 100, 64, EP_DATA_RW, &img), 0);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ep_pool_destroy(p);
}
END_TEST

/* Huge-page data packs beside huge-page code, in one range. */
START_TEST(test_hugetlb)
{
	size_t huge = tu_huge_page_size();
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_HUGETLB,
				 .code_range = 8 * huge };
	struct ep_pool *p = NULL;
	char perms[8];
	int rc;

	if (!huge) {
		fprintf(stderr, "SKIP: hugetlb data: no Hugepagesize in /proc/meminfo\n");
		return;
	}
	rc = ep_pool_create(&cfg, &p);
	if (rc) {
		fprintf(stderr, "SKIP: hugetlb data: no hugetlb pool here (%s)\n", ep_strerror(rc));
		return;
	}
	void *code = tu_jit_ret(p, 100, 9, &rc);

	ck_assert_int_eq(rc, 0);
	struct ep_image ro, rw;

	rc = ep_alloc_data(p, 100, 0, EP_DATA_RO, &ro);
	if (rc == -ENOSPC || rc == -ENOMEM) {
		fprintf(stderr, "SKIP: hugetlb data: no second huge page (%s)\n", ep_strerror(rc));
	} else {
		ck_assert_int_eq(rc, 0);
		memset(ro.rw, 7, 100);
		ck_assert_int_eq(ep_finalize(p, ro.exec), 0);
		ck_assert(all_bytes(ro.exec, 100, 7));
		ck_assert_int_eq(tu_mapping_perms(ro.exec, perms, NULL, 0), 0);
		ck_assert_msg(perms[1] == '-' && perms[2] == '-', "RO data mapped %s", perms);
		ck_assert_int_eq(child_signal(store_to, ro.exec), SIGSEGV);
		rc = ep_alloc_data(p, 100, 0, EP_DATA_RW, &rw);
		if (rc == 0) {
			ck_assert_int_eq(ep_finalize(p, rw.exec), 0);
			((char *)rw.exec)[0] = 1;
			ck_assert_int_eq(tu_mapping_perms(rw.exec, perms, NULL, 0), 0);
			ck_assert_msg(perms[1] == 'w' && perms[2] == '-', "RW data mapped %s", perms);
			ck_assert_uint_lt((uintptr_t)rw.exec > (uintptr_t)code
						  ? (uintptr_t)rw.exec - (uintptr_t)code
						  : (uintptr_t)code - (uintptr_t)rw.exec, 8 * huge);
		}
		ck_assert_uint_lt((uintptr_t)ro.exec > (uintptr_t)code
					  ? (uintptr_t)ro.exec - (uintptr_t)code
					  : (uintptr_t)code - (uintptr_t)ro.exec, 8 * huge);
	}
	ck_assert_int_eq(tu_as_fn(code)(), 9);
	ck_assert_int_eq(tu_count_wx_mappings(), 0);
	ep_pool_destroy(p);
}
END_TEST

/* The kernel module maps read+exec views only: no data. */
START_TEST(test_kmod)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_KMOD };
	struct ep_pool *p = NULL;
	struct ep_image img;
	int rc = ep_pool_create(&cfg, &p);

	if (rc) {
		fprintf(stderr, "SKIP: kmod data: no module here (%s)\n", ep_strerror(rc));
		return;
	}
	ck_assert_int_eq(ep_alloc_data(p, 100, 0, EP_DATA_RO, &img), -EOPNOTSUPP);
	ck_assert_int_eq(ep_alloc_data(p, 100, 0, EP_DATA_RW, &img), -EOPNOTSUPP);
	ep_pool_destroy(p);
}
END_TEST

/* Threads making the pool's data heaps at once, allocating in them, and
 * freeing each other's data. */
static struct ep_pool *g_pool;
static void *volatile g_handoff[4];

static void *data_worker(void *arg)
{
	int id = (int)(intptr_t)arg;

	for (int i = 0; i < 300; i++) {
		struct ep_image img;
		unsigned kind = (i + id) & 1 ? EP_DATA_RO : EP_DATA_RW;

		if (ep_alloc_data(g_pool, 64 + (size_t)i * 8, 0, kind, &img))
			return (void *)1;
		memset(img.rw, id + 1, 64);
		if (ep_finalize(g_pool, img.exec) || !all_bytes(img.exec, 64, (unsigned char)(id + 1)))
			return (void *)2;
		/* free the neighbour's last one, if it left one */
		void *other = __atomic_exchange_n(&g_handoff[(id + 1) & 3], NULL, __ATOMIC_ACQ_REL);

		if (other && ep_free(g_pool, other))
			return (void *)3;
		other = __atomic_exchange_n(&g_handoff[id], img.exec, __ATOMIC_ACQ_REL);
		if (other && ep_free(g_pool, other))
			return (void *)4;
	}
	return NULL;
}

START_TEST(test_threads)
{
	pthread_t t[4];
	struct ep_stats st;

	g_pool = make_pool(RANGE, NULL, 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, data_worker, (void *)(intptr_t)i), 0);
	for (int i = 0; i < 4; i++) {
		void *r;

		ck_assert_int_eq(pthread_join(t[i], &r), 0);
		ck_assert_ptr_null(r);
	}
	for (int i = 0; i < 4; i++)
		if (g_handoff[i])
			ck_assert_int_eq(ep_free(g_pool, g_handoff[i]), 0);
	ck_assert_int_eq(ep_pool_stats(g_pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ep_pool_destroy(g_pool);
}
END_TEST

int main(void)
{
	tu_need_pool();
	Suite *s = suite_create("data");
	TCase *tc = tcase_create("data");

	tcase_add_loop_test(tc, test_read_only, 0, 2);
	tcase_add_loop_test(tc, test_read_write, 0, 2);
	tcase_add_loop_test(tc, test_reach, 0, 2);
	tcase_add_test(tc, test_near_only);
	tcase_add_test(tc, test_stats_limit);
	tcase_add_test(tc, test_free_trim_reuse);
	tcase_add_test(tc, test_lookup_name_shrink);
	tcase_add_test(tc, test_pack_kept);
	tcase_add_test(tc, test_fork);
	tcase_add_test(tc, test_bad_input);
	tcase_add_test(tc, test_hugetlb);
	tcase_add_test(tc, test_kmod);
	tcase_add_test(tc, test_threads);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
