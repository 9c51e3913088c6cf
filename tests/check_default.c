/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_default.c - ep_default_pool(): one pool for the whole process,
 * made once however many threads race for it, not destroyed by
 * ep_pool_destroy(), and the same pool, usable, in a forked child.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "execpack.h"
#include "forkutil.h"
#include "testutil.h"

enum { NTHREADS = 8 };

static pthread_barrier_t start;

static void *racer(void *arg)
{
	struct ep_pool **out = arg;

	pthread_barrier_wait(&start);
	*out = ep_default_pool();
	return NULL;
}

/* Threads that ask at once all get one pool; the losers' pools are gone. */
START_TEST(test_one_pool_for_racing_threads)
{
	pthread_t t[NTHREADS];
	struct ep_pool *got[NTHREADS];

	ck_assert_int_eq(pthread_barrier_init(&start, NULL, NTHREADS), 0);
	for (int i = 0; i < NTHREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, racer, &got[i]), 0);
	for (int i = 0; i < NTHREADS; i++)
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
	pthread_barrier_destroy(&start);
	ck_assert_ptr_nonnull(got[0]);
	for (int i = 1; i < NTHREADS; i++)
		ck_assert_ptr_eq(got[i], got[0]);
	ck_assert_ptr_eq(ep_default_pool(), got[0]);

	int rc;
	void *f = tu_jit_ret(got[0], 64, 7, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 7);
	ck_assert_int_eq(ep_free(got[0], f), 0);
}
END_TEST

/* ep_pool_destroy() leaves it, and the code in it, alone. */
START_TEST(test_destroy_ignores_it)
{
	struct ep_pool *p = ep_default_pool();
	int rc;

	ck_assert_ptr_nonnull(p);
	void *f = tu_jit_ret(p, 64, 11, &rc);

	ck_assert_int_eq(rc, 0);
	ep_pool_destroy(p);
	ck_assert_ptr_eq(ep_default_pool(), p);
	ck_assert_int_eq(tu_as_fn(f)(), 11);
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 1);
	ck_assert_int_eq(ep_free(p, f), 0);
}
END_TEST

/* A forked child has the parent's pool, and JITs in its own copy of it:
 * the parent's code stays its own. */
START_TEST(test_same_pool_in_fork_child)
{
	struct ep_pool *p = ep_default_pool();
	int rc;

	ck_assert_ptr_nonnull(p);
	void *f = tu_jit_ret(p, 64, 21, &rc);

	ck_assert_int_eq(rc, 0);
	struct fu_child ch;
	pid_t pid = fu_fork(&ch, FU_FORK);

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int bad = ep_default_pool() != p || tu_as_fn(f)() != 21;
		void *g = bad ? NULL : tu_jit_ret(p, 64, 22, &rc);

		bad |= !g || rc || tu_as_fn(g)() != 22;
		bad |= !g || ep_free(p, g) || ep_free(p, f);
		if (bad)
			_exit(1);
		rel_child_exit_ok(ch.tx);
	}
	int st = fu_finish(&ch, 60);

	ck_assert_msg(st == 0, "the child's default pool: status %d%s", st, fu_status_text(st));
	ck_assert_int_eq(tu_as_fn(f)(), 21);
	ck_assert_int_eq(ep_free(p, f), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("default");
	TCase *tc = tcase_create("default");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_one_pool_for_racing_threads);
	tcase_add_test(tc, test_destroy_ignores_it);
	tcase_add_test(tc, test_same_pool_in_fork_child);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
