/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_interleave.c - racing calls driven through many schedules.
 *
 * The library's own sources are built here with -DEP_INTERLEAVE: every
 * preemption point of the core (interleave.h: the route, an allocation's
 * state, remote lists and counts, heap adoption, the fork gate, the limit,
 * the stats counts, every lock) calls into the scheduler (interleave-sched.c).  Two or
 * three threads run a scenario's call sequences, one thread at a time; at
 * every point the scheduler picks which goes on, by a schedule drawn from a
 * seed: PCT (each thread a random priority, the running one demoted at one
 * to three random steps; Burckhardt et al., ASPLOS 2010) for even seeds, a
 * random walk (switch with probability 1/2 to 1/6) for odd ones.  The seed list
 * is fixed, so a failure names the seed that replays it
 * (EP_IL_SEED=<n> runs that one alone, EP_IL_ONLY=s<k> one scenario;
 * EP_IL_SCHEDULES=<n> sets how many
 * run; EP_IL_NO_STATS=1 leaves out the stats check at every step, to look
 * past a failure of it at the other checks).
 *
 * After every step it checks what must hold at any moment: no lock has two
 * holders, every free chunk of every pack holds the trap fill, the stats
 * keep their relations (used_bytes <= pack_bytes <= packs * pack size,
 * large_allocs <= live_allocs), the limit's charge never exceeds it, and no
 * two live allocations share a chunk.  After each schedule: the records are
 * those of live allocations only, nothing freed is named, the stats and
 * the limit's charge are exactly what the live allocations make.
 *
 * A step may fork (scenarios 4, 18 and 19): the child runs unscheduled
 * (a yield there returns at once) and reports over a pipe (forkutil.h);
 * scenarios 18 and 19 fork raw children, made without fork()'s handlers,
 * while the other threads stand wherever the schedule left them.
 *
 * The files: interleave-sched.c/.h, the scheduler, the model and the checks;
 * interleave-alloc.c, scenarios 0-9 (the lock, writes, names, a fork, a
 * double free, the stats, the limit, a thread's exit); interleave-resize.c,
 * 10, 11, 16, 17 (shrink, finalize, add, trim, a stale free);
 * interleave-range.c, 12, 20 and 26 (code ranges, threads that share);
 * interleave-patch.c, 14 and
 * 15 (patch windows); interleave-fork.c, 18 and 19 (raw children);
 * interleave-lookup.c, 21-25 (ep_lookup(), a group's finalize);
 * interleave-first.c, 26 and 27 (a first data heap, the default pool).
 */
#include "config.h"

#include "interleave-sched.h"

int main(void)
{
	pthread_atfork(NULL, NULL, il_child_alarm);
	il_no_stats = getenv("EP_IL_NO_STATS") != NULL;
	const char *n = getenv("EP_IL_SCHEDULES");

	if (n)
		il_schedules = strtoul(n, NULL, 10);
	else if (RUNNING_ON_VALGRIND || getenv("EP_TEST_QUICK"))
		il_schedules = 40;
	if (RUNNING_ON_VALGRIND || getenv("EP_TEST_QUICK"))
		il_trap_every = 4;
	else if (getenv("EP_SANITIZER"))
		il_schedules = 300; /* (about ten times slower under TSan) */
	Suite *s = suite_create("interleave");
	TCase *tc = tcase_create("schedules");

	tcase_set_timeout(tc, 600);
	il_add_alloc_tests(tc);
	il_add_resize_tests(tc);
	il_add_range_tests(tc);
	il_add_patch_tests(tc);
	il_add_fork_tests(tc);
	il_add_lookup_tests(tc);
	il_add_first_tests(tc);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
