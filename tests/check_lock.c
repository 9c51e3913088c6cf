/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_lock.c - the heap lock (libexecpack/threads/lock.h) on its own: threads
 * count under it, each increment a read, a delay and a write, so that two
 * holders at once would lose increments, and each holder marks itself in,
 * checks that nobody else is, and out: the owner on the bias's fast path,
 * the others revoking it (membarrier(2), and the mprotect() fallback of
 * this test's build of lock.c).  The bias goes after four revocations and
 * never comes back, to the owner or to anyone; a contended lock puts its
 * waiters to sleep (futex) and wakes them at unlock, and so does an owner
 * that a revoker waits for.  The bias is x86's only: elsewhere no barrier
 * stands in for a refused membarrier(2), and no lock is ever biased.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lock.h"
#include "pack-seq.h"
#include "testutil.h"

static struct ep__lock g_lock;
static volatile unsigned long g_count; /* plain: only the lock protects it */
static int g_inside;                    /* holders right now */
static int g_overlap;                   /* times a holder saw another */
static int g_go;

extern int ep__lock_test_no_membarrier; /* (lock.c built with EP_LOCK_TEST) */

struct worker {
	unsigned long n;
	int sleep_in; /* hold the lock across a short sleep now and then */
	int fast_seen; /* held it on the bias's fast path at least once */
};

static void *count_loop(void *arg)
{
	struct worker *w = arg;

	while (!__atomic_load_n(&g_go, __ATOMIC_ACQUIRE))
		;
	for (unsigned long i = 0; i < w->n; i++) {
		ep__lock(&g_lock);
		if (ep__load_relaxed(&g_lock.owner_in) &&
		    ep__load_relaxed(&g_lock.owner) == ep__self())
			w->fast_seen = 1;
		if (__atomic_add_fetch(&g_inside, 1, __ATOMIC_SEQ_CST) != 1)
			__atomic_add_fetch(&g_overlap, 1, __ATOMIC_RELAXED);
		unsigned long c = g_count;

		/* widen the window in which a second holder would be seen;
		 * a sleep makes the others wait in the futex */
		if (w->sleep_in && i % 256 == 0)
			usleep(50);
		for (volatile int k = 0; k < 8; k++)
			;
		g_count = c + 1;
		__atomic_sub_fetch(&g_inside, 1, __ATOMIC_SEQ_CST);
		ep__unlock(&g_lock);
	}
	return NULL;
}

static void setup(void)
{
	ep__valgrind = RUNNING_ON_VALGRIND ? 1 : 0;
	ep__lock_setup();
	ep__lock_init(&g_lock);
	g_count = 0;
	g_inside = g_overlap = 0;
	__atomic_store_n(&g_go, 0, __ATOMIC_RELAXED);
}

/* _i threads besides this one (1 to 3: membarrier; 4: one thread, with
 * the mprotect() fallback barrier); every other one sleeps inside now and
 * then.  This thread takes the lock first: the owner. */
START_TEST(test_holders_exclude_each_other)
{
	setup();
	const int quick = RUNNING_ON_VALGRIND || getenv("EP_TEST_QUICK");
	unsigned long n = quick ? 5000 : 200000;
	struct worker w[4];
	pthread_t t[4];
	int nt = _i < 4 ? _i : 1;

	ep__lock_test_no_membarrier = _i == 4;
	ep__lock(&g_lock);
	ep__unlock(&g_lock);
	if (ep__bias_ok)
		ck_assert_ptr_eq(g_lock.owner, ep__self());
	else
		printf("SKIP: bias part of test_holders_exclude_each_other: membarrier(2) "
		       "unusable here (or under Valgrind): plain lock only\n");
	for (int i = 0; i <= nt; i++)
		w[i] = (struct worker){ i ? n / 10 : n, i % 2, 0 };
	for (int i = 1; i <= nt; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, count_loop, &w[i]), 0);
	__atomic_store_n(&g_go, 1, __ATOMIC_RELEASE);
	count_loop(&w[0]);
	for (int i = 1; i <= nt; i++)
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
	unsigned long total = 0;

	for (int i = 0; i <= nt; i++)
		total += w[i].n;
	ck_assert_uint_eq(g_count, total);
	ck_assert_int_eq(g_overlap, 0);
	ck_assert_int_eq(ep__load_relaxed(&g_lock.word), 0);
	if (ep__bias_ok) {
		for (int i = 1; i <= nt; i++)
			ck_assert_int_eq(w[i].fast_seen, 0); /* only the owner */
		/* four revocations at most, then a plain lock for good */
		ck_assert_ptr_null(g_lock.owner);
		ck_assert_int_eq(g_lock.revoked, 1);
	}
	ep__lock_test_no_membarrier = 0;
}
END_TEST

static void *take_once(void *arg)
{
	(void)arg;
	ep__lock(&g_lock);
	g_count++;
	ep__unlock(&g_lock);
	return NULL;
}

static void *take_many(void *arg)
{
	for (unsigned i = 0; i < 10000; i++)
		take_once(arg);
	return NULL;
}

/* A waiter that went to sleep is woken by the unlock (the word goes to 2
 * while it sleeps, and back to 0 after). */
START_TEST(test_sleeper_is_woken)
{
	setup();
	pthread_t t;

	ep__lock(&g_lock);
	ck_assert_int_eq(pthread_create(&t, NULL, take_once, NULL), 0);
	for (int i = 0; i < 2000 && ep__load_relaxed(&g_lock.word) != 2; i++)
		usleep(1000);
	ck_assert_int_eq(ep__load_relaxed(&g_lock.word), 2);
	ck_assert_uint_eq(g_count, 0);
	ep__unlock(&g_lock);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(g_count, 1);
	ck_assert_int_eq(ep__load_relaxed(&g_lock.word), 0);
}
END_TEST

/* The bias: the owner takes it without the word while nobody else does;
 * a revocation is given back at the revoker's unlock; after the fourth the
 * lock is plain for good, and one thread having it to itself for a long
 * while (as a thread adopting an exited thread's heap does) never gets a
 * bias again. */
START_TEST(test_bias_once)
{
	setup();
	if (!ep__bias_ok) {
		printf("SKIP: test_bias_once: membarrier(2) unusable here (or under Valgrind)\n");
		return;
	}
	ep__lock(&g_lock);
	ep__unlock(&g_lock);
	ck_assert_ptr_eq(g_lock.owner, ep__self());
	ep__lock(&g_lock);
	ck_assert_int_eq(g_lock.owner_in, 1);
	ck_assert_int_eq(ep__load_relaxed(&g_lock.word), 0);
	ep__unlock(&g_lock);
	for (unsigned i = 0; i < 4; i++) {
		pthread_t t;

		ck_assert_ptr_eq(g_lock.owner, ep__self());
		ck_assert_int_eq(g_lock.revoked, 0);
		ck_assert_int_eq(pthread_create(&t, NULL, take_once, NULL), 0);
		ck_assert_int_eq(pthread_join(t, NULL), 0);
	}
	ck_assert_uint_eq(g_count, 4);
	ck_assert_ptr_null(g_lock.owner);
	ck_assert_int_eq(g_lock.revoked, 1);
	/* another thread, then this one, alone for long: still plain */
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, take_many, NULL), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	take_many(NULL);
	ck_assert_ptr_null(g_lock.owner);
	ep__lock(&g_lock);
	ck_assert_int_eq(g_lock.owner_in, 0);
	ck_assert_int_ne(ep__load_relaxed(&g_lock.word), 0);
	ep__unlock(&g_lock);
}
END_TEST

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double g_revoker_wall, g_revoker_cpu;

static void *revoke_timed(void *arg)
{
	double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), t0 = clock_s(CLOCK_MONOTONIC);

	take_once(arg);
	g_revoker_wall = clock_s(CLOCK_MONOTONIC) - t0;
	g_revoker_cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
	return NULL;
}

/* A revoker waits for an owner inside for 0.5 s (as across a caller's
 * fill): it sleeps, and the owner's unlock wakes it.  _i: 1 with the
 * mprotect() fallback barrier. */
START_TEST(test_revoker_sleeps)
{
	setup();
	if (!ep__bias_ok) {
		printf("SKIP: test_revoker_sleeps: no bias here (not x86, membarrier(2) unusable, "
		       "or Valgrind)\n");
		return;
	}
	ep__lock_test_no_membarrier = _i;
	ep__lock(&g_lock);
	ep__unlock(&g_lock);
	ck_assert_ptr_eq(g_lock.owner, ep__self());
	ep__lock(&g_lock);
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, revoke_timed, NULL), 0);
	usleep(500 * 1000);
	ck_assert_uint_eq(g_count, 0); /* (still waiting) */
	ep__unlock(&g_lock);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ep__lock_test_no_membarrier = 0;
	ck_assert_uint_eq(g_count, 1);
	printf("revoker: waited %.3f s, burned %.4f s of CPU\n", g_revoker_wall, g_revoker_cpu);
	ck_assert(g_revoker_wall > 0.3);
	ck_assert_msg(g_revoker_cpu <= 0.05 * g_revoker_wall, "the revoker burned %.3f s in %.3f s",
		      g_revoker_cpu, g_revoker_wall);
}
END_TEST

static double g_seq_wall, g_seq_cpu;
static long g_seq_sleeps;

static void *seq_wait(void *arg)
{
	struct ep__pack *p = arg;
	double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), t0 = clock_s(CLOCK_MONOTONIC);
	struct rusage r0, r1;

	getrusage(RUSAGE_THREAD, &r0);
	ep__pack_read_wait(p, 1);
	getrusage(RUSAGE_THREAD, &r1);
	g_seq_wall = clock_s(CLOCK_MONOTONIC) - t0;
	g_seq_cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
	g_seq_sleeps = r1.ru_nvcsw - r0.ru_nvcsw;
	return NULL;
}

/* A lock-free reader of a pack's maps (a remote free) waits 0.5 s for an
 * owner preempted between its two seq stores: it sleeps, and the owner's
 * ep__pack_write_end() wakes it: a sleep or two, not a timed poll (which
 * slept about 5,000 times in 0.5 s). */
START_TEST(test_pack_seq_reader_sleeps)
{
	static struct ep__pack p;
	pthread_t t;

	setup();
	if (!ep__barrier_all()) {
		printf("SKIP: test_pack_seq_reader_sleeps: no barrier on every thread here "
		       "(membarrier(2) refused): the reader's sleep is timed\n");
		return;
	}
	memset(&p, 0, sizeof(p));
	ep__pack_write_begin(&p); /* (seq 1: the owner inside) */
	ck_assert_int_eq(pthread_create(&t, NULL, seq_wait, &p), 0);
	usleep(500 * 1000);
	ck_assert_uint_eq(ep__load_relaxed(&p.seq_sleepers), 1); /* asleep */
	ep__pack_write_end(&p);
	double t0 = clock_s(CLOCK_MONOTONIC);

	ck_assert_int_eq(pthread_join(t, NULL), 0);
	double late = clock_s(CLOCK_MONOTONIC) - t0;

	printf("pack seq reader: waited %.3f s, slept %ld times, burned %.4f s of CPU, "
	       "woken %.4f s after\n", g_seq_wall, g_seq_sleeps, g_seq_cpu, late);
	ck_assert_uint_eq(ep__load_relaxed(&p.seq_sleepers), 0);
	ck_assert(g_seq_wall > 0.3);
	ck_assert_msg(g_seq_sleeps <= 10, "the reader slept %ld times", g_seq_sleeps);
	ck_assert_msg(g_seq_cpu <= 0.05 * g_seq_wall, "the reader burned %.3f s in %.3f s",
		      g_seq_cpu, g_seq_wall);
}
END_TEST

/* Off x86 no lock is biased, and with membarrier(2) refused there is no
 * barrier on every CPU to be had (arm64's TLB invalidation by broadcast
 * interrupts nobody); on x86 the mprotect() fallback is one. */
START_TEST(test_bias_is_x86s)
{
	setup();
	ep__lock(&g_lock);
	ep__unlock(&g_lock);
	ep__lock_test_no_membarrier = 1;
	bool fallback = ep__barrier_all();

	ep__lock_test_no_membarrier = 0;
#if defined(__x86_64__) || defined(__i386__)
	if (ep__bias_ok) {
		ck_assert_ptr_eq(g_lock.owner, ep__self());
		ck_assert(fallback);
	} else {
		ck_assert_ptr_null(g_lock.owner);
	}
#else
	ck_assert_int_eq(ep__bias_ok, 0);
	ck_assert_ptr_null(g_lock.owner);
	ck_assert(!fallback);
#endif
	(void)fallback;
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lock");
	TCase *tc = tcase_create("lock");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_holders_exclude_each_other, 1, 5);
	tcase_add_test(tc, test_sleeper_is_woken);
	tcase_add_test(tc, test_bias_once);
	tcase_add_loop_test(tc, test_revoker_sleeps, 0, 2);
	tcase_add_test(tc, test_bias_is_x86s);
	tcase_add_test(tc, test_pack_seq_reader_sleeps);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
