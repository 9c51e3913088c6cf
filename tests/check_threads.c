/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_threads.c - eight threads hammer one pool.
 *
 * Each worker allocates (mostly pack-sized, sometimes large), writes code
 * that returns a value unique to (thread, iteration), finalizes, calls it,
 * patches some live, calls older ones again, frees, and reads the stats;
 * every result is checked.  A ninth thread scans /proc/self/maps for any
 * writable+executable mapping the whole time.  The "subpools" cases hand
 * allocations between threads (so calls cross heaps), share one limit
 * among four threads, and check that two threads get separate packs.
 */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>

#include "reliability.h"


#define NTHREADS 8
#define WINDOW 24          /* live functions per thread */
#define LARGE_SIZE ((size_t)4 << 20)

struct live {
	void *exec;
	size_t size;
	uint32_t value;
	bool large;
};

struct worker {
	struct ep_pool *pool;
	int id;
	int iters;
	pthread_t th;
	/* results, read after join */
	int failed_line;
	char msg[200];
	unsigned long calls, allocs, large_allocs, patches;
};

static int g_stop;         /* atomic: the scanner stops when set */
static int g_scan_failed;  /* atomic */
static char g_scan_msg[512];
static unsigned long g_scans;

#define WCHECK(w, cond, ...)                                                \
	do {                                                                \
		if (!(cond)) {                                              \
			(w)->failed_line = __LINE__;                        \
			snprintf((w)->msg, sizeof((w)->msg), __VA_ARGS__);  \
			return;                                             \
		}                                                           \
	} while (0)

static uint32_t value_of(int id, int iter, int gen)
{
	/* thread in the top nibble, then a generation, then the iteration */
	return ((uint32_t)(id + 1) << 28) | ((uint32_t)(gen & 0xf) << 24) |
	       ((uint32_t)iter & 0xffffff);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void worker_run(struct worker *w)
{
	struct live win[WINDOW];
	int n = 0;
	uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1);

	memset(win, 0, sizeof(win));
	for (int it = 0; it < w->iters; it++) {
		uint64_t r = rnd(&seed);
		bool large = (r % 127) == 0;
		size_t size = large ? LARGE_SIZE + (size_t)(r >> 8) % 8192
				    : 1 + (size_t)(r >> 8) % 700;
		uint32_t v = value_of(w->id, it, 0);
		struct ep_image img;

		if (size < RET_IMM_LEN)
			size = RET_IMM_LEN;
		int rc = ep_alloc(w->pool, size, &img);

		WCHECK(w, rc == 0, "ep_alloc(%zu): %s", size, ep_strerror(rc));
		WCHECK(w, img.size >= size && img.exec && img.rw, "bad image for %zu", size);
		w->allocs++;
		w->large_allocs += large;
		/* the staging buffer and the exec view start out as traps */
		WCHECK(w, tu_is_trap(img.rw, 1) &&
			      tu_is_trap((unsigned char *)img.rw + img.size - 1, 1),
		       "staging not trap-filled");
		WCHECK(w, tu_is_trap(img.exec, 1) &&
			      tu_is_trap((unsigned char *)img.exec + img.size - 1, 1),
		       "fresh exec view not trap-filled at %p (size %zu)", img.exec, img.size);
		if (r & 0x100) {
			rel_emit_ret_imm(img.rw, v);
		} else {
			/* stage through ep_write instead, and a wrong one first */
			unsigned char code[RET_IMM_LEN];

			rel_emit_ret_imm(code, v ^ 0x00ffffff);
			rc = ep_write(w->pool, img.exec, code, sizeof(code));
			WCHECK(w, rc == 0, "staging ep_write: %s", ep_strerror(rc));
			rel_emit_ret_imm(code, v);
			rc = ep_write(w->pool, img.exec, code, sizeof(code));
			WCHECK(w, rc == 0, "staging ep_write: %s", ep_strerror(rc));
		}
		/* out of bounds by one byte: refused, whoever owns the next chunk */
		rc = ep_write(w->pool, img.exec, img.rw, img.size + 1);
		WCHECK(w, rc == -EINVAL, "overlong ep_write gave %d", rc);
		rc = ep_finalize(w->pool, img.exec);
		WCHECK(w, rc == 0, "ep_finalize: %s", ep_strerror(rc));
		rc = ep_finalize(w->pool, img.exec);
		WCHECK(w, rc == -EINVAL, "second ep_finalize gave %d", rc);
		uint32_t got = (uint32_t)rel_call(img.exec);

		w->calls++;
		WCHECK(w, got == v, "new function %p returned %#x, expected %#x", img.exec, got, v);

		/* an address inside, not the start: never freeable */
		rc = ep_free(w->pool, (unsigned char *)img.exec + 1);
		WCHECK(w, rc == -EINVAL, "ep_free(exec + 1) gave %d", rc);

		if (n == WINDOW) {
			/* free the oldest, after checking it one last time */
			struct live *o = &win[0];

			got = (uint32_t)rel_call(o->exec);
			WCHECK(w, got == o->value, "old function %p returned %#x, expected %#x",
			       o->exec, got, o->value);
			rc = ep_free(w->pool, o->exec);
			WCHECK(w, rc == 0, "ep_free: %s", ep_strerror(rc));
			/* (no double free here: another thread may already own
			 * the address again) */
			memmove(&win[0], &win[1], (WINDOW - 1) * sizeof(win[0]));
			n--;
		}
		win[n++] = (struct live){ img.exec, img.size, v, large };

		/* re-check every live function of this thread now and then */
		if (it % 8 == 0) {
			for (int i = 0; i < n; i++) {
				got = (uint32_t)rel_call(win[i].exec);
				w->calls++;
				WCHECK(w, got == win[i].value, "live function %p returned %#x, expected %#x",
				       win[i].exec, got, win[i].value);
			}
		}
		/* patch a random live one in place, then call it */
		if (it % 3 == 0) {
			struct live *l = &win[(size_t)(r >> 20) % (size_t)n];
			uint32_t nv = value_of(w->id, it, 1 + (int)((r >> 40) % 15));

			rc = rel_patch(w->pool, l->exec, nv);
			WCHECK(w, rc == 0, "live ep_write: %s", ep_strerror(rc));
			l->value = nv;
			got = (uint32_t)rel_call(l->exec);
			w->patches++;
			WCHECK(w, got == nv, "patched function %p returned %#x, expected %#x",
			       l->exec, got, nv);
		}
		if (it % 16 == 0) {
			struct ep_stats st;
			size_t mine = (size_t)n, mine_large = 0;

			for (int i = 0; i < n; i++)
				mine_large += win[i].large;
			rc = ep_pool_stats(w->pool, &st);
			WCHECK(w, rc == 0, "ep_pool_stats: %s", ep_strerror(rc));
			/* ep_pool_stats(3): never more than were alive at one
			 * moment of the call (each thread holds WINDOW + 1 at most),
			 * so used_bytes <= pack_bytes */
			WCHECK(w, st.live_allocs <= (size_t)NTHREADS * (WINDOW + 1),
			       "live_allocs %zu > %d (this thread's %zu)", st.live_allocs,
			       NTHREADS * (WINDOW + 1), mine);
			WCHECK(w, st.large_allocs <= st.live_allocs,
			       "large_allocs %zu (mine %zu, live %zu)", st.large_allocs, mine_large,
			       st.live_allocs);
			WCHECK(w, st.used_bytes <= st.pack_bytes, "used %zu > pack bytes %zu",
			       st.used_bytes, st.pack_bytes);
			WCHECK(w, st.large_bytes >= st.large_allocs * LARGE_SIZE,
			       "large_bytes %zu for %zu large", st.large_bytes, st.large_allocs);
			WCHECK(w, st.packs >= 1, "no packs while %zu allocations live", mine);
		}
	}
	for (int i = 0; i < n; i++) {
		uint32_t got = (uint32_t)rel_call(win[i].exec);

		WCHECK(w, got == win[i].value, "final check %p returned %#x, expected %#x",
		       win[i].exec, got, win[i].value);
		int rc = ep_free(w->pool, win[i].exec);

		WCHECK(w, rc == 0, "final ep_free: %s", ep_strerror(rc));
	}
}

static void *worker_main(void *arg)
{
	worker_run(arg);
	return NULL;
}

/* Any mapping both writable and executable fails the test.  Under Valgrind
 * its own translation cache is such a mapping, so only ranges that lie in
 * the pool's mappings (named memfd:execpack) count there. */
static int scan_maps(char *msg, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int bad = 0;

	if (!f) {
		snprintf(msg, len, "cannot open /proc/self/maps: %s", strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char perms[8] = "";
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
			continue;
		if (perms[1] != 'w' || perms[2] != 'x')
			continue;
		if (RUNNING_ON_VALGRIND && !strstr(line, "execpack"))
			continue;
		snprintf(msg, len, "writable+executable mapping: %.400s", line);
		bad = 1;
		break;
	}
	fclose(f);
	return bad;
}

static void *scanner_main(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
		if (scan_maps(g_scan_msg, sizeof(g_scan_msg))) {
			__atomic_store_n(&g_scan_failed, 1, __ATOMIC_RELEASE);
			return NULL;
		}
		g_scans++;
		struct timespec ts = { 0, 2000000 };

		nanosleep(&ts, NULL);
	}
	return NULL;
}

static int iterations(void)
{
	const char *e = getenv("EP_THREADS_ITERS");

	if (e && *e)
		return atoi(e);
	return rel_quick() ? 400 : 4000;
}

static void run_stress(unsigned flags)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .flags = flags };
	struct ep_pool *pool = NULL;
	int rc = ep_pool_create(&cfg, &pool);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));

	struct worker w[NTHREADS];
	pthread_t scanner;
	struct timespec t0, t1;

	__atomic_store_n(&g_stop, 0, __ATOMIC_RELEASE);
	/* an atomic flag: helgrind does not model C11 atomics (make check-valgrind) */
	VALGRIND_HG_DISABLE_CHECKING(&g_stop, sizeof(g_stop));
	__atomic_store_n(&g_scan_failed, 0, __ATOMIC_RELEASE);
	g_scans = 0;
	ck_assert_int_eq(pthread_create(&scanner, NULL, scanner_main, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < NTHREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].pool = pool;
		w[i].id = i;
		w[i].iters = iterations();
		ck_assert_int_eq(pthread_create(&w[i].th, NULL, worker_main, &w[i]), 0);
	}
	unsigned long calls = 0, allocs = 0, large = 0, patches = 0;
	int failed = 0;

	for (int i = 0; i < NTHREADS; i++) {
		ck_assert_int_eq(pthread_join(w[i].th, NULL), 0);
		calls += w[i].calls;
		allocs += w[i].allocs;
		large += w[i].large_allocs;
		patches += w[i].patches;
		if (w[i].failed_line) {
			fprintf(stderr, "thread %d failed at line %d: %s\n", i, w[i].failed_line,
				w[i].msg);
			failed++;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_join(scanner, NULL), 0);

	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

	printf("flags %#x: %d threads x %d iterations: %lu allocs (%lu large), %lu calls, "
	       "%lu live patches, %lu maps scans in %.2f s\n",
	       flags, NTHREADS, iterations(), allocs, large, calls, patches, g_scans, secs);
	ck_assert_msg(failed == 0, "%d of %d threads failed (see above)", failed, NTHREADS);
	ck_assert_msg(!g_scan_failed, "%s", g_scan_msg);

	/* one last scan with everything quiet, so the check cannot be vacuous */
	char msg[512];

	ck_assert_msg(scan_maps(msg, sizeof(msg)) == 0, "%s", msg);

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ck_assert_uint_eq(st.large_allocs, 0);
	ck_assert_uint_eq(st.large_bytes, 0);
	ck_assert_uint_le(st.packs, 1); /* at most the one cached empty pack */
	ep_pool_destroy(pool);
}

START_TEST(test_stress)
{
	run_stress(0);
}
END_TEST

START_TEST(test_stress_randomized)
{
	run_stress(EP_F_RANDOMIZE);
}
END_TEST

/* The scanner itself must be able to see a W+X mapping. */
START_TEST(test_scanner_detects_wx)
{
	char msg[512];
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED || RUNNING_ON_VALGRIND) {
		/* refused (MDWE, SELinux execmem): nothing to detect; fine */
		if (p != MAP_FAILED)
			munmap(p, 4096);
		return;
	}
	ck_assert_int_eq(scan_maps(msg, sizeof(msg)), 1);
	munmap(p, 4096);
	ck_assert_int_eq(scan_maps(msg, sizeof(msg)), 0);
}
END_TEST

/* ---- heaps (sub-pools, as these cases were first named) -------------------- */

static struct ep_pool *pool_with_subs(const char *n, size_t limit)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD, .limit = limit };
	struct ep_pool *pool = NULL;

	setenv("EXECPACK_HEAPS", n, 1);
	ck_assert_int_eq(ep_pool_create(&cfg, &pool), 0);
	unsetenv("EXECPACK_HEAPS");
	return pool;
}

#define HANDOFF_N 400

struct handoff {
	struct ep_pool *pool;
	void *exec[HANDOFF_N];
	size_t size[HANDOFF_N];
	pthread_mutex_t m;    /* with cv: the producer's progress, for helgrind too */
	pthread_cond_t cv;
	int produced;         /* allocations written so far */
	int failed;           /* line; under m */
	int rc;
};

#define HFAIL(h, r)                                 \
	do {                                        \
		pthread_mutex_lock(&(h)->m);        \
		(h)->rc = (r);                      \
		(h)->failed = __LINE__;             \
		pthread_cond_broadcast(&(h)->cv);   \
		pthread_mutex_unlock(&(h)->m);      \
		return NULL;                        \
	} while (0)

/* Allocate and write in one thread ... */
static void *handoff_producer(void *arg)
{
	struct handoff *h = arg;

	for (int i = 0; i < HANDOFF_N; i++) {
		struct ep_image im;
		size_t size = (size_t)64 << (i % 6); /* 64 B .. 2 KiB: both copy paths */
		int rc = ep_alloc(h->pool, size, &im);

		if (rc)
			HFAIL(h, rc);
		tu_emit_sized(im.rw, size, 0x7000u + (uint32_t)i);
		h->exec[i] = im.exec;
		h->size[i] = size;
		pthread_mutex_lock(&h->m);
		h->produced = i + 1;
		pthread_cond_signal(&h->cv);
		pthread_mutex_unlock(&h->m);
	}
	return NULL;
}

/* ... finalize, call and free in another: every call crosses sub-pools. */
static void *handoff_consumer(void *arg)
{
	struct handoff *h = arg;

	for (int i = 0; i < HANDOFF_N; i++) {
		pthread_mutex_lock(&h->m);
		while (h->produced <= i && !h->failed)
			pthread_cond_wait(&h->cv, &h->m);
		int stop = h->produced <= i;

		pthread_mutex_unlock(&h->m);
		if (stop)
			return NULL;
		int rc = ep_finalize(h->pool, h->exec[i]);

		if (rc)
			HFAIL(h, rc);
		if (rel_call(h->exec[i]) != (int)(0x7000u + (uint32_t)i))
			HFAIL(h, 0);
		if (ep_finalize(h->pool, h->exec[i]) != -EINVAL) /* once only */
			HFAIL(h, 1);
		/* (no double-free check here: the producer may already have
		 * been given this address again) */
		if ((rc = ep_free(h->pool, h->exec[i])))
			HFAIL(h, rc);
	}
	return NULL;
}

START_TEST(test_subpool_handoff)
{
	struct handoff *h = calloc(1, sizeof(*h));

	ck_assert_ptr_nonnull(h);
	pthread_mutex_init(&h->m, NULL);
	pthread_cond_init(&h->cv, NULL);
	h->pool = pool_with_subs("4", 0);
	pthread_t p, c;

	ck_assert_int_eq(pthread_create(&p, NULL, handoff_producer, h), 0);
	ck_assert_int_eq(pthread_create(&c, NULL, handoff_consumer, h), 0);
	ck_assert_int_eq(pthread_join(p, NULL), 0);
	ck_assert_int_eq(pthread_join(c, NULL), 0);
	ck_assert_msg(h->failed == 0, "failed at line %d (rc %d)", h->failed, h->rc);

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(h->pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ck_assert_uint_le(st.packs, 1); /* one cached empty pack per pool, not per sub-pool */
	ep_pool_destroy(h->pool);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->m);
	free(h);
}
END_TEST

struct filler {
	struct ep_pool *pool;
	pthread_barrier_t *go;
	void *exec[4096];
	int n, last_rc;
};

static void *fill_to_limit(void *arg)
{
	struct filler *f = arg;
	struct ep_image im;

	pthread_barrier_wait(f->go);
	while (f->n < 4096) {
		int rc = ep_alloc(f->pool, 64, &im);

		if (rc) {
			f->last_rc = rc;
			break;
		}
		f->exec[f->n++] = im.exec;
	}
	return NULL;
}

/* The limit is the pool's, whichever sub-pools the threads land on. */
START_TEST(test_subpool_shared_limit)
{
	enum { T = 4, LIMIT = 64 * 1000 };
	struct ep_pool *pool = pool_with_subs("4", LIMIT);
	struct filler *f = calloc(T, sizeof(*f));
	pthread_t th[T];
	pthread_barrier_t go;

	ck_assert_ptr_nonnull(f);
	pthread_barrier_init(&go, NULL, T);
	for (int i = 0; i < T; i++) {
		f[i].pool = pool;
		f[i].go = &go;
		ck_assert_int_eq(pthread_create(&th[i], NULL, fill_to_limit, &f[i]), 0);
	}
	int total = 0;

	for (int i = 0; i < T; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_int_eq(f[i].last_rc, -EPERM);
		total += f[i].n;
	}
	ck_assert_int_eq(total, LIMIT / 64); /* exactly the limit, no more */

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.used_bytes, LIMIT);
	ck_assert_uint_eq(st.live_allocs, (size_t)total);
	for (int i = 0; i < T; i++)
		for (int k = 0; k < f[i].n; k++)
			ck_assert_int_eq(ep_free(pool, f[i].exec[k]), 0);
	struct ep_image im;

	ck_assert_int_eq(ep_alloc(pool, 64, &im), 0); /* room again */
	ck_assert_int_eq(ep_free(pool, im.exec), 0);
	pthread_barrier_destroy(&go);
	free(f);
	ep_pool_destroy(pool);
}
END_TEST

struct one_alloc {
	struct ep_pool *pool;
	pthread_barrier_t *go;
	void *exec;
};

static void *alloc_one(void *arg)
{
	struct one_alloc *o = arg;
	struct ep_image im;

	if (ep_alloc(o->pool, 64, &im) == 0) {
		rel_emit_ret_imm(im.rw, 5);
		if (ep_finalize(o->pool, im.exec) == 0)
			o->exec = im.exec;
	}
	pthread_barrier_wait(o->go); /* both allocations live at once */
	return NULL;
}

/* Two threads, two sub-pools: each gets its own pack; with
 * EXECPACK_HEAPS=1 they share one. */
static size_t packs_for_two_threads(const char *n)
{
	struct ep_pool *pool = pool_with_subs(n, 0);
	struct one_alloc o[2] = { { .pool = pool }, { .pool = pool } };
	pthread_barrier_t go;
	pthread_t th[2];

	pthread_barrier_init(&go, NULL, 3);
	for (int i = 0; i < 2; i++) {
		o[i].go = &go;
		ck_assert_int_eq(pthread_create(&th[i], NULL, alloc_one, &o[i]), 0);
	}
	pthread_barrier_wait(&go);

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_ptr_nonnull(o[i].exec);
		ck_assert_int_eq(rel_call(o[i].exec), 5);
		ck_assert_int_eq(ep_free(pool, o[i].exec), 0); /* from another thread */
	}
	pthread_barrier_destroy(&go);
	ep_pool_destroy(pool);
	return st.packs;
}

START_TEST(test_subpools_split_threads)
{
	ck_assert_uint_eq(packs_for_two_threads("1"), 1);
	ck_assert_uint_eq(packs_for_two_threads("2"), 2);
}
END_TEST


/* Threads that share: threads with little code allocate in the first
 * heap's pack rather than each taking one; a thread past EP__BORROW_MAX
 * (256 KiB) of code takes its own. */
enum { SHARE_THREADS = 4, SHARE_N = 100 };

struct share_arg {
	struct ep_pool *pool;
	pthread_barrier_t *go, *start; /* start: all begin at once (optional) */
	size_t size;
	int n;
	void *exec[SHARE_N];
};

static void *share_alloc(void *arg)
{
	struct share_arg *a = arg;

	if (a->start)
		pthread_barrier_wait(a->start);
	for (int i = 0; i < a->n; i++) {
		struct ep_image im;

		if (ep_alloc(a->pool, a->size, &im) != 0)
			break;
		rel_emit_ret_imm(im.rw, (uint32_t)i);
		if (ep_finalize(a->pool, im.exec) != 0)
			break;
		a->exec[i] = im.exec;
	}
	pthread_barrier_wait(a->go); /* all live at once */
	return NULL;
}

static size_t packs_after_threads(struct ep_pool *pool, struct share_arg *a, int nthreads)
{
	pthread_barrier_t go;
	pthread_t th[SHARE_THREADS];
	struct ep_stats st;

	pthread_barrier_init(&go, NULL, (unsigned)nthreads + 1);
	for (int t = 0; t < nthreads; t++) {
		a[t].go = &go;
		ck_assert_int_eq(pthread_create(&th[t], NULL, share_alloc, &a[t]), 0);
	}
	pthread_barrier_wait(&go);
	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	for (int t = 0; t < nthreads; t++)
		ck_assert_int_eq(pthread_join(th[t], NULL), 0);
	pthread_barrier_destroy(&go);
	return st.packs;
}

START_TEST(test_threads_share_packs)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *pool = NULL;
	static struct share_arg a[SHARE_THREADS];
	struct ep_stats st;

	unsetenv("EXECPACK_HEAPS");
	ck_assert_int_eq(ep_pool_create(&cfg, &pool), 0);
	struct ep_image im;

	ck_assert_int_eq(ep_alloc(pool, 64, &im), 0); /* the main thread's heap: a pack */
	rel_emit_ret_imm(im.rw, 7);
	ck_assert_int_eq(ep_finalize(pool, im.exec), 0);
	void *first = im.exec;

	memset(a, 0, sizeof(a));
	for (int t = 0; t < SHARE_THREADS; t++)
		a[t] = (struct share_arg){ .pool = pool, .size = 64, .n = SHARE_N };
	ck_assert_uint_eq(packs_after_threads(pool, a, SHARE_THREADS), 1);
	for (int t = 0; t < SHARE_THREADS; t++) {
		for (int i = 0; i < SHARE_N; i++) {
			ck_assert_ptr_nonnull(a[t].exec[i]);
			ck_assert_int_eq(rel_call(a[t].exec[i]), i);
			ck_assert_int_eq(ep_free(pool, a[t].exec[i]), 0); /* another thread's */
		}
	}
	/* the frees are reused by the next thread's allocations: still one */
	a[0] = (struct share_arg){ .pool = pool, .size = 64, .n = SHARE_N };
	ck_assert_uint_eq(packs_after_threads(pool, a, 1), 1);
	for (int i = 0; i < SHARE_N; i++)
		ck_assert_int_eq(ep_free(pool, a[0].exec[i]), 0);

	/* a thread with more code than 256 KiB takes its own pack */
	a[0] = (struct share_arg){ .pool = pool, .size = 4096, .n = SHARE_N };
	ck_assert_uint_eq(packs_after_threads(pool, a, 1), 2);
	for (int i = 0; i < SHARE_N; i++) {
		ck_assert_int_eq(rel_call(a[0].exec[i]), i);
		ck_assert_int_eq(ep_free(pool, a[0].exec[i]), 0);
	}
	ck_assert_int_eq(rel_call(first), 7);
	ck_assert_int_eq(ep_free(pool, first), 0);
	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ep_pool_destroy(pool);
}
END_TEST

/* glibc's malloc arenas: one <heap> each in malloc_info()'s report. */
static int malloc_arenas(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int n = 0;

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(malloc_info(0, f), 0);
	fclose(f);
	for (const char *p = buf; (p = strstr(p, "<heap nr=")); p++)
		n++;
	free(buf);
	return n;
}

/*
 * Threads that start at once on an empty pool make one pack between them
 * (the first heap makes it; the others borrow behind its lock), and a
 * thread that only JITs through the library gets no malloc arena of its
 * own: its records, heap and staging buffers are the library's small
 * blocks (meta.c).  The arenas are glibc's: under Valgrind or a sanitizer
 * the library uses malloc() on purpose, and that half says SKIP.
 */
START_TEST(test_threads_start_at_once)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *pool = NULL;
	static struct share_arg a[SHARE_THREADS];
	pthread_barrier_t start;
	bool arenas = true;

#if defined(EP_TEST_ASAN) || defined(EP_TEST_TSAN)
	arenas = false;
#endif
	if (RUNNING_ON_VALGRIND)
		arenas = false;
	unsetenv("EXECPACK_HEAPS");
	ck_assert_int_eq(ep_pool_create(&cfg, &pool), 0);
	int before = malloc_arenas();

	pthread_barrier_init(&start, NULL, SHARE_THREADS);
	memset(a, 0, sizeof(a));
	for (int t = 0; t < SHARE_THREADS; t++)
		a[t] = (struct share_arg){ .pool = pool, .size = 64 + 64 * (size_t)t, .n = SHARE_N,
					   .start = &start };
	ck_assert_uint_eq(packs_after_threads(pool, a, SHARE_THREADS), 1);
	pthread_barrier_destroy(&start);
	int after = malloc_arenas();

	if (arenas)
		ck_assert_msg(after == before, "%d malloc arenas before the threads, %d after",
			      before, after);
	else
		printf("SKIP arenas: Valgrind or a sanitizer: the library uses malloc() there\n");
	for (int t = 0; t < SHARE_THREADS; t++)
		for (int i = 0; i < SHARE_N; i++) {
			ck_assert_ptr_nonnull(a[t].exec[i]);
			ck_assert_int_eq(rel_call(a[t].exec[i]), i);
			ck_assert_int_eq(ep_free(pool, a[t].exec[i]), 0);
		}
	ep_pool_destroy(pool);
}
END_TEST

static Suite *threads_suite(void)
{
	Suite *s = suite_create("threads");
	TCase *tc = tcase_create("stress");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_scanner_detects_wx);
	tcase_add_test(tc, test_stress);
	tcase_add_test(tc, test_stress_randomized);
	suite_add_tcase(s, tc);

	TCase *ts = tcase_create("subpools");

	tcase_set_timeout(ts, 120);
	tcase_add_test(ts, test_subpool_handoff);
	tcase_add_test(ts, test_subpool_shared_limit);
	tcase_add_test(ts, test_subpools_split_threads);
	tcase_add_test(ts, test_threads_share_packs);
	tcase_add_test(ts, test_threads_start_at_once);
	suite_add_tcase(s, ts);
	return s;
}

int main(void)
{
	tu_need_pool();

	fflush(stdout); /* before Check forks: no duplicated output */
	SRunner *sr = srunner_create(threads_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
