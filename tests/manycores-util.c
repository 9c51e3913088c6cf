/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * manycores-util.c - check_manycores' helpers: clocks and budgets, the first
 * failure of any thread, the stop flag, pools and code checks, the
 * ep_pool_stats() monitor threads and the ring of threads taking turns
 * (manycores.h).
 */
#include "config.h"

#include "manycores.h"

/* ---- helpers ---------------------------------------------------------- */

double mc_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void mc_pause_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* How long a loop may run: short, it is the count of events that matters,
 * and under Valgrind or EP_TEST_QUICK=1 shorter still. */
double mc_run_budget(void)
{
	return rel_quick() ? 0.5 : 1.0;
}

/* How long a child may take before it counts as hung: generous, a healthy
 * one needs milliseconds even on a loaded machine. */
double mc_child_timeout(void)
{
	return RUNNING_ON_VALGRIND ? 120.0 : 20.0;
}

size_t mc_chunks_of(size_t size)
{
	return (size + EP_CHUNK_SIZE - 1) / EP_CHUNK_SIZE * EP_CHUNK_SIZE;
}

/* The first failure seen by any thread of a test (or -1 line: none). */
static pthread_mutex_t g_fail_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_fail_line;
static char g_fail_msg[400];

void mc_fail_reset(void)
{
	pthread_mutex_lock(&g_fail_lock);
	g_fail_line = 0;
	g_fail_msg[0] = 0;
	pthread_mutex_unlock(&g_fail_lock);
}

void mc_fail_record(int line, const char *fmt, ...)
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

bool mc_failed(void)
{
	pthread_mutex_lock(&g_fail_lock);
	bool f = g_fail_line != 0;

	pthread_mutex_unlock(&g_fail_lock);
	return f;
}

void mc_assert_no_failure(void)
{
	pthread_mutex_lock(&g_fail_lock);
	int line = g_fail_line;
	char msg[sizeof(g_fail_msg)];

	memcpy(msg, g_fail_msg, sizeof(msg));
	pthread_mutex_unlock(&g_fail_lock);
	ck_assert_msg(line == 0, "line %d: %s", line, msg);
}

/* The stop flag of the threads of a test: atomics, which helgrind does not
 * model, hence the annotation. */
static int g_stop;

void mc_stop_reset(void)
{
	__atomic_store_n(&g_stop, 0, __ATOMIC_RELEASE);
	VALGRIND_HG_DISABLE_CHECKING(&g_stop, sizeof(g_stop));
}

bool mc_stopping(void)
{
	return __atomic_load_n(&g_stop, __ATOMIC_ACQUIRE) != 0;
}

void mc_stop_all(void)
{
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
}

struct ep_pool *mc_new_pool(enum ep_backend b, size_t limit)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = b, .limit = limit };
	struct ep_pool *pool = NULL;
	int rc = ep_pool_create(&cfg, &pool);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	return pool;
}

/* Does the code at f read `mov eax, v; ret`?  Checked before each call, so
 * that code changed under a process is a failure, not a crash. */
bool mc_code_is(const void *f, uint32_t v)
{
	unsigned char want[RET_IMM_LEN];

	rel_emit_ret_imm(want, v);
	return memcmp(f, want, sizeof(want)) == 0;
}

uint32_t mc_code_imm(const void *f)
{
	return tu_ret_imm_of(f);
}

bool mc_runs_as(void *f, uint32_t v)
{
	return mc_code_is(f, v) && (uint32_t)rel_call(f) == v;
}

static void monitor_run(struct monitor *m)
{
	while (!mc_stopping()) {
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
			mc_pause_us(m->pause_us);
	}
}

void *mc_monitor_main(void *arg)
{
	monitor_run(arg);
	return NULL;
}

void mc_monitor_start(struct monitor *m, struct ep_pool *pool, long pause)
{
	memset(m, 0, sizeof(*m));
	m->pool = pool;
	m->pause_us = pause;
	ck_assert_int_eq(pthread_create(&m->th, NULL, mc_monitor_main, m), 0);
}

/*
 * Threads take turns (a ring): the one whose turn it is allocates, writes,
 * finalizes, calls and frees one program, then passes the turn; so its
 * ep_alloc() always comes after the previous thread's ep_free() returned.
 * The limit is the largest size, so at most one program fits, and every
 * ep_alloc() must succeed.  Sizes above 256 bytes are in the mix.  With
 * cross set, each thread leaves its program alive and the next one frees
 * it before it allocates its own: frees of other threads' programs.
 */
const size_t mc_ring_sizes[8] = { 2048, 320, 64, 1000, 2048, 512, 192, 2048 };

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
	size_t size = mc_ring_sizes[k % (sizeof(mc_ring_sizes) / sizeof(mc_ring_sizes[0]))];
	uint32_t v = 0x10000000u | ((uint32_t)idx << 20) | (uint32_t)(k & 0xfffff);
	struct ep_image im, extra;
	int rc;

	if (r->left) {
		TCHECK(mc_runs_as(r->left, r->left_v), "turn %lu: the previous program reads %#x, "
		       "not %#x", k, mc_code_imm(r->left), r->left_v);
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
	if (r->exact && mc_chunks_of(size) == RING_LIMIT) {
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
	TCHECK(mc_runs_as(im.exec, v), "turn %lu: the new program does not return %#x", k, v);
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
		bool end = mc_failed() || k + 1 >= r->max_steps ||
			   (k >= r->min_steps && mc_now_s() > r->deadline);

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
unsigned long mc_ring_run(struct ep_pool *pool, int n, bool exact, bool cross,
			      double budget, struct monitor *mons, int nmons)
{
	struct ring r = { .pool = pool, .n = n, .exact = exact, .cross = cross };
	struct ring_member *mem = calloc((size_t)n, sizeof(*mem));

	ck_assert_ptr_nonnull(mem);
	r.min_steps = rel_quick() ? 50 : 200;
	r.max_steps = rel_quick() ? 1000 : 6000;
	r.deadline = mc_now_s() + budget;
	pthread_mutex_init(&r.m, NULL);
	pthread_cond_init(&r.cv, NULL);
	mc_stop_reset();
	for (int i = 0; i < nmons; i++) {
		/* (read while the monitor runs, below: a count, no order) */
		VALGRIND_HG_DISABLE_CHECKING(&mons[i].calls, sizeof(mons[i].calls));
		ck_assert_int_eq(pthread_create(&mons[i].th, NULL, mc_monitor_main, &mons[i]), 0);
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
		for (double end = mc_now_s() + 10;
		     !__atomic_load_n(&mons[i].calls, __ATOMIC_RELAXED) && mc_now_s() < end;)
			usleep(1000);
	mc_stop_all();
	for (int i = 0; i < nmons; i++)
		ck_assert_int_eq(pthread_join(mons[i].th, NULL), 0);
	if (r.left)
		ck_assert_int_eq(ep_free(pool, r.left), 0);
	pthread_cond_destroy(&r.cv);
	pthread_mutex_destroy(&r.m);
	free(mem);
	return r.steps;
}
