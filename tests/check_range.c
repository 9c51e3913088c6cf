/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_range.c - ep_config.code_range: every pack and large allocation of
 * a pool, of all its threads, inside one reservation; a full range is
 * -ENOMEM and never a far mapping; freed space stays reserved and is
 * reused; threads sharing a range of fewer packs than they are; with
 * near; after fork(); JIT code calling another allocation
 * with rel32; the errors; an older, shorter config.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "execpack.h"
#include "testutil.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define PACK ((size_t)64 << 10)

/* The lowest and highest byte of every allocation seen. */
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

/*
 * size bytes of code that returns imm from its start: the rest no-ops.
 * (Not a function that ends where its mapping does, as tu_jit_ret() writes
 * them: Valgrind's translator reads past such an end and dies when the
 * next page is not readable, as it is not in a range.)
 */
static void *jit_ret(struct ep_pool *pool, size_t size, uint32_t imm, int *rc_out)
{
	struct ep_image img;
	int rc = ep_alloc(pool, size, &img);

	if (rc == 0) {
		tu_fill_nops(img.rw, img.size);
		tu_emit_ret_imm(img.rw, imm);
		rc = ep_finalize(pool, img.exec);
	}
	*rc_out = rc;
	return rc == 0 ? img.exec : NULL;
}

static struct ep_pool *range_pool(enum ep_backend b, size_t pack, size_t range, int *rc_out)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = b, .pack_size = pack,
				 .code_range = range };
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(&cfg, &p);

	if (rc_out)
		*rc_out = rc;
	else
		ck_assert_msg(rc == 0, "ep_pool_create(code_range %zu): %s", range, ep_strerror(rc));
	return p;
}

/* Whether anything is mapped at [p, p+len) (the reservation included). */
static int mapped(void *p, size_t len)
{
	void *q = mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	if (q == p) {
		munmap(q, len);
		return 0;
	}
	if (q != MAP_FAILED) {
		munmap(q, len); /* a kernel that took the flag for a hint */
		return -1;
	}
	return errno == EEXIST;
}

/* Mappings the kernel places top-down, between the pool's: without the
 * range, the pool's next packs would land below them. */
static void *clutter(size_t len)
{
	void *q = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	ck_assert_ptr_ne(q, MAP_FAILED);
	return q;
}

START_TEST(test_all_inside)
{
	size_t range = (size_t)16 << 20;
	struct ep_pool *p = range_pool(EP_BACKEND_MEMFD, PACK, range, NULL);
	struct span s = { 0, 0 };
	void *execs[400], *cl[40];
	int rc;

	for (int i = 0; i < 400; i++) {
		size_t len = i % 40 == 39 ? 3 * PACK : 1000 + (size_t)i * 7;

		if (i % 10 == 0)
			cl[i / 10] = clutter((size_t)1 << 20);
		execs[i] = jit_ret(p, len, (uint32_t)i, &rc);
		ck_assert_msg(rc == 0, "ep_alloc %d: %s", i, ep_strerror(rc));
		span_add(&s, execs[i], len);
	}
	ck_assert_msg(s.hi - s.lo <= range, "allocations span %zu bytes, range %zu",
		      (size_t)(s.hi - s.lo), range);
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_ge(st.packs, 8);
	ck_assert_uint_eq(st.large_allocs, 10);
	for (int i = 0; i < 400; i++)
		ck_assert_int_eq(tu_as_fn(execs[i])(), i);
	/* freed: the space stays reserved (nothing else may land there) */
	for (int i = 0; i < 400; i++)
		ck_assert_int_eq(ep_free(p, execs[i]), 0);
	ck_assert_int_ne(mapped(execs[39], 3 * PACK), 0); /* (-1: cannot tell) */
	for (int i = 0; i < 40; i++)
		munmap(cl[i], (size_t)1 << 20);
	ep_pool_destroy(p);
	/* and given back with the pool */
	ck_assert_int_ne(mapped((void *)s.lo, s.hi - s.lo), 1);
}
END_TEST

START_TEST(test_full_range)
{
	size_t range = 4 * PACK;
	struct ep_pool *p = range_pool(EP_BACKEND_MEMFD, PACK, range, NULL);
	struct ep_image img, big;
	struct span s = { 0, 0 };
	void *first = NULL;
	int n = 0, rc;

	/* more than the range holds: refused, nothing mapped */
	ck_assert_int_eq(ep_alloc(p, range + PACK, &img), -ENOMEM);
	/* a large allocation of two packs, then packs until the range is full */
	ck_assert_int_eq(ep_alloc(p, 2 * PACK, &big), 0);
	span_add(&s, big.exec, big.size);
	while ((rc = ep_alloc(p, PACK / 2, &img)) == 0) {
		span_add(&s, img.exec, img.size);
		if (!first)
			first = img.exec;
		ck_assert_int_lt(++n, 100);
	}
	ck_assert_int_eq(rc, -ENOMEM);
	ck_assert_int_eq(n, 4); /* two packs of two each */
	ck_assert_uint_le(s.hi - s.lo, range);
	ck_assert_int_eq(ep_alloc(p, 3 * PACK, &img), -ENOMEM);
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 5);
	/* the large one freed: its space is reused, by a pack or a large one */
	void *was = big.exec;

	ck_assert_int_eq(ep_free(p, big.exec), 0);
	ck_assert_int_eq(ep_alloc(p, 2 * PACK, &big), 0);
	ck_assert_ptr_eq(big.exec, was);
	ck_assert_int_eq(ep_free(p, big.exec), 0);
	for (int i = 0; i < 4; i++) { /* two packs where it was */
		ck_assert_int_eq(ep_alloc(p, PACK / 2, &img), 0);
		ck_assert_uint_ge((uintptr_t)img.exec, s.lo);
		ck_assert_uint_le((uintptr_t)img.exec + img.size, s.hi);
	}
	ck_assert_int_eq(ep_alloc(p, PACK / 2, &img), -ENOMEM);
	(void)first;
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_errors)
{
	int rc;
	struct ep_pool *p = range_pool(EP_BACKEND_MEMFD, PACK, PACK - 4096, &rc);
	char why[256];
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .code_range = 4096 };

	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_ptr_null(p);
	/* the default pack (2 MiB) does not fit 1 MiB */
	p = range_pool(EP_BACKEND_MEMFD, 0, (size_t)1 << 20, &rc);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_int_eq(ep_backend_probe(EP_BACKEND_MEMFD, &cfg, why, sizeof(why)), -EINVAL);
	ck_assert_msg(strstr(why, "code range") != NULL, "reason: %s", why);
	/* exactly one pack; a size that is no whole number of pages */
	p = range_pool(EP_BACKEND_MEMFD, PACK, PACK, NULL);
	ep_pool_destroy(p);
	p = range_pool(EP_BACKEND_MEMFD, PACK, PACK + 1, NULL);
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(p, PACK, &img), 0);
	ep_pool_destroy(p);
	/* far more address space than there is */
	p = range_pool(EP_BACKEND_MEMFD, PACK, SIZE_MAX / 2, &rc);
	ck_assert_int_eq(rc, -ENOMEM);
	ck_assert_ptr_null(p);
}
END_TEST

/* Threads allocating at once, each from a heap of its own. */
struct worker {
	struct ep_pool *p;
	void *execs[64];
	size_t lens[64];
	int rc;
};

static void *work(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < 64 && !w->rc; i++) {
		w->lens[i] = i % 16 == 15 ? 2 * PACK : 3000;
		w->execs[i] = jit_ret(w->p, w->lens[i], (uint32_t)i, &w->rc);
	}
	return NULL;
}

START_TEST(test_threads)
{
	size_t range = (size_t)32 << 20;
	struct ep_pool *p = range_pool(EP_BACKEND_MEMFD, PACK, range, NULL);
	struct worker w[4];
	pthread_t t[4];
	struct span s = { 0, 0 };

	memset(w, 0, sizeof(w));
	for (int i = 0; i < 4; i++) {
		w[i].p = p;
		ck_assert_int_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		ck_assert_msg(w[i].rc == 0, "thread %d: %s", i, ep_strerror(w[i].rc));
		for (int k = 0; k < 64; k++) {
			span_add(&s, w[i].execs[k], w[i].lens[k]);
			ck_assert_int_eq(tu_as_fn(w[i].execs[k])(), k);
		}
	}
	ck_assert_uint_le(s.hi - s.lo, range);
	ep_pool_destroy(p);
}
END_TEST

/*
 * A range holds fewer packs than there are threads: the threads share
 * them.  Each of 16 threads JITs 64-byte programs until the range is full
 * (each takes one first, then all go on together), calling each; together
 * they get nearly every byte of it, though only two heaps can have a pack.
 */
#define SHARERS 16
#define SMALL 64
#define SHARE_RANGE ((size_t)4 << 20) /* two default packs */

struct sharer {
	struct ep_pool *p;
	pthread_barrier_t *started;
	uint32_t id;
	void **execs;
	size_t n, cap;
	int rc, bad;
};

static void *share(void *arg)
{
	struct sharer *w = arg;
	void *x;

	x = jit_ret(w->p, SMALL, w->id << 20, &w->rc);
	pthread_barrier_wait(w->started);
	while (x) {
		/* each program runs as soon as it is made */
		if (tu_as_fn(x)() != (int)(w->id << 20 | (uint32_t)w->n))
			w->bad++;
		w->execs[w->n++] = x;
		if (w->n == w->cap)
			break;
		x = jit_ret(w->p, SMALL, w->id << 20 | (uint32_t)w->n, &w->rc);
	}
	return NULL;
}

/* 16 threads until -ENOMEM; the bytes they got in all. */
static size_t share_range(struct ep_pool *p, struct sharer *w)
{
	pthread_barrier_t started;
	pthread_t t[SHARERS];
	size_t total = 0;

	ck_assert_int_eq(pthread_barrier_init(&started, NULL, SHARERS), 0);
	for (uint32_t i = 0; i < SHARERS; i++) {
		w[i].p = p;
		w[i].started = &started;
		w[i].id = i + 1;
		w[i].n = 0;
		w[i].rc = 0;
		ck_assert_int_eq(pthread_create(&t[i], NULL, share, &w[i]), 0);
	}
	for (int i = 0; i < SHARERS; i++) {
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		ck_assert_msg(w[i].rc == -ENOMEM, "thread %d stopped on %s", i, ep_strerror(w[i].rc));
		ck_assert_msg(w[i].n > 0, "thread %d got nothing", i);
		ck_assert_int_eq(w[i].bad, 0);
		total += w[i].n * SMALL;
	}
	pthread_barrier_destroy(&started);
	return total;
}

START_TEST(test_threads_share)
{
	/* (quick, as under Valgrind: two packs of 64 KiB, the same shape) */
	bool quick = getenv("EP_TEST_QUICK") != NULL;
	size_t range = quick ? 2 * PACK : SHARE_RANGE;
	struct ep_pool *p = range_pool(EP_BACKEND_MEMFD, quick ? PACK : 0, range, NULL);
	struct sharer w[SHARERS];
	struct span s = { 0, 0 };

	memset(w, 0, sizeof(w));
	for (int i = 0; i < SHARERS; i++) {
		w[i].cap = range / SMALL + 1;
		w[i].execs = calloc(w[i].cap, sizeof(void *));
		ck_assert_ptr_nonnull(w[i].execs);
	}
	size_t total = share_range(p, w);

	ck_assert_msg(total >= range / 10 * 9, "%zu bytes of %zu handed out", total, range);
	/* all inside, all still there, and freed by a thread that made none
	 * of them (the heaps' threads have exited, too) */
	for (int i = 0; i < SHARERS; i++) {
		for (size_t k = 0; k < w[i].n; k++) {
			span_add(&s, w[i].execs[k], SMALL);
			ck_assert_int_eq(tu_as_fn(w[i].execs[k])(), (int)((uint32_t)(i + 1) << 20 | k));
			ck_assert_int_eq(ep_free(p, w[i].execs[k]), 0);
		}
	}
	ck_assert_uint_le(s.hi - s.lo, range);
	ck_assert_int_eq(ep_free(p, w[0].execs[0]), -EINVAL);
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	/* and the whole range again, with the heaps adopted */
	total = share_range(p, w);
	ck_assert_msg(total >= range / 10 * 9, "again: %zu bytes of %zu", total, range);
	for (int i = 0; i < SHARERS; i++)
		free(w[i].execs);
	ep_pool_destroy(p);
}
END_TEST

/* Two threads hold a 64-byte program each, one pack each: a third's
 * first ep_alloc() and ep_add() still find room. */
struct holder {
	struct ep_pool *p;
	pthread_barrier_t *made, *done;
	void *exec;
	int rc;
};

static void *hold(void *arg)
{
	struct holder *h = arg;

	h->exec = jit_ret(h->p, SMALL, 2, &h->rc);
	pthread_barrier_wait(h->made);
	pthread_barrier_wait(h->done);
	return NULL;
}

static void *third(void *arg)
{
	struct holder *h = arg;
	unsigned char code[SMALL];
	void *added = NULL;

	h->exec = jit_ret(h->p, SMALL, 3, &h->rc);
	if (h->rc)
		return NULL;
	tu_fill_nops(code, sizeof(code));
	tu_emit_ret_imm(code, 4);
	h->rc = ep_add(h->p, code, sizeof(code), &added);
	if (h->rc == 0 && (tu_as_fn(h->exec)() != 3 || tu_as_fn(added)() != 4))
		h->rc = -EIO;
	if (h->rc == 0)
		h->rc = ep_free(h->p, added);
	return NULL;
}

START_TEST(test_third_thread)
{
	/* (EXECPACK_HEAPS: each thread takes a pack of its own, not sharing
	 * the first's, so that the range fills) */
	setenv("EXECPACK_HEAPS", "8", 1);
	struct ep_pool *p = range_pool(EP_BACKEND_MEMFD, 0, SHARE_RANGE, NULL);

	unsetenv("EXECPACK_HEAPS");
	pthread_barrier_t made, done;
	struct holder second = { p, &made, &done, NULL, 0 }, last = { p, NULL, NULL, NULL, 0 };
	pthread_t t2, t3;
	int rc;
	void *first = jit_ret(p, SMALL, 1, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(pthread_barrier_init(&made, NULL, 2), 0);
	ck_assert_int_eq(pthread_barrier_init(&done, NULL, 2), 0);
	ck_assert_int_eq(pthread_create(&t2, NULL, hold, &second), 0);
	pthread_barrier_wait(&made);
	ck_assert_int_eq(second.rc, 0);
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.packs, 2); /* the range is full of packs */
	ck_assert_int_eq(pthread_create(&t3, NULL, third, &last), 0);
	ck_assert_int_eq(pthread_join(t3, NULL), 0);
	pthread_barrier_wait(&done);
	ck_assert_int_eq(pthread_join(t2, NULL), 0);
	ck_assert_msg(last.rc == 0, "third thread: %s", ep_strerror(last.rc));
	ck_assert_int_eq(tu_as_fn(first)(), 1);
	ck_assert_int_eq(tu_as_fn(second.exec)(), 2);
	ck_assert_int_eq(tu_as_fn(last.exec)(), 3);
	ck_assert_int_eq(ep_free(p, last.exec), 0);
	ck_assert_int_eq(ep_free(p, second.exec), 0);
	ck_assert_int_eq(ep_free(p, first), 0);
	pthread_barrier_destroy(&made);
	pthread_barrier_destroy(&done);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_fork)
{
	size_t range = (size_t)8 << 20;
	struct ep_pool *p = range_pool(EP_BACKEND_MEMFD, PACK, range, NULL);
	struct span s = { 0, 0 };
	void *execs[40];
	int rc;

	for (int i = 0; i < 40; i++) {
		execs[i] = jit_ret(p, i % 10 == 9 ? PACK + 1 : 5000, (uint32_t)i, &rc);
		ck_assert_int_eq(rc, 0);
		span_add(&s, execs[i], i % 10 == 9 ? PACK + 1 : 5000);
	}
	fflush(NULL);
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* the child's copies at the same addresses, its new code in the
		 * same range, the parent's reservation still around it */
		struct span c = s;
		void *mine[60];
		int bad = 0;

		for (int i = 0; i < 40; i += 2)
			if ((rc = ep_free(p, execs[i])))
				bad = fprintf(stderr, "child: ep_free: %s\n", ep_strerror(rc));
		for (int i = 0; i < 60 && !bad; i++) {
			size_t len = i % 10 == 9 ? 2 * PACK : 7000;

			mine[i] = jit_ret(p, len, (uint32_t)i + 100, &rc);
			if (rc || tu_as_fn(mine[i])() != i + 100)
				bad = fprintf(stderr, "child: alloc %d: %s\n", i, ep_strerror(rc));
			else
				span_add(&c, mine[i], len);
		}
		for (int i = 1; i < 40; i += 2)
			if (tu_as_fn(execs[i])() != i)
				bad = fprintf(stderr, "child: %d returns %d\n", i, tu_as_fn(execs[i])());
		if (c.hi - c.lo > range)
			bad = fprintf(stderr, "child: span %zu\n", (size_t)(c.hi - c.lo));
		for (int i = 0; i < 60 && !bad; i++)
			ep_free(p, mine[i]);
		for (int i = 1; i < 40; i += 2)
			ep_free(p, execs[i]);
		ep_pool_destroy(p);
		_exit(bad ? 1 : 0);
	}
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed: %d", st);
	for (int i = 0; i < 40; i++) {
		ck_assert_int_eq(tu_as_fn(execs[i])(), i);
		ck_assert_int_eq(ep_free(p, execs[i]), 0);
	}
	ep_pool_destroy(p);
}
END_TEST

#if defined(__x86_64__)
/* mov eax, imm; ret at callee; sub rsp,8; call rel32 callee; add rsp,8; ret */
static void *jit_caller(struct ep_pool *p, const void *callee)
{
	struct ep_image img;
	unsigned char *q;

	ck_assert_int_eq(ep_alloc(p, 32, &img), 0);
	q = img.rw;
	*q++ = 0x48, *q++ = 0x83, *q++ = 0xec, *q++ = 0x08;
	*q++ = 0xe8;
	int64_t disp = (intptr_t)callee - ((intptr_t)img.exec + (q - (unsigned char *)img.rw) + 4);

	ck_assert(disp >= INT32_MIN && disp <= INT32_MAX);
	int32_t rel = (int32_t)disp;

	memcpy(q, &rel, 4), q += 4;
	*q++ = 0x48, *q++ = 0x83, *q++ = 0xc4, *q++ = 0x08;
	*q++ = 0xc3;
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	return img.exec;
}
#endif

int range_helper(int x);
__attribute__((noinline, used)) int range_helper(int x)
{
	return x + 1;
}

START_TEST(test_near)
{
	int (*f)(int) = range_helper;
	const void *near;

	memcpy(&near, &f, sizeof(near));
	size_t range = (size_t)64 << 20;
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD, .pack_size = PACK,
				 .near = near, .code_range = range };
	struct ep_pool *p = NULL;
	struct span s = { 0, 0 };
	void *execs[64];
	int rc;

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	for (int i = 0; i < 64; i++) {
		size_t len = i % 8 == 7 ? 2 * PACK : 100;

		execs[i] = jit_ret(p, len, (uint32_t)i, &rc);
		ck_assert_int_eq(rc, 0);
		span_add(&s, execs[i], len);
	}
	ck_assert_uint_le(s.hi - s.lo, range);
	int64_t lo = (int64_t)(s.lo - (uintptr_t)near), hi = (int64_t)(s.hi - (uintptr_t)near);

	ck_assert_msg(lo >= -((int64_t)1 << 31) && hi <= (int64_t)1 << 31,
		      "range [%#lx, %#lx) not within reach of %p", (unsigned long)s.lo,
		      (unsigned long)s.hi, near);
#if defined(__x86_64__)
	/* JIT code calling JIT code of another pack, and of a large allocation */
	void *c1 = jit_caller(p, execs[0]), *c2 = jit_caller(p, execs[63]);

	ck_assert_int_eq(tu_as_fn(c1)(), 0);
	ck_assert_int_eq(tu_as_fn(c2)(), 63);
#endif
	/* a range bigger than near's whole reach */
	struct ep_pool *q = NULL;

	cfg.code_range = (size_t)5 << 30;
	ck_assert_int_eq(ep_pool_create(&cfg, &q), -EADDRNOTAVAIL);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_hugetlb)
{
	int rc;
	size_t huge = tu_huge_page_size(); /* the backend's (32 MiB with 16k pages) */

	if (!huge) {
		fprintf(stderr, "SKIP: hugetlb code range: no Hugepagesize in /proc/meminfo\n");
		return;
	}
	struct ep_pool *p = range_pool(EP_BACKEND_HUGETLB, 0, 4 * huge, &rc);

	if (rc == -ENOSPC || rc == -ENOMEM || rc == -ENOENT || rc == -EACCES || rc == -EPERM ||
	    rc == -ENODEV) {
		fprintf(stderr, "SKIP: hugetlb code range: no huge pages here (%s)\n",
			ep_strerror(rc));
		return;
	}
	ck_assert_msg(rc == 0, "ep_pool_create(hugetlb): %s", ep_strerror(rc));
	void *a = jit_ret(p, 100, 1, &rc);

	ck_assert_int_eq(rc, 0);
	void *b = jit_ret(p, huge + 1, 2, &rc);

	if (rc == -ENOSPC) {
		fprintf(stderr, "SKIP: hugetlb code range: only one huge page\n");
	} else {
		ck_assert_int_eq(rc, 0);
		uintptr_t lo = (uintptr_t)(a < b ? a : b), hi = (uintptr_t)(a < b ? b : a);

		ck_assert_uint_lt(hi - lo, 4 * huge);
		ck_assert_int_eq(tu_as_fn(b)(), 2);
		/* 2 + 1 huge pages of 4 taken: two more do not fit */
		struct ep_image img;

		ck_assert_int_eq(ep_alloc(p, 2 * huge, &img), -ENOMEM);
	}
	ck_assert_int_eq(tu_as_fn(a)(), 1);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_kmod)
{
	int rc;
	struct ep_pool *p = range_pool(EP_BACKEND_KMOD, PACK, 4 * PACK, &rc);

	if (rc) {
		fprintf(stderr, "SKIP: kmod code range: no module here (%s)\n", ep_strerror(rc));
		return;
	}
	struct span s = { 0, 0 };
	struct ep_image img;
	int n = 0;

	while ((rc = ep_alloc(p, PACK / 2, &img)) == 0) {
		span_add(&s, img.exec, img.size);
		ck_assert_int_lt(++n, 100);
	}
	ck_assert_int_eq(rc, -ENOMEM);
	ck_assert_int_eq(n, 8);
	ck_assert_uint_le(s.hi - s.lo, 4 * PACK);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_older_config)
{
	/* a caller's config that ends before code_range: no range, whatever
	 * bytes follow it */
	struct {
		struct ep_config c;
		char tail[64];
	} old;
	struct ep_pool *p = NULL;
	int rc;

	memset(&old, 0, sizeof(old));
	memset((char *)&old.c + offsetof(struct ep_config, code_range), 0xff, sizeof(size_t));
	old.c.sz = offsetof(struct ep_config, code_range);
	old.c.backend = EP_BACKEND_MEMFD;
	old.c.pack_size = PACK;
	ck_assert_int_eq(ep_pool_create(&old.c, &p), 0);
	void *f = jit_ret(p, 3 * PACK, 5, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 5);
	ep_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("range");
	TCase *tc = tcase_create("range");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_all_inside);
	tcase_add_test(tc, test_full_range);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_threads);
	tcase_add_test(tc, test_threads_share);
	tcase_add_test(tc, test_third_thread);
	tcase_add_test(tc, test_fork);
	tcase_add_test(tc, test_near);
	tcase_add_test(tc, test_hugetlb);
	tcase_add_test(tc, test_kmod);
	tcase_add_test(tc, test_older_config);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
