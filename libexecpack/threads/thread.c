/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * thread.c - the heap each thread allocates from.
 *
 * A thread that allocates is known by a small record that outlives it while
 * a heap still names it as owner: at exit the thread marks each heap it
 * owns orphaned (the flag that pack.c and remote.c read, so that they need
 * nothing of this file), and the next thread that wants a heap in that
 * pool adopts the heap instead of making one.  refs counts the thread
 * itself and the heaps that name it.
 */
#include "config.h"
#include "atomic.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "heap.h"
#include "lock.h"
#include "pack.h"
#include "registry.h"
#include "remote.h"
#include "small.h"
#include "thread.h"
#include "track.h"

pthread_mutex_t ep__thread_key_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t ep__thread_spare_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t g_thread_key;
static bool g_thread_key_made;                 /* ep__thread_key_lock */
static __thread struct ep__thread *tl_self;

__thread struct ep__tl_slot ep__tl_cache[EP__TL_SLOTS] __attribute__((tls_model("initial-exec")));

/*
 * Records whose thread has exited and that no heap names any more wait here
 * for the next thread: never freed, because remote.c looks at a heap's
 * owner without a lock while another thread may be adopting the heap.
 */
static struct ep__thread *g_spare_threads; /* linked by next (ep__thread_spare_lock) */

void ep__thread_put(struct ep__thread *t)
{
	if (t && ep__sub_acq_rel(&t->refs, 1) == 0) {
		ep__mutex_lock(&ep__thread_spare_lock);
		t->next = g_spare_threads;
		g_spare_threads = t;
		ep__mutex_unlock(&ep__thread_spare_lock);
	}
}

/* The thread has exited: what other threads freed of its heap comes back,
 * and the empty pack it kept goes. */
static void trim_if_mine(struct ep__heap *h, void *t)
{
	if (ep__load_relaxed(&h->owner) != t)
		return;
	EP_YIELD("heap orphaned");
	ep__store_seq_cst(&h->orphaned, 1);
	ep__lock(&h->lock);
	/* (seq_cst: after the heap's orphaned mark, against a lock-free free's
	 * push then look at that mark; remote.c) */
	EP_YIELD("remote list");
	if (ep__load_seq_cst(&h->remote))
		ep__remote_drain(h);
	ep__pack_trim(h);
	ep__unlock(&h->lock);
}

static void thread_exit(void *arg)
{
	struct ep__thread *t = arg;

	EP_YIELD("thread exit");
	ep__each_heap(trim_if_mine, t);
	tl_self = NULL;
	memset(ep__tl_cache, 0, sizeof(ep__tl_cache));
	ep__thread_put(t);
}

/* (a mutex, not pthread_once(): Helgrind follows it) */
static bool thread_key_make(void)
{
	ep__mutex_lock(&ep__thread_key_lock);
	if (!g_thread_key_made)
		g_thread_key_made = pthread_key_create(&g_thread_key, thread_exit) == 0;
	bool ok = g_thread_key_made;

	ep__mutex_unlock(&ep__thread_key_lock);
	return ok;
}

/* This thread's record, made on first use; NULL without memory. */
static struct ep__thread *thread_self(void)
{
	struct ep__thread *t = tl_self;

	if (t)
		return t;
	if (!thread_key_make())
		return NULL;
	ep__mutex_lock(&ep__thread_spare_lock);
	t = g_spare_threads;
	if (t)
		g_spare_threads = t->next;
	ep__mutex_unlock(&ep__thread_spare_lock);
	if (!t) {
		t = ep__small_get(sizeof(*t)); /* (never given back: spares) */
		if (!t)
			return NULL;
		/* (atomics only, shared by the thread and the heaps naming it) */
		if (ep__under_valgrind())
			VALGRIND_HG_DISABLE_CHECKING(t, sizeof(*t));
	}
	ep__store_relaxed(&t->refs, 1);
	if (pthread_setspecific(g_thread_key, t)) {
		ep__thread_put(t);
		return NULL;
	}
	tl_self = t;
	return t;
}


/*
 * The heap the calling thread allocates from, found (its own), adopted (one
 * whose thread has exited) or made, in that order; with a cap on heaps
 * (EXECPACK_HEAPS, or a backend whose calls must not overlap) threads share
 * the heaps there are.  NULL without memory.
 */
static struct ep__heap *heap_claim(struct ep_pool *pool)
{
	struct ep__thread *self = thread_self();
	struct ep__heap *h, *pick = NULL;
	unsigned i = 0;

	ep__mutex_lock(&pool->heaps_lock);
	for (h = ep__load_relaxed(&pool->heaps); h; h = h->next_heap)
		if (self && ep__load_relaxed(&h->owner) == self)
			goto found;
	/* (a heap of data, api.c, is never a thread's: skipped below) */
	for (h = ep__load_relaxed(&pool->heaps); h; h = h->next_heap) {
		if (!h->data && ep__heap_orphaned(h)) {
			ep__thread_put(ep__load_relaxed(&h->owner));
			EP_YIELD("heap adopt");
			ep__store_release(&h->owner, NULL);
			goto adopt;
		}
	}
	if (!pool->max_heaps || pool->nheaps < pool->max_heaps) {
		h = ep__heap_clone(pool->first);
		if (h) {
			ep__registry_add(h); /* (the handlers are in: ep_pool_create()) */
			h->next_heap = ep__load_relaxed(&pool->heaps);
			VG_HAPPENS_BEFORE(&pool->heaps);
			EP_YIELD("heap published");
			ep__store_release(&pool->heaps, h);
			pool->nheaps++;
			goto adopt;
		}
	}
	/* shared: spread the threads over the heaps there are */
	for (h = ep__load_relaxed(&pool->heaps); h; h = h->next_heap) {
		if (h->data)
			continue;
		if (!pick || (self && ((uintptr_t)self >> 4) % pool->nheaps == i))
			pick = h;
		i++;
	}
	h = pick;
	goto found;
adopt:
	if (self) {
		ep__add_relaxed(&self->refs, 1);
		EP_YIELD("heap owner");
		ep__store_release(&h->owner, self);
		ep__store_seq_cst(&h->orphaned, 0);
	}
found:
	ep__mutex_unlock(&pool->heaps_lock);
	return h;
}

struct ep__heap *ep__home_slow(struct ep_pool *pool, struct ep__tl_slot *slot)
{
	struct ep__heap *h = heap_claim(pool);

	if (h && tl_self) {
		slot->pool = pool;
		slot->id = pool->id;
		slot->heap = h;
	}
	return h;
}

/* Heaps per pool: one per thread that allocates; one when the backend's
 * calls must not overlap.  EXECPACK_HEAPS=N caps them (N >= 1). */
unsigned ep__heaps_wanted(const struct ep__heap *first)
{
	if (!first->ops->threadsafe)
		return 1;
	const char *env = secure_getenv("EXECPACK_HEAPS");
	long n = env && *env ? strtol(env, NULL, 10) : 0;

	return n < 1 ? 0 : n > 65536 ? 65536 : (unsigned)n;
}

