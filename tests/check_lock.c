/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_lock.c - the biased heap lock (libexecpack/lock.h) on its own:
 * two threads count under it, one the owner on the fast path, the other
 * revoking the bias every time, with membarrier(2) and with the mprotect()
 * fallback; no increment may be lost.  Then the bias is dropped after
 * ep__lock_foreign_max revocations, comes back to a thread that has the lock
 * to itself for EP__REBIAS_AFTER acquisitions, and not while two take turns.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "lock.h"
#include "testutil.h"

int ep__valgrind; /* (api.c's, set by ep_pool_create(); not linked here) */

static struct ep__lock g_lock;
static volatile unsigned long g_count; /* plain: only the lock protects it */
static int g_go;

struct worker {
	unsigned long n;
	int fast_seen; /* the owner held the lock without the word at least once */
};

static void *count_loop(void *arg)
{
	struct worker *w = arg;

	while (!__atomic_load_n(&g_go, __ATOMIC_ACQUIRE))
		;
	for (unsigned long i = 0; i < w->n; i++) {
		ep__lock(&g_lock);
		if (__atomic_load_n(&g_lock.owner_in, __ATOMIC_RELAXED) &&
		    __atomic_load_n(&g_lock.owner, __ATOMIC_RELAXED) == ep__self())
			w->fast_seen = 1;
		unsigned long c = g_count;

		/* widen the window in which a second holder would be seen */
		for (volatile int k = 0; k < 8; k++)
			;
		g_count = c + 1;
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
	__atomic_store_n(&g_go, 0, __ATOMIC_RELAXED);
}

/* _i 0: revocations use membarrier(2); 1: the mprotect() fallback. */
START_TEST(test_owner_and_revoker_exclude_each_other)
{
	setup();
	ep__lock_test_no_membarrier = _i;
	ep__lock_foreign_max = ~0u; /* revoke on every foreign acquisition */
	/* the owner: the first thread to take the lock (this one, here) */
	ep__lock(&g_lock);
	ep__unlock(&g_lock);
	if (ep__bias_ok)
		ck_assert_ptr_eq(g_lock.owner, ep__self());
	else
		printf("SKIP: bias part of test_owner_and_revoker_exclude_each_other: "
		       "membarrier(2) unusable here (or under Valgrind): plain lock only\n");

	/* this thread counts as the owner, a second thread as the revoker */
	/* (smaller under Valgrind, which runs one thread at a time) */
	const int quick = RUNNING_ON_VALGRIND || getenv("EP_TEST_QUICK");
	struct worker own = { quick ? 20000 : 400000, 0 }, other = { quick ? 500 : 5000, 0 };
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, count_loop, &other), 0);
	__atomic_store_n(&g_go, 1, __ATOMIC_RELEASE);
	count_loop(&own);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(g_count, own.n + other.n);
	if (ep__bias_ok) {
		ck_assert_int_eq(own.fast_seen, 1);
		ck_assert_int_eq(other.fast_seen, 0);
		ck_assert_uint_eq(g_lock.foreign, other.n); /* every one revoked */
		ck_assert_ptr_eq(g_lock.owner, ep__self()); /* and gave it back */
		ck_assert_int_eq(g_lock.revoked, 0);
	}
	ep__lock_foreign_max = 4;
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

START_TEST(test_bias_dropped_when_shared)
{
	setup();
	ep__lock(&g_lock);
	ep__unlock(&g_lock);
	if (!ep__bias_ok) {
		printf("SKIP: test_bias_dropped_when_shared: membarrier(2) unusable here "
		       "(or under Valgrind)\n");
		return;
	}
	for (unsigned i = 0; i < ep__lock_foreign_max; i++) {
		pthread_t t;

		ck_assert_ptr_eq(g_lock.owner, ep__self());
		ck_assert_int_eq(pthread_create(&t, NULL, take_once, NULL), 0);
		ck_assert_int_eq(pthread_join(t, NULL), 0);
	}
	ck_assert_uint_eq(g_count, ep__lock_foreign_max);
	/* shared: a plain futex lock from now on, for this thread too */
	ck_assert_ptr_null(g_lock.owner);
	ck_assert_int_eq(g_lock.revoked, 1);
	ep__lock(&g_lock);
	ck_assert_int_eq(g_lock.owner_in, 0);
	ck_assert_int_ne(__atomic_load_n(&g_lock.word, __ATOMIC_RELAXED), 0);
	ep__unlock(&g_lock);
	ck_assert_int_eq(__atomic_load_n(&g_lock.word, __ATOMIC_RELAXED), 0);
	ck_assert_ptr_null(g_lock.owner);
	/* ... until one thread has had it to itself for a while: biased to it
	 * again, so a burst of foreign calls does not cost the fast path for
	 * good; and the next foreign taker revokes as before */
	for (unsigned i = 0; i < EP__REBIAS_AFTER + 1; i++) {
		ep__lock(&g_lock);
		g_count++;
		ep__unlock(&g_lock);
	}
	ck_assert_ptr_eq(g_lock.owner, ep__self());
	ck_assert_int_eq(g_lock.revoked, 0);
	ep__lock(&g_lock);
	ck_assert_int_eq(g_lock.owner_in, 1); /* the fast path */
	ck_assert_int_eq(__atomic_load_n(&g_lock.word, __ATOMIC_RELAXED), 0);
	ep__unlock(&g_lock);
	pthread_t t;
	unsigned before = g_count;

	ck_assert_int_eq(pthread_create(&t, NULL, take_once, NULL), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(g_count, before + 1);
	ck_assert_ptr_eq(g_lock.owner, ep__self()); /* one revocation: still the owner */
}
END_TEST

/* A shared lock taken in turn by two threads is never biased again. */
static void *take_many(void *arg)
{
	for (unsigned i = 0; i < EP__REBIAS_AFTER / 2; i++)
		take_once(arg);
	return NULL;
}

START_TEST(test_no_rebias_while_shared)
{
	setup();
	ep__lock_foreign_max = 1;
	ep__lock(&g_lock);
	ep__unlock(&g_lock);
	if (!ep__bias_ok) {
		ep__lock_foreign_max = 4;
		printf("SKIP: test_no_rebias_while_shared: membarrier(2) unusable here "
		       "(or under Valgrind)\n");
		return;
	}
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, take_once, NULL), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_ptr_null(g_lock.owner); /* shared after one revocation */
	for (int round = 0; round < 6; round++) {
		/* alternate runs shorter than EP__REBIAS_AFTER */
		ck_assert_int_eq(pthread_create(&t, NULL, take_many, NULL), 0);
		ck_assert_int_eq(pthread_join(t, NULL), 0);
		take_many(NULL);
		ck_assert_ptr_null(g_lock.owner);
	}
	ep__lock_foreign_max = 4;
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lock");
	TCase *tc = tcase_create("bias");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_owner_and_revoker_exclude_each_other, 0, 2);
	tcase_add_test(tc, test_bias_dropped_when_shared);
	tcase_add_test(tc, test_no_rebias_while_shared);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
