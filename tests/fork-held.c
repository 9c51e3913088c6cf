/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fork-held.c - check_fork's test of fork() while a tracer keeps the
 * new child stopped before any of its fork handlers run.
 */
#include "config.h"

#include "fork-suite.h"

/* ---- fork() while a tracer keeps the new child stopped -------------------- */

/*
 * The tracer: a child of the test's process that seizes it with
 * PTRACE_O_TRACEFORK, lets it go on at its fork event, and keeps the new
 * child stopped from its first instruction (before any fork handler runs
 * there) until told 'r'.  Says 's' once seized (or 'e': ptrace refused),
 * 'h' once the new child is held.  Every wait of its is bounded by the
 * test's, which kills it.
 */
static void tracer(struct fu_child *c, pid_t target)
{
	int st;
	unsigned long msg = 0;

	FU_CHILD_EXPECT(c, 'g');
	if (ptrace(PTRACE_SEIZE, target, 0L, (void *)(long)PTRACE_O_TRACEFORK)) {
		fprintf(stderr, "PTRACE_SEIZE: %s\n", strerror(errno));
		fu_send(c, 'e');
		_exit(0);
	}
	fu_send(c, 's');
	for (;;) {
		CHILD_CHECK(waitpid(target, &st, __WALL) == target, "waitpid(parent): %s",
			    strerror(errno));
		CHILD_CHECK(WIFSTOPPED(st), "the parent ended (status %#x)", st);
		if (st >> 8 == (SIGTRAP | (PTRACE_EVENT_FORK << 8)))
			break;
		/* (a signal for it, or a group stop: passed on) */
		int sig = st >> 16 ? 0 : WSTOPSIG(st);

		CHILD_CHECK(!ptrace(PTRACE_CONT, target, 0L, (void *)(long)sig), "PTRACE_CONT: %s",
			    strerror(errno));
	}
	CHILD_CHECK(!ptrace(PTRACE_GETEVENTMSG, target, 0L, &msg), "PTRACE_GETEVENTMSG: %s",
		    strerror(errno));
	pid_t held = (pid_t)msg;

	CHILD_CHECK(!ptrace(PTRACE_DETACH, target, 0L, 0L), "PTRACE_DETACH(parent): %s",
		    strerror(errno));
	/* its first stop: it has run nothing yet, and stays so */
	CHILD_CHECK(waitpid(held, &st, __WALL) == held && WIFSTOPPED(st),
		    "the new child's first stop (status %#x)", st);
	fu_send(c, 'h');
	FU_CHILD_EXPECT(c, 'r');
	CHILD_CHECK(!ptrace(PTRACE_DETACH, held, 0L, 0L), "PTRACE_DETACH(child): %s",
		    strerror(errno));
	_exit(0);
}

/*
 * fork() returns while a tracer keeps the new child stopped before its
 * fork handler, and the parent goes on changing its code (a patch, a free
 * and a new program in the same pack, a large one): the child, let go,
 * still runs the code it had at the fork.  _i: the backend.
 */
START_TEST(test_fork_child_held_by_tracer)
{
	struct ep_pool *pool = new_pool_on(backends[_i]);
	void *f = jit(pool, 64, 0x1111), *g = jit(pool, 64, 0x3333);
	void *big = jit(pool, LARGE_SIZE, 0x5555);
	struct fu_child tr;

	if (RUNNING_ON_VALGRIND) {
		printf("SKIP: test_fork_child_held_by_tracer: no ptrace under Valgrind\n");
		ep_pool_destroy(pool);
		return;
	}
	if (fork_talk(&tr, FU_FORK) == 0)
		tracer(&tr, getppid());
	/* (Yama: only a process's ancestors may trace it, unless it says so) */
	(void)prctl(PR_SET_PTRACER, (unsigned long)tr.pid, 0UL, 0UL, 0UL);
	ck_assert_int_eq(fu_send(&tr, 'g'), 0);

	char m = 0;

	ck_assert_msg(fu_recv(&tr, &m, CHILD_SECS) == 0, "the tracer said nothing");
	if (m == 'e') {
		ck_assert_int_eq(fu_finish(&tr, CHILD_SECS), 0);
		printf("SKIP: test_fork_child_held_by_tracer: ptrace not permitted here\n");
		ep_pool_destroy(pool);
		return;
	}
	ck_assert_msg(m == 's', "got '%c' from the tracer, expected 's'", m);

	double t0 = now_s();
	pid_t pid = fork();

	if (pid == 0) {
		/* let go only after the parent's changes: the code of the fork */
		signal(SIGALRM, SIG_DFL);
		alarm(20);
		CHILD_EXPECT_CALL(f, 0x1111);
		CHILD_EXPECT_CALL(g, 0x3333);
		CHILD_EXPECT_CALL(big, 0x5555);
		void *h = child_jit(pool, 64, 0x7777);

		CHILD_EXPECT_CALL(f, 0x1111);
		CHILD_OK(ep_free(pool, h));
		CHILD_OK(ep_free(pool, f));
		_exit(0);
	}
	double took = now_s() - t0;

	ck_assert_msg(pid > 0, "fork: %s", strerror(errno));
	printf("fork() with its child held by a tracer returned in %.3f s\n", took);
	FU_EXPECT(&tr, 'h', CHILD_SECS);
	/* the child is stopped: the parent changes code in the packs it had */
	ck_assert_int_eq(rel_patch(pool, f, 0x2222), 0);
	expect_call(f, 0x2222);
	ck_assert_int_eq(ep_free(pool, g), 0);
	void *n = jit(pool, 64, 0x4444);

	ck_assert_int_eq(rel_patch(pool, big, 0x6666), 0);
	expect_call(big, 0x6666);
	ck_assert_int_eq(fu_send(&tr, 'r'), 0);
	int st = fu_finish(&tr, CHILD_SECS);

	ck_assert_msg(st == 0, "the tracer ended with status %d%s", st, fu_status_text(st));
	struct fu_child ch = { .pid = pid, .tx = -1, .rx = -1 };

	st = fu_finish(&ch, CHILD_SECS);
	ck_assert_msg(st == 0, "the held child ended with status %d%s", st, fu_status_text(st));
	expect_call(f, 0x2222);
	expect_call(n, 0x4444);
	ep_pool_destroy(pool);
}
END_TEST

/* (in the order the suite runs them) */
void fork_add_held_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_fork_child_held_by_tracer, 0, NBACKENDS);
}
