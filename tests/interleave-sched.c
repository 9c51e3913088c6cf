/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * interleave-sched.c - check_interleave's scheduler (every preemption
 * point of the library's -DEP_INTERLEAVE build hands the turn to the thread
 * a seed's schedule picks), its model of the live allocations and the
 * invariants checked at every step, the calls the scenarios' threads make,
 * and the loop over seeds.  The scenarios: interleave-*.c; the suite and
 * what it covers: check_interleave.c.
 */
#include "config.h"

#include "interleave-sched.h"

/* ---- the scheduler ------------------------------------------------------- */

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
__thread int il_me = -1;
/* Set: the thread runs on through its preemption points (a caller's own
 * step that no other call may split, such as an emitter's writes to a
 * window it just opened); it still hands over where it waits for a lock. */
static __thread int il_hold;
pid_t il_pid;
static uint64_t g_rng;
static unsigned g_prio[IL_MAX];
static unsigned long g_step, g_change[3];
static unsigned long g_est; /* about the steps a schedule of the scenario takes */
static int g_nchange, g_walk, g_blocked[IL_MAX];
static unsigned long g_blocked_run;
int il_failed;
int il_rc[IL_MAX][4]; /* what the scenario's calls returned */
char il_why[512];
unsigned long il_seed;

uint64_t il_rnd(void)
{
	uint64_t x = g_rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	g_rng = x;
	return x * 2685821657736338717ull;
}

void il_fail(const char *fmt, ...)
{
	if (il_failed++)
		return;
	va_list ap;
	int n = snprintf(il_why, sizeof(il_why), "seed %lu step %lu: ", il_seed, g_step);

	va_start(ap, fmt);
	vsnprintf(il_why + n, sizeof(il_why) - (size_t)n, fmt, ap);
	va_end(ap);
}

int il_alive(int i)
{
	return i < g_nw && !__atomic_load_n(&g_w[i].joined, __ATOMIC_ACQUIRE);
}

/* The next thread to run: a runnable one (not waiting for a lock, unless
 * every thread is). */
/* A scenario's own schedule: the thread to run next at where, or -1. */
int (*il_directed)(const char *where);

static int pick(void)
{
	int best = -1, any = -1;

	if (g_walk && il_me >= 0 && il_alive(il_me) && !g_blocked[il_me] && il_rnd() % g_walk)
		return il_me;
	unsigned off = (unsigned)(il_rnd() % IL_MAX);

	for (int k = 0; k < IL_MAX; k++) {
		int i = (int)((k + off) % IL_MAX);

		if (!il_alive(i))
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
	return il_me >= 0 && getpid() == il_pid;
}

static void il_check(const char *where);

/* A scenario's signal: called at every preemption point, as a handler
 * that interrupted the thread there would run (never nested). */
void (*il_signal)(const char *where);
static __thread int il_in_signal;

void ep__il_yield(const char *where)
{
	if (!managed() || il_hold)
		return;
	g_step++;
	memset(g_blocked, 0, sizeof(g_blocked));
	g_blocked_run = 0;
	il_check(where);
	if (il_signal && !il_in_signal) {
		il_in_signal = 1;
		il_signal(where);
		il_in_signal = 0;
	}
	for (int i = 0; i < g_nchange; i++)
		if (g_step == g_change[i])
			g_prio[il_me] = (unsigned)i; /* below every starting priority */
	int next = il_directed ? il_directed(where) : -1;

	if (next < 0 || !il_alive(next))
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
			il_seed, where);
		_exit(1);
	}
	int next = pick();

	if (next != il_me)
		handoff(next);
}

/* Locks held now, to see a second holder. */
struct il_held_lock il_held[64];

void ep__il_enter(const void *lock)
{
	if (!managed())
		return;
	for (int i = 0; i < 64; i++) {
		if (il_held[i].lock == lock) {
			il_fail("lock %p taken by thread %d while thread %d holds it", lock, il_me,
				il_held[i].holder);
			return;
		}
	}
	for (int i = 0; i < 64; i++) {
		if (!il_held[i].lock) {
			il_held[i].lock = lock;
			il_held[i].holder = il_me;
			return;
		}
	}
}

void ep__il_leave(const void *lock)
{
	if (!managed())
		return;
	for (int i = 0; i < 64; i++)
		if (il_held[i].lock == lock)
			il_held[i].lock = NULL;
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
	 * il_run() gives the turn on once the thread is gone */
	return NULL;
}

/* One schedule of fns[0..n-1] under seed. */
void il_run(unsigned long seed, void (**fns)(int), int n)
{
	il_seed = seed;
	il_pid = getpid(); /* (Check runs each test in a child of its own) */
	memset(il_rc, 0, sizeof(il_rc));
	g_rng = seed * 0x9e3779b97f4a7c15ull + 1;
	g_step = 0;
	/* odd seeds: a walk that switches with probability 1/2 to 1/6 */
	g_walk = seed & 1 ? 2 + (int)(seed / 2 % 5) : 0;
	g_nw = n;
	g_cur = -1;
	g_blocked_run = 0;
	memset(g_blocked, 0, sizeof(g_blocked));
	memset(il_held, 0, sizeof(il_held));
	/* PCT: distinct priorities above the change points' values, and the
	 * demotions somewhere in the steps the scenario takes */
	for (int i = 0; i < IL_MAX; i++)
		g_prio[i] = 10 + (unsigned)i;
	for (int i = IL_MAX - 1; i > 0; i--) {
		int j = (int)(il_rnd() % (unsigned)(i + 1));
		unsigned t = g_prio[i];

		g_prio[i] = g_prio[j];
		g_prio[j] = t;
	}
	g_nchange = 1 + (int)(seed / 2 % 3);
	for (int i = 0; i < g_nchange; i++)
		g_change[i] = 1 + il_rnd() % g_est;
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

struct ep_pool *il_pool;
size_t il_pack_size;
struct il_entry il_model[IL_MODEL];
unsigned char *il_freed[IL_MODEL]; /* addresses freed with a name once */
int il_nfreed;

void il_model_add(unsigned char *x, size_t size)
{
	for (int i = 0; i < IL_MODEL; i++) {
		if (il_model[i].live && !il_model[i].freeing && x < il_model[i].exec + il_model[i].size &&
		    il_model[i].exec < x + size)
			il_fail("new allocation %p+%zu overlaps live %p+%zu", (void *)x, size,
				(void *)il_model[i].exec, il_model[i].size);
	}
	for (int i = 0; i < IL_MODEL; i++) {
		if (!il_model[i].live) {
			il_model[i].exec = x;
			il_model[i].size = size;
			il_model[i].live = 1;
			il_model[i].freeing = 0;
			il_model[i].name[0] = 0;
			return;
		}
	}
	il_fail("model full");
}

/* (an address may be live twice while an ep_free() of it has not
 * returned: a code range hands freed space to any heap at once; the one
 * not being freed is the one a new call means) */
int il_model_find(const void *x)
{
	int any = -1;

	for (int i = 0; i < IL_MODEL; i++) {
		if (il_model[i].live && il_model[i].exec == x) {
			if (!il_model[i].freeing)
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
	if (il_model[i].name[0] && il_nfreed < IL_MODEL)
		il_freed[il_nfreed++] = il_model[i].exec;
	il_model[i].live = 0;
}

static void model_gone(const void *x)
{
	model_gone_at(il_model_find(x), x);
}

/* A chunk of the trap fill (chunks are aligned to their size, at least 16
 * bytes; the fills' periods divide 16). */
unsigned char il_trap[EP_CHUNK_SIZE] __attribute__((aligned(EP_CHUNK_SIZE)));

void il_check_traps(const char *where)
{
	static const unsigned char zero[EP_CHUNK_SIZE];

	for (struct ep__heap *h = ep__load_acquire(&il_pool->heaps); h;
	     h = h->next_heap) {
		/* (a data heap's free chunks hold zeros: ep_alloc_data()) */
		const unsigned char *fill = h->data ? zero : il_trap;

		for (struct ep__pack *p = h->head; p; p = p->next) {
			if (__atomic_load_n(&p->seq, __ATOMIC_RELAXED) & 1)
				continue;
			for (size_t c = 0; c < p->nchunks; c++) {
				if (ep__bitmap_test(p->used, c))
					continue;
				unsigned char *b = (unsigned char *)p->r.exec + (c << p->shift);

				if (memcmp(b, fill, (size_t)1 << p->shift)) {
					il_fail("free chunk %zu of a %s pack (%p) is not %s (at %s)", c,
						h->data ? "data" : "code", (void *)b,
						h->data ? "zeroed" : "trap-filled", where);
					return;
				}
			}
		}
	}
}

void il_check_stats(const char *where)
{
	struct ep_stats st;

	if (ep_pool_stats(il_pool, &st)) {
		il_fail("ep_pool_stats failed");
		return;
	}
	if (st.used_bytes > st.pack_bytes || st.pack_bytes > st.packs * il_pack_size ||
	    st.large_allocs > st.live_allocs)
		il_fail("stats relation broken at %s: packs %zu pack_bytes %zu used_bytes %zu "
			"live %zu large %zu",
			where, st.packs, st.pack_bytes, st.used_bytes, st.live_allocs,
			st.large_allocs);
	if (il_pool->limit && ep__load_relaxed(&il_pool->charged) > il_pool->limit)
		il_fail("limit %zu, %zu charged", il_pool->limit, il_pool->charged);
}

int il_no_stats; /* EP_IL_NO_STATS=1: look past a stats failure */
/* Every step is checked; a quick run (EP_TEST_QUICK: Valgrind, the
 * emulated aarch64 stage) reads the packs' free chunks every 4th step, and
 * a scenario that takes tens of thousands of steps of one kind (the lock
 * replay) checks only what it is about. */
unsigned il_trap_every = 1;
int il_steps_unchecked;

static void il_check(const char *where)
{
	if (!il_pool || il_steps_unchecked)
		return;
	if (!il_no_stats)
		il_check_stats(where);
	if (g_step % il_trap_every == 0)
		il_check_traps(where);
}

/* With no thread running: what the calls left must be exactly the live
 * allocations' doing. */
static void check_quiet(void)
{
	/* the chunks that frees from other threads left queued come back */
	for (struct ep__heap *h = il_pool->heaps; h; h = h->next_heap) {
		ep__lock(&h->lock);
		ep__remote_drain(h);
		ep__unlock(&h->lock);
	}
	il_check_traps("end");
	size_t live = 0, bytes = 0;

	for (int i = 0; i < IL_MODEL; i++) {
		if (!il_model[i].live)
			continue;
		live++;
		bytes += il_model[i].size;
		if (ep_write(il_pool, il_model[i].exec, NULL, 0))
			il_fail("live allocation %p is not live for the library",
				(void *)il_model[i].exec);
	}
	for (struct ep__heap *h = il_pool->heaps; h; h = h->next_heap)
		for (size_t b = 0; b <= h->hash_mask; b++)
			for (struct ep__alloc *a = h->hash[b]; a; a = a->hnext)
				if (il_model_find(a->exec) < 0)
					il_fail("a record of %p, which is not live", a->exec);
	for (int i = 0; i < il_nfreed; i++) {
		char name[32];
		size_t off;

		if (il_model_find(il_freed[i]) < 0 &&
		    ep_symbolize(il_freed[i], name, sizeof(name), &off) == 0)
			il_fail("freed %p is still named %s", (void *)il_freed[i], name);
	}
	struct ep_stats st;

	ep_pool_stats(il_pool, &st);
	if (st.live_allocs != live || st.used_bytes + st.large_bytes < bytes)
		il_fail("stats after the run: live %zu used %zu large %zu; the model: %zu live, "
			"%zu bytes",
			st.live_allocs, st.used_bytes, st.large_bytes, live, bytes);
	if (il_pool->limit && il_pool->charged != bytes)
		il_fail("limit: %zu charged for %zu bytes live", il_pool->charged, bytes);
}

/* A pool for a schedule: the memfd backend always (AUTO would pick huge
 * pages where the machine has them reserved, whose packs are larger). */
void il_pool_begin(const struct ep_config *cfg_in)
{
	struct ep_config cfg = { .sz = sizeof(cfg) };

	if (cfg_in)
		cfg = *cfg_in;
	cfg.backend = EP_BACKEND_MEMFD;
	TU_FILL(il_trap, sizeof(il_trap), NULL);
	memset(il_model, 0, sizeof(il_model));
	il_nfreed = 0;
	ck_assert_int_eq(ep_pool_create(&cfg, &il_pool), 0);
	il_pack_size = il_pool->first->pack_size;
}

/* A pool made elsewhere (the default pool), checked from here on as
 * il_pool_begin()'s, with an empty model. */
void il_pool_adopt(struct ep_pool *p)
{
	TU_FILL(il_trap, sizeof(il_trap), NULL);
	memset(il_model, 0, sizeof(il_model));
	il_nfreed = 0;
	il_pool = p;
	il_pack_size = p->first->pack_size;
}

void il_pool_end(void)
{
	struct ep_pool *p = il_pool;

	check_quiet();
	il_pool = NULL;
	ep_pool_destroy(p);
}

/* ---- what the threads call ----------------------------------------------- */

unsigned char *il_pub[4]; /* allocations handed between threads */

/* Wait (as a thread that cannot go on) until slot i holds something. */
unsigned char *il_await(int i)
{
	while (!il_pub[i])
		ep__il_blocked("script wait");
	return il_pub[i];
}

/* ep_alloc + code + ep_finalize (fin); the model learns it. */
unsigned char *il_jit(size_t n, int fin)
{
	struct ep_image img;
	int rc = ep_alloc(il_pool, n, &img);

	if (rc) {
		il_fail("ep_alloc(%zu): %d", n, rc);
		return NULL;
	}
	il_model_add(img.exec, img.size);
	memset(img.rw, 0x11, n); /* not a trap on any architecture */
	if (fin && (rc = ep_finalize(il_pool, img.exec)))
		il_fail("ep_finalize: %d", rc);
	return img.exec;
}

int il_do_free(unsigned char *x)
{
	int i = -1;

	/* (the newest at x: an older one may still be in its own free, its
	 * chunks reused before that free's caller got back) */
	for (int k = 0; k < IL_MODEL && i < 0; k++)
		if (il_model[k].live && !il_model[k].freeing && il_model[k].exec == x)
			i = k;
	if (i < 0)
		i = il_model_find(x);

	if (i >= 0)
		il_model[i].freeing++;
	int rc = ep_free(il_pool, x);

	if (rc == 0 && i >= 0 && il_model[i].live && il_model[i].exec == x)
		model_gone_at(i, x); /* (the entry this call marked) */
	else if (rc == 0)
		model_gone(x);
	else if (i >= 0 && il_model[i].exec == x)
		il_model[i].freeing--;
	return rc;
}

/* ---- scenarios ----------------------------------------------------------- */

unsigned long il_schedules = 1000; /* per scenario (EP_IL_SCHEDULES) */

/* Run one under the seeds 1, 2, ... (il_schedules / share of them: a
 * scenario whose every schedule is slow runs fewer).  Whether it ran
 * (EP_IL_ONLY may name another). */
int il_each_seed(const char *name, void (*one)(unsigned long seed), unsigned long est,
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
		unsigned long n = il_schedules / share ? il_schedules / share : 1;

		for (unsigned long seed = 1; seed <= n && !il_failed; seed++, runs++) {
			one(seed);
			steps += g_step;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%s: %lu schedules, %lu steps, %.2f s\n", name, runs, steps,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	ck_assert_msg(!il_failed, "%s", il_why);
	return 1;
}

/* hold: the begin and the writes to rw are one step, so that a free racing
 * the window comes before the begin or after the writes (a free closes the
 * window and its buffers go: rw is not used after it, ep_patch_begin(3));
 * the commit still races the free. */
int il_patch_fill(unsigned char *x, size_t off, size_t len, unsigned char v, int hold)
{
	void *rw;

	il_hold = hold;
	int rc = ep_patch_begin(il_pool, x + off, len, &rw);

	if (!rc)
		memset(rw, v, len);
	il_hold = 0;
	if (rc)
		return rc;
	return ep_patch_commit(il_pool, x + off);
}


/* A fork child of a schedule: whatever the library's own child handler
 * does must end, or the child is stopped (this handler runs first). */
void il_child_alarm(void)
{
	if (il_pid && getpid() != il_pid) {
		signal(SIGALRM, SIG_DFL); /* (not Check's handler: it kills the group) */
		alarm(10);
	}
}
