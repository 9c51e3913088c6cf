/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * interleave-alloc.c - check_interleave's scenarios 0-9: the heap lock,
 * writes, names, a fork, a double free, the stats, the limit and a thread's
 * exit, each racing frees from another thread.
 */
#include "config.h"

#include "interleave-sched.h"

/* 1. The heap lock: a thread that frees another's staged programs takes
 * the owner's lock while the owner allocates; no lock ever has two holders
 * (ep__il_enter). */
static void s1_owner(int id)
{
	(void)id;
	for (int i = 0; i < 3; i++) {
		il_pub[i] = il_jit(64 + 64 * (size_t)i, 0);
		il_jit(100, 1);
	}
}

static void s1_other(int id)
{
	for (int i = 0; i < 3; i++)
		il_rc[id][i] = il_do_free(il_await(i));
}

static void s1(unsigned long seed)
{
	void (*fns[])(int) = { s1_owner, s1_other };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(NULL);
	il_run(seed, fns, 2);
	for (int i = 0; i < 3; i++)
		if (il_rc[1][i])
			il_fail("free of a staged program from another thread: %d", il_rc[1][i]);
	il_pool_end();
}

START_TEST(test_lock_one_holder)
{
	il_each_seed("s1", s1, 100, 1);
}
END_TEST

/* 1, replayed: the interleaving that let two threads into a biased lock.
 * The heap's thread is preempted as it takes its own lock again (at the
 * lock's first point: it has read who owns the bias); another thread takes
 * that lock enough times to drop the bias (EP__REBIAS_AFTER was 4096) and
 * have it for itself, and is preempted inside; then the first goes on.  A
 * lock of any kind must not let it in. */
#define S0_CALLS 8300
static int g_s0_phase, g_s0_calls[2], g_s0_biased;

static int s0_schedule(const char *where)
{
	/* the last point before the lock is held: after the read of the
	 * bias's owner where the lock has one, else before its one CAS */
	if (!strcmp(where, "lock owner read"))
		g_s0_biased = 1;
	if (g_s0_phase == 0 && il_me == 0 && g_s0_calls[0] >= 1 &&
	    !strcmp(where, g_s0_biased ? "lock owner read" : "lock")) {
		g_s0_phase = 1;
		return 1;
	}
	if (g_s0_phase == 1 && il_me == 1 && g_s0_calls[1] >= S0_CALLS &&
	    !strcmp(where, "code write")) {
		g_s0_phase = 2;
		return 0;
	}
	return il_me; /* (a blocked one: the default pick) */
}

static void s0_owner(int id)
{
	il_pub[0] = il_jit(64, 1);
	g_s0_calls[id] = 1;
	il_rc[id][0] = ep_write(il_pool, il_pub[0] + 4, "\x11", 1);
}

static void s0_other(int id)
{
	unsigned char *x = il_await(0);

	for (int i = 0; i <= S0_CALLS && !il_failed; i++, g_s0_calls[id]++)
		if ((il_rc[id][0] = ep_write(il_pool, x + 8, "\x11", 1)))
			break;
}

static void s0(unsigned long seed)
{
	void (*fns[])(int) = { s0_owner, s0_other };

	memset(il_pub, 0, sizeof(il_pub));
	g_s0_phase = g_s0_biased = 0;
	g_s0_calls[0] = g_s0_calls[1] = 0;
	il_directed = s0_schedule;
	il_steps_unchecked = 1; /* (the locks' holders are checked at each entry) */
	il_pool_begin(NULL);
	il_run(seed, fns, 2);
	il_directed = NULL;
	il_steps_unchecked = 0;
	if (g_s0_phase != 2)
		il_fail("the replay did not reach its end (phase %d)", g_s0_phase);
	if (il_rc[0][0] || il_rc[1][0])
		il_fail("writes: %d %d", il_rc[0][0], il_rc[1][0]);
	il_pool_end();
}

START_TEST(test_lock_replay)
{
	il_each_seed("s0", s0, 100, ~0ul); /* a fixed schedule: once is enough */
}
END_TEST

/* 2. ep_write() racing an ep_free() from another thread: whatever the
 * order, no written byte is left in a freed chunk. */
static void s2_owner(int id)
{
	(void)id;
	il_pub[0] = il_jit(200, 1);
	il_jit(64, 1); /* (and drains what was freed meanwhile) */
}

static void s2_writer(int id)
{
	static const unsigned char code[16] = { 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22,
						0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22 };

	il_rc[id][0] = ep_write(il_pool, il_await(0) + 64, code, sizeof(code));
}

static void s2_freer(int id)
{
	il_rc[id][0] = il_do_free(il_await(0));
}

static void s2(unsigned long seed)
{
	void (*fns[])(int) = { s2_owner, s2_writer, s2_freer };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(NULL);
	il_run(seed, fns, 3);
	if (il_rc[2][0])
		il_fail("the free failed: %d", il_rc[2][0]);
	if (il_rc[1][0] && il_rc[1][0] != -EINVAL)
		il_fail("the write failed with %d", il_rc[1][0]);
	il_pool_end();
}

START_TEST(test_write_vs_free)
{
	il_each_seed("s2", s2, 55, 1);
}
END_TEST

/* 3. ep_set_name() racing an ep_free() from another thread: no record or
 * name is left of freed code, and later allocations never overlap. */
static void s3_owner(int id)
{
	(void)id;
	il_pub[0] = il_jit(128, 1);
	for (int i = 0; i < 3; i++)
		il_jit(64, 1);
}

static void s3_namer(int id)
{
	unsigned char *x = il_await(0);

	il_rc[id][0] = ep_set_name(il_pool, x, "s3_program");
	if (il_rc[id][0] == 0) {
		int i = il_model_find(x);

		if (i >= 0)
			strcpy(il_model[i].name, "s3");
		else if (il_nfreed < IL_MODEL)
			il_freed[il_nfreed++] = x; /* named after the free returned: must fail */
	}
}

static void s3_freer(int id)
{
	unsigned char *x = il_await(0);

	il_rc[id][0] = il_do_free(x);
	if (il_nfreed < IL_MODEL)
		il_freed[il_nfreed++] = x;
}

static void s3(unsigned long seed)
{
	void (*fns[])(int) = { s3_owner, s3_namer, s3_freer };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(NULL);
	il_run(seed, fns, 3);
	if (il_rc[2][0])
		il_fail("the free failed: %d", il_rc[2][0]);
	il_pool_end();
}

START_TEST(test_name_vs_free)
{
	il_each_seed("s3", s3, 75, 1);
}
END_TEST

/* 4. fork() while another thread claims its first heap (heaps_lock): the
 * child's first ep_alloc() must not wait for a lock nobody will give back. */
static void s4_forker(int id)
{
	struct fu_child c;
	pid_t pid = fu_fork(&c, FU_FORK);

	if (pid == 0) {
		struct ep_image img;
		int rc = ep_alloc(il_pool, 64, &img);

		if (rc == 0)
			rc = ep_finalize(il_pool, img.exec);
		if (rc == 0)
			rc = ep_free(il_pool, img.exec);
		if (rc)
			_exit(2);
		rel_child_exit_ok(c.tx);
	}
	/* (a SIGKILL after 'k' is a pass: the child spared memcheck's leak
	 * check of what the parent's other threads held; reliability.h) */
	il_rc[id][0] = pid < 0 ? -errno : fu_finish(&c, 30);
}

static void s4_claimer(int id)
{
	(void)id;
	il_jit(64, 1);
}

static void s4(unsigned long seed)
{
	void (*fns[])(int) = { s4_forker, s4_claimer, s4_claimer };

	il_pool_begin(NULL);
	il_run(seed, fns, 3);
	if (il_rc[0][0] != 0)
		il_fail("the fork child's first ep_alloc(): exit status %d (%d: killed by "
			"its alarm, hung)",
			il_rc[0][0], 128 + SIGALRM);
	il_pool_end();
}

START_TEST(test_fork_vs_heap_claim)
{
	il_each_seed("s4", s4, 70, 1);
}
END_TEST

/* 5. A double free from another thread racing the owner's reuse of the
 * chunk: the owner's correct calls on its new allocation never fail
 * because of it (unless the double free hit the very same address, which
 * is then the new allocation's free, and says so by returning 0). */
static void s5_owner(int id)
{
	il_pub[0] = il_jit(128, 1);
	while (!il_pub[1])
		ep__il_blocked("script wait"); /* the first free is done */
	struct ep_image img;
	int rc = ep_alloc(il_pool, 128, &img);

	if (rc) {
		il_fail("ep_alloc: %d", rc);
		return;
	}
	il_model_add(img.exec, img.size);
	il_pub[2] = img.exec;
	memset(img.rw, 0x11, 128);
	il_rc[id][0] = ep_finalize(il_pool, img.exec);
	il_rc[id][1] = ep_write(il_pool, img.exec + 8, "\x11\x11", 2);
	il_rc[id][2] = il_do_free(img.exec);
}

static void s5_freer(int id)
{
	unsigned char *x = il_await(0);

	il_rc[id][0] = il_do_free(x);
	il_pub[1] = x;
	il_rc[id][1] = ep_free(il_pool, x); /* the caller's bug */
}

static void s5(unsigned long seed)
{
	void (*fns[])(int) = { s5_owner, s5_freer };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(NULL);
	il_run(seed, fns, 2);
	if (il_rc[1][0])
		il_fail("the first free failed: %d", il_rc[1][0]);
	int hit_same = il_rc[1][1] == 0;

	if (hit_same && il_pub[2] != il_pub[0])
		il_fail("a double free of %p returned 0 with nothing live there",
			(void *)il_pub[0]);
	if (hit_same && il_model_find(il_pub[2]) >= 0)
		il_model[il_model_find(il_pub[2])].live = 0; /* what the double free freed */
	for (int i = 0; i < 3 && !hit_same; i++)
		if (il_rc[0][i])
			il_fail("the owner's call %d on its new allocation failed with %d "
				"(a double free of another address took it)",
				i, il_rc[0][i]);
	il_pool_end();
}

START_TEST(test_double_free_vs_reuse)
{
	il_each_seed("s5", s5, 70, 1);
}
END_TEST

/* 7. The stats' relations at every step while packs come and go (small
 * packs; sealed ones too: committed whole). */
static void s7_churn(int id)
{
	(void)id;
	for (int i = 0; i < 3; i++) {
		unsigned char *x = il_jit(40000, 1);

		if (x)
			il_do_free(x);
	}
}

static void s7_monitor(int id)
{
	(void)id;
	for (int i = 0; i < 30; i++)
		il_check_stats("monitor");
}

static void s7(unsigned long seed)
{
	void (*fns[])(int) = { s7_churn, s7_churn, s7_monitor };
	struct ep_config cfg = { .sz = sizeof(cfg), .pack_size = 64 << 10 };

	static int no_seal; /* mseal(2) unavailable (old kernel, Valgrind) */

	if (seed % 3 == 0 && !no_seal) {
		struct ep_pool *probe;
		struct ep_config sealed = cfg;

		sealed.backend = EP_BACKEND_MEMFD;
		sealed.flags = EP_F_SEAL;
		int rc = ep_pool_create(&sealed, &probe);

		if (rc == 0) {
			ep_pool_destroy(probe);
			cfg.flags = EP_F_SEAL;
		} else {
			no_seal = 1;
			printf("SKIP: s7's sealed pools: %s\n", ep_strerror(rc));
		}
	}
	il_pool_begin(&cfg);
	il_run(seed, fns, 3);
	il_pool_end();
}

START_TEST(test_stats_relations)
{
	il_each_seed("s7", s7, 150, 1);
}
END_TEST

/* 8. The limit counts what is reserved: a request that fails (no room for
 * it near the code) never holds a charge that makes another thread's
 * small allocation fail. */
#define S8_BIG (((size_t)4 << 30) - ((size_t)8 << 20))

static void s8_big(int id)
{
	struct ep_image img;

	il_rc[id][0] = ep_alloc(il_pool, S8_BIG, &img);
	if (il_rc[id][0] == 0)
		il_model_add(img.exec, img.size);
}

static void s8_small(int id)
{
	(void)id;
	il_jit(64, 1);
}

static void s8(unsigned long seed)
{
	void (*fns[])(int) = { s8_big, s8_small };
	struct ep_config cfg = {
		.sz = sizeof(cfg), .limit = S8_BIG, .near = (const void *)&s8,
	};

	il_pool_begin(&cfg);
	il_run(seed, fns, 2);
	/* (-EPERM when the small one came first: then it does not fit) */
	if (il_rc[0][0] != -EADDRNOTAVAIL && il_rc[0][0] != -EPERM)
		il_fail("the request of 4 GiB - 8 MiB near the code: %d", il_rc[0][0]);
	il_pool_end();
}

START_TEST(test_limit_counts_what_exists)
{
	il_each_seed("s8", s8, 50, 20);
}
END_TEST

/* The thread-exit handshake: a thread frees another's program while that
 * thread exits, a third adopts the heap; the chunks always come back. */
static void s9_exiter(int id)
{
	(void)id;
	il_pub[0] = il_jit(256, 1);
	il_pub[1] = il_jit(64, 1);
}

static void s9_freer(int id)
{
	il_rc[id][0] = il_do_free(il_await(1));
	il_rc[id][1] = il_do_free(il_await(0));
}

static void s9(unsigned long seed)
{
	void (*fns[])(int) = { s9_exiter, s9_freer, s4_claimer };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(NULL);
	il_run(seed, fns, 3);
	if (il_rc[1][0] || il_rc[1][1])
		il_fail("frees: %d %d", il_rc[1][0], il_rc[1][1]);
	il_pool_end();
}

START_TEST(test_exit_vs_remote_free)
{
	il_each_seed("s9", s9, 90, 1);
}
END_TEST

/* (in the order main() runs them) */
void il_add_alloc_tests(TCase *tc)
{
	tcase_add_test(tc, test_lock_one_holder);
	tcase_add_test(tc, test_lock_replay);
	tcase_add_test(tc, test_write_vs_free);
	tcase_add_test(tc, test_name_vs_free);
	tcase_add_test(tc, test_fork_vs_heap_claim);
	tcase_add_test(tc, test_double_free_vs_reuse);
	tcase_add_test(tc, test_stats_relations);
	tcase_add_test(tc, test_limit_counts_what_exists);
	tcase_add_test(tc, test_exit_vs_remote_free);
}
