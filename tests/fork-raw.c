/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fork-raw.c - check_fork's tests of children made without fork()'s
 * handlers (syscall(SYS_fork)): a first call during another thread's exit
 * walk, frees of what a vanished call held, free chunks that hold traps.
 */
#include "config.h"

#include "fork-suite.h"

/* ---- children made without fork()'s handlers ----------------------------- */

/* Under Valgrind a raw fork is not what it is natively (and the child's
 * mark page may not be wiped): nothing to learn there. */
static bool raw_fork_skipped(void)
{
	if (!RUNNING_ON_VALGRIND)
		return false;
	printf("SKIP: a raw fork under Valgrind\n");
	return true;
}

/*
 * A thread parked in its thread-exit walk: it holds the list of every
 * heap and waits for its own heap's lock, which another thread holds inside
 * the pool's fill function (refilling a named program it frees).
 */
static struct {
	struct ep_pool *pool;
	void *f;
	int armed; /* the next fill parks */
	int free_rc;
	sem_t named, in_fill, go, exit_now;
} g_pk;

static void sem_take(sem_t *s)
{
	while (sem_wait(s) && errno == EINTR)
		;
}

static void parking_fill(void *dst, size_t len, void *ctx)
{
	(void)ctx;
	TU_FILL(dst, len, NULL);
	if (__atomic_exchange_n(&g_pk.armed, 0, __ATOMIC_ACQ_REL)) {
		sem_post(&g_pk.in_fill);
		sem_take(&g_pk.go);
	}
}

static void *exiter_main(void *arg)
{
	void *f = NULL;

	(void)arg;
	if (rel_jit(g_pk.pool, 64, 0x71, &f) == 0 && ep_set_name(g_pk.pool, f, "parked") == 0)
		g_pk.f = f; /* (named: a free from another thread takes the lock) */
	sem_post(&g_pk.named);
	sem_take(&g_pk.exit_now);
	return NULL; /* its exit walk waits for its heap's lock */
}

static void *freer_main(void *arg)
{
	(void)arg;
	__atomic_store_n(&g_pk.armed, 1, __ATOMIC_RELEASE);
	g_pk.free_rc = ep_free(g_pk.pool, g_pk.f);
	return NULL;
}

/*
 * A child made by syscall(SYS_fork) while another thread of the parent is
 * parked in its thread-exit walk: its first call is ep_pool_create() (_i 0)
 * or ep_pool_destroy() (_i 1), and it must return.
 */
START_TEST(test_raw_child_first_call_during_exit_walk)
{
	static const char *const call[] = { "ep_pool_create()", "ep_pool_destroy()" };
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .fill = parking_fill };
	pthread_t te, tf;
	const char *san = getenv("EP_SANITIZER");

	if (raw_fork_skipped())
		return;
	if (san && !strcmp(san, "tsan")) {
		/* (it sees no fork: the child's reset of a mutex that a
		 * vanished thread held reads as a race with that thread) */
		printf("SKIP: a raw fork beside a thread in a mutex, under ThreadSanitizer\n");
		return;
	}
	memset(&g_pk, 0, sizeof(g_pk));
	sem_init(&g_pk.named, 0, 0);
	sem_init(&g_pk.in_fill, 0, 0);
	sem_init(&g_pk.go, 0, 0);
	sem_init(&g_pk.exit_now, 0, 0);
	int rc = ep_pool_create(&cfg, &g_pk.pool);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	ck_assert_int_eq(pthread_create(&te, NULL, exiter_main, NULL), 0);
	sem_take(&g_pk.named);
	ck_assert_msg(g_pk.f != NULL, "the exiting thread's program");
	ck_assert_int_eq(pthread_create(&tf, NULL, freer_main, NULL), 0);
	sem_take(&g_pk.in_fill); /* the freer holds the exiter's heap lock */
	sem_post(&g_pk.exit_now);
	/* the exiter cannot finish its exit while that lock is held: still
	 * not joinable after a while, it is parked in its walk */
	struct timespec nap = { 0, 300 * 1000 * 1000 };

	nanosleep(&nap, NULL);
	ck_assert_msg(pthread_tryjoin_np(te, NULL) != 0, "the exiting thread was not held");

	pid_t pid = fu_raw_fork();

	if (pid == 0) {
		signal(SIGALRM, SIG_DFL);
		alarm(10);
		if (_i == 0) {
			struct ep_pool *p2 = NULL;
			int crc = ep_pool_create(NULL, &p2);

			if (crc == 0)
				ep_pool_destroy(p2);
			_exit(crc ? 2 : 0);
		}
		ep_pool_destroy(g_pk.pool);
		_exit(0);
	}
	ck_assert_int_ge(pid, 0);
	int st = rel_wait(pid);

	sem_post(&g_pk.go);
	pthread_join(tf, NULL);
	pthread_join(te, NULL);
	ck_assert_int_eq(g_pk.free_rc, 0);
	ck_assert_msg(st == 0, "a raw child's first call, %s: status %d%s", call[_i], st,
		      st == 128 + SIGALRM ? " (hung: killed by its alarm)" : "");
	ep_pool_destroy(g_pk.pool);
}
END_TEST

/* The owner's own free of a finalized program, parked in the refill (the
 * program BUSY under its heap's lock). */
static void *busy_freer_main(void *arg)
{
	void *f = NULL;

	(void)arg;
	if (rel_jit(g_pk.pool, 64, 0x72, &f) == 0)
		g_pk.f = f;
	sem_post(&g_pk.named);
	if (!f)
		return NULL;
	__atomic_store_n(&g_pk.armed, 1, __ATOMIC_RELEASE);
	g_pk.free_rc = ep_free(g_pk.pool, f);
	return NULL;
}

/*
 * A raw child made while another thread's call held a program BUSY (its own
 * free, parked in the fill): the child frees that program from its thread
 * (without the heap's lock), which must not wait for the vanished call.
 */
START_TEST(test_raw_child_frees_what_a_vanished_call_held)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .fill = parking_fill };
	pthread_t t;

	if (raw_fork_skipped())
		return;
	memset(&g_pk, 0, sizeof(g_pk));
	sem_init(&g_pk.named, 0, 0);
	sem_init(&g_pk.in_fill, 0, 0);
	sem_init(&g_pk.go, 0, 0);
	int rc = ep_pool_create(&cfg, &g_pk.pool);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	ck_assert_int_eq(pthread_create(&t, NULL, busy_freer_main, NULL), 0);
	sem_take(&g_pk.named);
	ck_assert_msg(g_pk.f != NULL, "the other thread's program");
	sem_take(&g_pk.in_fill);

	pid_t pid = fu_raw_fork();

	if (pid == 0) {
		signal(SIGALRM, SIG_DFL);
		alarm(10);
		_exit(ep_free(g_pk.pool, g_pk.f) == 0 ? 0 : 2);
	}
	ck_assert_int_ge(pid, 0);
	int st = rel_wait(pid);

	sem_post(&g_pk.go);
	pthread_join(t, NULL);
	ck_assert_int_eq(g_pk.free_rc, 0);
	ck_assert_msg(st == 0, "the raw child's free of a program a vanished call held: status %d%s",
		      st, st == 128 + SIGALRM ? " (hung: killed by its alarm)" : "");
	ep_pool_destroy(g_pk.pool);
}
END_TEST

/*
 * A raw child's free chunks hold traps: the parent writes code after the
 * fork into a chunk that is free in the child's view, then the child's
 * ep_alloc() gets that chunk (first fit), which must hold the trap fill,
 * not the parent's code.  memfd (_i 0), hugetlb (1), kmod (2).
 */
START_TEST(test_raw_child_free_chunks_trap)
{
	static const enum ep_backend raw_backends[] = { EP_BACKEND_MEMFD, EP_BACKEND_HUGETLB,
							EP_BACKEND_KMOD };
	static const char *const names[] = { "memfd", "hugetlb", "kmod" };
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = raw_backends[_i] };
	struct ep_pool *pool = NULL;

	if (raw_fork_skipped())
		return;
	int rc = ep_pool_create(&cfg, &pool);

	if (rc) {
		printf("SKIP: %s: %s\n", names[_i], ep_strerror(rc));
		return;
	}
	void *a = jit(pool, 64, 0x11);
	struct fu_child c;

	if (!fork_talk(&c, FU_RAW)) {
		void *b = NULL;
		struct ep_image img;
		static unsigned char trap[64] __attribute__((aligned(64)));

		signal(SIGALRM, SIG_DFL);
		alarm(10);
		CHILD_CHECK(fu_recv_buf(&c, &b, sizeof(b)) == 0, "no word");
		int arc = ep_alloc(pool, 64, &img);

		/* hugetlb: the child's copy of the pack, or a new pack, needs a
		 * free huge page, which tests run beside this one may hold */
		if ((arc == -ENOSPC || arc == -ENOMEM) && raw_backends[_i] == EP_BACKEND_HUGETLB)
			_exit(77);
		CHILD_OK(arc);
		/* (memfd's copy is always made; elsewhere a pack whose copy
		 * failed hands out nothing, and this one is in a new pack) */
		CHILD_CHECK(img.exec == b || _i != 0,
			    "the child's allocation %p is not the chunk %p the parent wrote",
			    img.exec, b);
		TU_FILL(trap, sizeof(trap), NULL);
		CHILD_CHECK(memcmp(img.exec, trap, sizeof(trap)) == 0,
			    "%s: the child's new allocation %p holds %02x %02x %02x %02x "
			    "(the parent's code), not traps",
			    names[_i], img.exec, ((unsigned char *)img.exec)[0],
			    ((unsigned char *)img.exec)[1], ((unsigned char *)img.exec)[2],
			    ((unsigned char *)img.exec)[3]);
		CHILD_EXPECT_CALL(a, 0x11);
		_exit(0);
	}
	void *b = jit(pool, 64, 0x5a5a); /* after the fork, into a chunk free there */

	ck_assert_int_eq(fu_send_buf(&c, &b, sizeof(b)), 0);
	pid_t pid = c.pid;
	int st = fu_finish(&c, CHILD_SECS);

	if (st == 77)
		printf("SKIP: test_raw_child_free_chunks_trap: %s: no free huge page for the "
		       "child's copy\n", names[_i]);
	else
		ck_assert_msg(st == 0, "child %ld ended with status %d%s", (long)pid, st,
			      fu_status_text(st));
	expect_call(a, 0x11);
	expect_call(b, 0x5a5a);
	ck_assert_int_eq(ep_free(pool, a), 0);
	ck_assert_int_eq(ep_free(pool, b), 0);
	ep_pool_destroy(pool);
}
END_TEST

/* (in the order the suite runs them) */
void fork_add_raw_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_raw_child_first_call_during_exit_walk, 0, 2);
	tcase_add_test(tc, test_raw_child_frees_what_a_vanished_call_held);
	tcase_add_loop_test(tc, test_raw_child_free_chunks_trap, 0, 3);
}
