/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_manycores.c - promises that hold however many threads share one
 * pool, and however the process forks.  Only the public interface is used.
 *
 *   limit   ep_alloc(3): an allocation counts towards the limit "until
 *           ep_free(3)": among 16 racing threads exactly limit/size succeed,
 *           and bytes one thread freed (its own program or another
 *           thread's) can be allocated by any other thread as soon as
 *           ep_free() has returned (programs above 256 bytes and a thread
 *           calling ep_pool_stats() included).
 *   stats   ep_pool_stats(3) reports a state the pool was in: with the
 *           number of live allocations bounded (at most one at a time, or
 *           a few tokens shared by 8 threads), live_allocs and used_bytes
 *           never exceed that bound, used_bytes never exceeds pack_bytes.
 *   fork    a child made by fork(), _Fork() or syscall(SYS_fork) (the last
 *           two run no atfork handler) frees and re-JITs a slot without
 *           changing the parent's code, and the other way round; children
 *           made by vfork()+exec, posix_spawn() and fork()+exec leave the
 *           parent's packs where they are (it copies none of them).
 *   fork-threads
 *           fork() while other threads are inside every call, and while a
 *           thread destroys pools with named code: each child must be able
 *           to allocate, name, finalize, call and free, and must not hang.
 *
 * Whether a thread calling ep_pool_stats() (or calls on other threads'
 * allocations) slows the other threads afterwards shows only in timings:
 * that is left to the benchmarks (make bench, many threads); nothing here
 * asserts a duration.  The time bounds below only cap how long a loop runs.
 *
 * Children that could hang are waited for with a timeout and killed, so
 * the suite ends either way.  Threads record the first failure and the
 * test asserts once they are idle or joined: an assertion unwinds the
 * test's frame, which a running thread may still use.
 *
 * The files: manycores-util.c and manycores.h, the helpers, the monitors
 * and the ring; manycores-limit.c, manycores-stats.c, manycores-fork.c
 * (fork and fork-threads) and manycores-heaps.c, a family of tests each.
 */
#include "config.h"

#include "manycores.h"

static Suite *manycores_suite(void)
{
	Suite *s = suite_create("manycores");
	TCase *tl = tcase_create("limit");

	tcase_set_timeout(tl, 60);
	mc_add_limit_tests(tl);
	suite_add_tcase(s, tl);

	TCase *th = tcase_create("heaps");

	tcase_set_timeout(th, 60);
	mc_add_heap_tests(th);
	suite_add_tcase(s, th);

	TCase *ts = tcase_create("stats");

	tcase_set_timeout(ts, 60);
	mc_add_stats_tests(ts);
	suite_add_tcase(s, ts);

	TCase *tf = tcase_create("fork");

	tcase_set_timeout(tf, 60);
	mc_add_fork_tests(tf);
	suite_add_tcase(s, tf);

	TCase *tt = tcase_create("fork-threads");

	tcase_set_timeout(tt, 60);
	mc_add_fork_thread_tests(tt);
	suite_add_tcase(s, tt);
	return s;
}

int main(void)
{
	printf("backend: %s\n", tu_need_pool());
	/* a child that failed early closes its pipes: a write to them must
	 * fail, not kill the test */
	signal(SIGPIPE, SIG_IGN);

	fflush(stdout); /* before Check forks: no duplicated output */
	SRunner *sr = srunner_create(manycores_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed_n = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed_n ? EXIT_FAILURE : EXIT_SUCCESS;
}
