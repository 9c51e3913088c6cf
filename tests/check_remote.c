/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_remote.c - ep_free() of an allocation another thread made: such a
 * free takes no lock of the owner's heap (libexecpack(7), THREAD SAFETY), and
 * every promise of ep_free(3) still holds the moment it returns:
 *
 *   traps     the code is refilled (with the pool's fill) before ep_free()
 *             returns, whoever frees it;
 *   limit     the bytes are charged no more: another thread may allocate
 *             them at once;
 *   stats     live_allocs and used_bytes no longer count it;
 *   gone      a second ep_free(), ep_write(), ep_finalize(), ep_set_name()
 *             on it fail with -EINVAL, before and after the owner took the
 *             chunks back;
 *   once      of two threads freeing one address at once, exactly one
 *             succeeds;
 *   reuse     the owner's next allocation takes the chunks back (first fit
 *             finds the lowest run again);
 *   orphans   the frees of a heap whose thread has exited, or that never
 *             allocates again, give its packs back;
 *   fork      fork() while threads free each other's code.
 *
 * Only the public interface is used.  The owner of the allocations is a
 * worker thread that stays alive (it runs what it is handed, one job at a
 * time) unless a test wants it gone.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

#include "forkutil.h"
#include "reliability.h"

/* ---- a thread that allocates what it is told ---------------------------- */

struct worker {
	pthread_t t;
	pthread_mutex_t m;
	pthread_cond_t c;
	void (*job)(void *);
	void *arg;
	bool quit;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	pthread_mutex_lock(&w->m);
	for (;;) {
		while (!w->job && !w->quit)
			pthread_cond_wait(&w->c, &w->m);
		if (!w->job)
			break;
		pthread_mutex_unlock(&w->m);
		w->job(w->arg);
		pthread_mutex_lock(&w->m);
		w->job = NULL;
		pthread_cond_broadcast(&w->c);
	}
	pthread_mutex_unlock(&w->m);
	return NULL;
}

static void worker_start(struct worker *w)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->m, NULL);
	pthread_cond_init(&w->c, NULL);
	ck_assert_int_eq(pthread_create(&w->t, NULL, worker_main, w), 0);
}

/* Hand job(arg) to the worker's thread; worker_wait() for its end. */
static void worker_post(struct worker *w, void (*job)(void *), void *arg)
{
	pthread_mutex_lock(&w->m);
	w->job = job;
	w->arg = arg;
	pthread_cond_broadcast(&w->c);
	pthread_mutex_unlock(&w->m);
}

static void worker_wait(struct worker *w)
{
	pthread_mutex_lock(&w->m);
	while (w->job)
		pthread_cond_wait(&w->c, &w->m);
	pthread_mutex_unlock(&w->m);
}

/* Run job(arg) on the worker's thread and wait for it. */
static void worker_do(struct worker *w, void (*job)(void *), void *arg)
{
	worker_post(w, job, arg);
	worker_wait(w);
}

static void worker_stop(struct worker *w)
{
	pthread_mutex_lock(&w->m);
	w->quit = true;
	pthread_cond_broadcast(&w->c);
	pthread_mutex_unlock(&w->m);
	pthread_join(w->t, NULL);
	pthread_mutex_destroy(&w->m);
	pthread_cond_destroy(&w->c);
}

/* A batch of programs JITted by whoever runs jit_job(). */
struct batch {
	struct ep_pool *pool;
	size_t n, size;
	void *exec[512];
	int rc;
};

static void jit_job(void *arg)
{
	struct batch *b = arg;

	b->rc = 0;
	for (size_t i = 0; i < b->n && !b->rc; i++)
		b->rc = rel_jit(b->pool, b->size, (uint32_t)(1000 + i), &b->exec[i]);
}

static void one_alloc_job(void *arg)
{
	struct batch *b = arg;
	struct ep_image img;

	b->rc = ep_alloc(b->pool, b->size, &img);
	b->exec[0] = img.exec;
	if (!b->rc) {
		rel_emit_ret_imm(img.rw, 7);
		b->rc = ep_finalize(b->pool, img.exec);
	}
}

static struct ep_pool *new_pool(size_t limit, unsigned flags)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .limit = limit, .flags = flags };
	struct ep_pool *pool;

	ck_assert_int_eq(ep_pool_create(&cfg, &pool), 0);
	return pool;
}

static struct ep_stats stats(struct ep_pool *pool)
{
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	return st;
}

/* Whether the n bytes at exec all read as the trap fill. */
static bool all_traps(const void *exec, size_t n)
{
	const unsigned char *p = exec;

	for (size_t i = 0; i < n; i++)
		if (p[i] != tu_trap_byte(p + i))
			return false;
	return true;
}

/* ---- traps, stats, limit ------------------------------------------------ */

START_TEST(test_remote_free_traps_at_once)
{
	struct ep_pool *pool = new_pool(0, 0);
	struct worker w;
	struct batch b = { .pool = pool, .n = 64, .size = 200 };

	worker_start(&w);
	worker_do(&w, jit_job, &b);
	ck_assert_int_eq(b.rc, 0);
	for (size_t i = 0; i < b.n; i++) {
		ck_assert_int_eq(rel_call(b.exec[i]), (int)(1000 + i));
		ck_assert_int_eq(ep_free(pool, b.exec[i]), 0);
		/* 200 bytes take 4 chunks: all of them trap now */
		ck_assert_msg(all_traps(b.exec[i], 256), "program %zu not refilled", i);
	}
	worker_stop(&w);
	ep_pool_destroy(pool);
}
END_TEST

START_TEST(test_remote_free_stats_at_once)
{
	struct ep_pool *pool = new_pool(0, 0);
	struct worker w;
	struct batch b = { .pool = pool, .n = 100, .size = 100 };

	worker_start(&w);
	worker_do(&w, jit_job, &b);
	ck_assert_int_eq(b.rc, 0);
	struct ep_stats st = stats(pool);

	ck_assert_uint_eq(st.live_allocs, 100);
	ck_assert_uint_eq(st.used_bytes, 100 * 128);
	for (size_t i = 0; i < 60; i++)
		ck_assert_int_eq(ep_free(pool, b.exec[i]), 0);
	/* the owner has made no call since: the figures are exact anyway */
	st = stats(pool);
	ck_assert_uint_eq(st.live_allocs, 40);
	ck_assert_uint_eq(st.used_bytes, 40 * 128);
	ck_assert_uint_le(st.used_bytes, st.pack_bytes);
	for (size_t i = 60; i < 100; i++)
		ck_assert_int_eq(ep_free(pool, b.exec[i]), 0);
	st = stats(pool);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	worker_stop(&w);
	ep_pool_destroy(pool);
}
END_TEST

START_TEST(test_remote_free_limit_at_once)
{
	struct ep_pool *pool = new_pool(4096, 0);
	struct worker owner, other;
	struct batch b = { .pool = pool, .n = 16, .size = 256 };
	struct batch c = { .pool = pool, .size = 256 };

	worker_start(&owner);
	worker_start(&other);
	worker_do(&owner, jit_job, &b);
	ck_assert_int_eq(b.rc, 0);
	worker_do(&other, one_alloc_job, &c);
	ck_assert_int_eq(c.rc, -EPERM); /* the limit is spent */
	for (size_t i = 0; i < b.n; i++) {
		ck_assert_int_eq(ep_free(pool, b.exec[i]), 0);
		/* a third thread has the bytes as soon as ep_free() returned */
		worker_do(&other, one_alloc_job, &c);
		ck_assert_int_eq(c.rc, 0);
		ck_assert_int_eq(rel_call(c.exec[0]), 7);
		worker_do(&other, one_alloc_job, &c);
		ck_assert_int_eq(c.rc, -EPERM);
		b.exec[i] = NULL;
	}
	worker_stop(&owner);
	worker_stop(&other);
	ep_pool_destroy(pool);
}
END_TEST

/* ---- gone, once, reuse -------------------------------------------------- */

START_TEST(test_remote_freed_is_gone)
{
	struct ep_pool *pool = new_pool(0, 0);
	struct worker w;
	struct batch b = { .pool = pool, .n = 2, .size = 64 };
	uint32_t v = 5;

	worker_start(&w);
	worker_do(&w, jit_job, &b);
	ck_assert_int_eq(b.rc, 0);
	ck_assert_int_eq(ep_free(pool, b.exec[0]), 0);
	/* before the owner took the chunks back */
	ck_assert_int_eq(ep_free(pool, b.exec[0]), -EINVAL);
	ck_assert_int_eq(ep_write(pool, (char *)b.exec[0] + 1, &v, 4), -EINVAL);
	ck_assert_int_eq(ep_finalize(pool, b.exec[0]), -EINVAL);
	ck_assert_int_eq(ep_set_name(pool, b.exec[0], "gone"), -EINVAL);
	/* the neighbour is untouched and still patchable */
	ck_assert_int_eq(rel_patch(pool, b.exec[1], 77), 0);
	ck_assert_int_eq(rel_call(b.exec[1]), 77);
	/* the owner's next allocation takes the chunks back (first fit: the
	 * lowest run, where the freed program was) */
	struct batch c = { .pool = pool, .size = 64 };

	worker_do(&w, one_alloc_job, &c);
	ck_assert_int_eq(c.rc, 0);
	ck_assert_ptr_eq(c.exec[0], b.exec[0]);
	ck_assert_int_eq(rel_call(c.exec[0]), 7);
	ck_assert_int_eq(ep_free(pool, c.exec[0]), 0);
	ck_assert_int_eq(ep_free(pool, c.exec[0]), -EINVAL);
	ck_assert_int_eq(ep_free(pool, b.exec[1]), 0);
	struct ep_stats st = stats(pool);

	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	worker_stop(&w);
	ep_pool_destroy(pool);
}
END_TEST

/*
 * What a free takes to be a program's extent: lengths around what a
 * chunk's state byte keeps (up to 31 chunks) and past it, and programs
 * shrunk before and after ep_finalize().  Each sits between two guards;
 * its free refills exactly its chunks, gives back exactly its bytes and
 * leaves the guards whole, and the next allocation of its size lands
 * where it was.  _i: 0 freed by another thread (no lock), 1 by the owner.
 */
struct extent_job {
	struct ep_pool *pool;
	void *prog[8], *guard[9];
	size_t reserved[8];
	int rc;
};

/* the last four shrunk: to 200 and 1000 bytes before ep_finalize(), to
 * 1000 and 100 after */
static const size_t ext_size[8] = { 64, 1984, 2048, 2560, 1900, 4096, 1500, 3000 };
static const size_t ext_keep[8] = { 64, 1984, 2048, 2560, 200, 1000, 1000, 100 };

static void extent_job(void *arg)
{
	struct extent_job *j = arg;

	j->rc = rel_jit(j->pool, 64, 900, &j->guard[0]);
	for (size_t i = 0; i < 8 && !j->rc; i++) {
		struct ep_image img;
		size_t keep = ext_keep[i];

		if ((j->rc = ep_alloc(j->pool, ext_size[i], &img)))
			break;
		rel_emit_ret_imm(img.rw, (uint32_t)(100 + i));
		if (i == 4 || i == 5) /* shrunk while staged */
			j->rc = ep_shrink(j->pool, img.exec, keep);
		if (!j->rc)
			j->rc = ep_finalize(j->pool, img.exec);
		if (!j->rc && i >= 6) /* shrunk when finalized */
			j->rc = ep_shrink(j->pool, img.exec, keep);
		j->prog[i] = img.exec;
		j->reserved[i] = (keep + 63) / 64 * 64;
		if (!j->rc)
			j->rc = rel_jit(j->pool, 64, (uint32_t)(901 + i), &j->guard[i + 1]);
	}
}

START_TEST(test_free_extent)
{
	struct ep_pool *pool = new_pool(0, 0);
	struct worker w;
	struct extent_job j = { .pool = pool };
	struct batch c = { .pool = pool };

	worker_start(&w);
	if (_i == 0)
		worker_do(&w, extent_job, &j);
	else
		extent_job(&j);
	ck_assert_int_eq(j.rc, 0);
	for (size_t i = 0; i < 8; i++) {
		ck_assert_int_eq(rel_call(j.prog[i]), (int)(100 + i));
		/* the shrunk ones end where their guard's chunk begins: the
		 * rest of their run went back */
		struct ep_stats before = stats(pool), after;

		ck_assert_int_eq(ep_free(pool, j.prog[i]), 0);
		after = stats(pool);
		ck_assert_uint_eq(after.live_allocs, before.live_allocs - 1);
		ck_assert_uint_eq(after.used_bytes, before.used_bytes - j.reserved[i]);
		ck_assert_msg(all_traps(j.prog[i], j.reserved[i]), "program %zu not refilled", i);
		ck_assert_int_eq(rel_call(j.guard[i]), (int)(900 + i));
		ck_assert_int_eq(rel_call(j.guard[i + 1]), (int)(901 + i));
		ck_assert_int_eq(ep_free(pool, j.prog[i]), -EINVAL);
		/* the owner takes the chunks back: the same size lands there */
		c.size = j.reserved[i];
		if (_i == 0)
			worker_do(&w, one_alloc_job, &c);
		else
			one_alloc_job(&c);
		ck_assert_int_eq(c.rc, 0);
		ck_assert_ptr_eq(c.exec[0], j.prog[i]);
		ck_assert_int_eq(rel_call(c.exec[0]), 7);
		ck_assert_int_eq(rel_call(j.guard[i + 1]), (int)(901 + i));
		j.prog[i] = c.exec[0]; /* (kept: the next sizes go higher) */
	}
	for (size_t i = 0; i < 8; i++)
		ck_assert_int_eq(ep_free(pool, j.prog[i]), 0);
	for (size_t i = 0; i < 9; i++)
		ck_assert_int_eq(ep_free(pool, j.guard[i]), 0);
	ck_assert_uint_eq(stats(pool).used_bytes, 0);
	worker_stop(&w);
	ep_pool_destroy(pool);
}
END_TEST

struct racer {
	struct ep_pool *pool;
	pthread_barrier_t *bar;
	void *volatile *target;
	int rounds;
	int *rcs; /* per round */
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;

	for (int i = 0; i < r->rounds; i++) {
		pthread_barrier_wait(r->bar);
		r->rcs[i] = ep_free(r->pool, *r->target);
		pthread_barrier_wait(r->bar);
	}
	return NULL;
}

/*
 * Two threads free the same address at once, each round: one gets 0, the
 * other -EINVAL, and the pool is intact.  _i: 0 both remote, 1 the owner
 * and a remote.
 */
START_TEST(test_remote_double_free_race)
{
	int rounds = rel_quick() ? 200 : 2000;
	struct ep_pool *pool = new_pool(0, 0);
	pthread_barrier_t bar;
	void *volatile target = NULL;
	int *rc1 = calloc((size_t)rounds, sizeof(int)), *rc2 = calloc((size_t)rounds, sizeof(int));
	struct racer r1 = { pool, &bar, &target, rounds, rc1 };
	pthread_t t1;
	struct worker w;
	struct batch b = { .pool = pool, .size = 64 };
	void *keep;

	ck_assert_ptr_nonnull(rc1);
	ck_assert_ptr_nonnull(rc2);
	pthread_barrier_init(&bar, NULL, 2);
	worker_start(&w);
	ck_assert_int_eq(pthread_create(&t1, NULL, racer_main, &r1), 0);
	/* a neighbour that must survive every round */
	ck_assert_int_eq(rel_jit(pool, 64, 4242, &keep), 0);
	for (int i = 0; i < rounds; i++) {
		if (_i == 0) {
			worker_do(&w, one_alloc_job, &b);
			ck_assert_int_eq(b.rc, 0);
			target = b.exec[0];
		} else {
			ck_assert_int_eq(rel_jit(pool, 64, 7, &b.exec[0]), 0);
			target = b.exec[0];
		}
		pthread_barrier_wait(&bar);
		rc2[i] = ep_free(pool, target);
		pthread_barrier_wait(&bar);
		ck_assert_msg((rc1[i] == 0 && rc2[i] == -EINVAL) || (rc1[i] == -EINVAL && rc2[i] == 0),
			      "round %d: %d and %d", i, rc1[i], rc2[i]);
	}
	pthread_join(t1, NULL);
	ck_assert_int_eq(rel_call(keep), 4242);
	struct ep_stats st = stats(pool);

	ck_assert_uint_eq(st.live_allocs, 1);
	ck_assert_uint_eq(st.used_bytes, 64);
	ck_assert_int_eq(ep_free(pool, keep), 0);
	worker_stop(&w);
	pthread_barrier_destroy(&bar);
	free(rc1);
	free(rc2);
	ep_pool_destroy(pool);
}
END_TEST

/* Named or placed at a random offset: a record of its own; freed from
 * another thread all the same. */
START_TEST(test_remote_free_with_record)
{
	struct ep_pool *pool = new_pool(0, _i ? EP_F_RANDOMIZE : 0);
	struct worker w;
	struct batch b = { .pool = pool, .n = 32, .size = 100 };

	worker_start(&w);
	worker_do(&w, jit_job, &b);
	ck_assert_int_eq(b.rc, 0);
	for (size_t i = 0; i < b.n; i += 2)
		ck_assert_int_eq(ep_set_name(pool, b.exec[i], "named"), 0);
	for (size_t i = 0; i < b.n; i++) {
		ck_assert_int_eq(ep_free(pool, b.exec[i]), 0);
		ck_assert_int_eq(ep_free(pool, b.exec[i]), -EINVAL);
	}
	ck_assert_uint_eq(stats(pool).live_allocs, 0);
	worker_stop(&w);
	ep_pool_destroy(pool);
}
END_TEST

/* ---- orphans ------------------------------------------------------------ */

static void *jit_thread(void *arg)
{
	jit_job(arg);
	return NULL;
}

START_TEST(test_remote_free_orphaned_heap)
{
	struct ep_pool *pool = new_pool(0, 0);
	struct batch b = { .pool = pool, .n = 512, .size = 2048 };
	pthread_t t;

	/* 512 x 2 KiB: at least one pack of its own */
	ck_assert_int_eq(pthread_create(&t, NULL, jit_thread, &b), 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(b.rc, 0);
	ck_assert_uint_ge(stats(pool).packs, 1);
	for (size_t i = 0; i < b.n; i++)
		ck_assert_int_eq(ep_free(pool, b.exec[i]), 0);
	struct ep_stats st = stats(pool);

	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ck_assert_uint_le(st.packs, 1); /* the one cached empty pack, at most */
	ep_pool_destroy(pool);
}
END_TEST

START_TEST(test_remote_free_idle_owner)
{
	struct ep_pool *pool = new_pool(0, 0);
	struct worker w;
	struct batch b = { .pool = pool, .n = 512, .size = 2048 };
	struct batch c = { .pool = pool, .size = 64 };

	worker_start(&w);
	worker_do(&w, jit_job, &b);
	ck_assert_int_eq(b.rc, 0);
	for (size_t i = 0; i < b.n; i++)
		ck_assert_int_eq(ep_free(pool, b.exec[i]), 0);
	ck_assert_uint_eq(stats(pool).used_bytes, 0);
	/* the owner's next call gives the packs back: one for its program */
	worker_do(&w, one_alloc_job, &c);
	ck_assert_int_eq(c.rc, 0);
	ck_assert_uint_eq(stats(pool).packs, 1);
	ck_assert_int_eq(ep_free(pool, c.exec[0]), 0);
	worker_stop(&w);
	ep_pool_destroy(pool);
}
END_TEST

/* ---- many threads ------------------------------------------------------- */

#define RING_N 8
#define RING_CAP 64

struct ring_run {
	struct ep_pool *pool;
	int ops;
	/* ring[i]: programs thread i JITted for thread i+1 to free */
	void *ring[RING_N][RING_CAP];
	uint32_t val[RING_N][RING_CAP];
	unsigned head[RING_N], tail[RING_N]; /* atomics */
	int bad[RING_N];
};

struct ring_arg {
	struct ring_run *run;
	int i;
};

static void *ring_thread(void *arg)
{
	struct ring_arg *a = arg;
	struct ring_run *r = a->run;
	int me = a->i, prev = (a->i + RING_N - 1) % RING_N;
	uint32_t v = (uint32_t)me << 24;

	for (int k = 0; k < r->ops && !r->bad[me]; k++) {
		/* free what the previous thread made, once it called right */
		unsigned h = __atomic_load_n(&r->head[prev], __ATOMIC_RELAXED);

		if (h != __atomic_load_n(&r->tail[prev], __ATOMIC_ACQUIRE)) {
			void *x = r->ring[prev][h % RING_CAP];

			if ((uint32_t)rel_call(x) != r->val[prev][h % RING_CAP] ||
			    ep_free(r->pool, x) != 0)
				r->bad[me] = 1;
			__atomic_store_n(&r->head[prev], h + 1, __ATOMIC_RELEASE);
		}
		unsigned t = __atomic_load_n(&r->tail[me], __ATOMIC_RELAXED);

		if (t - __atomic_load_n(&r->head[me], __ATOMIC_ACQUIRE) >= RING_CAP) {
			sched_yield();
			continue;
		}
		void *x;

		v++;
		if (rel_jit(r->pool, 16 + (size_t)(v % 700), v, &x)) {
			r->bad[me] = 2;
			break;
		}
		r->ring[me][t % RING_CAP] = x;
		r->val[me][t % RING_CAP] = v;
		__atomic_store_n(&r->tail[me], t + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

START_TEST(test_remote_ring_8)
{
	struct ring_run *r = calloc(1, sizeof(*r));
	struct ring_arg args[RING_N];
	pthread_t t[RING_N];

	ck_assert_ptr_nonnull(r);
	r->pool = new_pool(0, 0);
	r->ops = rel_quick() ? 2000 : 20000;
	for (int i = 0; i < RING_N; i++) {
		args[i] = (struct ring_arg){ r, i };
		ck_assert_int_eq(pthread_create(&t[i], NULL, ring_thread, &args[i]), 0);
	}
	for (int i = 0; i < RING_N; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < RING_N; i++)
		ck_assert_msg(!r->bad[i], "thread %d failed (%d)", i, r->bad[i]);
	size_t left = 0;

	for (int i = 0; i < RING_N; i++)
		for (unsigned h = r->head[i]; h != r->tail[i]; h++, left++) {
			ck_assert_uint_eq((uint32_t)rel_call(r->ring[i][h % RING_CAP]),
					  r->val[i][h % RING_CAP]);
			ck_assert_int_eq(ep_free(r->pool, r->ring[i][h % RING_CAP]), 0);
		}
	struct ep_stats st = stats(r->pool);

	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	/* every heap's thread has exited: its packs went back */
	ck_assert_uint_le(st.packs, 1);
	ep_pool_destroy(r->pool);
	free(r);
}
END_TEST

/* ---- fork --------------------------------------------------------------- */

/* One thread JITs programs and hands each to the other, which frees it. */
struct handoff {
	struct ep_pool *pool;
	void *slot; /* atomic: a program handed over, or NULL */
	int stop;   /* atomic */
	int bad;
};

static void *handoff_maker(void *arg)
{
	struct handoff *c = arg;

	while (!__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) {
		void *x, *none = NULL;

		if (rel_jit(c->pool, 64 + (size_t)((uintptr_t)&x % 256), 1, &x)) {
			c->bad = 1;
			break;
		}
		while (!__atomic_compare_exchange_n(&c->slot, &none, x, false, __ATOMIC_RELEASE,
						    __ATOMIC_RELAXED)) {
			none = NULL;
			if (__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) {
				if (ep_free(c->pool, x))
					c->bad = 2;
				return NULL;
			}
			sched_yield();
		}
	}
	return NULL;
}

static void *handoff_freer(void *arg)
{
	struct handoff *c = arg;

	for (;;) {
		void *x = __atomic_exchange_n(&c->slot, NULL, __ATOMIC_ACQUIRE);

		if (x) {
			if (rel_call(x) != 1 || ep_free(c->pool, x))
				c->bad = 3;
		} else if (__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) {
			return NULL;
		} else {
			sched_yield();
		}
	}
}

START_TEST(test_fork_during_remote_frees)
{
	struct handoff c = { .pool = new_pool(0, 0) };
	pthread_t maker, freer;
	void *mine[64];
	int forks = rel_quick() ? 5 : 30, bad_child = -1, bad_status = 0;

	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(rel_jit(c.pool, 128, (uint32_t)i, &mine[i]), 0);
	ck_assert_int_eq(pthread_create(&maker, NULL, handoff_maker, &c), 0);
	ck_assert_int_eq(pthread_create(&freer, NULL, handoff_freer, &c), 0);
	/* (no assertion until the threads are joined: it would leave this
	 * frame while they still use c) */
	for (int k = 0; k < forks && bad_child < 0; k++) {
		struct fu_child ch;
		pid_t pid = fu_fork(&ch, FU_FORK);

		if (pid == 0) {
			void *x;

			CHILD_CHECK(rel_jit(c.pool, 64, 99, &x) == 0, "child JIT");
			CHILD_CHECK(rel_call(x) == 99, "child call");
			for (int i = 0; i < 64; i++)
				CHILD_CHECK(rel_call(mine[i]) == i, "inherited program %d", i);
			CHILD_CHECK(ep_free(c.pool, x) == 0, "child free");
			CHILD_CHECK(ep_free(c.pool, mine[0]) == 0, "child free of the parent's");
			rel_child_exit_ok(ch.tx);
		}
		/* (a SIGKILL after 'k' is a pass under Valgrind: reliability.h) */
		bad_status = pid < 0 ? -errno : fu_finish(&ch, 60);
		if (bad_status)
			bad_child = k;
	}
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELAXED);
	pthread_join(maker, NULL);
	pthread_join(freer, NULL);
	ck_assert_msg(bad_child < 0, "child %d: status %d%s", bad_child, bad_status,
		      fu_status_text(bad_status));
	ck_assert_int_eq(c.bad, 0);
	void *last = __atomic_exchange_n(&c.slot, NULL, __ATOMIC_ACQUIRE);

	if (last)
		ck_assert_int_eq(ep_free(c.pool, last), 0);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(rel_call(mine[i]), i);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(ep_free(c.pool, mine[i]), 0);
	ck_assert_uint_eq(stats(c.pool).live_allocs, 0);
	ep_pool_destroy(c.pool);
}
END_TEST

/* ---- waits sleep ---------------------------------------------------------- */

static int g_slow_armed;  /* the next fill sleeps 1 s first */
static int g_slow_inside; /* a fill is asleep now */

static void slow_fill(void *dst, size_t len, void *ctx)
{
	(void)ctx;
	if (__atomic_exchange_n(&g_slow_armed, 0, __ATOMIC_ACQ_REL)) {
		struct timespec ts = { 1, 0 };

		__atomic_store_n(&g_slow_inside, 1, __ATOMIC_RELEASE);
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	TU_FILL(dst, len, NULL);
}

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A call whose fill sleeps 1 s. */
struct slow_job {
	struct ep_pool *pool;
	void *exec;
	int shrink; /* ep_shrink() to 64 bytes; else ep_free() */
	int rc;
};

static void slow_job(void *arg)
{
	struct slow_job *j = arg;

	__atomic_store_n(&g_slow_armed, 1, __ATOMIC_RELEASE);
	j->rc = j->shrink ? ep_shrink(j->pool, j->exec, 64) : ep_free(j->pool, j->exec);
}

static void *slow_thread(void *arg)
{
	slow_job(arg);
	return NULL;
}

static void wait_slow_inside(void)
{
	while (!__atomic_load_n(&g_slow_inside, __ATOMIC_ACQUIRE))
		usleep(1000);
}

static void one_staged_job(void *arg)
{
	struct batch *b = arg;
	struct ep_image img;

	b->rc = ep_alloc(b->pool, b->size, &img);
	b->exec[0] = img.exec;
}

/* How long the waiting call took, and the CPU its thread burned meanwhile. */
struct waited {
	double wall, cpu;
};

#define MEASURE(w, call)                                                   \
	do {                                                               \
		double c0_ = clock_s(CLOCK_THREAD_CPUTIME_ID);             \
		double t0_ = clock_s(CLOCK_MONOTONIC);                     \
		call;                                                      \
		(w).wall = clock_s(CLOCK_MONOTONIC) - t0_;                 \
		(w).cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0_;          \
	} while (0)

static void check_slept(const char *what, struct waited w)
{
	printf("%s: waited %.3f s, burned %.4f s of CPU (%.2f%%)\n", what, w.wall, w.cpu,
	       100 * w.cpu / w.wall);
	ck_assert_msg(w.wall > 0.5, "%s: waited only %.3f s: no wait was provoked", what, w.wall);
	ck_assert_msg(w.cpu <= 0.05 * w.wall, "%s: burned %.3f s of CPU in a %.3f s wait", what,
		      w.cpu, w.wall);
}

static const char *const wait_kinds[] = { "revocation", "busy", "fork gate" };

/*
 * A thread waits while another's fill sleeps 1 s; it must sleep too.
 *   0 revocation: the owner frees its own code, holding its heap's lock on
 *     the bias's fast path across the fill; this thread frees the owner's
 *     allocation that has a record (the lock's path: it revokes the bias).
 *   1 BUSY: the owner shrinks a finalized allocation (BUSY across the
 *     fill); this thread frees it (lock-free first, it finds BUSY).
 *   2 fork gate: a third thread frees the owner's finalized code without
 *     the lock (the refill is the slow fill); this thread forks meanwhile.
 */
START_TEST(test_wait_sleeps_behind_slow_fill)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .fill = slow_fill };
	struct ep_pool *pool;
	int rc = ep_pool_create(&cfg, &pool);

	if (rc) {
		printf("SKIP %s: memfd: %s\n", wait_kinds[_i], ep_strerror(rc));
		return;
	}
	struct worker w;
	struct batch b = { .pool = pool, .n = 2, .size = 256 };
	struct batch r = { .pool = pool, .size = 256 };

	worker_start(&w);
	worker_do(&w, jit_job, &b);
	ck_assert_int_eq(b.rc, 0);
	worker_do(&w, one_staged_job, &r); /* (unfinalized: it has a record) */
	ck_assert_int_eq(r.rc, 0);

	struct slow_job j = { .pool = pool, .exec = b.exec[0], .shrink = _i == 1 };
	struct waited wt;
	pthread_t t;

	__atomic_store_n(&g_slow_inside, 0, __ATOMIC_RELEASE);
	if (_i == 2)
		ck_assert_int_eq(pthread_create(&t, NULL, slow_thread, &j), 0);
	else
		worker_post(&w, slow_job, &j);
	wait_slow_inside();
	if (_i == 0) {
		MEASURE(wt, rc = ep_free(pool, r.exec[0]));
	} else if (_i == 1) {
		MEASURE(wt, rc = ep_free(pool, b.exec[0]));
	} else {
		pid_t pid;

		MEASURE(wt, pid = fork());
		if (pid == 0)
			_exit(0);
		ck_assert_int_gt(pid, 0);
		ck_assert_int_eq(rel_wait(pid), 0);
		rc = ep_free(pool, r.exec[0]);
	}
	if (_i == 2)
		pthread_join(t, NULL);
	else
		worker_wait(&w);
	ck_assert_int_eq(j.rc, 0);
	ck_assert_int_eq(rc, 0);
	check_slept(wait_kinds[_i], wt);
	ck_assert_int_eq(ep_free(pool, b.exec[1]), 0);
	if (_i != 1)
		ck_assert_int_eq(ep_free(pool, b.exec[0]), -EINVAL);
	worker_stop(&w);
	ep_pool_destroy(pool);
}
END_TEST

static Suite *remote_suite(void)
{
	Suite *s = suite_create("remote");
	TCase *tc = tcase_create("remote");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_remote_free_traps_at_once);
	tcase_add_test(tc, test_remote_free_stats_at_once);
	tcase_add_test(tc, test_remote_free_limit_at_once);
	tcase_add_test(tc, test_remote_freed_is_gone);
	tcase_add_loop_test(tc, test_free_extent, 0, 2);
	tcase_add_loop_test(tc, test_remote_double_free_race, 0, 2);
	tcase_add_loop_test(tc, test_remote_free_with_record, 0, 2);
	tcase_add_test(tc, test_remote_free_orphaned_heap);
	tcase_add_test(tc, test_remote_free_idle_owner);
	tcase_add_test(tc, test_remote_ring_8);
	tcase_add_test(tc, test_fork_during_remote_frees);
	tcase_add_loop_test(tc, test_wait_sleeps_behind_slow_fill, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	tu_need_pool();
	SRunner *sr = srunner_create(remote_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed_n = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed_n ? EXIT_FAILURE : EXIT_SUCCESS;
}
