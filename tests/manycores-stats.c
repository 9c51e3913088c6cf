/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * manycores-stats.c - check_manycores' stats tests: ep_pool_stats() never
 * reports more alive than ever was, with one allocation at a time or a few
 * shared by 8 threads.
 */
#include "config.h"

#include "manycores.h"

/* ---- stats: never more than was alive --------------------------------- */

/*
 * A thread that keeps a large allocation (its own mapping, not in a pack)
 * and writes its staging buffer over and over: whatever a write locks is
 * held most of the time, so the other threads' calls queue behind it.
 */
#define HOGS 2
#define HOG_SIZE tu_large_size() /* a large allocation: outside used_bytes */
#define HOG_WRITE ((size_t)256 << 10)

struct hog {
	pthread_t th;
	struct ep_pool *pool;
	void *exec;
	unsigned char *buf;
};

static void hog_run(struct hog *h)
{
	/* (smaller under Valgrind, where every byte copied is slow) */
	size_t len = rel_quick() ? (size_t)16 << 10 : HOG_WRITE;

	for (size_t off = 0; !mc_stopping(); off = (off + len) % HOG_SIZE) {
		int rc = ep_write(h->pool, (unsigned char *)h->exec + off, h->buf, len);

		TCHECK(rc == 0, "ep_write of %zu bytes: %s", len, ep_strerror(rc));
	}
}

static void *hog_main(void *arg)
{
	struct hog *h = arg;
	struct ep_image im;
	int rc = ep_alloc(h->pool, HOG_SIZE, &im);

	if (rc) {
		mc_fail_record(__LINE__, "ep_alloc(%zu): %s", HOG_SIZE, ep_strerror(rc));
		return NULL;
	}
	h->exec = im.exec;
	hog_run(h);
	rc = ep_free(h->pool, h->exec);
	if (rc)
		mc_fail_record(__LINE__, "ep_free: %s", ep_strerror(rc));
	return NULL;
}

/*
 * Never more than one program alive in packs: threads take turns (each
 * allocates after the previous one freed), or one thread alone alternates
 * alloc and free; three monitors check every snapshot: live_allocs <= 1 and
 * used_bytes <= the largest program.  In the third case, the ring of 8
 * again, two more threads hold a large allocation each and keep writing to
 * it (their allocations raise the bound on live_allocs by two), so that
 * the calls of the ring and the monitors wait for each other in every
 * order.
 */
START_TEST(test_stats_one_alive)
{
	struct ep_pool *pool = mc_new_pool(EP_BACKEND_AUTO, 0);
	struct monitor mons[3];
	struct hog hogs[HOGS];
	int nthreads = _i ? 8 : 1, nhogs = _i == 2 ? HOGS : 0;
	unsigned char *buf = malloc(HOG_WRITE);

	ck_assert_ptr_nonnull(buf);
	memset(buf, 0xcc, HOG_WRITE);
	mc_fail_reset();
	mc_stop_reset();
	memset(mons, 0, sizeof(mons));
	for (int i = 0; i < 3; i++) {
		mons[i].pool = pool;
		mons[i].check = true;
		mons[i].max_live = 1 + (size_t)nhogs;
		mons[i].max_used = RING_LIMIT; /* the ring's largest program */
		mons[i].max_large = (size_t)nhogs;
	}
	for (int i = 0; i < nhogs; i++) {
		hogs[i] = (struct hog){ .pool = pool, .buf = buf };
		ck_assert_int_eq(pthread_create(&hogs[i].th, NULL, hog_main, &hogs[i]), 0);
	}
	/* (a snapshot that is not one showed up about once in 100 turns on
	 * a loaded 2-core machine: time for a few hundred; a failure ends
	 * the run at once) */
	unsigned long steps = mc_ring_run(pool, nthreads, false, false, 3 * mc_run_budget(), mons, 3);

	mc_stop_all();
	for (int i = 0; i < nhogs; i++)
		ck_assert_int_eq(pthread_join(hogs[i].th, NULL), 0);
	free(buf);
	mc_assert_no_failure();
	ck_assert_uint_gt(steps, 0);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_gt(mons[i].calls, 0);
	ep_pool_destroy(pool);
}
END_TEST

/*
 * Churn from 8 threads, each with at most K programs alive, and all of
 * them together with at most M (tokens of a semaphore: one is taken before
 * ep_alloc() and given back after ep_free() returned).  A monitor checks
 * each snapshot against min(8 K, M) programs and their bytes.
 */
#define CHURN_THREADS 8
#define CHURN_MAX_SIZE 2048

struct churn_cfg {
	int k, m;
};

static const struct churn_cfg churn_cfgs[] = { { 1, 1 }, { 4, 3 }, { 8, 64 } };

struct churn_worker {
	pthread_t th;
	struct ep_pool *pool;
	sem_t *tokens;
	int idx, k;
	unsigned long ops;
};

static void churn_run(struct churn_worker *w)
{
	void *live[8];
	int n = 0;
	uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w->idx + 1);

	while (!mc_stopping()) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		if (n < w->k && sem_trywait(w->tokens) == 0) {
			/* log-uniform sizes, 16 .. 2048 */
			size_t size = ((size_t)16 << (seed % 8)) + (size_t)(seed >> 8) % 16;
			uint32_t v = 0x30000000u | ((uint32_t)w->idx << 20) | (uint32_t)(w->ops & 0xfffff);

			if (size > CHURN_MAX_SIZE)
				size = CHURN_MAX_SIZE;
			void *f = NULL;
			int rc = rel_jit(w->pool, size, v, &f);

			if (rc)
				sem_post(w->tokens);
			TCHECK(rc == 0, "jit(%zu): %s", size, ep_strerror(rc));
			TCHECK(mc_runs_as(f, v), "new program does not return %#x", v);
			live[n++] = f;
			w->ops++;
			if (n < w->k && (seed >> 32) % 2)
				continue;
		}
		if (n > 0) {
			/* free the oldest, then give its token back */
			int rc = ep_free(w->pool, live[0]);

			TCHECK(rc == 0, "ep_free: %s", ep_strerror(rc));
			memmove(&live[0], &live[1], (size_t)(n - 1) * sizeof(live[0]));
			n--;
			sem_post(w->tokens);
		} else {
			sched_yield();
		}
	}
	while (n > 0) {
		int rc = ep_free(w->pool, live[--n]);

		sem_post(w->tokens);
		TCHECK(rc == 0, "ep_free: %s", ep_strerror(rc));
	}
}

static void *churn_main(void *arg)
{
	churn_run(arg);
	return NULL;
}

START_TEST(test_stats_churn_8)
{
	struct churn_cfg c = churn_cfgs[_i];
	struct ep_pool *pool = mc_new_pool(EP_BACKEND_AUTO, 0);
	struct churn_worker w[CHURN_THREADS];
	struct monitor mon;
	sem_t tokens;
	size_t bound = (size_t)(c.m < CHURN_THREADS * c.k ? c.m : CHURN_THREADS * c.k);

	mc_fail_reset();
	mc_stop_reset();
	ck_assert_int_eq(sem_init(&tokens, 0, (unsigned)c.m), 0);
	memset(&mon, 0, sizeof(mon));
	mon.pool = pool;
	mon.check = true;
	mon.max_live = bound;
	mon.max_used = bound * CHURN_MAX_SIZE;
	mon.max_large = 0;
	ck_assert_int_eq(pthread_create(&mon.th, NULL, mc_monitor_main, &mon), 0);
	for (int i = 0; i < CHURN_THREADS; i++) {
		w[i] = (struct churn_worker){ .pool = pool, .tokens = &tokens, .idx = i, .k = c.k };
		ck_assert_int_eq(pthread_create(&w[i].th, NULL, churn_main, &w[i]), 0);
	}
	double end = mc_now_s() + mc_run_budget();

	while (mc_now_s() < end && !mc_failed())
		mc_pause_us(10000);
	mc_stop_all();
	unsigned long ops = 0;

	for (int i = 0; i < CHURN_THREADS; i++) {
		ck_assert_int_eq(pthread_join(w[i].th, NULL), 0);
		ops += w[i].ops;
	}
	ck_assert_int_eq(pthread_join(mon.th, NULL), 0);
	sem_destroy(&tokens);
	mc_assert_no_failure();
	ck_assert_uint_gt(ops, 0);
	ck_assert_uint_gt(mon.calls, 0);

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ep_pool_destroy(pool);
}
END_TEST

/* (in the order main() runs them) */
void mc_add_stats_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_stats_one_alive, 0, 3);
	tcase_add_loop_test(tc, test_stats_churn_8, 0,
			    (int)(sizeof(churn_cfgs) / sizeof(churn_cfgs[0])));
}
