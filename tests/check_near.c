/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_near.c - ep_config.near: packs and large mappings within rel32
 * reach of the program's code, JIT code calling a C function of this
 * program with "call rel32", the error when no range that near is free,
 * kmod's refusal, and a caller's older, shorter config.
 */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "execpack.h"
#include "testutil.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define REACH ((int64_t)1 << 31)

/* What the JIT code calls by rel32: a function of this program. */
int near_helper(int x);
__attribute__((noinline, used)) int near_helper(int x)
{
	return 3 * x + 1;
}

static const void *helper_addr(void)
{
	int (*f)(int) = near_helper;
	const void *p;

	memcpy(&p, &f, sizeof(p));
	return p;
}

/* Every byte of [p, p+len) within 2 GiB minus margin of near. */
static void assert_within(const void *p, size_t len, const void *near, size_t margin)
{
	int64_t lo = (int64_t)((intptr_t)p - (intptr_t)near);
	int64_t hi = lo + (int64_t)len - 1;
	int64_t reach = REACH - (int64_t)margin;

	ck_assert_msg(lo >= -reach && hi <= reach, "%p+%zu is not within reach of %p", p, len,
		      near);
}

static struct ep_pool *near_pool(enum ep_backend b, size_t pack_size, int *rc_out)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = b, .pack_size = pack_size,
				 .near = helper_addr() };
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(&cfg, &p);

	if (rc_out)
		*rc_out = rc;
	else
		ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	return p;
}

#if defined(__x86_64__)
/*
 * sub rsp, 8; mov edi, arg; call rel32 near_helper; add rsp, 8; ret
 * (the sub keeps the stack 16-byte aligned at the call).  Written to rw,
 * the displacement computed against exec: where the code will run.
 */
static size_t emit_call_helper(unsigned char *rw, const void *exec, int arg)
{
	unsigned char *p = rw;
	int64_t disp;
	int32_t rel;

	*p++ = 0x48, *p++ = 0x83, *p++ = 0xec, *p++ = 0x08;
	*p++ = 0xbf;
	memcpy(p, &arg, 4), p += 4;
	*p++ = 0xe8;
	disp = (int64_t)((intptr_t)helper_addr() - ((intptr_t)exec + (p - rw) + 4));
	ck_assert_msg(disp >= INT32_MIN && disp <= INT32_MAX, "helper out of rel32 reach");
	rel = (int32_t)disp;
	memcpy(p, &rel, 4), p += 4;
	*p++ = 0x48, *p++ = 0x83, *p++ = 0xc4, *p++ = 0x08;
	*p++ = 0xc3;
	return (size_t)(p - rw);
}

static int call_int(void *exec)
{
	return tu_as_fn(exec)();
}

/* JIT a call to near_helper(arg) in an allocation of size bytes and run it. */
static void *jit_call(struct ep_pool *p, size_t size, int arg, const void *near, size_t margin)
{
	struct ep_image img;
	int rc = ep_alloc(p, size, &img);

	ck_assert_msg(rc == 0, "ep_alloc(%zu): %s", size, ep_strerror(rc));
	assert_within(img.exec, img.size, near, margin);
	emit_call_helper(img.rw, img.exec, arg);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(call_int(img.exec), 3 * arg + 1);
	return img.exec;
}
#endif

START_TEST(test_call_rel32_memfd)
{
#if !defined(__x86_64__)
	fprintf(stderr, "SKIP: the call rel32 test is x86-64 code\n");
	return;
#else
	size_t pack = 64 * 1024;
	struct ep_pool *p = near_pool(EP_BACKEND_MEMFD, pack, NULL);
	void *execs[200];

	/* enough programs for many packs, and a large allocation or two */
	for (int i = 0; i < 200; i++)
		execs[i] = jit_call(p, i % 50 == 49 ? 3 * pack : 4000, i, helper_addr(), pack);
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_ge(st.packs, 10);
	ck_assert_uint_eq(st.large_allocs, 4);
	for (int i = 0; i < 200; i++)
		ck_assert_int_eq(call_int(execs[i]), 3 * i + 1);
	for (int i = 0; i < 200; i++)
		ck_assert_int_eq(ep_free(p, execs[i]), 0);
	ep_pool_destroy(p);
#endif
}
END_TEST

START_TEST(test_call_rel32_hugetlb)
{
#if !defined(__x86_64__)
	fprintf(stderr, "SKIP: the call rel32 test is x86-64 code\n");
	return;
#else
	int rc;
	struct ep_pool *p = near_pool(EP_BACKEND_HUGETLB, 0, &rc);

	if (rc == -ENOSPC || rc == -ENOMEM || rc == -ENOENT || rc == -EACCES || rc == -EPERM) {
		fprintf(stderr, "SKIP: hugetlb near placement: no huge pages here (%s)\n",
			ep_strerror(rc));
		return;
	}
	ck_assert_msg(rc == 0, "ep_pool_create(hugetlb, near): %s", ep_strerror(rc));
	void *a = jit_call(p, 100, 7, helper_addr(), (size_t)2 << 20);
	void *b = jit_call(p, 100, 8, helper_addr(), (size_t)2 << 20);

	ck_assert_uint_eq((uintptr_t)a >> 21, (uintptr_t)b >> 21); /* one huge page */
	ep_pool_destroy(p);
#endif
}
END_TEST

START_TEST(test_auto_near)
{
	/* AUTO never falls back to a backend that would place code far */
	struct ep_pool *p = near_pool(EP_BACKEND_AUTO, 0, NULL);
	struct ep_image img;

	ck_assert_str_ne(ep_pool_backend(p), "kmod");
	ck_assert_int_eq(ep_alloc(p, 64, &img), 0);
	assert_within(img.exec, img.size, helper_addr(), (size_t)2 << 20);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_kmod_refuses_near)
{
	int rc;
	struct ep_pool *p = near_pool(EP_BACKEND_KMOD, 0, &rc);
	struct ep_config cfg = { .sz = sizeof(cfg), .near = helper_addr() };
	char why[256];

	ck_assert_ptr_null(p);
	ck_assert_int_eq(rc, -EOPNOTSUPP);
	ck_assert_int_eq(ep_backend_probe(EP_BACKEND_KMOD, &cfg, why, sizeof(why)), -EOPNOTSUPP);
	ck_assert_msg(strstr(why, "near") != NULL, "reason: %s", why);
}
END_TEST

/* What of [r, r+len) is still free, reserved in pieces of 2 MiB, or of a
 * page where something else was mapped there meanwhile (the C library's
 * allocator may take the hole the test left): the window is full then. */
struct piece {
	void *a;
	size_t n;
};

static size_t take_rest(char *r, size_t len, struct piece *pc, size_t max)
{
	const int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE;
	size_t k = 0, step = (size_t)2 << 20, pg = tu_page();

	for (size_t off = 0; off < len && k < max; off += step) {
		size_t n = len - off < step ? len - off : step;
		void *a = mmap(r + off, n, PROT_NONE, fl, -1, 0);

		if (a == r + off) {
			pc[k++] = (struct piece){ a, n };
			continue;
		}
		if (a != MAP_FAILED)
			munmap(a, n); /* placed elsewhere: a kernel without NOREPLACE */
		for (size_t o = 0; o < n && k < max; o += pg) {
			void *b = mmap(r + off + o, pg, PROT_NONE, fl, -1, 0);

			if (b == r + off + o)
				pc[k++] = (struct piece){ b, pg };
			else if (b != MAP_FAILED)
				munmap(b, pg);
		}
	}
	return k;
}

START_TEST(test_no_range_near)
{
	/* A window made full: a 5 GiB reservation with near in its middle. */
	size_t big = (size_t)5 << 30, npc = 8192, k;
	struct piece *pc = calloc(npc, sizeof(*pc)); /* before the hole is made */
	void *r = mmap(NULL, big, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	ck_assert_ptr_nonnull(pc);
	if (r == MAP_FAILED) {
		fprintf(stderr, "SKIP: no 5 GiB of address space to fill a window with\n");
		free(pc);
		return;
	}
	const void *mid = (const char *)r + big / 2;
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD, .near = mid };
	struct ep_pool *p = NULL;

	/* pool made while the window is free, then the window taken */
	ck_assert_int_eq(munmap(r, big), 0);
	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	k = take_rest(r, big, pc, npc);
	ck_assert_uint_lt(k, npc);
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(p, 64, &img), -EADDRNOTAVAIL);
	ck_assert_ptr_nonnull(strstr(ep_strerror(-EADDRNOTAVAIL), "near"));
	/* and a pool made then says so at once */
	struct ep_pool *q = NULL;

	ck_assert_int_eq(ep_pool_create(&cfg, &q), -EADDRNOTAVAIL);
	ck_assert_ptr_null(q);
	/* the window free again: placed, and near */
	for (size_t i = 0; i < k; i++)
		ck_assert_int_eq(munmap(pc[i].a, pc[i].n), 0);
	free(pc);
	ck_assert_int_eq(ep_alloc(p, 64, &img), 0);
	assert_within(img.exec, img.size, mid, (size_t)2 << 20);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_too_large_for_reach)
{
	struct ep_pool *p = near_pool(EP_BACKEND_MEMFD, 0, NULL);
	struct ep_image img;

	/* more than fits in +-2 GiB: refused before anything is mapped */
	ck_assert_int_eq(ep_alloc(p, (size_t)4 << 30, &img), -EADDRNOTAVAIL);
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_near_edges)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *p = NULL;
	struct ep_image img;

	/* no user address space within reach: refused at creation */
	cfg.near = (const void *)(uintptr_t)0xffff880000000000ull;
	ck_assert_int_eq(ep_pool_create(&cfg, &p), -EADDRNOTAVAIL);
	ck_assert_ptr_null(p);
	/* the bottom of the address space: the window is cut at its start */
	cfg.near = (const void *)(uintptr_t)(3u << 20);
	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	ck_assert_int_eq(ep_alloc(p, 100, &img), 0);
	assert_within(img.exec, img.size, cfg.near, (size_t)2 << 20);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ep_pool_destroy(p);
	/* a large allocation that fits the reach only just: 4 GiB minus two
	 * packs is the most; one page more is refused */
	cfg.near = helper_addr();
	cfg.pack_size = (size_t)1 << 30;
	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	ck_assert_int_eq(ep_alloc(p, ((size_t)2 << 30) + 4096, &img), -EADDRNOTAVAIL);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_older_config_ignores_near)
{
	/* a caller built before near: its sz ends before the field, and
	 * whatever lies there is not read */
	struct {
		struct ep_config c;
	} old;
	struct ep_pool *p = NULL;

	memset(&old, 0, sizeof(old));
	memset((char *)&old.c + offsetof(struct ep_config, near), 0xff, sizeof(void *));
	old.c.sz = offsetof(struct ep_config, near);
	old.c.backend = EP_BACKEND_MEMFD;
	ck_assert_int_eq(ep_pool_create(&old.c, &p), 0);
	int rc;
	void *f = tu_jit_ret(p, 6, 5, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 5);
	ep_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("near");
	TCase *tc = tcase_create("near");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_call_rel32_memfd);
	tcase_add_test(tc, test_call_rel32_hugetlb);
	tcase_add_test(tc, test_auto_near);
	tcase_add_test(tc, test_kmod_refuses_near);
	tcase_add_test(tc, test_no_range_near);
	tcase_add_test(tc, test_too_large_for_reach);
	tcase_add_test(tc, test_near_edges);
	tcase_add_test(tc, test_older_config_ignores_near);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
