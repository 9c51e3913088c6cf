/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_interleave.c - racing calls driven through many schedules.
 *
 * The library's own sources are built here with -DEP_INTERLEAVE: every
 * preemption point of the core (interleave.h: the route, an allocation's
 * state, remote lists and counts, heap adoption, the fork gate, the limit,
 * the stats counts, every lock) calls into the scheduler below.  Two or
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
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "forkutil.h"
#include "heap.h"
#include "lock.h"
#include "remote.h"
#include "reliability.h"
#include "testutil.h"

/* ---- the scheduler ------------------------------------------------------- */

#define IL_MAX 3

struct il_worker {
	pthread_t t;
	int id;
	void (*fn)(int id);
	int joined; /* (main only, and the turn holder after an exit) */
};

static struct il_worker g_w[IL_MAX];
static int g_nw;
static pthread_mutex_t g_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_cur = -1;
static __thread int il_me = -1;
/* Set: the thread runs on through its preemption points (a caller's own
 * step that no other call may split, such as an emitter's writes to a
 * window it just opened); it still hands over where it waits for a lock. */
static __thread int il_hold;
static pid_t g_pid;
static uint64_t g_rng;
static unsigned g_prio[IL_MAX];
static unsigned long g_step, g_change[3];
static unsigned long g_est; /* about the steps a schedule of the scenario takes */
static int g_nchange, g_walk, g_blocked[IL_MAX];
static unsigned long g_blocked_run;
static int g_failed;
static int g_rc[IL_MAX][4]; /* what the scenario's calls returned */
static char g_why[512];
static unsigned long g_seed;

static uint64_t rnd(void)
{
	uint64_t x = g_rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	g_rng = x;
	return x * 2685821657736338717ull;
}

static void il_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void il_fail(const char *fmt, ...)
{
	if (g_failed++)
		return;
	va_list ap;
	int n = snprintf(g_why, sizeof(g_why), "seed %lu step %lu: ", g_seed, g_step);

	va_start(ap, fmt);
	vsnprintf(g_why + n, sizeof(g_why) - (size_t)n, fmt, ap);
	va_end(ap);
}

static int alive(int i)
{
	return i < g_nw && !__atomic_load_n(&g_w[i].joined, __ATOMIC_ACQUIRE);
}

/* The next thread to run: a runnable one (not waiting for a lock, unless
 * every thread is). */
/* A scenario's own schedule: the thread to run next at where, or -1. */
static int (*g_directed)(const char *where);

static int pick(void)
{
	int best = -1, any = -1;

	if (g_walk && il_me >= 0 && alive(il_me) && !g_blocked[il_me] && rnd() % g_walk)
		return il_me;
	unsigned off = (unsigned)(rnd() % IL_MAX);

	for (int k = 0; k < IL_MAX; k++) {
		int i = (int)((k + off) % IL_MAX);

		if (!alive(i))
			continue;
		if (any < 0)
			any = i;
		if (g_blocked[i])
			continue;
		if (g_walk) {
			if (best < 0)
				best = i;
		} else if (best < 0 || g_prio[i] > g_prio[best]) {
			best = i;
		}
	}
	return best >= 0 ? best : any;
}

static void handoff(int next)
{
	pthread_mutex_lock(&g_m);
	g_cur = next;
	pthread_cond_broadcast(&g_cv);
	while (g_cur != il_me)
		pthread_cond_wait(&g_cv, &g_m);
	pthread_mutex_unlock(&g_m);
}

static int managed(void)
{
	return il_me >= 0 && getpid() == g_pid;
}

static void il_check(const char *where);

/* A scenario's signal: called at every preemption point, as a handler
 * that interrupted the thread there would run (never nested). */
static void (*g_signal)(const char *where);
static __thread int il_in_signal;

void ep__il_yield(const char *where)
{
	if (!managed() || il_hold)
		return;
	g_step++;
	memset(g_blocked, 0, sizeof(g_blocked));
	g_blocked_run = 0;
	il_check(where);
	if (g_signal && !il_in_signal) {
		il_in_signal = 1;
		g_signal(where);
		il_in_signal = 0;
	}
	for (int i = 0; i < g_nchange; i++)
		if (g_step == g_change[i])
			g_prio[il_me] = (unsigned)i; /* below every starting priority */
	int next = g_directed ? g_directed(where) : -1;

	if (next < 0 || !alive(next))
		next = pick();

	if (next != il_me)
		handoff(next);
}

void ep__il_blocked(const char *where)
{
	if (!managed()) {
		sched_yield(); /* a fork child: nothing to hand over to */
		return;
	}
	g_blocked[il_me] = 1;
	if (++g_blocked_run > 100000) {
		fprintf(stderr, "check_interleave: seed %lu: every thread waits (%s): deadlock\n",
			g_seed, where);
		_exit(1);
	}
	int next = pick();

	if (next != il_me)
		handoff(next);
}

/* Locks held now, to see a second holder. */
static struct {
	const void *lock;
	int holder;
} g_held[64];

void ep__il_enter(const void *lock)
{
	if (!managed())
		return;
	for (int i = 0; i < 64; i++) {
		if (g_held[i].lock == lock) {
			il_fail("lock %p taken by thread %d while thread %d holds it", lock, il_me,
				g_held[i].holder);
			return;
		}
	}
	for (int i = 0; i < 64; i++) {
		if (!g_held[i].lock) {
			g_held[i].lock = lock;
			g_held[i].holder = il_me;
			return;
		}
	}
}

void ep__il_leave(const void *lock)
{
	if (!managed())
		return;
	for (int i = 0; i < 64; i++)
		if (g_held[i].lock == lock)
			g_held[i].lock = NULL;
}

static void *il_thread(void *arg)
{
	struct il_worker *w = arg;

	il_me = w->id;
	pthread_mutex_lock(&g_m);
	while (g_cur != il_me)
		pthread_cond_wait(&g_cv, &g_m);
	pthread_mutex_unlock(&g_m);
	w->fn(w->id);
	/* returns holding the turn: the thread-exit hooks may still yield;
	 * run() gives the turn on once the thread is gone */
	return NULL;
}

/* One schedule of fns[0..n-1] under seed. */
static void run(unsigned long seed, void (**fns)(int), int n)
{
	g_seed = seed;
	g_pid = getpid(); /* (Check runs each test in a child of its own) */
	memset(g_rc, 0, sizeof(g_rc));
	g_rng = seed * 0x9e3779b97f4a7c15ull + 1;
	g_step = 0;
	/* odd seeds: a walk that switches with probability 1/2 to 1/6 */
	g_walk = seed & 1 ? 2 + (int)(seed / 2 % 5) : 0;
	g_nw = n;
	g_cur = -1;
	g_blocked_run = 0;
	memset(g_blocked, 0, sizeof(g_blocked));
	memset(g_held, 0, sizeof(g_held));
	/* PCT: distinct priorities above the change points' values, and the
	 * demotions somewhere in the steps the scenario takes */
	for (int i = 0; i < IL_MAX; i++)
		g_prio[i] = 10 + (unsigned)i;
	for (int i = IL_MAX - 1; i > 0; i--) {
		int j = (int)(rnd() % (unsigned)(i + 1));
		unsigned t = g_prio[i];

		g_prio[i] = g_prio[j];
		g_prio[j] = t;
	}
	g_nchange = 1 + (int)(seed / 2 % 3);
	for (int i = 0; i < g_nchange; i++)
		g_change[i] = 1 + rnd() % g_est;
	for (int i = 0; i < n; i++) {
		g_w[i] = (struct il_worker){ .id = i, .fn = fns[i] };
		ck_assert_int_eq(pthread_create(&g_w[i].t, NULL, il_thread, &g_w[i]), 0);
	}
	pthread_mutex_lock(&g_m);
	g_cur = pick();
	pthread_cond_broadcast(&g_cv);
	pthread_mutex_unlock(&g_m);
	for (int left = n; left;) {
		for (int i = 0; i < n; i++) {
			if (g_w[i].joined || pthread_tryjoin_np(g_w[i].t, NULL))
				continue;
			pthread_mutex_lock(&g_m);
			__atomic_store_n(&g_w[i].joined, 1, __ATOMIC_RELEASE);
			left--;
			if (g_cur == i && left) {
				g_cur = pick();
				pthread_cond_broadcast(&g_cv);
			}
			pthread_mutex_unlock(&g_m);
		}
		if (left) {
			struct timespec ts = { 0, 20000 };

			nanosleep(&ts, NULL);
		}
	}
}

/* ---- the model and the invariants ---------------------------------------- */

#define MODEL 64

static struct ep_pool *g_pool;
static size_t g_pack_size;
static struct {
	unsigned char *exec;
	size_t size;
	int live;
	int freeing; /* an ep_free() of it has begun (its chunks may be reused
		      * before the call returns) */
	char name[16]; /* named when set */
} g_model[MODEL];
static unsigned char *g_freed[MODEL]; /* addresses freed with a name once */
static int g_nfreed;

static void model_add(unsigned char *x, size_t size)
{
	for (int i = 0; i < MODEL; i++) {
		if (g_model[i].live && !g_model[i].freeing && x < g_model[i].exec + g_model[i].size &&
		    g_model[i].exec < x + size)
			il_fail("new allocation %p+%zu overlaps live %p+%zu", (void *)x, size,
				(void *)g_model[i].exec, g_model[i].size);
	}
	for (int i = 0; i < MODEL; i++) {
		if (!g_model[i].live) {
			g_model[i].exec = x;
			g_model[i].size = size;
			g_model[i].live = 1;
			g_model[i].freeing = 0;
			g_model[i].name[0] = 0;
			return;
		}
	}
	il_fail("model full");
}

/* (an address may be live twice while an ep_free() of it has not
 * returned: a code range hands freed space to any heap at once; the one
 * not being freed is the one a new call means) */
static int model_find(const void *x)
{
	int any = -1;

	for (int i = 0; i < MODEL; i++) {
		if (g_model[i].live && g_model[i].exec == x) {
			if (!g_model[i].freeing)
				return i;
			any = i;
		}
	}
	return any;
}

static void model_gone_at(int i, const void *x)
{
	if (i < 0) {
		il_fail("ep_free(%p) returned 0, but it was not live", x);
		return;
	}
	if (g_model[i].name[0] && g_nfreed < MODEL)
		g_freed[g_nfreed++] = g_model[i].exec;
	g_model[i].live = 0;
}

static void model_gone(const void *x)
{
	model_gone_at(model_find(x), x);
}

/* A chunk of the trap fill (chunks are aligned to their size, at least 16
 * bytes; the fills' periods divide 16). */
static unsigned char g_trap[EP_CHUNK_SIZE] __attribute__((aligned(EP_CHUNK_SIZE)));

static void check_traps(const char *where)
{
	for (struct ep__heap *h = ep__load_acquire(&g_pool->heaps); h;
	     h = h->next_heap) {
		for (struct ep__pack *p = h->head; p; p = p->next) {
			if (__atomic_load_n(&p->seq, __ATOMIC_RELAXED) & 1)
				continue;
			for (size_t c = 0; c < p->nchunks; c++) {
				if (ep__bitmap_test(p->used, c))
					continue;
				unsigned char *b = (unsigned char *)p->r.exec + (c << p->shift);

				if (memcmp(b, g_trap, (size_t)1 << p->shift)) {
					il_fail("free chunk %zu of a pack (%p) holds code (at %s)", c,
						(void *)b, where);
					return;
				}
			}
		}
	}
}

static void check_stats(const char *where)
{
	struct ep_stats st;

	if (ep_pool_stats(g_pool, &st)) {
		il_fail("ep_pool_stats failed");
		return;
	}
	if (st.used_bytes > st.pack_bytes || st.pack_bytes > st.packs * g_pack_size ||
	    st.large_allocs > st.live_allocs)
		il_fail("stats relation broken at %s: packs %zu pack_bytes %zu used_bytes %zu "
			"live %zu large %zu",
			where, st.packs, st.pack_bytes, st.used_bytes, st.live_allocs,
			st.large_allocs);
	if (g_pool->limit && ep__load_relaxed(&g_pool->charged) > g_pool->limit)
		il_fail("limit %zu, %zu charged", g_pool->limit, g_pool->charged);
}

static int g_no_stats; /* EP_IL_NO_STATS=1: look past a stats failure */
/* Every step is checked; a quick run (EP_TEST_QUICK: Valgrind, the
 * emulated aarch64 stage) reads the packs' free chunks every 4th step, and
 * a scenario that takes tens of thousands of steps of one kind (the lock
 * replay) checks only what it is about. */
static unsigned g_trap_every = 1;
static int g_steps_unchecked;

static void il_check(const char *where)
{
	if (!g_pool || g_steps_unchecked)
		return;
	if (!g_no_stats)
		check_stats(where);
	if (g_step % g_trap_every == 0)
		check_traps(where);
}

/* With no thread running: what the calls left must be exactly the live
 * allocations' doing. */
static void check_quiet(void)
{
	/* the chunks that frees from other threads left queued come back */
	for (struct ep__heap *h = g_pool->heaps; h; h = h->next_heap) {
		ep__lock(&h->lock);
		ep__remote_drain(h);
		ep__unlock(&h->lock);
	}
	check_traps("end");
	size_t live = 0, bytes = 0;

	for (int i = 0; i < MODEL; i++) {
		if (!g_model[i].live)
			continue;
		live++;
		bytes += g_model[i].size;
		if (ep_write(g_pool, g_model[i].exec, NULL, 0))
			il_fail("live allocation %p is not live for the library",
				(void *)g_model[i].exec);
	}
	for (struct ep__heap *h = g_pool->heaps; h; h = h->next_heap)
		for (size_t b = 0; b <= h->hash_mask; b++)
			for (struct ep__alloc *a = h->hash[b]; a; a = a->hnext)
				if (model_find(a->exec) < 0)
					il_fail("a record of %p, which is not live", a->exec);
	for (int i = 0; i < g_nfreed; i++) {
		char name[32];
		size_t off;

		if (model_find(g_freed[i]) < 0 &&
		    ep_symbolize(g_freed[i], name, sizeof(name), &off) == 0)
			il_fail("freed %p is still named %s", (void *)g_freed[i], name);
	}
	struct ep_stats st;

	ep_pool_stats(g_pool, &st);
	if (st.live_allocs != live || st.used_bytes + st.large_bytes < bytes)
		il_fail("stats after the run: live %zu used %zu large %zu; the model: %zu live, "
			"%zu bytes",
			st.live_allocs, st.used_bytes, st.large_bytes, live, bytes);
	if (g_pool->limit && g_pool->charged != bytes)
		il_fail("limit: %zu charged for %zu bytes live", g_pool->charged, bytes);
}

/* A pool for a schedule: the memfd backend always (AUTO would pick huge
 * pages where the machine has them reserved, whose packs are larger). */
static void pool_begin(const struct ep_config *cfg_in)
{
	struct ep_config cfg = { .sz = sizeof(cfg) };

	if (cfg_in)
		cfg = *cfg_in;
	cfg.backend = EP_BACKEND_MEMFD;
	TU_FILL(g_trap, sizeof(g_trap), NULL);
	memset(g_model, 0, sizeof(g_model));
	g_nfreed = 0;
	ck_assert_int_eq(ep_pool_create(&cfg, &g_pool), 0);
	g_pack_size = g_pool->first->pack_size;
}

static void pool_end(void)
{
	struct ep_pool *p = g_pool;

	check_quiet();
	g_pool = NULL;
	ep_pool_destroy(p);
}

/* ---- what the threads call ----------------------------------------------- */

static unsigned char *g_pub[4]; /* allocations handed between threads */

/* Wait (as a thread that cannot go on) until slot i holds something. */
static unsigned char *await(int i)
{
	while (!g_pub[i])
		ep__il_blocked("script wait");
	return g_pub[i];
}

/* ep_alloc + code + ep_finalize (fin); the model learns it. */
static unsigned char *jit(size_t n, int fin)
{
	struct ep_image img;
	int rc = ep_alloc(g_pool, n, &img);

	if (rc) {
		il_fail("ep_alloc(%zu): %d", n, rc);
		return NULL;
	}
	model_add(img.exec, img.size);
	memset(img.rw, 0x11, n); /* not a trap on any architecture */
	if (fin && (rc = ep_finalize(g_pool, img.exec)))
		il_fail("ep_finalize: %d", rc);
	return img.exec;
}

static int do_free(unsigned char *x)
{
	int i = -1;

	/* (the newest at x: an older one may still be in its own free, its
	 * chunks reused before that free's caller got back) */
	for (int k = 0; k < MODEL && i < 0; k++)
		if (g_model[k].live && !g_model[k].freeing && g_model[k].exec == x)
			i = k;
	if (i < 0)
		i = model_find(x);

	if (i >= 0)
		g_model[i].freeing++;
	int rc = ep_free(g_pool, x);

	if (rc == 0 && i >= 0 && g_model[i].live && g_model[i].exec == x)
		model_gone_at(i, x); /* (the entry this call marked) */
	else if (rc == 0)
		model_gone(x);
	else if (i >= 0 && g_model[i].exec == x)
		g_model[i].freeing--;
	return rc;
}

/* ---- scenarios ----------------------------------------------------------- */

static unsigned long g_schedules = 1000; /* per scenario (EP_IL_SCHEDULES) */

/* Run one under the seeds 1, 2, ... (g_schedules / share of them: a
 * scenario whose every schedule is slow runs fewer).  Whether it ran
 * (EP_IL_ONLY may name another). */
static int each_seed(const char *name, void (*one)(unsigned long seed), unsigned long est,
		     unsigned long share)
{
	const char *s = getenv("EP_IL_SEED");

	unsigned long steps = 0, runs = 0;
	struct timespec t0, t1;
	const char *only = getenv("EP_IL_ONLY");

	if (only && strcmp(only, name))
		return 0;
	g_est = est;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (s) {
		one(strtoul(s, NULL, 10));
		steps = g_step;
		runs = 1;
	} else {
		unsigned long n = g_schedules / share ? g_schedules / share : 1;

		for (unsigned long seed = 1; seed <= n && !g_failed; seed++, runs++) {
			one(seed);
			steps += g_step;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%s: %lu schedules, %lu steps, %.2f s\n", name, runs, steps,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	ck_assert_msg(!g_failed, "%s", g_why);
	return 1;
}

/* 1. The heap lock: a thread that frees another's staged programs takes
 * the owner's lock while the owner allocates; no lock ever has two holders
 * (ep__il_enter). */
static void s1_owner(int id)
{
	(void)id;
	for (int i = 0; i < 3; i++) {
		g_pub[i] = jit(64 + 64 * (size_t)i, 0);
		jit(100, 1);
	}
}

static void s1_other(int id)
{
	for (int i = 0; i < 3; i++)
		g_rc[id][i] = do_free(await(i));
}

static void s1(unsigned long seed)
{
	void (*fns[])(int) = { s1_owner, s1_other };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(NULL);
	run(seed, fns, 2);
	for (int i = 0; i < 3; i++)
		if (g_rc[1][i])
			il_fail("free of a staged program from another thread: %d", g_rc[1][i]);
	pool_end();
}

START_TEST(test_lock_one_holder)
{
	each_seed("s1", s1, 100, 1);
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
	g_pub[0] = jit(64, 1);
	g_s0_calls[id] = 1;
	g_rc[id][0] = ep_write(g_pool, g_pub[0] + 4, "\x11", 1);
}

static void s0_other(int id)
{
	unsigned char *x = await(0);

	for (int i = 0; i <= S0_CALLS && !g_failed; i++, g_s0_calls[id]++)
		if ((g_rc[id][0] = ep_write(g_pool, x + 8, "\x11", 1)))
			break;
}

static void s0(unsigned long seed)
{
	void (*fns[])(int) = { s0_owner, s0_other };

	memset(g_pub, 0, sizeof(g_pub));
	g_s0_phase = g_s0_biased = 0;
	g_s0_calls[0] = g_s0_calls[1] = 0;
	g_directed = s0_schedule;
	g_steps_unchecked = 1; /* (the locks' holders are checked at each entry) */
	pool_begin(NULL);
	run(seed, fns, 2);
	g_directed = NULL;
	g_steps_unchecked = 0;
	if (g_s0_phase != 2)
		il_fail("the replay did not reach its end (phase %d)", g_s0_phase);
	if (g_rc[0][0] || g_rc[1][0])
		il_fail("writes: %d %d", g_rc[0][0], g_rc[1][0]);
	pool_end();
}

START_TEST(test_lock_replay)
{
	each_seed("s0", s0, 100, ~0ul); /* a fixed schedule: once is enough */
}
END_TEST

/* 2. ep_write() racing an ep_free() from another thread: whatever the
 * order, no written byte is left in a freed chunk. */
static void s2_owner(int id)
{
	(void)id;
	g_pub[0] = jit(200, 1);
	jit(64, 1); /* (and drains what was freed meanwhile) */
}

static void s2_writer(int id)
{
	static const unsigned char code[16] = { 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22,
						0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22 };

	g_rc[id][0] = ep_write(g_pool, await(0) + 64, code, sizeof(code));
}

static void s2_freer(int id)
{
	g_rc[id][0] = do_free(await(0));
}

static void s2(unsigned long seed)
{
	void (*fns[])(int) = { s2_owner, s2_writer, s2_freer };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(NULL);
	run(seed, fns, 3);
	if (g_rc[2][0])
		il_fail("the free failed: %d", g_rc[2][0]);
	if (g_rc[1][0] && g_rc[1][0] != -EINVAL)
		il_fail("the write failed with %d", g_rc[1][0]);
	pool_end();
}

START_TEST(test_write_vs_free)
{
	each_seed("s2", s2, 55, 1);
}
END_TEST

/* 3. ep_set_name() racing an ep_free() from another thread: no record or
 * name is left of freed code, and later allocations never overlap. */
static void s3_owner(int id)
{
	(void)id;
	g_pub[0] = jit(128, 1);
	for (int i = 0; i < 3; i++)
		jit(64, 1);
}

static void s3_namer(int id)
{
	unsigned char *x = await(0);

	g_rc[id][0] = ep_set_name(g_pool, x, "s3_program");
	if (g_rc[id][0] == 0) {
		int i = model_find(x);

		if (i >= 0)
			strcpy(g_model[i].name, "s3");
		else if (g_nfreed < MODEL)
			g_freed[g_nfreed++] = x; /* named after the free returned: must fail */
	}
}

static void s3_freer(int id)
{
	unsigned char *x = await(0);

	g_rc[id][0] = do_free(x);
	if (g_nfreed < MODEL)
		g_freed[g_nfreed++] = x;
}

static void s3(unsigned long seed)
{
	void (*fns[])(int) = { s3_owner, s3_namer, s3_freer };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(NULL);
	run(seed, fns, 3);
	if (g_rc[2][0])
		il_fail("the free failed: %d", g_rc[2][0]);
	pool_end();
}

START_TEST(test_name_vs_free)
{
	each_seed("s3", s3, 75, 1);
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
		int rc = ep_alloc(g_pool, 64, &img);

		if (rc == 0)
			rc = ep_finalize(g_pool, img.exec);
		if (rc == 0)
			rc = ep_free(g_pool, img.exec);
		if (rc)
			_exit(2);
		rel_child_exit_ok(c.tx);
	}
	/* (a SIGKILL after 'k' is a pass: the child spared memcheck's leak
	 * check of what the parent's other threads held; reliability.h) */
	g_rc[id][0] = pid < 0 ? -errno : fu_finish(&c, 30);
}

static void s4_claimer(int id)
{
	(void)id;
	jit(64, 1);
}

static void s4(unsigned long seed)
{
	void (*fns[])(int) = { s4_forker, s4_claimer, s4_claimer };

	pool_begin(NULL);
	run(seed, fns, 3);
	if (g_rc[0][0] != 0)
		il_fail("the fork child's first ep_alloc(): exit status %d (%d: killed by "
			"its alarm, hung)",
			g_rc[0][0], 128 + SIGALRM);
	pool_end();
}

START_TEST(test_fork_vs_heap_claim)
{
	each_seed("s4", s4, 70, 1);
}
END_TEST

/* 5. A double free from another thread racing the owner's reuse of the
 * chunk: the owner's correct calls on its new allocation never fail
 * because of it (unless the double free hit the very same address, which
 * is then the new allocation's free, and says so by returning 0). */
static void s5_owner(int id)
{
	g_pub[0] = jit(128, 1);
	while (!g_pub[1])
		ep__il_blocked("script wait"); /* the first free is done */
	struct ep_image img;
	int rc = ep_alloc(g_pool, 128, &img);

	if (rc) {
		il_fail("ep_alloc: %d", rc);
		return;
	}
	model_add(img.exec, img.size);
	g_pub[2] = img.exec;
	memset(img.rw, 0x11, 128);
	g_rc[id][0] = ep_finalize(g_pool, img.exec);
	g_rc[id][1] = ep_write(g_pool, img.exec + 8, "\x11\x11", 2);
	g_rc[id][2] = do_free(img.exec);
}

static void s5_freer(int id)
{
	unsigned char *x = await(0);

	g_rc[id][0] = do_free(x);
	g_pub[1] = x;
	g_rc[id][1] = ep_free(g_pool, x); /* the caller's bug */
}

static void s5(unsigned long seed)
{
	void (*fns[])(int) = { s5_owner, s5_freer };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(NULL);
	run(seed, fns, 2);
	if (g_rc[1][0])
		il_fail("the first free failed: %d", g_rc[1][0]);
	int hit_same = g_rc[1][1] == 0;

	if (hit_same && g_pub[2] != g_pub[0])
		il_fail("a double free of %p returned 0 with nothing live there",
			(void *)g_pub[0]);
	if (hit_same && model_find(g_pub[2]) >= 0)
		g_model[model_find(g_pub[2])].live = 0; /* what the double free freed */
	for (int i = 0; i < 3 && !hit_same; i++)
		if (g_rc[0][i])
			il_fail("the owner's call %d on its new allocation failed with %d "
				"(a double free of another address took it)",
				i, g_rc[0][i]);
	pool_end();
}

START_TEST(test_double_free_vs_reuse)
{
	each_seed("s5", s5, 70, 1);
}
END_TEST

/* 7. The stats' relations at every step while packs come and go (small
 * packs; sealed ones too: committed whole). */
static void s7_churn(int id)
{
	(void)id;
	for (int i = 0; i < 3; i++) {
		unsigned char *x = jit(40000, 1);

		if (x)
			do_free(x);
	}
}

static void s7_monitor(int id)
{
	(void)id;
	for (int i = 0; i < 30; i++)
		check_stats("monitor");
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
	pool_begin(&cfg);
	run(seed, fns, 3);
	pool_end();
}

START_TEST(test_stats_relations)
{
	each_seed("s7", s7, 150, 1);
}
END_TEST

/* 8. The limit counts what is reserved: a request that fails (no room for
 * it near the code) never holds a charge that makes another thread's
 * small allocation fail. */
#define S8_BIG (((size_t)4 << 30) - ((size_t)8 << 20))

static void s8_big(int id)
{
	struct ep_image img;

	g_rc[id][0] = ep_alloc(g_pool, S8_BIG, &img);
	if (g_rc[id][0] == 0)
		model_add(img.exec, img.size);
}

static void s8_small(int id)
{
	(void)id;
	jit(64, 1);
}

static void s8(unsigned long seed)
{
	void (*fns[])(int) = { s8_big, s8_small };
	struct ep_config cfg = {
		.sz = sizeof(cfg), .limit = S8_BIG, .near = (const void *)&s8,
	};

	pool_begin(&cfg);
	run(seed, fns, 2);
	/* (-EPERM when the small one came first: then it does not fit) */
	if (g_rc[0][0] != -EADDRNOTAVAIL && g_rc[0][0] != -EPERM)
		il_fail("the request of 4 GiB - 8 MiB near the code: %d", g_rc[0][0]);
	pool_end();
}

START_TEST(test_limit_counts_what_exists)
{
	each_seed("s8", s8, 50, 20);
}
END_TEST

/* The thread-exit handshake: a thread frees another's program while that
 * thread exits, a third adopts the heap; the chunks always come back. */
static void s9_exiter(int id)
{
	(void)id;
	g_pub[0] = jit(256, 1);
	g_pub[1] = jit(64, 1);
}

static void s9_freer(int id)
{
	g_rc[id][0] = do_free(await(1));
	g_rc[id][1] = do_free(await(0));
}

static void s9(unsigned long seed)
{
	void (*fns[])(int) = { s9_exiter, s9_freer, s4_claimer };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(NULL);
	run(seed, fns, 3);
	if (g_rc[1][0] || g_rc[1][1])
		il_fail("frees: %d %d", g_rc[1][0], g_rc[1][1]);
	pool_end();
}

START_TEST(test_exit_vs_remote_free)
{
	each_seed("s9", s9, 90, 1);
}
END_TEST

/* Shrink and finalize racing frees from other threads.  With a limit, and
 * one program that stays: a free that took the shrunk program for longer
 * than it is (its state byte's length) gives back more than it was
 * charged and counted, which the checks after the run see. */
static void s10_owner(int id)
{
	jit(64, 1);
	g_pub[0] = jit(300, 1);
	g_pub[1] = jit(300, 0);
	g_rc[id][0] = ep_shrink(g_pool, g_pub[0], 70);
	if (g_rc[id][0] == 0 && model_find(g_pub[0]) >= 0)
		g_model[model_find(g_pub[0])].size = 128;
	g_rc[id][1] = ep_finalize(g_pool, g_pub[1]);
}

static void s10_freer(int id)
{
	g_rc[id][id - 1] = do_free(await(id - 1));
}

static void s10(unsigned long seed)
{
	void (*fns[])(int) = { s10_owner, s10_freer, s10_freer };
	struct ep_config cfg = { .sz = sizeof(cfg), .limit = 1 << 20 };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(&cfg);
	run(seed, fns, 3);
	for (int i = 0; i < 2; i++) {
		if (g_rc[0][i] && g_rc[0][i] != -EINVAL)
			il_fail("owner's call %d: %d", i, g_rc[0][i]);
		if (g_rc[i + 1][i])
			il_fail("free %d: %d", i, g_rc[i + 1][i]);
	}
	pool_end();
}

START_TEST(test_shrink_finalize_vs_free)
{
	each_seed("s10", s10, 65, 1);
}
END_TEST

/* 11. A double free whose pack is released and its struct reused for a
 * new region while the free is under way: the owner's allocation in the
 * new region (at the chunk the stale address had in the old one) is never
 * disturbed: its write and free succeed in every schedule, and the double
 * free fails.  The old region's range is kept taken meanwhile, so that the
 * new one lies elsewhere (one at the same address would be the new
 * allocation's, rightly freed).  A third of the seeds direct it: the stale
 * free is held at its k-th point until the new allocation exists, then
 * runs j more points, then the owner runs. */
static int g_s11_stale, g_s11_seen, g_s11_k, g_s11_j, g_s11_phase;
static void *g_s11_plug;

static int s11_schedule(const char *where)
{
	(void)where;
	switch (g_s11_phase) {
	case 0:
		if (il_me != 1 || !g_s11_stale || ++g_s11_seen < g_s11_k)
			return -1;
		g_s11_phase = 1;
		/* fall through */
	case 1:
		if (!g_pub[2])
			return 0; /* held until the new allocation exists */
		g_s11_phase = 2;
		return 1;
	case 2:
		if (il_me == 1 && --g_s11_j <= 0)
			g_s11_phase = 3;
		return g_s11_phase == 2 ? 1 : 0;
	default:
		return 0;
	}
}

static void s11_owner(int id)
{
	unsigned char *a = jit(64, 1); /* chunk 0 of the first pack */

	/* a second pack, emptied: the heap keeps it, so the first is released
	 * when it empties */
	g_rc[id][3] = do_free(jit(g_pack_size, 0));
	g_pub[0] = a;
	while (!g_pub[1])
		ep__il_blocked("script wait"); /* the first free is done */
	jit(g_pack_size, 0); /* drains: the first pack goes, this takes the second */
	g_s11_plug = mmap(g_pub[0], g_pack_size, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (g_s11_plug == MAP_FAILED)
		g_s11_plug = NULL;
	else if (g_s11_plug != g_pub[0])
		il_fail("MAP_FIXED_NOREPLACE placed %p at %p", (void *)g_pub[0], g_s11_plug);
	/* a new pack: the released struct, unless a free still pins it */
	unsigned char *x = jit(64, 1);

	g_pub[2] = x;
	g_rc[id][0] = ep_write(g_pool, x + 8, "\x11\x11", 2);
	g_rc[id][1] = x ? do_free(x) : -1;
}

static void s11_freer(int id)
{
	unsigned char *x = await(0);

	g_rc[id][0] = do_free(x);
	g_pub[1] = x;
	g_s11_stale = 1;
	g_rc[id][1] = ep_free(g_pool, x); /* the caller's bug */
	g_s11_stale = 0;
}

static void s11(unsigned long seed)
{
	void (*fns[])(int) = { s11_owner, s11_freer };
	struct ep_config cfg = { .sz = sizeof(cfg), .pack_size = 64 << 10 };

	memset(g_pub, 0, sizeof(g_pub));
	g_s11_stale = g_s11_seen = g_s11_phase = 0;
	g_s11_k = (int)(seed / 3 % 4) + 1;
	g_s11_j = (int)(seed / 12 % 4) + 1;
	g_s11_plug = NULL;
	g_directed = seed % 3 == 0 ? s11_schedule : NULL;
	pool_begin(&cfg);
	run(seed, fns, 2);
	g_directed = NULL;
	if (g_rc[1][0] || g_rc[0][3])
		il_fail("the first frees failed: %d %d", g_rc[1][0], g_rc[0][3]);
	int same = g_pub[2] == g_pub[0];

	if (same && g_rc[1][1] == 0 && model_find(g_pub[2]) >= 0)
		g_model[model_find(g_pub[2])].live = 0; /* what the double free freed */
	if (!same && g_rc[1][1] != -EINVAL)
		il_fail("the double free of %p (its pack reused at %p) returned %d",
			(void *)g_pub[0], (void *)g_pub[2], g_rc[1][1]);
	for (int i = 0; i < 2 && !(same && g_rc[1][1] == 0); i++)
		if (g_rc[0][i])
			il_fail("the owner's call %d on its allocation in the reused pack failed "
				"with %d (a stale free claimed it)",
				i, g_rc[0][i]);
	if (g_s11_plug)
		munmap(g_s11_plug, g_pack_size);
	pool_end();
}

START_TEST(test_stale_free_vs_pack_reuse)
{
	each_seed("s11", s11, 120, 1);
}
END_TEST

/* 12. Threads of their own heaps mapping and unmapping regions of one code
 * range at once (code-range.c): every region inside it, none lost or
 * handed out twice, every call succeeds. */
#define S12_PACK ((size_t)64 << 10)
static uintptr_t g_s12[3][2];

static void s12_span(int id, const unsigned char *x, size_t n)
{
	if (!x)
		return;
	if (!g_s12[id][0] || (uintptr_t)x < g_s12[id][0])
		g_s12[id][0] = (uintptr_t)x;
	if ((uintptr_t)x + n > g_s12[id][1])
		g_s12[id][1] = (uintptr_t)x + n;
}

static void s12_large(int id)
{
	for (int i = 0; i < 2; i++) {
		unsigned char *x = jit(2 * S12_PACK, 1);

		s12_span(id, x, 2 * S12_PACK);
		g_rc[id][i] = x ? do_free(x) : -1;
	}
}

static void s12_small(int id)
{
	unsigned char *x = jit(100, 1);

	s12_span(id, x, 100);
	g_rc[id][0] = x ? do_free(x) : -1;
	x = jit(S12_PACK + 1, 0);
	s12_span(id, x, S12_PACK + 1);
	g_rc[id][1] = x ? do_free(x) : -1;
}

static void s12(unsigned long seed)
{
	void (*fns[])(int) = { s12_large, s12_large, s12_small };
	/* (what they hold at once, 6 packs and a page, and room for the
	 * holes first fit leaves between regions of mixed sizes) */
	size_t range = 10 * S12_PACK;
	struct ep_config cfg = { .sz = sizeof(cfg), .pack_size = S12_PACK, .code_range = range };
	uintptr_t lo = UINTPTR_MAX, hi = 0;

	memset(g_s12, 0, sizeof(g_s12));
	pool_begin(&cfg);
	run(seed, fns, 3);
	for (int i = 0; i < 3; i++) {
		for (int k = 0; k < 2; k++)
			if (g_rc[i][k])
				il_fail("thread %d, call %d: %d", i, k, g_rc[i][k]);
		if (g_s12[i][0] && g_s12[i][0] < lo)
			lo = g_s12[i][0];
		if (g_s12[i][1] > hi)
			hi = g_s12[i][1];
	}
	if (hi - lo > range)
		il_fail("regions span %zu bytes of a %zu-byte range", (size_t)(hi - lo), range);
	pool_end();
}

START_TEST(test_code_range)
{
	each_seed("s12", s12, 120, 1);
}
END_TEST

/* 20. A code range of two packs and three threads allocating at once: a
 * heap with no pack allocates in another heap's (heap.c), racing that
 * heap's own thread and frees from the third; each thread's first program
 * stays live until all three are made, so one of them always borrows.
 * Every call succeeds, and the model holds (check_quiet()). */
static void s20_thread(int id)
{
	unsigned char *x = jit(100, 1), *y;

	g_pub[id] = x;
	for (int i = 0; i < 3; i++)
		await(i);
	y = jit(200, id != 1);
	g_rc[id][0] = y ? do_free(y) : -1;
	g_rc[id][1] = do_free(g_pub[(id + 1) % 3]);
}

static void s20(unsigned long seed)
{
	void (*fns[])(int) = { s20_thread, s20_thread, s20_thread };
	struct ep_config cfg = { .sz = sizeof(cfg), .pack_size = S12_PACK,
				 .code_range = 2 * S12_PACK };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(&cfg);
	run(seed, fns, 3);
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 2; k++)
			if (g_rc[i][k])
				il_fail("thread %d, call %d: %d", i, k, g_rc[i][k]);
	pool_end();
}

START_TEST(test_code_range_shared)
{
	each_seed("s20", s20, 150, 1);
}
END_TEST

/* 14. Patch windows racing frees, by the owner and by another thread
 * (which takes a plain allocation without the lock, but not one with a
 * window), and lookups; the emitter's writes to an open window do not race
 * its free (patch_fill()), its commit does: a commit never writes chunks
 * that were given back
 * (the free chunks hold traps at every step), a window never outlives its
 * allocation (no record of a freed one), and a commit that succeeded on
 * code that stays is there. */
static void s14_owner(int id)
{
	g_pub[0] = jit(200, 1);
	g_pub[1] = jit(64, 1);
	g_pub[2] = jit(128, 1);
	g_rc[id][0] = do_free(g_pub[1]);
}

/* hold: the begin and the writes to rw are one step, so that a free racing
 * the window comes before the begin or after the writes (a free closes the
 * window and its buffers go: rw is not used after it, ep_patch_begin(3));
 * the commit still races the free. */
static int patch_fill(unsigned char *x, size_t off, size_t len, unsigned char v, int hold)
{
	void *rw;

	il_hold = hold;
	int rc = ep_patch_begin(g_pool, x + off, len, &rw);

	if (!rc)
		memset(rw, v, len);
	il_hold = 0;
	if (rc)
		return rc;
	return ep_patch_commit(g_pool, x + off);
}

static void s14_patcher(int id)
{
	for (int i = 0; i < 3; i++)
		g_rc[id][i] = patch_fill(await(i), 8, 48, 0x22, 1);
}

static void s14_freer(int id)
{
	struct ep_info in;
	unsigned char *x = await(0);
	int rc = ep_lookup(x + 70, &in);

	if (rc == 0 && (in.exec != x || in.size != 256))
		il_fail("lookup of a live program: exec %p size %zu", in.exec, in.size);
	else if (rc && rc != -ENOENT)
		il_fail("lookup: %d", rc);
	g_rc[id][0] = do_free(x);
}

static void s14(unsigned long seed)
{
	void (*fns[])(int) = { s14_owner, s14_patcher, s14_freer };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(NULL);
	run(seed, fns, 3);
	if (g_rc[0][0] || g_rc[2][0])
		il_fail("frees: %d %d", g_rc[0][0], g_rc[2][0]);
	for (int i = 0; i < 2; i++)
		if (g_rc[1][i] && g_rc[1][i] != -EINVAL)
			il_fail("patch %d of a program being freed: %d", i, g_rc[1][i]);
	if (g_rc[1][2])
		il_fail("patch of a program that stays: %d", g_rc[1][2]);
	for (int b = 8; b < 56; b++)
		if (g_pub[2][b] != 0x22)
			il_fail("byte %d of the patched program is %#x", b, g_pub[2][b]);
	pool_end();
}

START_TEST(test_patch_vs_free)
{
	each_seed("s14", s14, 90, 1);
}
END_TEST

/* 15. A window racing a write, a shrink, a name and a second begin on one
 * program: each acts before or after the window; a second window on it is
 * refused (-EBUSY) while one is open; the write's bytes, which the window
 * does not change, survive its commit; a shrink into an open window is
 * refused (-EBUSY), and a window past a shrunk end (-EINVAL). */
static void s15_owner(int id)
{
	g_pub[0] = jit(300, 1);
	g_rc[id][0] = patch_fill(g_pub[0], 64, 16, 0x33, 0);
}

static void s15_writer(int id)
{
	unsigned char *x = await(0);

	g_rc[id][0] = ep_write(g_pool, x + 100, "\x44\x44\x44\x44", 4);
	g_rc[id][1] = ep_shrink(g_pool, x, 200);
	if (g_rc[id][1] == 0 && model_find(x) >= 0)
		g_model[model_find(x)].size = 256;
}

static void s15_other(int id)
{
	unsigned char *x = await(0);
	void *rw;

	g_rc[id][0] = ep_patch_begin(g_pool, x + 200, 80, &rw);
	if (g_rc[id][0] == 0) {
		memset(rw, 0x55, 80);
		g_rc[id][1] = ep_patch_commit(g_pool, x + 200);
	}
	g_rc[id][2] = ep_set_name(g_pool, x, "s15");
}

static void s15(unsigned long seed)
{
	void (*fns[])(int) = { s15_owner, s15_writer, s15_other };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(NULL);
	run(seed, fns, 3);
	unsigned char *x = g_pub[0];

	if (g_rc[0][0] && g_rc[0][0] != -EBUSY)
		il_fail("the owner's window: %d", g_rc[0][0]);
	/* (-EINVAL: the shrink came first and cut its range off) */
	if (g_rc[2][0] && g_rc[2][0] != -EBUSY && !(g_rc[2][0] == -EINVAL && !g_rc[1][1]))
		il_fail("the other window: %d (shrink %d)", g_rc[2][0], g_rc[1][1]);
	if (g_rc[0][0] && g_rc[2][0] == -EBUSY)
		il_fail("both windows refused as busy");
	if (g_rc[1][0] || g_rc[2][1] || g_rc[2][2])
		il_fail("write %d, commit %d, name %d", g_rc[1][0], g_rc[2][1], g_rc[2][2]);
	if (g_rc[1][1] && g_rc[1][1] != -EBUSY)
		il_fail("shrink: %d", g_rc[1][1]);
	for (int b = 100; b < 104; b++)
		if (x[b] != 0x44)
			il_fail("byte %d that ep_write() wrote is %#x after the commit", b, x[b]);
	for (int b = 64; !g_rc[0][0] && b < 80; b++)
		if (x[b] != 0x33)
			il_fail("byte %d of the committed window is %#x", b, x[b]);
	for (int b = 200; !g_rc[2][0] && b < (g_rc[1][1] ? 280 : 256); b++)
		if (x[b] != 0x55)
			il_fail("byte %d of the other committed window is %#x", b, x[b]);
	char name[8];
	size_t off;

	if (ep_symbolize(x + 10, name, sizeof(name), &off) || strcmp(name, "s15"))
		il_fail("the name is lost");
	pool_end();
}

START_TEST(test_patch_vs_write_shrink_name)
{
	each_seed("s15", s15, 90, 1);
}
END_TEST

/* 16. ep_add(), ep_finalize_size() and ep_pool_trim() racing frees from
 * other threads: the added program is plain at once (a lock-free free may
 * take it), the one finalized short is charged and counted for what it
 * keeps, and a trim from another thread gives back an emptied pack and the
 * tails of the others while they free.  The free chunks hold the fill at
 * every step (ep_add() copies only the program into them). */
static void s16_owner(int id)
{
	static const unsigned char code[300] = { 0x11 };
	void *x = NULL;

	jit(64, 1);
	g_rc[id][0] = ep_add(g_pool, code, sizeof(code), &x);
	if (g_rc[id][0] == 0)
		model_add(x, 320);
	g_pub[0] = x;
	g_pub[1] = jit(1000, 0);
	g_rc[id][1] = ep_finalize_size(g_pool, g_pub[1], 70);
	if (g_rc[id][1] == 0 && model_find(g_pub[1]) >= 0)
		g_model[model_find(g_pub[1])].size = 128;
	g_pub[2] = jit(3000, 1);
}

static void s16_freer(int id)
{
	g_rc[id][0] = do_free(await(0));
	g_rc[id][1] = do_free(await(2));
}

static void s16_trimmer(int id)
{
	size_t released;

	g_rc[id][0] = ep_pool_trim(g_pool, &released);
	g_rc[id][1] = do_free(await(1));
	g_rc[id][2] = ep_pool_trim(g_pool, &released);
}

static void s16(unsigned long seed)
{
	void (*fns[])(int) = { s16_owner, s16_freer, s16_trimmer };
	struct ep_config cfg = { .sz = sizeof(cfg), .limit = 1 << 20 };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(&cfg);
	run(seed, fns, 3);
	/* (the owner's finalize may come after the trimmer's free: -EINVAL) */
	for (int i = 0; i < 3; i++)
		if ((g_rc[0][i] && !(i == 1 && g_rc[0][i] == -EINVAL)) || g_rc[1][i] || g_rc[2][i])
			il_fail("call %d: owner %d, freer %d, trimmer %d", i, g_rc[0][i], g_rc[1][i],
				g_rc[2][i]);
	pool_end();
}

START_TEST(test_add_trim_vs_free)
{
	each_seed("s16", s16, 80, 1);
}
END_TEST

/* 17. s10 on 16-byte chunks, at the state byte's bound: a program of 31
 * chunks (its length in the byte) shrunk to 5, one of 32 (the maps say)
 * finalized, each raced by a free from another thread. */
static void s17_owner(int id)
{
	jit(16, 1);
	g_pub[0] = jit(31 * 16, 1);
	g_pub[1] = jit(32 * 16, 0);
	g_rc[id][0] = ep_shrink(g_pool, g_pub[0], 70);
	if (g_rc[id][0] == 0 && model_find(g_pub[0]) >= 0)
		g_model[model_find(g_pub[0])].size = 80;
	g_rc[id][1] = ep_finalize(g_pool, g_pub[1]);
}

static void s17(unsigned long seed)
{
	void (*fns[])(int) = { s17_owner, s10_freer, s10_freer };
	struct ep_config cfg = { .sz = sizeof(cfg), .limit = 1 << 20, .chunk_size = 16 };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(&cfg);
	run(seed, fns, 3);
	for (int i = 0; i < 2; i++) {
		if (g_rc[0][i] && g_rc[0][i] != -EINVAL)
			il_fail("owner's call %d: %d", i, g_rc[0][i]);
		if (g_rc[i + 1][i])
			il_fail("free %d: %d", i, g_rc[i + 1][i]);
	}
	pool_end();
}

START_TEST(test_small_chunks_shrink_finalize_vs_free)
{
	each_seed("s17", s17, 65, 1);
}
END_TEST

/* ---- children made without fork()'s handlers ------------------------------ */

/*
 * A raw child (syscall(SYS_fork): no handler of the library's or libc's
 * runs) is forked inside a step, at whatever point the schedule left the
 * other threads: it has one thread, and the locks those threads held stay
 * held in it until its first call resets them.  Inside the child nothing
 * is scheduled (managed() is false there: a yield returns at once, a wait
 * for a lock spins), so it runs its calls straight through, under an
 * alarm of its own (no fork handler sets child_alarm()), and tells the
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
 * with g_why (il_fail() in the child) or why on the pipe. */
static void raw_child_exit(struct fu_child *c, const char *why) __attribute__((noreturn));
static void raw_child_exit(struct fu_child *c, const char *why)
{
	if (!why && g_failed)
		why = g_why;
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
	unsigned char *x = jit(64, 1);

	if (x && ep_set_name(g_pool, x, "s18_program") == 0 && model_find(x) >= 0)
		strcpy(g_model[model_find(x)].name, "s18"); /* (a named free takes the lock) */
	g_pub[0] = x;
	jit(200, 1);
	g_s18_walking = 1; /* the rest of this thread is its exit walk */
}

static void s18_freer(int id)
{
	g_rc[id][0] = do_free(await(0));
}

static void s18_forker(int id)
{
	struct fu_child c[2];

	await(0); /* (the exiter has a heap: its walk has work to do) */
	/* half the seeds fork no sooner than the walk begins */
	while (g_seed % 4 >= 2 && !g_s18_walking)
		ep__il_blocked("s18: the walk");
	for (int k = 0; k < 2; k++) {
		pid_t pid = raw_child_begin(&c[k]);

		if (pid == 0) {
			if (k == 1) {
				fu_close(&c[0].tx); /* (the first child's pipes are not its) */
				fu_close(&c[0].rx);
				ep_pool_destroy(g_pool);
				raw_child_exit(&c[k], NULL);
			}
			struct ep_pool *p = NULL;
			int rc = ep_pool_create(NULL, &p);

			if (rc == 0)
				ep_pool_destroy(p);
			raw_child_exit(&c[k], rc ? "ep_pool_create() failed" : NULL);
		}
		if (pid < 0) {
			g_rc[id][k] = -errno;
			if (k == 1) {
				fu_close(&c[0].tx);
				g_rc[id][0] = raw_child_result(&c[0], g_s18_why[0], sizeof(g_s18_why[0]));
			}
			return;
		}
	}
	if (g_s18_walking && alive(0))
		g_s18_in_walk++;
	for (int k = 0; k < 2; k++)
		g_rc[id][k] = raw_child_result(&c[k], g_s18_why[k], sizeof(g_s18_why[k]));
}

static void s18(unsigned long seed)
{
	static const char *const call[] = { "ep_pool_create()", "ep_pool_destroy()" };
	void (*fns[])(int) = { s18_exiter, s18_freer, s18_forker };

	memset(g_pub, 0, sizeof(g_pub));
	g_s18_walking = 0;
	pool_begin(NULL);
	run(seed, fns, 3);
	for (int k = 0; k < 2; k++)
		if (g_rc[2][k])
			il_fail("a raw child's first call, %s: status %d%s%s%s", call[k], g_rc[2][k],
				fu_status_text(g_rc[2][k]), g_s18_why[k][0] ? ": " : "", g_s18_why[k]);
	if (g_rc[1][0])
		il_fail("the free of the exiting thread's program: %d", g_rc[1][0]);
	pool_end();
}

START_TEST(test_raw_child_first_call_vs_exit_walk)
{
	const char *why = raw_child_skipped();

	if (why) {
		printf("SKIP: s18: %s\n", why);
		return;
	}
	g_s18_in_walk = 0;
	if (!each_seed("s18", s18, 90, 4))
		return;
	printf("s18: forked inside the exit walk in %d schedules\n", g_s18_in_walk);
	/* (the seeds are fixed: a change that leaves the walk no point to
	 * fork at must say so, not pass without trying) */
	ck_assert_msg(g_s18_in_walk > 0 || g_schedules / 4 < 50 || getenv("EP_IL_SEED"),
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

/* jit() with a byte of its own in the code. */
static unsigned char *jit_fill(size_t n, unsigned char v)
{
	struct ep_image img;
	int rc = ep_alloc(g_pool, n, &img);

	if (rc) {
		il_fail("ep_alloc(%zu): %d", n, rc);
		return NULL;
	}
	model_add(img.exec, img.size);
	memset(img.rw, v, n);
	if ((rc = ep_finalize(g_pool, img.exec)))
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
		int rc = ep_alloc(g_pool, k & 1 ? 64 : 128, &img);

		if (rc) {
			il_fail("the raw child's ep_alloc(): %d", rc);
			break;
		}
		for (size_t off = 0; off < img.size; off += sizeof(g_trap)) {
			size_t len = img.size - off < sizeof(g_trap) ? img.size - off : sizeof(g_trap);

			if (memcmp((unsigned char *)img.exec + off, g_trap, len)) {
				il_fail("the raw child's allocation %d at %p+%zu holds %02x, not traps "
					"(the parent's later code is 0x22)",
					k, img.exec, off, ((unsigned char *)img.exec)[off]);
				break;
			}
		}
	}
	check_traps("the raw child, after its first calls");
	raw_child_exit(c, NULL);
}

static void s19_owner(int id)
{
	struct fu_child c;

	g_pub[0] = jit(64, 1);
	g_pub[1] = jit(128, 1);
	g_pub[2] = jit(64, 1);
	jit(64, 1);
	pid_t pid = raw_child_begin(&c);

	if (pid == 0)
		s19_child(&c);
	if (pid < 0) {
		g_rc[id][0] = -errno;
		return;
	}
	for (int i = 0; i < MODEL; i++)
		if (g_model[i].live && g_model[i].freeing) {
			g_s19_mid_free++;
			break;
		}
	jit_fill(64, 0x22);
	while (!g_pub[3] || !__atomic_load_n(&g_rc[2][3], __ATOMIC_RELAXED))
		ep__il_blocked("s19: the frees");
	for (int k = 0; k < 4; k++)
		jit_fill(k & 1 ? 64 : 128, 0x22);
	fu_send(&c, 'w');
	g_rc[id][0] = raw_child_result(&c, g_s19_why, sizeof(g_s19_why));
}

static void s19_freer(int id)
{
	g_rc[id][0] = do_free(await(id == 1 ? 0 : 1));
	if (id == 1) {
		g_rc[id][1] = do_free(await(2));
		g_pub[3] = (unsigned char *)1; /* (a mark, not an allocation) */
	} else {
		jit(64, 1);
		__atomic_store_n(&g_rc[id][3], 1, __ATOMIC_RELAXED);
	}
}

static void s19(unsigned long seed)
{
	void (*fns[])(int) = { s19_owner, s19_freer, s19_freer };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(NULL);
	run(seed, fns, 3);
	if (g_rc[0][0])
		il_fail("the raw child: status %d%s%s%s", g_rc[0][0], fu_status_text(g_rc[0][0]),
			g_s19_why[0] ? ": " : "", g_s19_why);
	if (g_rc[1][0] || g_rc[1][1] || g_rc[2][0])
		il_fail("frees: %d %d %d", g_rc[1][0], g_rc[1][1], g_rc[2][0]);
	pool_end();
}

START_TEST(test_raw_child_free_chunks_vs_frees)
{
	const char *why = raw_child_skipped();

	if (why) {
		printf("SKIP: s19: %s\n", why);
		return;
	}
	g_s19_mid_free = 0;
	if (!each_seed("s19", s19, 110, 4))
		return;
	printf("s19: forked while a free was under way in %d schedules\n", g_s19_mid_free);
	ck_assert_msg(g_s19_mid_free > 0 || g_schedules / 4 < 50 || getenv("EP_IL_SEED"),
		      "no schedule forked while a free of the owner's program was under way");
}
END_TEST

/* A fork child of a schedule: whatever the library's own child handler
 * does must end, or the child is stopped (this handler runs first). */
static void child_alarm(void)
{
	if (g_pid && getpid() != g_pid) {
		signal(SIGALRM, SIG_DFL); /* (not Check's handler: it kills the group) */
		alarm(10);
	}
}

/* 21-24. ep_lookup() against the calls that change what it reads: it never
 * takes a lock, never says -ENOENT for live code, and never reads a pool
 * that a destroy freed. */

/* What a lookup of x + off must say of the live program x of size bytes. */
static void expect_live(const unsigned char *x, size_t size, size_t off, const char *what)
{
	struct ep_info in;
	int rc = ep_lookup(x + off, &in);

	if (rc || in.exec != x || in.size != size || !(in.flags & EP_INFO_FINALIZED))
		il_fail("%s: lookup of %p + %zu: rc %d exec %p size %zu flags %#x", what,
			(const void *)x, off, rc, in.exec, in.size, in.flags);
}

static unsigned char *g_lone; /* a neighbour born and freed beside them */

static void s21_owner(int id)
{
	g_pub[0] = jit(64 * 40, 1); /* its length in the maps */
	g_pub[1] = jit(192, 1);     /* in its state byte */
	g_lone = jit(100, 1);
	g_rc[id][0] = do_free(g_lone);
	uint32_t v = 7;

	g_rc[id][1] = ep_write(g_pool, g_pub[0] + 64, &v, sizeof(v));
	g_rc[id][2] = ep_write(g_pool, g_pub[1] + 8, &v, sizeof(v));
}

static void s21_patcher(int id)
{
	g_rc[id][0] = patch_fill(await(0), 128, 16, 0x22, 0);
	g_rc[id][1] = patch_fill(await(1), 0, 8, 0x22, 0);
}

static void s21_looker(int id)
{
	(void)id;
	for (int k = 0; k < 4; k++) {
		expect_live(await(0), 64 * 40, (size_t)k * 631 % (64 * 40), "long");
		expect_live(await(1), 192, (size_t)k * 37 % 192, "short");
	}
}

static void s21(unsigned long seed)
{
	void (*fns[])(int) = { s21_owner, s21_patcher, s21_looker };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(NULL);
	run(seed, fns, 3);
	for (int t = 0; t < 2; t++)
		for (int i = 0; i < 3; i++)
			if (g_rc[t][i])
				il_fail("thread %d call %d: %d", t, i, g_rc[t][i]);
	pool_end();
}

START_TEST(test_lookup_vs_write_window)
{
	each_seed("s21", s21, 110, 1);
}
END_TEST

/* 22. A signal handler's lookups on a thread that holds the heap's lock
 * (in a write, a window, a free, the pack's maps or an entry half
 * written): each answers at once, hit or miss; it never waits for the
 * thread it interrupted. */
static unsigned char *g_stage_rw;

static void s22_signal(const char *where)
{
	int holds = 0;

	(void)where;
	if (il_me != 0 || !g_pub[1])
		return;
	for (int i = 0; i < 64; i++)
		holds |= g_held[i].lock && g_held[i].holder == 0;
	if (!holds || rnd() % 3)
		return;
	struct ep_info in;
	int rc = ep_lookup((void *)&write, &in);

	if (rc != -ENOENT)
		il_fail("lookup of libc in a handler: %d", rc);
	if ((rc = ep_lookup(g_stage_rw, &in)) != -ENOENT)
		il_fail("lookup of a staging buffer in a handler: %d", rc);
	/* the short one: live for the whole scenario */
	expect_live(g_pub[1], 192, 100, "in a handler");
}

static void s22_owner(int id)
{
	struct ep_image img;

	g_pub[0] = jit(64 * 40, 1);
	if (ep_alloc(g_pool, 300, &img) == 0)
		g_stage_rw = img.rw;
	model_add(img.exec, img.size);
	g_pub[1] = jit(192, 1);
	uint32_t v = 9;

	g_rc[id][0] = ep_write(g_pool, g_pub[1] + 8, &v, sizeof(v));
	g_rc[id][1] = patch_fill(g_pub[1], 0, 8, 0x22, 0);
	g_rc[id][2] = do_free(g_pub[0]);
	g_rc[id][3] = do_free(img.exec);
}

static void s22_other(int id)
{
	g_rc[id][0] = ep_set_name(g_pool, await(1), "s22");
}

static void s22(unsigned long seed)
{
	void (*fns[])(int) = { s22_owner, s22_other };

	memset(g_pub, 0, sizeof(g_pub));
	g_stage_rw = NULL;
	pool_begin(NULL);
	g_signal = s22_signal;
	run(seed, fns, 2);
	g_signal = NULL;
	for (int i = 0; i < 4; i++)
		if (g_rc[0][i])
			il_fail("owner call %d: %d", i, g_rc[0][i]);
	pool_end();
}

START_TEST(test_lookup_in_signal_with_lock)
{
	each_seed("s22", s22, 120, 1);
}
END_TEST

/* 23. A lookup racing a free from another thread: the program as it was
 * (exact exec and size), or -ENOENT; never another answer. */
static void s23_owner(int id)
{
	(void)id;
	g_pub[0] = jit(64 * 36, 1);
	g_pub[1] = jit(100, 1);
	g_pub[2] = jit(64, 1);
}

static void s23_freer(int id)
{
	for (int i = 0; i < 3; i++)
		g_rc[id][i] = do_free(await(i));
}

static void s23_looker(int id)
{
	static const size_t size[3] = { 64 * 36, 128, 64 };

	(void)id;
	for (int k = 0; k < 6; k++) {
		int i = k % 3;
		unsigned char *x = await(i);
		struct ep_info in;
		int rc = ep_lookup(x + size[i] - 1, &in);

		if (rc == 0 && (in.exec != x || in.size != size[i]))
			il_fail("lookup during a free: exec %p size %zu for %p", in.exec, in.size,
				(void *)x);
		else if (rc && rc != -ENOENT)
			il_fail("lookup during a free: %d", rc);
	}
}

static void s23(unsigned long seed)
{
	void (*fns[])(int) = { s23_owner, s23_freer, s23_looker };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(NULL);
	run(seed, fns, 3);
	for (int i = 0; i < 3; i++)
		if (g_rc[1][i])
			il_fail("free %d: %d", i, g_rc[1][i]);
	pool_end();
}

START_TEST(test_lookup_vs_free)
{
	each_seed("s23", s23, 100, 1);
}
END_TEST

/* 24. A lookup racing the destroy of its pool: hit (that pool, that
 * program) or miss; the heap and packs it holds are freed only after it
 * left (grace.h: under AddressSanitizer a read of them would be seen). */
static struct ep_pool *g_doomed;

static void s24_owner(int id)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *p;
	struct ep_image img;

	if ((g_rc[id][0] = ep_pool_create(&cfg, &p)))
		return;
	g_doomed = p;
	if ((g_rc[id][1] = ep_alloc(p, 64 * 34, &img)))
		return;
	memset(img.rw, 0x11, img.size);
	if ((g_rc[id][2] = ep_finalize(p, img.exec)))
		return;
	g_pub[0] = img.exec;
	ep_pool_destroy(p);
}

static void s24_looker(int id)
{
	unsigned char *x = await(0);

	(void)id;
	for (int k = 0; k < 4; k++) {
		struct ep_info in;
		int rc = ep_lookup(x + 64 * 33 + 5, &in);

		if (rc == 0 && (in.pool != g_doomed || in.exec != x || in.size != 64 * 34))
			il_fail("lookup during a destroy: pool %p exec %p size %zu", (void *)in.pool,
				in.exec, in.size);
		else if (rc && rc != -ENOENT)
			il_fail("lookup during a destroy: %d", rc);
	}
}

static void s24(unsigned long seed)
{
	void (*fns[])(int) = { s24_owner, s24_looker };

	memset(g_pub, 0, sizeof(g_pub));
	pool_begin(NULL);
	run(seed, fns, 2);
	for (int i = 0; i < 3; i++)
		if (g_rc[0][i])
			il_fail("owner call %d: %d", i, g_rc[0][i]);
	pool_end();
}

START_TEST(test_lookup_vs_destroy)
{
	each_seed("s24", s24, 90, 1);
}
END_TEST

int main(void)
{
	pthread_atfork(NULL, NULL, child_alarm);
	g_no_stats = getenv("EP_IL_NO_STATS") != NULL;
	const char *n = getenv("EP_IL_SCHEDULES");

	if (n)
		g_schedules = strtoul(n, NULL, 10);
	else if (RUNNING_ON_VALGRIND || getenv("EP_TEST_QUICK"))
		g_schedules = 40;
	if (RUNNING_ON_VALGRIND || getenv("EP_TEST_QUICK"))
		g_trap_every = 4;
	else if (getenv("EP_SANITIZER"))
		g_schedules = 300; /* (about ten times slower under TSan) */
	Suite *s = suite_create("interleave");
	TCase *tc = tcase_create("schedules");

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_lock_one_holder);
	tcase_add_test(tc, test_lock_replay);
	tcase_add_test(tc, test_write_vs_free);
	tcase_add_test(tc, test_name_vs_free);
	tcase_add_test(tc, test_fork_vs_heap_claim);
	tcase_add_test(tc, test_double_free_vs_reuse);
	tcase_add_test(tc, test_stats_relations);
	tcase_add_test(tc, test_limit_counts_what_exists);
	tcase_add_test(tc, test_exit_vs_remote_free);
	tcase_add_test(tc, test_shrink_finalize_vs_free);
	tcase_add_test(tc, test_stale_free_vs_pack_reuse);
	tcase_add_test(tc, test_add_trim_vs_free);
	tcase_add_test(tc, test_small_chunks_shrink_finalize_vs_free);
	tcase_add_test(tc, test_code_range);
	tcase_add_test(tc, test_code_range_shared);
	tcase_add_test(tc, test_patch_vs_free);
	tcase_add_test(tc, test_patch_vs_write_shrink_name);
	tcase_add_test(tc, test_raw_child_first_call_vs_exit_walk);
	tcase_add_test(tc, test_raw_child_free_chunks_vs_frees);
	tcase_add_test(tc, test_lookup_vs_write_window);
	tcase_add_test(tc, test_lookup_in_signal_with_lock);
	tcase_add_test(tc, test_lookup_vs_free);
	tcase_add_test(tc, test_lookup_vs_destroy);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
