/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * manycores-limit.c - check_manycores' limit tests: exactly limit/size
 * allocations among 16 racing threads, freed bytes usable at once by any
 * other thread (hand-offs in a ring, rounds behind a barrier).
 */
#include "config.h"

#include "manycores.h"

/* ---- limit: exactly limit/size among 16 threads, freed bytes at once ---- */

#define NT 16

enum { CMD_NONE, CMD_FILL, CMD_ALLOC_ONE, CMD_FREE_ONE, CMD_FREE_ALL, CMD_EXIT };

/* A thread that runs the commands it is given, one at a time, and says
 * when each has returned: the order of calls across threads is then exact. */
struct cmd_worker {
	pthread_t th;
	struct ep_pool *pool;
	size_t size;
	/* under g_cmd_lock */
	int cmd;
	unsigned posted, done;
	int rc;
	int nheld;
	void *held[1024];
};

static pthread_mutex_t g_cmd_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cmd_cv = PTHREAD_COND_INITIALIZER;

static int cmd_alloc(struct cmd_worker *w)
{
	struct ep_image im;

	if (w->nheld == (int)(sizeof(w->held) / sizeof(w->held[0])))
		return -E2BIG;
	int rc = ep_alloc(w->pool, w->size, &im);

	if (rc == 0)
		w->held[w->nheld++] = im.exec;
	return rc;
}

static void *cmd_main(void *arg)
{
	struct cmd_worker *w = arg;
	unsigned seen = 0;

	for (;;) {
		pthread_mutex_lock(&g_cmd_lock);
		while (w->posted == seen)
			pthread_cond_wait(&g_cmd_cv, &g_cmd_lock);
		seen = w->posted;
		int cmd = w->cmd;

		pthread_mutex_unlock(&g_cmd_lock);
		int rc = 0;

		switch (cmd) {
		case CMD_FILL:
			while ((rc = cmd_alloc(w)) == 0)
				;
			break;
		case CMD_ALLOC_ONE:
			rc = cmd_alloc(w);
			break;
		case CMD_FREE_ONE:
			rc = w->nheld ? ep_free(w->pool, w->held[--w->nheld]) : -ENOENT;
			break;
		case CMD_FREE_ALL:
			while (w->nheld && rc == 0)
				rc = ep_free(w->pool, w->held[--w->nheld]);
			break;
		default:
			break;
		}
		pthread_mutex_lock(&g_cmd_lock);
		w->rc = rc;
		w->done = seen;
		pthread_cond_broadcast(&g_cmd_cv);
		pthread_mutex_unlock(&g_cmd_lock);
		if (cmd == CMD_EXIT)
			return NULL;
	}
}

static void cmd_post(struct cmd_worker *w, int cmd)
{
	pthread_mutex_lock(&g_cmd_lock);
	w->cmd = cmd;
	w->posted++;
	pthread_cond_broadcast(&g_cmd_cv);
	pthread_mutex_unlock(&g_cmd_lock);
}

/* Wait until w has returned from its last command; its rc. */
static int cmd_wait(struct cmd_worker *w)
{
	pthread_mutex_lock(&g_cmd_lock);
	while (w->done != w->posted)
		pthread_cond_wait(&g_cmd_cv, &g_cmd_lock);
	int rc = w->rc;

	pthread_mutex_unlock(&g_cmd_lock);
	return rc;
}

static int cmd_run(struct cmd_worker *w, int cmd)
{
	cmd_post(w, cmd);
	return cmd_wait(w);
}

static const size_t limit_sizes[] = { 64, 320, 2048 };

/*
 * 16 threads race to fill a pool whose limit is N allocations: exactly N
 * succeed, every thread ends with -EPERM.  Then, over and over, one thread
 * frees one of its allocations and, once ep_free() has returned, another
 * thread allocates: it must succeed at once, and a third must still be
 * refused (the limit stays exact).  A monitoring thread calls
 * ep_pool_stats() meanwhile.
 */
START_TEST(test_limit_exact_among_16)
{
	enum { N = 40 };
	size_t size = limit_sizes[_i];
	struct ep_pool *pool = mc_new_pool(EP_BACKEND_AUTO, N * mc_chunks_of(size));
	struct cmd_worker *w = calloc(NT, sizeof(*w));
	struct monitor mon;

	ck_assert_ptr_nonnull(w);
	mc_fail_reset();
	mc_stop_reset();
	for (int i = 0; i < NT; i++) {
		w[i].pool = pool;
		w[i].size = size;
		ck_assert_int_eq(pthread_create(&w[i].th, NULL, cmd_main, &w[i]), 0);
	}
	for (int i = 0; i < NT; i++)
		cmd_post(&w[i], CMD_FILL);
	int total = 0;

	for (int i = 0; i < NT; i++) {
		int rc = cmd_wait(&w[i]);

		ck_assert_msg(rc == -EPERM, "thread %d stopped with %d (%s), not -EPERM", i, rc,
			      ep_strerror(rc));
		total += w[i].nheld;
	}
	ck_assert_msg(total == N, "%d allocations of %zu bytes succeeded, the limit allows %d",
		      total, size, N);

	mc_monitor_start(&mon, pool, 50);
	double end = mc_now_s() + mc_run_budget();
	int handoffs = 0, src = 0;

	for (int k = 0; k < 2000 && (k < 100 || mc_now_s() < end); k++) {
		while (w[src].nheld == 0)
			src = (src + 1) % NT;
		int dst = (src + 1 + k % (NT - 1)) % NT;
		int third = (dst + 1) % NT;

		int rc = cmd_run(&w[src], CMD_FREE_ONE);

		if (rc) {
			mc_fail_record(__LINE__, "ep_free in thread %d: %s", src, ep_strerror(rc));
			break;
		}
		rc = cmd_run(&w[dst], CMD_ALLOC_ONE);
		if (rc) {
			mc_fail_record(__LINE__,
				    "hand-off %d: thread %d freed %zu bytes, then thread %d could not "
				    "allocate them: %d (%s)",
				    k, src, size, dst, rc, ep_strerror(rc));
			break;
		}
		rc = cmd_run(&w[third], CMD_ALLOC_ONE);
		if (rc != -EPERM) {
			mc_fail_record(__LINE__, "hand-off %d: a pool at its limit gave thread %d %d (%s)",
				    k, third, rc, ep_strerror(rc));
			break;
		}
		handoffs++;
		src = (src + 3) % NT;
	}
	mc_stop_all();
	ck_assert_int_eq(pthread_join(mon.th, NULL), 0);
	for (int i = 0; i < NT; i++) {
		ck_assert_int_eq(cmd_run(&w[i], CMD_FREE_ALL), 0);
		cmd_run(&w[i], CMD_EXIT);
		ck_assert_int_eq(pthread_join(w[i].th, NULL), 0);
	}
	mc_assert_no_failure();
	ck_assert_int_gt(handoffs, 0);

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	free(w);
	ep_pool_destroy(pool);
}
END_TEST

/* Hand-offs with a limit of one program, while other threads call
 * ep_pool_stats() (from time to time, and without pause); then with each
 * program freed by the next thread. */
START_TEST(test_limit_handoff)
{
	struct ep_pool *pool = mc_new_pool(EP_BACKEND_AUTO, RING_LIMIT);
	struct monitor mons[2];

	mc_fail_reset();
	memset(mons, 0, sizeof(mons));
	mons[0].pool = mons[1].pool = pool;
	mons[0].pause_us = 100;
	unsigned long steps = mc_ring_run(pool, 4, true, _i == 2, mc_run_budget(), mons, _i ? 2 : 1);

	mc_assert_no_failure();
	ck_assert_uint_gt(steps, 0);

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ep_pool_destroy(pool);
}
END_TEST

/*
 * 16 threads in rounds: each allocates one program (the limit is exactly
 * what 16 of the largest take), finalizes, calls and frees it, then all
 * wait for each other; no ep_alloc() may fail, as every earlier ep_free()
 * has returned.
 */
struct round_worker {
	pthread_t th;
	struct ep_pool *pool;
	pthread_barrier_t *bar;
	int idx;
	double deadline;
};

static int g_rounds_over; /* written by the barrier's serial thread only */

static void round_step(struct round_worker *w, int round)
{
	size_t size = mc_ring_sizes[(size_t)(round + w->idx) % (sizeof(mc_ring_sizes) / sizeof(mc_ring_sizes[0]))];
	uint32_t v = 0x20000000u | ((uint32_t)w->idx << 20) | (uint32_t)(round & 0xfffff);
	void *f = NULL;
	int rc = rel_jit(w->pool, size, v, &f);

	TCHECK(rc == 0, "round %d: thread %d, %zu bytes: %d (%s) though every program of the "
	       "round before was freed", round, w->idx, size, rc, ep_strerror(rc));
	TCHECK(mc_runs_as(f, v), "round %d: the new program does not return %#x", round, v);
	rc = ep_free(w->pool, f);
	TCHECK(rc == 0, "ep_free: %s", ep_strerror(rc));
}

static void *round_main(void *arg)
{
	struct round_worker *w = arg;

	for (int round = 0;; round++) {
		round_step(w, round);
		if (pthread_barrier_wait(w->bar) == PTHREAD_BARRIER_SERIAL_THREAD)
			g_rounds_over = mc_failed() || round >= 3000 ||
					(round >= 50 && mc_now_s() > w->deadline);
		pthread_barrier_wait(w->bar); /* (the barrier orders g_rounds_over) */
		if (g_rounds_over)
			return NULL;
	}
}

START_TEST(test_limit_rounds_16)
{
	struct ep_pool *pool = mc_new_pool(EP_BACKEND_AUTO, NT * RING_LIMIT);
	struct round_worker w[NT];
	pthread_barrier_t bar;

	mc_fail_reset();
	g_rounds_over = 0;
	pthread_barrier_init(&bar, NULL, NT);
	double deadline = mc_now_s() + mc_run_budget();

	for (int i = 0; i < NT; i++) {
		w[i] = (struct round_worker){ .pool = pool, .bar = &bar, .idx = i,
					      .deadline = deadline };
		ck_assert_int_eq(pthread_create(&w[i].th, NULL, round_main, &w[i]), 0);
	}
	for (int i = 0; i < NT; i++)
		ck_assert_int_eq(pthread_join(w[i].th, NULL), 0);
	pthread_barrier_destroy(&bar);
	mc_assert_no_failure();

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ep_pool_destroy(pool);
}
END_TEST

/* (in the order main() runs them) */
void mc_add_limit_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_limit_exact_among_16, 0,
			    (int)(sizeof(limit_sizes) / sizeof(limit_sizes[0])));
	tcase_add_loop_test(tc, test_limit_handoff, 0, 3);
	tcase_add_test(tc, test_limit_rounds_16);
}
