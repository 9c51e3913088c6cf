/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_fork.c - fork() safety.
 *
 * After fork(), neither process may change code the other runs, each keeps
 * running the code it had, and each can go on allocating, writing (ep_write
 * on live code included) and freeing, in packs and large allocations alike.
 * Processes synchronise with pipes; all code is real `mov eax, imm32; ret`.
 * Children made without fork()'s handlers (syscall(SYS_fork)): their first
 * call returns whatever a thread of the parent held at the fork, and their
 * free chunks hold traps whatever the parent wrote there since.
 *
 * The files: fork-suite.h, what they share; fork-child.c, one parent and
 * its children; fork-threads.c, a multi-threaded parent; fork-raw.c,
 * children made without fork()'s handlers; fork-held.c, a child held
 * stopped by a tracer; here, the suite and main().
 */
#include "config.h"

#include "fork-suite.h"

static Suite *fork_suite(void)
{
	Suite *s = suite_create("fork");
	TCase *tc = tcase_create("fork");

	tcase_set_timeout(tc, 60);
	fork_add_child_tests(tc);
	suite_add_tcase(s, tc);

	TCase *tt = tcase_create("threads");

	tcase_set_timeout(tt, 60);
	fork_add_thread_tests(tt);
	suite_add_tcase(s, tt);

	TCase *tr = tcase_create("raw");

	tcase_set_timeout(tr, 60);
	fork_add_raw_tests(tr);
	suite_add_tcase(s, tr);

	/* (a fork() that waits for a held child never returns: the timeout
	 * says so) */
	TCase *th = tcase_create("held");

	tcase_set_timeout(th, 20);
	fork_add_held_tests(th);
	suite_add_tcase(s, th);
	return s;
}

int main(void)
{
	printf("backend: %s\n", tu_need_pool());

	fflush(stdout); /* before Check forks: no duplicated output */
	SRunner *sr = srunner_create(fork_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
