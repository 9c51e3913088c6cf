/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_lock.c - the heap lock (libexecpack/lock.h) on its own: threads
 * count under it, each increment a read, a delay and a write, so that two
 * holders at once would lose increments; a contended lock puts its waiters
 * to sleep (futex) and wakes them at unlock; and a lock is never held by a
 * second thread while a first one holds it (each holder marks itself in,
 * checks that nobody else is, and out).
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lock.h"
#include "testutil.h"

int ep__valgrind; /* (api.c's, set by ep_pool_create(); not linked here) */

static struct ep__lock g_lock;
static volatile unsigned long g_count; /* plain: only the lock protects it */
static int g_inside;                    /* holders right now */
static int g_overlap;                   /* times a holder saw another */
static int g_go;

struct worker {
	unsigned long n;
	int sleep_in; /* hold the lock across a short sleep now and then */
};

static void *count_loop(void *arg)
{
	struct worker *w = arg;

	while (!__atomic_load_n(&g_go, __ATOMIC_ACQUIRE))
		;
	for (unsigned long i = 0; i < w->n; i++) {
		ep__lock(&g_lock);
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
	ep__lock_init(&g_lock);
	g_count = 0;
	g_inside = g_overlap = 0;
	__atomic_store_n(&g_go, 0, __ATOMIC_RELAXED);
}

/* _i threads besides this one; every other one sleeps inside now and then */
START_TEST(test_holders_exclude_each_other)
{
	setup();
	const int quick = RUNNING_ON_VALGRIND || getenv("EP_TEST_QUICK");
	unsigned long n = quick ? 5000 : 200000;
	struct worker w[4];
	pthread_t t[4];
	int nt = _i;

	for (int i = 0; i <= nt; i++)
		w[i] = (struct worker){ n, i % 2 };
	for (int i = 1; i <= nt; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, count_loop, &w[i]), 0);
	__atomic_store_n(&g_go, 1, __ATOMIC_RELEASE);
	count_loop(&w[0]);
	for (int i = 1; i <= nt; i++)
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
	ck_assert_uint_eq(g_count, n * (unsigned long)(nt + 1));
	ck_assert_int_eq(g_overlap, 0);
	ck_assert_int_eq(__atomic_load_n(&g_lock.word, __ATOMIC_RELAXED), 0);
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

/* A waiter that went to sleep is woken by the unlock (the word goes to 2
 * while it sleeps, and back to 0 after). */
START_TEST(test_sleeper_is_woken)
{
	setup();
	pthread_t t;

	ep__lock(&g_lock);
	ck_assert_int_eq(pthread_create(&t, NULL, take_once, NULL), 0);
	for (int i = 0; i < 2000 && __atomic_load_n(&g_lock.word, __ATOMIC_RELAXED) != 2; i++)
		usleep(1000);
	ck_assert_int_eq(__atomic_load_n(&g_lock.word, __ATOMIC_RELAXED), 2);
	ck_assert_uint_eq(g_count, 0);
	ep__unlock(&g_lock);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(g_count, 1);
	ck_assert_int_eq(__atomic_load_n(&g_lock.word, __ATOMIC_RELAXED), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lock");
	TCase *tc = tcase_create("lock");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_holders_exclude_each_other, 1, 4);
	tcase_add_test(tc, test_sleeper_is_woken);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
