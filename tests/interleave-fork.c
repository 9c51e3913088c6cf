/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * interleave-fork.c - check_interleave's scenarios 18 and 19: raw children
 * (made without fork()'s handlers) forked while the other threads stand
 * wherever the schedule left them.
 */
#include "config.h"

#include "interleave-sched.h"

/* ---- children made without fork()'s handlers ------------------------------ */

/*
 * A raw child (syscall(SYS_fork): no handler of the library's or libc's
 * runs) is forked inside a step, at whatever point the schedule left the
 * other threads: it has one thread, and the locks those threads held stay
 * held in it until its first call resets them.  Inside the child nothing
 * is scheduled (managed() is false there: a yield returns at once, a wait
 * for a lock spins), so it runs its calls straight through, under an
 * alarm of its own (no fork handler sets il_child_alarm()), and tells the
 * forking thread what failed over a pipe (forkutil.h); that thread reads
 * it holding the turn, so nothing of the parent moves meanwhile unless it
 * waits for another thread first.
 */
static const char *raw_child_skipped(void)
{
	if (RUNNING_ON_VALGRIND)
		return "a raw fork under Valgrind is not what it is natively";
	return fu_unavailable(FU_RAW);
}

/* In a raw child: the verdict to the parent, then out.  Status 0, or 3
 * with il_why (il_fail() in the child) or why on the pipe. */
static void raw_child_exit(struct fu_child *c, const char *why) __attribute__((noreturn));
static void raw_child_exit(struct fu_child *c, const char *why)
{
	if (!why && il_failed)
		why = il_why;
	if (why)
		fu_send_buf(c, why, strlen(why));
	_exit(why ? 3 : 0);
}

/* In the forking thread: the child's status, and what it said into why. */
static int raw_child_result(struct fu_child *c, char *why, size_t n)
{
	fu_recv_text(c, why, n); /* (its message first: all it says before it exits) */
	return fu_finish(c, 30);
}

static pid_t raw_child_begin(struct fu_child *c)
{
	pid_t pid = fu_fork(c, FU_RAW);

	if (pid == 0) {
		signal(SIGALRM, SIG_DFL); /* (not Check's handler: it kills the group) */
		alarm(10);
	}
	return pid;
}

/* 18. A raw child's first call is ep_pool_create() (one child) or
 * ep_pool_destroy() (a second, forked at the same step), while another
 * thread of the parent may be anywhere in its thread-exit walk (holding the
 * list of heaps, its heap's lock, or waiting for that lock, which a third
 * thread's free of its named program takes).  Both calls must return. */
static int g_s18_walking, g_s18_in_walk; /* the exiter's fn returned; forks inside its walk */
static char g_s18_why[2][256];

static void s18_exiter(int id)
{
	(void)id;
	unsigned char *x = il_jit(64, 1);

	if (x && ep_set_name(il_pool, x, "s18_program") == 0 && il_model_find(x) >= 0)
		strcpy(il_model[il_model_find(x)].name, "s18"); /* (a named free takes the lock) */
	il_pub[0] = x;
	il_jit(200, 1);
	g_s18_walking = 1; /* the rest of this thread is its exit walk */
}

static void s18_freer(int id)
{
	il_rc[id][0] = il_do_free(il_await(0));
}

static void s18_forker(int id)
{
	struct fu_child c[2];

	il_await(0); /* (the exiter has a heap: its walk has work to do) */
	/* half the seeds fork no sooner than the walk begins */
	while (il_seed % 4 >= 2 && !g_s18_walking)
		ep__il_blocked("s18: the walk");
	for (int k = 0; k < 2; k++) {
		pid_t pid = raw_child_begin(&c[k]);

		if (pid == 0) {
			if (k == 1) {
				fu_close(&c[0].tx); /* (the first child's pipes are not its) */
				fu_close(&c[0].rx);
				ep_pool_destroy(il_pool);
				raw_child_exit(&c[k], NULL);
			}
			struct ep_pool *p = NULL;
			int rc = ep_pool_create(NULL, &p);

			if (rc == 0)
				ep_pool_destroy(p);
			raw_child_exit(&c[k], rc ? "ep_pool_create() failed" : NULL);
		}
		if (pid < 0) {
			il_rc[id][k] = -errno;
			if (k == 1) {
				fu_close(&c[0].tx);
				il_rc[id][0] = raw_child_result(&c[0], g_s18_why[0], sizeof(g_s18_why[0]));
			}
			return;
		}
	}
	if (g_s18_walking && il_alive(0))
		g_s18_in_walk++;
	for (int k = 0; k < 2; k++)
		il_rc[id][k] = raw_child_result(&c[k], g_s18_why[k], sizeof(g_s18_why[k]));
}

static void s18(unsigned long seed)
{
	static const char *const call[] = { "ep_pool_create()", "ep_pool_destroy()" };
	void (*fns[])(int) = { s18_exiter, s18_freer, s18_forker };

	memset(il_pub, 0, sizeof(il_pub));
	g_s18_walking = 0;
	il_pool_begin(NULL);
	il_run(seed, fns, 3);
	for (int k = 0; k < 2; k++)
		if (il_rc[2][k])
			il_fail("a raw child's first call, %s: status %d%s%s%s", call[k], il_rc[2][k],
				fu_status_text(il_rc[2][k]), g_s18_why[k][0] ? ": " : "", g_s18_why[k]);
	if (il_rc[1][0])
		il_fail("the free of the exiting thread's program: %d", il_rc[1][0]);
	il_pool_end();
}

START_TEST(test_raw_child_first_call_vs_exit_walk)
{
	const char *why = raw_child_skipped();

	if (why) {
		printf("SKIP: s18: %s\n", why);
		return;
	}
	g_s18_in_walk = 0;
	if (!il_each_seed("s18", s18, 90, 4))
		return;
	printf("s18: forked inside the exit walk in %d schedules\n", g_s18_in_walk);
	/* (the seeds are fixed: a change that leaves the walk no point to
	 * fork at must say so, not pass without trying) */
	ck_assert_msg(g_s18_in_walk > 0 || il_schedules / 4 < 50 || getenv("EP_IL_SEED"),
		      "no schedule forked while the exiting thread was in its exit walk");
}
END_TEST

/* 19. A raw child's free chunks hold traps whatever the parent wrote
 * there after the fork.  The owner forks among frees of its programs by
 * other threads (one may be half done at the fork: FREEING in the child,
 * or queued for the owner's drain), then writes new code (0x22, unlike
 * anything before the fork) into whatever its heap has free, once the
 * frees are done too.  Only then does the child make its first calls:
 * ep_alloc(), whose chunks must hold the trap fill (never the parent's
 * later code), and every free chunk of every pack must hold traps. */
static int g_s19_mid_free; /* schedules that forked while a free was under way */
static char g_s19_why[256];

/* il_jit() with a byte of its own in the code. */
static unsigned char *jit_fill(size_t n, unsigned char v)
{
	struct ep_image img;
	int rc = ep_alloc(il_pool, n, &img);

	if (rc) {
		il_fail("ep_alloc(%zu): %d", n, rc);
		return NULL;
	}
	il_model_add(img.exec, img.size);
	memset(img.rw, v, n);
	if ((rc = ep_finalize(il_pool, img.exec)))
		il_fail("ep_finalize: %d", rc);
	return img.exec;
}

static void s19_child(struct fu_child *c)
{
	char m = 0;

	if (fu_recv(c, &m, -1) || m != 'w')
		raw_child_exit(c, "no word from the parent");
	for (int k = 0; k < 6; k++) {
		struct ep_image img;
		int rc = ep_alloc(il_pool, k & 1 ? 64 : 128, &img);

		if (rc) {
			il_fail("the raw child's ep_alloc(): %d", rc);
			break;
		}
		for (size_t off = 0; off < img.size; off += sizeof(il_trap)) {
			size_t len = img.size - off < sizeof(il_trap) ? img.size - off : sizeof(il_trap);

			if (memcmp((unsigned char *)img.exec + off, il_trap, len)) {
				il_fail("the raw child's allocation %d at %p+%zu holds %02x, not traps "
					"(the parent's later code is 0x22)",
					k, img.exec, off, ((unsigned char *)img.exec)[off]);
				break;
			}
		}
	}
	il_check_traps("the raw child, after its first calls");
	raw_child_exit(c, NULL);
}

static void s19_owner(int id)
{
	struct fu_child c;

	il_pub[0] = il_jit(64, 1);
	il_pub[1] = il_jit(128, 1);
	il_pub[2] = il_jit(64, 1);
	il_jit(64, 1);
	pid_t pid = raw_child_begin(&c);

	if (pid == 0)
		s19_child(&c);
	if (pid < 0) {
		il_rc[id][0] = -errno;
		return;
	}
	for (int i = 0; i < IL_MODEL; i++)
		if (il_model[i].live && il_model[i].freeing) {
			g_s19_mid_free++;
			break;
		}
	jit_fill(64, 0x22);
	while (!il_pub[3] || !__atomic_load_n(&il_rc[2][3], __ATOMIC_RELAXED))
		ep__il_blocked("s19: the frees");
	for (int k = 0; k < 4; k++)
		jit_fill(k & 1 ? 64 : 128, 0x22);
	fu_send(&c, 'w');
	il_rc[id][0] = raw_child_result(&c, g_s19_why, sizeof(g_s19_why));
}

static void s19_freer(int id)
{
	il_rc[id][0] = il_do_free(il_await(id == 1 ? 0 : 1));
	if (id == 1) {
		il_rc[id][1] = il_do_free(il_await(2));
		il_pub[3] = (unsigned char *)1; /* (a mark, not an allocation) */
	} else {
		il_jit(64, 1);
		__atomic_store_n(&il_rc[id][3], 1, __ATOMIC_RELAXED);
	}
}

static void s19(unsigned long seed)
{
	void (*fns[])(int) = { s19_owner, s19_freer, s19_freer };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(NULL);
	il_run(seed, fns, 3);
	if (il_rc[0][0])
		il_fail("the raw child: status %d%s%s%s", il_rc[0][0], fu_status_text(il_rc[0][0]),
			g_s19_why[0] ? ": " : "", g_s19_why);
	if (il_rc[1][0] || il_rc[1][1] || il_rc[2][0])
		il_fail("frees: %d %d %d", il_rc[1][0], il_rc[1][1], il_rc[2][0]);
	il_pool_end();
}

START_TEST(test_raw_child_free_chunks_vs_frees)
{
	const char *why = raw_child_skipped();

	if (why) {
		printf("SKIP: s19: %s\n", why);
		return;
	}
	g_s19_mid_free = 0;
	if (!il_each_seed("s19", s19, 110, 4))
		return;
	printf("s19: forked while a free was under way in %d schedules\n", g_s19_mid_free);
	ck_assert_msg(g_s19_mid_free > 0 || il_schedules / 4 < 50 || getenv("EP_IL_SEED"),
		      "no schedule forked while a free of the owner's program was under way");
}
END_TEST

/* (in the order main() runs them) */
void il_add_fork_tests(TCase *tc)
{
	tcase_add_test(tc, test_raw_child_first_call_vs_exit_walk);
	tcase_add_test(tc, test_raw_child_free_chunks_vs_frees);
}
