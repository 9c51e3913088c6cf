/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fork-suite.h - what check_fork's files share: the sizes and backends the
 * loop tests cycle through, a pool on one, JIT and call checks for the
 * parent and for a child, a child's end, a churn of allocations; and each
 * family's function that adds its tests to the suite (check_fork.c).
 */
#ifndef EP_TESTS_FORK_SUITE_H
#define EP_TESTS_FORK_SUITE_H

#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <semaphore.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <time.h>

#include "forkutil.h"
#include "reliability.h"

/* Larger than any backend's default pack: its own mapping. */
#define LARGE_SIZE tu_large_size()

#define NSIZES 3
/* the sizes the loop tests cycle through: two in a pack, one large */
static inline size_t size_at(int i)
{
	return i % NSIZES == 0 ? 64 : i % NSIZES == 1 ? 200 : LARGE_SIZE;
}

/* Every test runs on the default backend (AUTO: hugetlb where huge pages
 * can be had) and on memfd explicitly: loop index = backend * NSIZES + size. */
static const enum ep_backend backends[] = { EP_BACKEND_AUTO, EP_BACKEND_MEMFD };
#define NBACKENDS (int)(sizeof(backends) / sizeof(backends[0]))

static inline struct ep_pool *new_pool_on(enum ep_backend b)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = b };
	struct ep_pool *pool = NULL;
	int rc = ep_pool_create(&cfg, &pool);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	return pool;
}

#define new_pool() new_pool_on(backends[_i / NSIZES])

static inline void *jit(struct ep_pool *pool, size_t size, uint32_t v)
{
	void *f = NULL;
	int rc = rel_jit(pool, size, v, &f);

	ck_assert_msg(rc == 0, "jit(%zu, %#x): %s", size, v, ep_strerror(rc));
	ck_assert_uint_eq((uint32_t)rel_call(f), v);
	return f;
}

static inline void *child_jit(struct ep_pool *pool, size_t size, uint32_t v)
{
	void *f = NULL;
	int rc = rel_jit(pool, size, v, &f);

	CHILD_CHECK(rc == 0, "jit(%zu, %#x): %s", size, v, ep_strerror(rc));
	CHILD_CHECK((uint32_t)rel_call(f) == v, "new function returned %#x, not %#x",
		    (uint32_t)rel_call(f), v);
	return f;
}

#define CHILD_EXPECT_CALL(f, v)                                                      \
	do {                                                                         \
		uint32_t got_ = (uint32_t)rel_call(f);                               \
		CHILD_CHECK(got_ == (uint32_t)(v), "%s returned %#x, expected %#x", #f, \
			    got_, (uint32_t)(v));                                    \
	} while (0)

#define CHILD_OK(expr)                                                        \
	do {                                                                  \
		int rc_ = (expr);                                             \
		CHILD_CHECK(rc_ == 0, "%s: %d (%s)", #expr, rc_, ep_strerror(rc_)); \
	} while (0)

static inline void expect_call(void *f, uint32_t v)
{
	ck_assert_uint_eq((uint32_t)rel_call(f), v);
}

static inline void expect_child_ok(pid_t pid)
{
	int st = rel_wait(pid);

	ck_assert_msg(st == 0, "child %ld ended with status %d%s", (long)pid, st,
		      fu_status_text(st));
}

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Every child of a test ends within this; one that hangs fails it. */
#define CHILD_SECS 30.0

/* Make a child talking over c's pipes: 0 in the child, 1 in the parent. */
static inline int fork_talk(struct fu_child *c, enum fu_kind k)
{
	pid_t pid = fu_fork(c, k);

	ck_assert_msg(pid >= 0, "%s: %s", fu_kind_names[k], strerror(errno));
	return pid > 0;
}

/* The child's end: it must have exited with status 0. */
static inline void finish_child_ok(struct fu_child *c)
{
	pid_t pid = c->pid;
	int st = fu_finish(c, CHILD_SECS);

	ck_assert_msg(st == 0, "child %ld ended with status %d%s", (long)pid, st,
		      fu_status_text(st));
}

/* Allocate, check and free a batch of functions of mixed sizes, in the
 * calling process; enough of them to need a new pack. */
static inline void churn(struct ep_pool *pool, uint32_t tag, bool in_child)
{
	enum { N = 48 };
	void *f[N];

	for (int i = 0; i < N; i++) {
		size_t sz = (i % 3 == 0) ? 64 * 1024 : (size_t)(64 + i * 40);

		if (in_child)
			f[i] = child_jit(pool, sz, tag + (uint32_t)i);
		else
			f[i] = jit(pool, sz, tag + (uint32_t)i);
	}
	for (int i = 0; i < N; i++) {
		uint32_t got = (uint32_t)rel_call(f[i]);
		int rc = ep_free(pool, f[i]);

		if (in_child) {
			CHILD_CHECK(got == tag + (uint32_t)i, "churn %d: %#x", i, got);
			CHILD_CHECK(rc == 0, "churn free %d: %s", i, ep_strerror(rc));
		} else {
			ck_assert_uint_eq(got, tag + (uint32_t)i);
			ck_assert_int_eq(rc, 0);
		}
	}
}

void fork_add_child_tests(TCase *tc);
void fork_add_thread_tests(TCase *tc);
void fork_add_raw_tests(TCase *tc);
void fork_add_held_tests(TCase *tc);

#endif
