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

#include "backend.h"
#include "bitmap.h"
#include "execpack.h"
#include "internal.h"
#include "lock.h"

#define CHUNK EP_CHUNK_SIZE
#define RANDOMIZE_SLACK 48 /* extra bytes reserved for EP_F_RANDOMIZE */

/* Staging buffers of 64 << k bytes (k < STASH_CLASSES) are kept for reuse. */
#define STASH_CLASSES 7
#define STASH_DEPTH 8
#define SPARE_RECORDS 64

struct ep__pack;
struct ep__thread;

struct ep__alloc {
	struct ep__alloc *hnext; /* hash chain */
	uintptr_t key;           /* address of the reservation's first byte */
	void *exec;              /* what ep_alloc() returned */
	struct ep__pack *pack;   /* NULL: a large allocation */
	struct ep__region large; /* its own mapping when pack is NULL */
	size_t chunk;            /* first chunk in the pack */
	size_t reserved;         /* bytes reserved and charged */
	size_t offset;           /* exec - reservation start (EP_F_RANDOMIZE) */
	unsigned char *staging;  /* reserved bytes; NULL once finalized */
	int stash_class;         /* staging's size class, or -1 */
	int view;                /* 1: no record, a copy on the caller's stack */
	struct ep__diag *diag;   /* diag.c: name and unwind info; NULL if none */
};

/*
 * A pack.  Its struct and bitmaps are never freed while its heap lives (a
 * released pack waits on the heap's spares for reuse), because a thread
 * freeing into it without the heap's lock (remote.c) may still be reading
 * them: such a reader checks what it read against seq.
 */
struct ep__pack {
	struct ep__region r;
	struct ep__pack *next, *prev;
	struct ep__sub *heap; /* for ever */
	size_t nchunks;
	size_t free_chunks;
	size_t first_free; /* lowest clear chunk (nchunks when full) */
	uint64_t *used;
	uint64_t *start;
	uint64_t *recs;     /* start bits of allocations with a record */
	struct ep__fit fit; /* longest free runs of used, for first fit */
	int cached;         /* empty and counted in the pool's empty_packs */
	size_t slot;        /* its place in the heap's creation order (by_slot) */

	/* remote frees (remote.c); all atomics */
	unsigned seq;       /* odd while the owner changes used, start or recs */
	unsigned char *freeing; /* per chunk: an ep_free() claimed the allocation
				 * starting here (a byte: given up with a store) */
	uint64_t *done;     /* ... of those whose refill is done, to give back */
	uint64_t *done_sum; /* words of done with a bit set */
	int queued;         /* on the heap's remote list */
	struct ep__pack *rnext;
};

/* One region's address range, sorted by lo, for address lookups. */
struct ep__range {
	uintptr_t lo, hi;
	struct ep__pack *pack;   /* or */
	struct ep__alloc *large;
};

/*
 * Monotonic counts of one heap, only ever raised, each with a release store
 * under the heap's lock; ep_pool_stats() reads them without any lock (see
 * pool_stats() for the order that makes its relations hold).
 */
struct ep__tally {
	uint64_t allocs, frees;             /* every allocation */
	uint64_t used_in, used_out;         /* pack chunk bytes taken, given back */
	uint64_t packs_in, packs_out;       /* packs mapped, released */
	uint64_t large_in, large_out;       /* large allocations made, freed */
	uint64_t lbytes_in, lbytes_out;     /* their mapped bytes */
	uint64_t commit_in, commit_out;     /* pack bytes committed, released */
};

/*
 * A heap: what one thread allocates from, with its own lock, packs and
 * tables.  Each thread that allocates gets one (adopting the heap of a
 * thread that has exited before making a new one), so threads JITting at
 * once never share a lock; a call on another thread's allocation finds its
 * heap through route.h and takes only that heap's lock.  First fit holds
 * within a heap.  (The type keeps its old name: diag.c keys memcheck pools
 * by it.)
 */
struct ep__sub {
	struct ep__lock lock;
	struct ep_pool *root;
	const struct ep__backend_ops *ops;
	struct ep__backend *be;
	ep_fill_fn fill;
	void *fill_ctx;
	ep_fill_fn user_fill; /* ep_config.fill, called through fill_guarded() */
	void *user_fill_ctx;
	unsigned flags;
	size_t limit;
	size_t pack_size;
	size_t page_size;

	struct ep__pack *head, *tail;

	/*
	 * First fit across packs: the packs in creation order (NULL where one
	 * was released) and a max tree over them, whose leaf i is never less
	 * than the longest free run of by_slot[i] (see pack_find()).
	 */
	struct ep__pack **by_slot;
	uint32_t *fits;   /* 2 * cap_slots entries, node 1 the root */
	size_t nslots;    /* slots handed out, live or not */
	size_t cap_slots; /* a power of two, or 0 */
	size_t npacks;    /* live packs */

	struct ep__range *ranges;
	size_t nranges, cap_ranges;

	struct ep__alloc **hash;
	size_t hash_mask; /* buckets - 1 */
	size_t nrecs;     /* records in the hash */

	struct ep__tally tally;
	/* frees by other threads (remote.c): atomic counts for the stats, the
	 * packs with chunks to give back, and a gate for fork(); on cache
	 * lines of their own, away from what the owner writes on every call */
	char rf_pad0[64];
	uint64_t rfrees, rused_out;
	struct ep__pack *remote;
	unsigned rf_inflight;
	int rf_gate;
	char rf_pad1[64];
	struct ep__pack *spare_packs; /* released, kept for reuse (next) */
	struct ep__pack *cached_pack; /* the empty pack it keeps, if any */
	uint64_t rng;
	int shares_backend; /* not the first heap: the backend is closed by that one */
	struct ep__thread *owner; /* the thread it belongs to (pool->heaps_lock) */
	struct ep__sub *next_heap; /* the pool's heaps, newest first */

	void *stash[STASH_CLASSES][STASH_DEPTH];
	unsigned nstash[STASH_CLASSES];
	struct ep__alloc *spare_recs;
	size_t nspare_recs;

	struct ep__sub *gnext, *gprev; /* all pools, for the fork handlers */
	char reasons[512];             /* why other backends were not chosen */
};

struct ep_pool {
	struct ep__sub *first;  /* made with the pool; owns the backend */
	struct ep__sub *heaps;  /* atomic head: every heap, newest first */
	unsigned nheaps;        /* (heaps_lock) */
	unsigned max_heaps;     /* EXECPACK_HEAPS, or 1 for a backend whose calls
				 * must not overlap; 0: one per thread */
	uint64_t id;            /* tells a reused address from this pool */
	pthread_mutex_t heaps_lock;
	size_t limit;
	size_t charged; /* atomic: bytes reserved in all heaps (for limit) */
	size_t empty_packs; /* atomic: empty packs kept mapped, in all heaps */
};

/* A raise of a tally count: only the heap's lock holder writes it. */
static inline void ep__tally(uint64_t *c, uint64_t n)
{
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
	if (__builtin_expect(__atomic_load_n(&h->remote, __ATOMIC_RELAXED) != NULL, 0))
		ep__heap_drain(h);
}
/* With the heap's lock: the pack's bitmaps change (see struct ep__pack). */
static inline void ep__pack_write_begin(struct ep__pack *p)
{
	__atomic_store_n(&p->seq, p->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}
static inline void ep__pack_write_end(struct ep__pack *p)
{
	__atomic_store_n(&p->seq, p->seq + 1, __ATOMIC_RELEASE);
}
/* Whether an ep_free() has claimed the allocation that starts at chunk c. */
static inline bool ep__pack_freeing(const struct ep__pack *p, size_t c)
{
	return __atomic_load_n(&p->freeing[c], __ATOMIC_ACQUIRE) != 0;
}
/* Claim it: false when another ep_free() has. */
static inline bool ep__pack_claim(struct ep__pack *p, size_t c)
{
	return __atomic_exchange_n(&p->freeing[c], 1, __ATOMIC_ACQ_REL) == 0;
}
/* (only by the claim's holder) */
static inline void ep__pack_unclaim(struct ep__pack *p, size_t c)
{
	__atomic_store_n(&p->freeing[c], 0, __ATOMIC_RELEASE);
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
	const struct ep__thread *t = __atomic_load_n(&h->owner, __ATOMIC_ACQUIRE);

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
void ep__fork_untrack(struct ep__sub *h);
int ep__own_region_slow(struct ep__sub *h, struct ep__region *r);

/* On every call: one load tells a child that no fork handler told. */
static inline void ep__fork_check(void)
{
	int *mark = ep__fork_mark;

	if (__builtin_expect(mark && !__atomic_load_n(mark, __ATOMIC_RELAXED), 0))
		ep__fork_missed();
}

/* Before a change to a region: in a child whose copy of it is not made
 * yet, make it (never in the process that created the region). */
static inline int ep__own_region(struct ep__sub *h, struct ep__region *r)
{
	return r->gen == ep__fork_generation() ? 0 : ep__own_region_slow(h, r);
}

#endif /* EP_POOL_H */
