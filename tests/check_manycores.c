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
 */
#include "config.h"

#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <time.h>

#include "forkutil.h"
#include "reliability.h"

extern char **environ;

/* ---- helpers ---------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pause_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* How long a loop may run: short, it is the count of events that matters,
 * and under Valgrind or EP_TEST_QUICK=1 shorter still. */
static double run_budget(void)
{
	return rel_quick() ? 0.5 : 1.0;
}

/* How long a child may take before it counts as hung: generous, a healthy
 * one needs milliseconds even on a loaded machine. */
static double child_timeout(void)
{
	return RUNNING_ON_VALGRIND ? 120.0 : 20.0;
}

static size_t chunks_of(size_t size)
{
	return (size + EP_CHUNK_SIZE - 1) / EP_CHUNK_SIZE * EP_CHUNK_SIZE;
}

/* The first failure seen by any thread of a test (or -1 line: none). */
static pthread_mutex_t g_fail_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_fail_line;
static char g_fail_msg[400];

static void fail_reset(void)
{
	pthread_mutex_lock(&g_fail_lock);
	g_fail_line = 0;
	g_fail_msg[0] = 0;
	pthread_mutex_unlock(&g_fail_lock);
}

static void fail_record(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail_record(int line, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&g_fail_lock);
	if (!g_fail_line) {
		g_fail_line = line;
		va_start(ap, fmt);
		vsnprintf(g_fail_msg, sizeof(g_fail_msg), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&g_fail_lock);
}

static bool failed(void)
{
	pthread_mutex_lock(&g_fail_lock);
	bool f = g_fail_line != 0;

	pthread_mutex_unlock(&g_fail_lock);
	return f;
}

static void assert_no_failure(void)
{
	pthread_mutex_lock(&g_fail_lock);
	int line = g_fail_line;
	char msg[sizeof(g_fail_msg)];

	memcpy(msg, g_fail_msg, sizeof(msg));
	pthread_mutex_unlock(&g_fail_lock);
	ck_assert_msg(line == 0, "line %d: %s", line, msg);
}

/* In a thread: record the failure and leave the (void) function. */
#define TCHECK(cond, ...)                                      \
	do {                                                   \
		if (!(cond)) {                                 \
			fail_record(__LINE__, __VA_ARGS__);    \
			return;                                \
		}                                              \
	} while (0)

/* The stop flag of the threads of a test: atomics, which helgrind does not
 * model, hence the annotation. */
static int g_stop;

static void stop_reset(void)
{
	__atomic_store_n(&g_stop, 0, __ATOMIC_RELEASE);
	VALGRIND_HG_DISABLE_CHECKING(&g_stop, sizeof(g_stop));
}

static bool stopping(void)
{
	return __atomic_load_n(&g_stop, __ATOMIC_ACQUIRE) != 0;
}

static void stop_all(void)
{
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
}

static struct ep_pool *new_pool(enum ep_backend b, size_t limit)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = b, .limit = limit };
	struct ep_pool *pool = NULL;
	int rc = ep_pool_create(&cfg, &pool);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	return pool;
}

/* Does the code at f read `mov eax, v; ret`?  Checked before each call, so
 * that code changed under a process is a failure, not a crash. */
static bool code_is(const void *f, uint32_t v)
{
	unsigned char want[RET_IMM_LEN];

	rel_emit_ret_imm(want, v);
	return memcmp(f, want, sizeof(want)) == 0;
}

static uint32_t code_imm(const void *f)
{
	return tu_ret_imm_of(f);
}

static bool runs_as(void *f, uint32_t v)
{
	return code_is(f, v) && (uint32_t)rel_call(f) == v;
}

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

/* A monitoring thread: ep_pool_stats() over and over, with a pause between
 * calls when pause_us > 0 (calls that come and go leave the pool quiet in
 * between); with check set, every snapshot is checked against the bounds. */
struct monitor {
	pthread_t th;
	struct ep_pool *pool;
	long pause_us;
	bool check;
	size_t max_live;  /* allocations alive at any moment, at most */
	size_t max_used;  /* bytes of chunks in packs in use at any moment, at most */
	size_t max_large; /* large allocations alive at any moment, at most */
	unsigned long calls;
};

static void monitor_run(struct monitor *m)
{
	while (!stopping()) {
		struct ep_stats st;
		int rc = ep_pool_stats(m->pool, &st);

		__atomic_store_n(&m->calls, m->calls + 1, __ATOMIC_RELAXED);
		TCHECK(rc == 0, "ep_pool_stats: %s", ep_strerror(rc));
		if (m->check) {
			TCHECK(st.live_allocs <= m->max_live,
			       "ep_pool_stats: live_allocs %zu, but never more than %zu were alive "
			       "(used_bytes %zu, packs %zu)",
			       st.live_allocs, m->max_live, st.used_bytes, st.packs);
			TCHECK(st.used_bytes <= m->max_used,
			       "ep_pool_stats: used_bytes %zu, but never more than %zu were in use "
			       "(live_allocs %zu, packs %zu)",
			       st.used_bytes, m->max_used, st.live_allocs, st.packs);
			TCHECK(st.used_bytes <= st.pack_bytes,
			       "ep_pool_stats: used_bytes %zu > pack_bytes %zu (packs %zu)",
			       st.used_bytes, st.pack_bytes, st.packs);
			TCHECK(st.large_allocs <= m->max_large && st.large_allocs <= st.live_allocs,
			       "ep_pool_stats: large_allocs %zu (live_allocs %zu), but never more "
			       "than %zu were alive",
			       st.large_allocs, st.live_allocs, m->max_large);
		}
		if (m->pause_us > 0)
			pause_us(m->pause_us);
	}
}

static void *monitor_main(void *arg)
{
	monitor_run(arg);
	return NULL;
}

static void monitor_start(struct monitor *m, struct ep_pool *pool, long pause)
{
	memset(m, 0, sizeof(*m));
	m->pool = pool;
	m->pause_us = pause;
	ck_assert_int_eq(pthread_create(&m->th, NULL, monitor_main, m), 0);
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
	struct ep_pool *pool = new_pool(EP_BACKEND_AUTO, N * chunks_of(size));
	struct cmd_worker *w = calloc(NT, sizeof(*w));
	struct monitor mon;

	ck_assert_ptr_nonnull(w);
	fail_reset();
	stop_reset();
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

	monitor_start(&mon, pool, 50);
	double end = now_s() + run_budget();
	int handoffs = 0, src = 0;

	for (int k = 0; k < 2000 && (k < 100 || now_s() < end); k++) {
		while (w[src].nheld == 0)
			src = (src + 1) % NT;
		int dst = (src + 1 + k % (NT - 1)) % NT;
		int third = (dst + 1) % NT;

		int rc = cmd_run(&w[src], CMD_FREE_ONE);

		if (rc) {
			fail_record(__LINE__, "ep_free in thread %d: %s", src, ep_strerror(rc));
			break;
		}
		rc = cmd_run(&w[dst], CMD_ALLOC_ONE);
		if (rc) {
			fail_record(__LINE__,
				    "hand-off %d: thread %d freed %zu bytes, then thread %d could not "
				    "allocate them: %d (%s)",
				    k, src, size, dst, rc, ep_strerror(rc));
			break;
		}
		rc = cmd_run(&w[third], CMD_ALLOC_ONE);
		if (rc != -EPERM) {
			fail_record(__LINE__, "hand-off %d: a pool at its limit gave thread %d %d (%s)",
				    k, third, rc, ep_strerror(rc));
			break;
		}
		handoffs++;
		src = (src + 3) % NT;
	}
	stop_all();
	ck_assert_int_eq(pthread_join(mon.th, NULL), 0);
	for (int i = 0; i < NT; i++) {
		ck_assert_int_eq(cmd_run(&w[i], CMD_FREE_ALL), 0);
		cmd_run(&w[i], CMD_EXIT);
		ck_assert_int_eq(pthread_join(w[i].th, NULL), 0);
	}
	assert_no_failure();
	ck_assert_int_gt(handoffs, 0);

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	free(w);
	ep_pool_destroy(pool);
}
END_TEST

/*
 * Threads take turns (a ring): the one whose turn it is allocates, writes,
 * finalizes, calls and frees one program, then passes the turn; so its
 * ep_alloc() always comes after the previous thread's ep_free() returned.
 * The limit is the largest size, so at most one program fits, and every
 * ep_alloc() must succeed.  Sizes above 256 bytes are in the mix.  With
 * cross set, each thread leaves its program alive and the next one frees
 * it before it allocates its own: frees of other threads' programs.
 */
static const size_t ring_sizes[] = { 2048, 320, 64, 1000, 2048, 512, 192, 2048 };
#define RING_LIMIT 2048

struct ring {
	struct ep_pool *pool;
	int n;
	bool exact; /* also check that a second allocation is refused */
	bool cross; /* the next thread frees the program */
	unsigned long min_steps, max_steps;
	double deadline;
	pthread_mutex_t m;
	pthread_cond_t cv;
	/* under m */
	int turn;
	unsigned long steps;
	bool done;
	void *left; /* with cross: the program the last turn left alive */
	uint32_t left_v;
};

struct ring_member {
	pthread_t th;
	struct ring *r;
	int idx;
};

static void ring_step(struct ring *r, int idx, unsigned long k)
{
	size_t size = ring_sizes[k % (sizeof(ring_sizes) / sizeof(ring_sizes[0]))];
	uint32_t v = 0x10000000u | ((uint32_t)idx << 20) | (uint32_t)(k & 0xfffff);
	struct ep_image im, extra;
	int rc;

	if (r->left) {
		TCHECK(runs_as(r->left, r->left_v), "turn %lu: the previous program reads %#x, "
		       "not %#x", k, code_imm(r->left), r->left_v);
		rc = ep_free(r->pool, r->left);
		TCHECK(rc == 0, "turn %lu: ep_free of the previous thread's program: %s", k,
		       ep_strerror(rc));
		r->left = NULL;
	}
	rc = ep_alloc(r->pool, size, &im);
	TCHECK(rc == 0,
	       "turn %lu: thread %d could not allocate %zu bytes after the previous "
	       "program was freed: %d (%s)",
	       k, idx, size, rc, ep_strerror(rc));
	if (r->exact && chunks_of(size) == RING_LIMIT) {
		rc = ep_alloc(r->pool, 64, &extra);
		if (rc == 0)
			ep_free(r->pool, extra.exec);
		TCHECK(rc == -EPERM, "turn %lu: a pool at its limit gave %d (%s)", k, rc,
		       ep_strerror(rc));
	}
	TCHECK(im.size >= size, "image of %zu bytes for %zu", im.size, size);
	rel_emit_ret_imm(im.rw, v);
	rc = ep_finalize(r->pool, im.exec);
	TCHECK(rc == 0, "ep_finalize: %s", ep_strerror(rc));
	TCHECK(runs_as(im.exec, v), "turn %lu: the new program does not return %#x", k, v);
	if (r->cross) {
		r->left = im.exec;
		r->left_v = v;
		return;
	}
	rc = ep_free(r->pool, im.exec);
	TCHECK(rc == 0, "ep_free: %s", ep_strerror(rc));
}

static void *ring_main(void *arg)
{
	struct ring_member *me = arg;
	struct ring *r = me->r;

	for (;;) {
		pthread_mutex_lock(&r->m);
		while (r->turn != me->idx && !r->done)
			pthread_cond_wait(&r->cv, &r->m);
		unsigned long k = r->steps;
		bool done = r->done;

		pthread_mutex_unlock(&r->m);
		if (done)
			return NULL;
		ring_step(r, me->idx, k);
		bool end = failed() || k + 1 >= r->max_steps ||
			   (k >= r->min_steps && now_s() > r->deadline);

		pthread_mutex_lock(&r->m);
		r->steps = k + 1;
		r->done = end;
		r->turn = (me->idx + 1) % r->n;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->m);
	}
}

/* Runs a ring of n threads on pool for about budget seconds (200 turns at
 * least, 50 under Valgrind, unless something failed); the monitors run
 * alongside. */
static unsigned long ring_run(struct ep_pool *pool, int n, bool exact, bool cross,
			      double budget, struct monitor *mons, int nmons)
{
	struct ring r = { .pool = pool, .n = n, .exact = exact, .cross = cross };
	struct ring_member *mem = calloc((size_t)n, sizeof(*mem));

	ck_assert_ptr_nonnull(mem);
	r.min_steps = rel_quick() ? 50 : 200;
	r.max_steps = rel_quick() ? 1000 : 6000;
	r.deadline = now_s() + budget;
	pthread_mutex_init(&r.m, NULL);
	pthread_cond_init(&r.cv, NULL);
	stop_reset();
	for (int i = 0; i < nmons; i++) {
		/* (read while the monitor runs, below: a count, no order) */
		VALGRIND_HG_DISABLE_CHECKING(&mons[i].calls, sizeof(mons[i].calls));
		ck_assert_int_eq(pthread_create(&mons[i].th, NULL, monitor_main, &mons[i]), 0);
	}
	for (int i = 0; i < n; i++) {
		mem[i].r = &r;
		mem[i].idx = i;
		ck_assert_int_eq(pthread_create(&mem[i].th, NULL, ring_main, &mem[i]), 0);
	}
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(pthread_join(mem[i].th, NULL), 0);
	/* a loaded machine may not have run a monitor yet: each gets its
	 * turn (10 s at most) before the stop */
	for (int i = 0; i < nmons; i++)
		for (double end = now_s() + 10;
		     !__atomic_load_n(&mons[i].calls, __ATOMIC_RELAXED) && now_s() < end;)
			usleep(1000);
	stop_all();
	for (int i = 0; i < nmons; i++)
		ck_assert_int_eq(pthread_join(mons[i].th, NULL), 0);
	if (r.left)
		ck_assert_int_eq(ep_free(pool, r.left), 0);
	pthread_cond_destroy(&r.cv);
	pthread_mutex_destroy(&r.m);
	free(mem);
	return r.steps;
}

/* Hand-offs with a limit of one program, while other threads call
 * ep_pool_stats() (from time to time, and without pause); then with each
 * program freed by the next thread. */
START_TEST(test_limit_handoff)
{
	struct ep_pool *pool = new_pool(EP_BACKEND_AUTO, RING_LIMIT);
	struct monitor mons[2];

	fail_reset();
	memset(mons, 0, sizeof(mons));
	mons[0].pool = mons[1].pool = pool;
	mons[0].pause_us = 100;
	unsigned long steps = ring_run(pool, 4, true, _i == 2, run_budget(), mons, _i ? 2 : 1);

	assert_no_failure();
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
	size_t size = ring_sizes[(size_t)(round + w->idx) % (sizeof(ring_sizes) / sizeof(ring_sizes[0]))];
	uint32_t v = 0x20000000u | ((uint32_t)w->idx << 20) | (uint32_t)(round & 0xfffff);
	void *f = NULL;
	int rc = rel_jit(w->pool, size, v, &f);

	TCHECK(rc == 0, "round %d: thread %d, %zu bytes: %d (%s) though every program of the "
	       "round before was freed", round, w->idx, size, rc, ep_strerror(rc));
	TCHECK(runs_as(f, v), "round %d: the new program does not return %#x", round, v);
	rc = ep_free(w->pool, f);
	TCHECK(rc == 0, "ep_free: %s", ep_strerror(rc));
}

static void *round_main(void *arg)
{
	struct round_worker *w = arg;

	for (int round = 0;; round++) {
		round_step(w, round);
		if (pthread_barrier_wait(w->bar) == PTHREAD_BARRIER_SERIAL_THREAD)
			g_rounds_over = failed() || round >= 3000 ||
					(round >= 50 && now_s() > w->deadline);
		pthread_barrier_wait(w->bar); /* (the barrier orders g_rounds_over) */
		if (g_rounds_over)
			return NULL;
	}
}

START_TEST(test_limit_rounds_16)
{
	struct ep_pool *pool = new_pool(EP_BACKEND_AUTO, NT * RING_LIMIT);
	struct round_worker w[NT];
	pthread_barrier_t bar;

	fail_reset();
	g_rounds_over = 0;
	pthread_barrier_init(&bar, NULL, NT);
	double deadline = now_s() + run_budget();

	for (int i = 0; i < NT; i++) {
		w[i] = (struct round_worker){ .pool = pool, .bar = &bar, .idx = i,
					      .deadline = deadline };
		ck_assert_int_eq(pthread_create(&w[i].th, NULL, round_main, &w[i]), 0);
	}
	for (int i = 0; i < NT; i++)
		ck_assert_int_eq(pthread_join(w[i].th, NULL), 0);
	pthread_barrier_destroy(&bar);
	assert_no_failure();

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ep_pool_destroy(pool);
}
END_TEST

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

	for (size_t off = 0; !stopping(); off = (off + len) % HOG_SIZE) {
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
		fail_record(__LINE__, "ep_alloc(%zu): %s", HOG_SIZE, ep_strerror(rc));
		return NULL;
	}
	h->exec = im.exec;
	hog_run(h);
	rc = ep_free(h->pool, h->exec);
	if (rc)
		fail_record(__LINE__, "ep_free: %s", ep_strerror(rc));
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
	struct ep_pool *pool = new_pool(EP_BACKEND_AUTO, 0);
	struct monitor mons[3];
	struct hog hogs[HOGS];
	int nthreads = _i ? 8 : 1, nhogs = _i == 2 ? HOGS : 0;
	unsigned char *buf = malloc(HOG_WRITE);

	ck_assert_ptr_nonnull(buf);
	memset(buf, 0xcc, HOG_WRITE);
	fail_reset();
	stop_reset();
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
	unsigned long steps = ring_run(pool, nthreads, false, false, 3 * run_budget(), mons, 3);

	stop_all();
	for (int i = 0; i < nhogs; i++)
		ck_assert_int_eq(pthread_join(hogs[i].th, NULL), 0);
	free(buf);
	assert_no_failure();
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

	while (!stopping()) {
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
			TCHECK(runs_as(f, v), "new program does not return %#x", v);
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
	struct ep_pool *pool = new_pool(EP_BACKEND_AUTO, 0);
	struct churn_worker w[CHURN_THREADS];
	struct monitor mon;
	sem_t tokens;
	size_t bound = (size_t)(c.m < CHURN_THREADS * c.k ? c.m : CHURN_THREADS * c.k);

	fail_reset();
	stop_reset();
	ck_assert_int_eq(sem_init(&tokens, 0, (unsigned)c.m), 0);
	memset(&mon, 0, sizeof(mon));
	mon.pool = pool;
	mon.check = true;
	mon.max_live = bound;
	mon.max_used = bound * CHURN_MAX_SIZE;
	mon.max_large = 0;
	ck_assert_int_eq(pthread_create(&mon.th, NULL, monitor_main, &mon), 0);
	for (int i = 0; i < CHURN_THREADS; i++) {
		w[i] = (struct churn_worker){ .pool = pool, .tokens = &tokens, .idx = i, .k = c.k };
		ck_assert_int_eq(pthread_create(&w[i].th, NULL, churn_main, &w[i]), 0);
	}
	double end = now_s() + run_budget();

	while (now_s() < end && !failed())
		pause_us(10000);
	stop_all();
	unsigned long ops = 0;

	for (int i = 0; i < CHURN_THREADS; i++) {
		ck_assert_int_eq(pthread_join(w[i].th, NULL), 0);
		ops += w[i].ops;
	}
	ck_assert_int_eq(pthread_join(mon.th, NULL), 0);
	sem_destroy(&tokens);
	assert_no_failure();
	ck_assert_uint_gt(ops, 0);
	ck_assert_uint_gt(mon.calls, 0);

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ep_pool_destroy(pool);
}
END_TEST

/* ---- fork: fork(), _Fork(), syscall(SYS_fork) ------------------------- */

#define CHILD_CODE(f, v)                                                                 \
	CHILD_CHECK(runs_as((f), (v)), "%s at %p: code for %#x expected, reads %#x", #f, (f), \
		    (uint32_t)(v), code_imm(f))

#define CHILD_OK(expr)                                                                \
	do {                                                                          \
		int rc_ = (expr);                                                     \
		CHILD_CHECK(rc_ == 0, "%s: %d (%s)", #expr, rc_, ep_strerror(rc_));   \
	} while (0)

static void *jit_ok(struct ep_pool *pool, size_t size, uint32_t v)
{
	void *f = NULL;
	int rc = rel_jit(pool, size, v, &f);

	ck_assert_msg(rc == 0, "jit(%zu, %#x): %s", size, v, ep_strerror(rc));
	ck_assert_msg(runs_as(f, v), "new function does not return %#x", v);
	return f;
}

/* After a child came and went: the parent's pool works as before. */
static void parent_pool_usable(struct ep_pool *pool, void *f, uint32_t v)
{
	ck_assert_msg(runs_as(f, v), "the parent's function at %p reads %#x, expected %#x", f,
		      code_imm(f), v);
	void *g = jit_ok(pool, 64, 0x5151);
	void *h = jit_ok(pool, 1000, 0x5252);

	ck_assert_int_eq(rel_patch(pool, g, 0x5353), 0);
	ck_assert(runs_as(g, 0x5353));
	ck_assert_int_eq(ep_free(pool, g), 0);
	ck_assert_int_eq(ep_free(pool, h), 0);
	ck_assert_int_eq(ep_free(pool, f), 0);

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
}

/*
 * The child frees the parent's function (returning 42) and JITs one that
 * returns 7 (into the same slot, first fit); the parent's keeps returning
 * 42, and the parent's pool stays usable.
 */
START_TEST(test_fork_child_rejits)
{
	enum fu_kind kind = (enum fu_kind)_i;
	const char *why = fu_unavailable(kind);

	if (why) {
		printf("SKIP: %s child: %s\n", fu_kind_names[kind], why);
		return;
	}
	struct ep_pool *pool = new_pool(EP_BACKEND_AUTO, 0);
	void *f = jit_ok(pool, 64, 42);
	void *n = jit_ok(pool, 320, 43); /* a neighbour, patched by the child */
	struct fu_child c;
	pid_t pid = fu_fork(&c, kind);

	ck_assert_msg(pid >= 0, "%s: %s", fu_kind_names[kind], strerror(errno));
	if (pid == 0) {
		CHILD_CODE(f, 42);
		CHILD_OK(ep_free(pool, f));
		void *g = NULL;

		CHILD_OK(rel_jit(pool, 64, 7, &g));
		CHILD_CODE(g, 7);
		CHILD_OK(rel_patch(pool, n, 8));
		CHILD_CODE(n, 8);
		CHILD_CHECK(fu_send(&c, 'c') == 0, "send");
		FU_CHILD_EXPECT(&c, 'p');
		CHILD_CODE(g, 7);
		CHILD_OK(ep_free(pool, g));
		CHILD_OK(ep_free(pool, n));
		_exit(0);
	}
	char m = 0;
	int got = fu_recv(&c, &m, child_timeout());
	/* the child changed "the same" code: ours is untouched */
	bool f_ok = runs_as(f, 42), n_ok = runs_as(n, 43);
	uint32_t f_now = code_imm(f), n_now = code_imm(n);

	fu_send(&c, 'p');
	int st = fu_finish(&c, child_timeout());

	ck_assert_msg(got == 0 && m == 'c', "the %s child did not get to its changes",
		      fu_kind_names[kind]);
	ck_assert_msg(f_ok, "%s child: the parent's function now reads %#x, not 42",
		      fu_kind_names[kind], f_now);
	ck_assert_msg(n_ok, "%s child: the parent's neighbour now reads %#x, not 43",
		      fu_kind_names[kind], n_now);
	ck_assert_msg(st == 0, "%s child ended with status %d%s", fu_kind_names[kind], st,
		      fu_status_text(st));
	ck_assert_int_eq(ep_free(pool, n), 0);
	parent_pool_usable(pool, f, 42);
	ep_pool_destroy(pool);
}
END_TEST

/*
 * The other way round: the parent frees its function and JITs one that
 * returns 7, and patches a neighbour, while the child (still alive) keeps
 * calling its copies: they must still return 42 and 43.
 */
START_TEST(test_fork_parent_rejits)
{
	enum fu_kind kind = (enum fu_kind)_i;
	const char *why = fu_unavailable(kind);

	if (why) {
		printf("SKIP: %s child: %s\n", fu_kind_names[kind], why);
		return;
	}
	struct ep_pool *pool = new_pool(EP_BACKEND_AUTO, 0);
	void *f = jit_ok(pool, 64, 42);
	void *n = jit_ok(pool, 320, 43);
	struct fu_child c;
	pid_t pid = fu_fork(&c, kind);

	ck_assert_msg(pid >= 0, "%s: %s", fu_kind_names[kind], strerror(errno));
	if (pid == 0) {
		CHILD_CODE(f, 42);
		if (kind != FU_FORK) {
			/* libexecpack(7): a child made without fork()'s handlers
			 * shares the pages until its first call, which makes its
			 * copies (a stats call is enough) */
			struct ep_stats st;

			CHILD_OK(ep_pool_stats(pool, &st));
		}
		CHILD_CHECK(fu_send(&c, 'r') == 0, "send");
		FU_CHILD_EXPECT(&c, 'p');
		/* the parent has freed f, JITted 7 and patched n meanwhile */
		CHILD_CODE(f, 42);
		CHILD_CODE(n, 43);
		/* and the child may change its own */
		CHILD_OK(ep_free(pool, f));
		void *g = NULL;

		CHILD_OK(rel_jit(pool, 64, 9, &g));
		CHILD_CODE(g, 9);
		CHILD_OK(ep_free(pool, g));
		CHILD_OK(ep_free(pool, n));
		CHILD_CHECK(fu_send(&c, 'd') == 0, "send");
		_exit(0);
	}
	char m = 0;

	if (fu_recv(&c, &m, child_timeout()) != 0 || m != 'r') {
		int st = fu_finish(&c, 0);

		ck_abort_msg("the %s child did not start: status %d%s", fu_kind_names[kind], st,
			     fu_status_text(st));
	}
	ck_assert_int_eq(ep_free(pool, f), 0);
	void *g = jit_ok(pool, 64, 7);

	ck_assert_int_eq(rel_patch(pool, n, 44), 0);
	ck_assert(runs_as(n, 44));
	ck_assert_int_eq(fu_send(&c, 'p'), 0);
	int got = fu_recv(&c, &m, child_timeout());
	int st = fu_finish(&c, child_timeout());

	ck_assert_msg(st == 0, "%s child ended with status %d%s", fu_kind_names[kind], st,
		      fu_status_text(st));
	ck_assert_msg(got == 0 && m == 'd', "the child did not finish");
	/* nothing the child did reached the parent either */
	ck_assert_msg(runs_as(g, 7), "the parent's new function reads %#x, not 7", code_imm(g));
	ck_assert_msg(runs_as(n, 44), "the parent's patched function reads %#x, not 44",
		      code_imm(n));
	ck_assert_int_eq(ep_free(pool, n), 0);
	parent_pool_usable(pool, g, 7);
	ep_pool_destroy(pool);
}
END_TEST

/* ---- children that exec: vfork(), posix_spawn(), fork()+exec ---------- */

enum spawn_kind { SK_VFORK, SK_SPAWN, SK_FORK_EXEC, SK_KINDS };

static const char *const spawn_names[] = { "vfork()+exec", "posix_spawn()", "fork()+exec" };

#define TRUE_PATH "/bin/true"

static pid_t spawn_vfork(void)
{
	char *const argv[] = { (char *)TRUE_PATH, NULL };
	pid_t pid = vfork();

	if (pid == 0) {
		execve(TRUE_PATH, argv, environ);
		_exit(127);
	}
	return pid;
}

static pid_t spawn_true(enum spawn_kind k)
{
	char *const argv[] = { (char *)TRUE_PATH, NULL };
	pid_t pid;

	switch (k) {
	case SK_VFORK:
		return spawn_vfork();
	case SK_SPAWN:
		errno = posix_spawn(&pid, TRUE_PATH, NULL, NULL, argv, environ);
		return errno ? -1 : pid;
	default:
		pid = fork();
		if (pid == 0) {
			execve(TRUE_PATH, argv, environ);
			_exit(127);
		}
		return pid;
	}
}

/* "dev inode" of the mapping holding addr in /proc/self/maps, or "". */
static void mapping_id(const void *addr, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[1024];

	out[0] = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char dev[32], ino[32];

		if (sscanf(line, "%lx-%lx %*s %*s %31s %31s", &lo, &hi, dev, ino) == 4 &&
		    (uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
			snprintf(out, len, "%s %s", dev, ino);
			break;
		}
	}
	fclose(f);
}

/*
 * A child that execs /bin/true comes and goes; the parent's code is intact
 * and the parent goes on changing its pack (free, re-JIT, patch) in place:
 * the pack is still the same file (memfd backend), the parent copied
 * nothing because a child was forked.
 */
START_TEST(test_spawn_exec)
{
	enum spawn_kind kind = (enum spawn_kind)_i;

	if (access(TRUE_PATH, X_OK) != 0) {
		printf("SKIP: %s: no %s to run\n", spawn_names[kind], TRUE_PATH);
		return;
	}
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *pool = NULL;
	int rc = ep_pool_create(&cfg, &pool);

	if (rc) {
		/* (the check of the pack's file needs the memfd backend) */
		printf("SKIP: %s: no memfd pool here: %s\n", spawn_names[kind], ep_strerror(rc));
		return;
	}
	void *f = jit_ok(pool, 64, 42);
	void *n = jit_ok(pool, 320, 43);
	char before[80], after[80];

	mapping_id(f, before, sizeof(before));
	fflush(stdout);
	fflush(stderr);
	for (int round = 0; round < 3; round++) {
		pid_t pid = spawn_true(kind);

		ck_assert_msg(pid > 0, "%s: %s", spawn_names[kind], strerror(errno));
		struct fu_child sc = { .pid = pid, .tx = -1, .rx = -1 };
		int st = fu_finish(&sc, child_timeout());

		ck_assert_msg(st == 0, "%s child ended with status %d%s", spawn_names[kind], st,
			      fu_status_text(st));
		ck_assert_msg(runs_as(f, 42), "after a %s child: the function reads %#x, not 42",
			      spawn_names[kind], code_imm(f));
		ck_assert_int_eq(ep_free(pool, n), 0);
		n = jit_ok(pool, 320, 44 + (uint32_t)round);
		ck_assert_int_eq(rel_patch(pool, f, 42), 0);
		ck_assert(runs_as(f, 42));
	}
	mapping_id(f, after, sizeof(after));
	ck_assert_msg(before[0] != 0, "no mapping for %p in /proc/self/maps", f);
	ck_assert_msg(strcmp(before, after) == 0,
		      "after %s children the parent's pack was replaced by a copy "
		      "(mapping %s, now %s)",
		      spawn_names[kind], before, after);
	ck_assert_int_eq(ep_free(pool, n), 0);
	parent_pool_usable(pool, f, 42);
	ep_pool_destroy(pool);
}
END_TEST

/* ---- fork while other threads are inside every call ------------------- */

#define BUSY_THREADS 4

struct busy_worker {
	pthread_t th;
	struct ep_pool *pool;
	void *shared; /* a function every worker patches */
	int idx;
	unsigned long ops; /* atomic */
};

static void busy_run(struct busy_worker *w)
{
	uint64_t seed = 0x2545f4914f6cdd1dull * (uint64_t)(w->idx + 1);

	while (!stopping()) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		size_t size = ((size_t)16 << (seed % 8)) + (size_t)(seed >> 8) % 32;
		uint32_t v = 0x40000000u | ((uint32_t)w->idx << 20) | (uint32_t)(seed >> 40 & 0xfffff);
		struct ep_image im;
		unsigned char code[RET_IMM_LEN];
		struct ep_stats st;
		int rc = ep_alloc(w->pool, size, &im);

		TCHECK(rc == 0, "ep_alloc(%zu): %s", size, ep_strerror(rc));
		rel_emit_ret_imm(code, v);
		rc = ep_write(w->pool, im.exec, code, sizeof(code));
		TCHECK(rc == 0, "ep_write (staging): %s", ep_strerror(rc));
		rc = ep_set_name(w->pool, im.exec, (seed & 1) ? "busy_even" : "busy_odd");
		TCHECK(rc == 0, "ep_set_name: %s", ep_strerror(rc));
		rc = ep_finalize(w->pool, im.exec);
		TCHECK(rc == 0, "ep_finalize: %s", ep_strerror(rc));
		TCHECK(runs_as(im.exec, v), "new function does not return %#x", v);
		rc = rel_patch(w->pool, w->shared, v);
		TCHECK(rc == 0, "ep_write (live): %s", ep_strerror(rc));
		rc = ep_pool_stats(w->pool, &st);
		TCHECK(rc == 0, "ep_pool_stats: %s", ep_strerror(rc));
		rc = ep_free(w->pool, im.exec);
		TCHECK(rc == 0, "ep_free: %s", ep_strerror(rc));
		__atomic_add_fetch(&w->ops, 1, __ATOMIC_RELEASE);
	}
}

static void *busy_main(void *arg)
{
	busy_run(arg);
	return NULL;
}

/* In a child: the whole cycle on pool, with a name. */
static void child_cycle(struct ep_pool *pool, uint32_t v)
{
	struct ep_image im;

	CHILD_OK(ep_alloc(pool, 200, &im));
	CHILD_OK(ep_set_name(pool, im.exec, "child_fn"));
	rel_emit_ret_imm(im.rw, v);
	CHILD_OK(ep_finalize(pool, im.exec));
	CHILD_CODE(im.exec, v);
	CHILD_OK(rel_patch(pool, im.exec, v + 1));
	CHILD_CODE(im.exec, v + 1);
	CHILD_OK(ep_free(pool, im.exec));
}

static unsigned long busy_ops(struct busy_worker *w)
{
	unsigned long n = 0;

	for (int i = 0; i < BUSY_THREADS; i++)
		n += __atomic_load_n(&w[i].ops, __ATOMIC_ACQUIRE);
	return n;
}

START_TEST(test_fork_busy_threads)
{
	struct ep_pool *pool = new_pool(EP_BACKEND_AUTO, 0);
	struct busy_worker w[BUSY_THREADS];
	void *shared = jit_ok(pool, 64, 0x40000000u);
	int forks = rel_quick() ? 4 : 16, st = 0, k;

	fail_reset();
	stop_reset();
	memset(w, 0, sizeof(w));
	for (int i = 0; i < BUSY_THREADS; i++) {
		w[i].pool = pool;
		w[i].shared = shared;
		w[i].idx = i;
		VALGRIND_HG_DISABLE_CHECKING(&w[i].ops, sizeof(w[i].ops));
		ck_assert_int_eq(pthread_create(&w[i].th, NULL, busy_main, &w[i]), 0);
	}
	for (k = 0; k < forks && !failed(); k++) {
		/* the workers are in the middle of their calls */
		unsigned long ops = busy_ops(w);
		double end = now_s() + 5;

		while (busy_ops(w) < ops + 3 && now_s() < end && !failed())
			sched_yield();
		struct fu_child c;
		pid_t pid = fu_fork(&c, FU_FORK);

		if (pid < 0) {
			st = -errno;
			break;
		}
		if (pid == 0) {
			uint32_t s = code_imm(shared);

			CHILD_CHECK((s & 0xff000000u) == 0x40000000u, "shared function reads %#x", s);
			CHILD_CHECK(runs_as(shared, s), "shared function does not run as it reads");
			child_cycle(pool, 0x0c000000u | (uint32_t)k);
			struct ep_stats sst;

			CHILD_OK(ep_pool_stats(pool, &sst));
			rel_child_exit_ok(c.tx);
		}
		st = fu_finish(&c, child_timeout());
		if (st != 0)
			break;
	}
	stop_all();
	for (int i = 0; i < BUSY_THREADS; i++)
		ck_assert_int_eq(pthread_join(w[i].th, NULL), 0);
	ck_assert_msg(st == 0, "child %d (forked while %d threads were inside the library) ended "
		      "with status %d%s", k, BUSY_THREADS, st, fu_status_text(st));
	assert_no_failure();
	ck_assert_uint_gt(busy_ops(w), 0);
	ck_assert_int_eq(ep_free(pool, shared), 0);
	ep_pool_destroy(pool);
}
END_TEST

/*
 * A thread creates pools, names code in them and destroys them (which
 * drops the names), while the main thread forks: each child names code in
 * a pool of its own and must not hang.
 */
/* A pool that is quick to create: memfd with small packs where it can be
 * had (a 2 MiB pack takes milliseconds to fill), else the default. */
static int small_pool(struct ep_pool **out)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .pack_size = 64 << 10 };

	return ep_pool_create(&cfg, out) == 0 ? 0 : ep_pool_create(NULL, out);
}

static void namer_run(void)
{
	for (unsigned long i = 0; !stopping(); i++) {
		struct ep_pool *p = NULL;
		int rc = small_pool(&p);

		TCHECK(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
		/* many names: dropping them at destroy takes a while */
		for (int j = 0; j < 256; j++) {
			struct ep_image im;

			rc = ep_alloc(p, 64, &im);
			TCHECK(rc == 0, "ep_alloc: %s", ep_strerror(rc));
			rc = ep_set_name(p, im.exec, "doomed");
			TCHECK(rc == 0, "ep_set_name: %s", ep_strerror(rc));
			rel_emit_ret_imm(im.rw, 5);
			if (j % 8)
				TCHECK(ep_finalize(p, im.exec) == 0, "ep_finalize");
		}
		ep_pool_destroy(p); /* with named code alive */
	}
}

static void *namer_main(void *arg)
{
	(void)arg;
	namer_run();
	return NULL;
}

START_TEST(test_fork_naming_thread)
{
	pthread_t th;
	int forks = rel_quick() ? 5 : 60, st = 0, k;
	double end = now_s() + 2 * run_budget();

	fail_reset();
	stop_reset();
	ck_assert_int_eq(pthread_create(&th, NULL, namer_main, NULL), 0);
	for (k = 0; k < forks && (k < 10 || now_s() < end) && !failed(); k++) {
		struct fu_child c;
		pid_t pid = fu_fork(&c, FU_FORK);

		if (pid < 0) {
			st = -errno;
			break;
		}
		if (pid == 0) {
			struct ep_pool *p = NULL;

			CHILD_OK(small_pool(&p));
			child_cycle(p, 0x0d000000u | (uint32_t)k);
			ep_pool_destroy(p);
			rel_child_exit_ok(c.tx);
		}
		st = fu_finish(&c, child_timeout());
		if (st != 0)
			break;
		pause_us(500); /* let the thread get back into its calls */
	}
	stop_all();
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(st == 0, "child %d (forked while a thread named and destroyed code) ended "
		      "with status %d%s", k, st, fu_status_text(st));
	assert_no_failure();
}
END_TEST

/* ---- heaps follow the threads ------------------------------------------- */

/*
 * A thread that has exited leaves its heap to the next thread that
 * allocates: sixteen threads one after another, each leaving one program
 * alive, share one heap, hence one pack (a heap each would map a pack each).
 */
struct one_prog {
	struct ep_pool *pool;
	void *f;
	uint32_t v;
};

static void *alloc_and_exit(void *arg)
{
	struct one_prog *o = arg;
	int rc = rel_jit(o->pool, 64, o->v, &o->f);

	return rc ? NULL : o;
}

START_TEST(test_heap_adopted_after_exit)
{
	struct ep_pool *pool = new_pool(EP_BACKEND_MEMFD, 0);
	struct one_prog o[16];
	struct ep_stats st;

	for (int i = 0; i < 16; i++) {
		pthread_t t;
		void *ret = NULL;

		o[i] = (struct one_prog){ .pool = pool, .v = 100u + (uint32_t)i };
		ck_assert_int_eq(pthread_create(&t, NULL, alloc_and_exit, &o[i]), 0);
		ck_assert_int_eq(pthread_join(t, &ret), 0);
		ck_assert_ptr_eq(ret, &o[i]);
	}
	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 16);
	ck_assert_uint_eq(st.packs, 1);
	for (int i = 0; i < 16; i++) {
		ck_assert(runs_as(o[i].f, o[i].v));
		ck_assert_int_eq(ep_free(pool, o[i].f), 0); /* from a thread with no heap */
	}
	ep_pool_destroy(pool);
}
END_TEST

/* Eight threads at once, a thousand programs each, all freed, threads
 * gone: at most the one cached empty pack is left. */
static void *fill_free_exit(void *arg)
{
	struct ep_pool *pool = arg;
	void *f[1000];

	for (int i = 0; i < 1000; i++)
		if (rel_jit(pool, 64 + (size_t)(i % 7) * 96, (uint32_t)i, &f[i]))
			return NULL;
	for (int i = 0; i < 1000; i++)
		if (ep_free(pool, f[i]))
			return NULL;
	return pool;
}

START_TEST(test_heaps_give_packs_back)
{
	struct ep_pool *pool = new_pool(EP_BACKEND_MEMFD, 0);
	pthread_t t[8];
	struct ep_stats st;

	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, fill_free_exit, pool), 0);
	for (int i = 0; i < 8; i++) {
		void *ret = NULL;

		ck_assert_int_eq(pthread_join(t[i], &ret), 0);
		ck_assert_ptr_eq(ret, pool);
	}
	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ck_assert_uint_le(st.packs, 1);
	ep_pool_destroy(pool);
}
END_TEST

static Suite *manycores_suite(void)
{
	Suite *s = suite_create("manycores");
	TCase *tl = tcase_create("limit");

	tcase_set_timeout(tl, 60);
	tcase_add_loop_test(tl, test_limit_exact_among_16, 0,
			    (int)(sizeof(limit_sizes) / sizeof(limit_sizes[0])));
	tcase_add_loop_test(tl, test_limit_handoff, 0, 3);
	tcase_add_test(tl, test_limit_rounds_16);
	suite_add_tcase(s, tl);

	TCase *th = tcase_create("heaps");

	tcase_set_timeout(th, 60);
	tcase_add_test(th, test_heap_adopted_after_exit);
	tcase_add_test(th, test_heaps_give_packs_back);
	suite_add_tcase(s, th);

	TCase *ts = tcase_create("stats");

	tcase_set_timeout(ts, 60);
	tcase_add_loop_test(ts, test_stats_one_alive, 0, 3);
	tcase_add_loop_test(ts, test_stats_churn_8, 0,
			    (int)(sizeof(churn_cfgs) / sizeof(churn_cfgs[0])));
	suite_add_tcase(s, ts);

	TCase *tf = tcase_create("fork");

	tcase_set_timeout(tf, 60);
	tcase_add_loop_test(tf, test_fork_child_rejits, 0, FU_KINDS);
	tcase_add_loop_test(tf, test_fork_parent_rejits, 0, FU_KINDS);
	tcase_add_loop_test(tf, test_spawn_exec, 0, SK_KINDS);
	suite_add_tcase(s, tf);

	TCase *tt = tcase_create("fork-threads");

	tcase_set_timeout(tt, 60);
	tcase_add_test(tt, test_fork_busy_threads);
	tcase_add_test(tt, test_fork_naming_thread);
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
