/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pool.h - what the library's core files share: a pool, its heaps, their
 * packs and records, and the calls between heap.c (one heap), thread.c
 * (which heap a thread uses), fork.c, config.c and api.c (the public calls).
 */
#ifndef EP_POOL_H
#define EP_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "internal.h"
#include "types.h"

/* A raise of a tally count: only the heap's lock holder writes it. */
static inline void ep__tally(uint64_t *c, uint64_t n)
{
	EP_YIELD("tally");
	__atomic_store_n(c, *c + n, __ATOMIC_RELEASE);
}


/* ---- heap.c: one heap ---- */

int ep__heap_create(const struct ep_config *cfg, struct ep__sub **out);
struct ep__sub *ep__heap_clone(const struct ep__sub *first);
void ep__heap_destroy(struct ep__sub *h);
int ep__heap_alloc(struct ep__sub *h, size_t size, struct ep_image *out);
int ep__heap_write(struct ep__sub *h, void *dst, const void *src, size_t len);
int ep__heap_finalize(struct ep__sub *h, void *exec);
int ep__heap_free(struct ep__sub *h, void *exec);
int ep__heap_shrink(struct ep__sub *h, void *exec, size_t size);
int ep__heap_set_name(struct ep__sub *h, void *exec, const char *name);
int ep__heap_set_unwind(struct ep__sub *h, void *exec, int kind, size_t prologue, size_t frame);
/* fn on the region of every pack and large allocation of the heap */
void ep__heap_each_region(struct ep__sub *h, void (*fn)(struct ep__sub *, struct ep__region *));
int ep__mseal(void *addr, size_t len);
/* Nonzero while this thread runs a caller's fill (ep_pool_create(3)). */
extern __thread int ep__in_fill __attribute__((tls_model("initial-exec")));

/* Give back what other threads freed (remote.c); with the heap's lock. */
void ep__heap_drain(struct ep__sub *h);
static inline void ep__heap_drain_check(struct ep__sub *h)
{
	EP_YIELD("remote list");
	if (__builtin_expect(__atomic_load_n(&h->remote, __ATOMIC_RELAXED) != NULL, 0))
		ep__heap_drain(h);
}
/* With the heap's lock: the pack's bitmaps change (see struct ep__pack). */
static inline void ep__pack_write_begin(struct ep__pack *p)
{
	EP_YIELD("pack seq");
	__atomic_store_n(&p->seq, p->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}
static inline void ep__pack_write_end(struct ep__pack *p)
{
	__atomic_store_n(&p->seq, p->seq + 1, __ATOMIC_RELEASE);
}
/* ---- commit.c: the committed (filled, executable) prefix of a pack ---- */

#define EP__COMMIT_FIRST ((size_t)64 << 10) /* a new pack's prefix */
/* Map p's region and commit its first part, room for n chunks at least;
 * sets p->nchunks. */
int ep__pack_map(struct ep__sub *h, struct ep__pack *p, size_t n);
/* Commit more of p, for n chunks after its last used one (-ENOSPC: no). */
int ep__pack_grow(struct ep__sub *h, struct ep__pack *p, size_t n);

/* ---- remote.c: ep_free() from a thread that does not own the heap ---- */

/* The route table's word for a pack's pages (route.h), and back. */
static inline void *ep__route_pack(struct ep__pack *p)
{
	return (void *)((uintptr_t)p | 1);
}
static inline struct ep__sub *ep__route_heap(void *v, struct ep__pack **pack)
{
	uintptr_t w = (uintptr_t)v;

	if (w & 1) {
		*pack = (struct ep__pack *)(w & ~(uintptr_t)1);
		return (*pack)->heap;
	}
	*pack = NULL;
	return v;
}
/* 0: freed; -EINVAL; 1: take the heap's lock and free there instead. */
int ep__remote_free(struct ep__pack *p, void *exec);
/* fork(): no remote free is under way once this returns; and after. */
void ep__remote_gate(struct ep__sub *h);
void ep__remote_ungate(struct ep__sub *h);

/* ---- config.c: validating a config, opening its backend ---- */

int ep__config_open(const struct ep_config *cfg_in, int backend, struct ep_config *cfg,
		    struct ep__sub *h);

/* ---- thread.c: the heap a thread allocates from ---- */

#define EP__TL_SLOTS 4
/* The calling thread's last pools and its heap in each (a pool is told
 * from one made later at the same address by its id). */
struct ep__tl_slot {
	const struct ep_pool *pool;
	uint64_t id;
	struct ep__sub *heap;
};
extern __thread struct ep__tl_slot ep__tl_cache[EP__TL_SLOTS]
	__attribute__((tls_model("initial-exec")));

struct ep__sub *ep__home_slow(struct ep_pool *pool, struct ep__tl_slot *slot);
void ep__thread_put(struct ep__thread *t);
/* Whether t's thread has exited (t may be reused for another thread later:
 * records are never freed, so a racy look at one is safe). */
bool ep__thread_dead(const struct ep__thread *t);
/* Whether h's thread has exited, or it has none yet (any thread, no lock). */
static inline bool ep__heap_orphaned(const struct ep__sub *h)
{
	const struct ep__thread *t = __atomic_load_n(&h->owner, __ATOMIC_SEQ_CST);

	return !t || ep__thread_dead(t);
}
/* The heap's thread has exited (thread.c): give back what it kept. */
void ep__heap_trim(struct ep__sub *h);
/* fn on every heap of every pool (fork.c's list, locked meanwhile). */
void ep__each_heap(void (*fn)(struct ep__sub *, void *), void *arg);
unsigned ep__heaps_wanted(const struct ep__sub *first);

/* The calling thread's heap in pool; NULL without memory. */
static inline struct ep__sub *ep__home(struct ep_pool *pool)
{
	struct ep__tl_slot *slot = &ep__tl_cache[((uintptr_t)pool >> 6) % EP__TL_SLOTS];

	if (__builtin_expect(slot->pool == pool && slot->id == pool->id, 1))
		return slot->heap;
	return ep__home_slow(pool, slot);
}

/* ---- fork.c ---- */

extern int *ep__fork_mark;
void ep__fork_missed(void);
void ep__fork_track(struct ep__sub *h);
void ep__fork_track_pool(struct ep_pool *pool);
void ep__fork_untrack_pool(struct ep_pool *pool);
/* The thread records' mutexes (thread.c), here so that the fork handlers
 * cover them (see fork.c for the order of every lock). */
extern pthread_mutex_t ep__thread_key_lock, ep__thread_spare_lock;
void ep__fork_untrack(struct ep__sub *h);
int ep__own_region_slow(struct ep__sub *h, struct ep__region *r);

/* On every call: one load tells a child that no fork handler told. */
static inline void ep__fork_check(void)
{
	int *mark = ep__fork_mark;

	if (__builtin_expect(mark && __atomic_load_n(mark, __ATOMIC_ACQUIRE) != 1, 0))
		ep__fork_missed();
}

/* Before a change to a region: in a child whose copy of it is not made
 * yet, make it (never in the process that created the region). */
static inline int ep__own_region(struct ep__sub *h, struct ep__region *r)
{
	return r->gen == ep__fork_generation() ? 0 : ep__own_region_slow(h, r);
}

#endif /* EP_POOL_H */
