/*
 * pool.c - packs, the allocation table and the public calls.
 *
 * A pool owns a list of packs in creation order (first fit walks it in that
 * order, as the kernel's bpf_prog_pack does) and a separate mapping for each
 * request larger than a pack.  No metadata lives in executable memory: each
 * pack has two out-of-band bitmaps, "used" (chunk is allocated) and "start"
 * (an allocation begins here).  An address is resolved by a binary search
 * over the address ranges of all regions (never by masking: packs are not
 * aligned to their size), then the start bitmap.
 *
 * Records: an allocation being staged, named, given unwind info or placed
 * at a random offset, a large one, or one a thread is working on without
 * the lock has a record in a hash table keyed by the address of its first
 * chunk.  A finalized plain pack allocation has none: its two bitmaps say
 * all there is (it begins at a start bit and runs to the next start bit or
 * free chunk).  With 10,000 live programs the records were megabytes that
 * every ep_free() missed in cache; now the table holds a few hot entries.
 *
 * fork(): the mappings are MAP_SHARED, so after fork() parent and child would
 * share code pages.  Both processes bump a generation in pthread_atfork
 * handlers; before a process changes a region whose generation is old, the
 * backend gives it a private copy at the same addresses (privatize op), so
 * no process ever writes a file that another one executes.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#endif
#ifdef HAVE_VALGRIND_HELGRIND_H
#include <valgrind/helgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif
/* Helgrind does not see the ordering atomics give; these tell it. */
#ifndef ANNOTATE_HAPPENS_BEFORE
#define ANNOTATE_HAPPENS_BEFORE(obj) ((void)(obj))
#define ANNOTATE_HAPPENS_AFTER(obj) ((void)(obj))
#endif
#define VG_HAPPENS_BEFORE(obj)                        \
	do {                                          \
		if (ep__under_valgrind())             \
			ANNOTATE_HAPPENS_BEFORE(obj); \
	} while (0)
#define VG_HAPPENS_AFTER(obj)                        \
	do {                                         \
		if (ep__under_valgrind())            \
			ANNOTATE_HAPPENS_AFTER(obj); \
	} while (0)
#ifndef VALGRIND_DISCARD_TRANSLATIONS
#define VALGRIND_DISCARD_TRANSLATIONS(addr, len) ((void)(addr), (void)(len))
#endif

#include "bitmap.h"
#include "diag.h"
#include "execpack.h"
#include "internal.h"
#include "lock.h"

#define CHUNK EP_CHUNK_SIZE
#define RANDOMIZE_SLACK 48 /* extra bytes reserved for EP_F_RANDOMIZE */

/*
 * Copies into a pack (ep_finalize) and trap refills (ep_free) longer than
 * this are done outside the pool lock, so that threads sharing a pool
 * overlap their memcpy/memset; shorter ones cost less than the extra atomics.
 */
#define INLINE_COPY 256

/* Staging buffers of 64 << k bytes (k < STASH_CLASSES) are kept for reuse. */
#define STASH_CLASSES 7
#define STASH_DEPTH 8
#define SPARE_RECORDS 64

/* ep__alloc.state: what a thread outside the lock is doing with it */
enum { ST_LIVE = 0, ST_BUSY, ST_DYING };

struct ep__pack;

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
	int state;               /* ST_*, atomic: changed outside the lock */
	int view;                /* 1: no record, a copy on the caller's stack */
	struct ep__alloc *pnext; /* pool->pending */
	struct ep__diag *diag;   /* diag.c: name and unwind info; NULL if none */
};

/* Work done on an allocation outside the lock is published with a release
 * store of its state and seen by an acquire load. */
static inline int state_of(struct ep__alloc *a)
{
	int st = __atomic_load_n(&a->state, __ATOMIC_ACQUIRE);

	VG_HAPPENS_AFTER(&a->state);
	return st;
}

static inline void state_publish(struct ep__alloc *a, int st)
{
	VG_HAPPENS_BEFORE(&a->state);
	__atomic_store_n(&a->state, st, __ATOMIC_RELEASE);
}

struct ep__pack {
	struct ep__region r;
	struct ep__pack *next, *prev;
	size_t nchunks;
	size_t free_chunks;
	size_t first_free; /* lowest clear chunk (nchunks when full) */
	uint64_t *used;
	uint64_t *start;
	struct ep__fit fit; /* longest free runs of used, for first fit */
	int cached;         /* empty and counted in the pool's empty_packs */
};

/* One region's address range, sorted by lo, for address lookups. */
struct ep__range {
	uintptr_t lo, hi;
	struct ep__pack *pack;   /* or */
	struct ep__alloc *large;
};

/*
 * A pool is a few sub-pools, each with its own lock, packs and tables; a
 * thread allocates from "its" sub-pool (threads are spread round-robin), so
 * two threads JITting at once rarely wait for each other.  First fit holds
 * within a sub-pool; a single-threaded program only ever uses one.
 */
struct ep__sub {
	struct ep__lock lock;
	struct ep_pool *root;
	const struct ep__backend_ops *ops;
	struct ep__backend *be;
	ep_fill_fn fill;
	void *fill_ctx;
	unsigned flags;
	size_t limit;
	size_t pack_size;
	size_t page_size;

	struct ep__pack *head, *tail;
	size_t npacks;

	struct ep__range *ranges;
	size_t nranges, cap_ranges;

	struct ep__alloc **hash;
	size_t hash_mask; /* buckets - 1 */
	size_t nrecs;     /* records in the hash */
	size_t nlive;     /* live allocations, with or without a record */

	size_t used_bytes, large_allocs, large_bytes;
	uint64_t rng;
	int shares_backend; /* not sub-pool 0: the backend is closed by that one */

	/*
	 * Work done outside the lock.  inflight counts threads copying or
	 * filling with the lock released (fork() waits for none); pending
	 * holds allocations whose copy (BUSY) or refill (DYING) is done,
	 * pushed without the lock; the next lock holder does the bookkeeping
	 * that is left (drain()), before it looks anything up.
	 */
	unsigned inflight;
	struct ep__alloc *pending;
	void *stash[STASH_CLASSES][STASH_DEPTH];
	unsigned nstash[STASH_CLASSES];
	struct ep__alloc *spare_recs;
	size_t nspare_recs;

	struct ep__sub *gnext, *gprev; /* all pools, for the fork handlers */
	char reasons[512];             /* why other backends were not chosen */
};

#define MAX_SUBS 4

#define PICKS 16 /* a power of two: thread number & (PICKS - 1) indexes pick[] */

struct ep_pool {
	struct ep__sub *sub[MAX_SUBS];
	unsigned nsub;
	struct ep__sub *pick[PICKS]; /* sub[i % nsub]: home() needs no division */
	size_t limit;
	size_t charged; /* atomic: bytes reserved in all sub-pools (for limit) */
	size_t empty_packs; /* atomic: empty packs kept mapped, in all sub-pools */
};

/* ---- fork generation ------------------------------------------------------ */

static pthread_mutex_t g_pools_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ep__sub *g_pools;
static unsigned g_fork_gen;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

/* Holding every pool lock across fork() means no copy is half-done in the
 * child and no region is being written while the generation changes. */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&g_pools_lock);
	for (struct ep__sub *p = g_pools; p; p = p->gnext) {
		ep__lock(&p->lock);
		/* a copy or refill started before the lock was taken finishes
		 * without it; none may be half done in the child */
		while (__atomic_load_n(&p->inflight, __ATOMIC_ACQUIRE))
			sched_yield();
	}
}

static void atfork_release(void)
{
	__atomic_add_fetch(&g_fork_gen, 1, __ATOMIC_RELAXED);
	for (struct ep__sub *p = g_pools; p; p = p->gnext)
		ep__unlock(&p->lock);
	pthread_mutex_unlock(&g_pools_lock);
}

/* The child has one thread: the biases of the parent's threads go, and
 * membarrier(2) is set up again for this process. */
static void atfork_child(void)
{
	for (struct ep__sub *p = g_pools; p; p = p->gnext)
		ep__lock_reset_child(&p->lock);
	ep__lock_setup();
	atfork_release();
}

static void atfork_install(void)
{
	ep__lock_setup();
	pthread_atfork(atfork_prepare, atfork_release, atfork_child);
}

unsigned ep__fork_generation(void)
{
	return __atomic_load_n(&g_fork_gen, __ATOMIC_RELAXED);
}

/* Before the first change to a region after a fork(): make it ours alone. */
static int own_region(struct ep__sub *pool, struct ep__region *r)
{
	unsigned gen = ep__fork_generation();

	if (r->gen == gen)
		return 0;
	if (r->sealed)
		return -EPERM; /* a sealed view cannot be replaced by a private copy */
	if (pool->ops->privatize) {
		int rc = pool->ops->privatize(pool->be, r);

		if (rc)
			return rc;
	}
	r->gen = gen;
	return 0;
}

/* ---- helpers -------------------------------------------------------------- */

static inline size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

static uint64_t next_random(struct ep__sub *pool)
{
	/* xorshift64*: placement randomness, not a secret key */
	uint64_t x = pool->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	pool->rng = x;
	return x * 2685821657736338717ull;
}

static void seed_random(struct ep__sub *pool)
{
	uint64_t s = 0;

	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uintptr_t)pool;
	}
	pool->rng = s | 1;
}

#ifndef SYS_mseal
#if defined(__x86_64__) || defined(__aarch64__)
#define SYS_mseal 462
#endif
#endif

static int sys_mseal(void *addr, size_t len)
{
#ifdef SYS_mseal
	return syscall(SYS_mseal, addr, len, 0UL) ? -errno : 0;
#else
	(void)addr;
	(void)len;
	return -ENOSYS;
#endif
}

/*
 * EP_F_SEAL: the exec view can never again be unmapped, remapped or made
 * writable.  Sealed regions are therefore never released: an empty sealed
 * pack stays cached, and a freed sealed large mapping is refilled with traps
 * and its exec view left in place until exit.
 */
static int seal_region(struct ep__sub *pool, struct ep__region *r)
{
	if (!(pool->flags & EP_F_SEAL))
		return 0;
	int rc = sys_mseal(r->exec, r->size);

	if (rc == 0)
		r->sealed = 1;
	return rc;
}

/* Drop a region; a sealed one is first refilled, as its exec view stays. */
static void region_drop(struct ep__sub *pool, struct ep__region *r)
{
	/* (not when inherited across fork(): the other process still runs it) */
	if (r->sealed && r->gen == ep__fork_generation() &&
	    pool->ops->fill(pool->be, r, 0, r->size, pool->fill, pool->fill_ctx) == 0)
		VALGRIND_DISCARD_TRANSLATIONS(r->exec, r->size);
	pool->ops->unmap(pool->be, r);
}

/* Code at [addr, addr+len) changed through another mapping. */
static void code_changed(void *addr, size_t len)
{
	ep__sync_icache(addr, len);
	if (ep__under_valgrind())
		VALGRIND_DISCARD_TRANSLATIONS(addr, len);
}

/* ---- the allocation hash -------------------------------------------------- */

static size_t hash_index(const struct ep__sub *pool, uintptr_t key)
{
	uint64_t h = (uint64_t)(key >> 4) * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 32) & pool->hash_mask;
}

static int hash_grow(struct ep__sub *pool)
{
	size_t nb = (pool->hash_mask + 1) * 2;
	struct ep__alloc **nh = calloc(nb, sizeof(*nh));

	if (!nh)
		return -ENOMEM;
	size_t old = pool->hash_mask + 1;
	struct ep__alloc **oh = pool->hash;

	pool->hash = nh;
	pool->hash_mask = nb - 1;
	for (size_t i = 0; i < old; i++) {
		for (struct ep__alloc *a = oh[i], *n; a; a = n) {
			n = a->hnext;
			size_t j = hash_index(pool, a->key);

			a->hnext = nh[j];
			nh[j] = a;
		}
	}
	free(oh);
	return 0;
}

static void hash_insert(struct ep__sub *pool, struct ep__alloc *a)
{
	size_t i = hash_index(pool, a->key);

	a->hnext = pool->hash[i];
	pool->hash[i] = a;
	pool->nrecs++;
}

static struct ep__alloc *hash_find(const struct ep__sub *pool, uintptr_t key)
{
	for (struct ep__alloc *a = pool->hash[hash_index(pool, key)]; a; a = a->hnext)
		if (a->key == key)
			return a;
	return NULL;
}

static void hash_remove(struct ep__sub *pool, struct ep__alloc *a)
{
	struct ep__alloc **pp = &pool->hash[hash_index(pool, a->key)];

	while (*pp != a)
		pp = &(*pp)->hnext;
	*pp = a->hnext;
	pool->nrecs--;
}

/* ---- region ranges -------------------------------------------------------- */

/* Index of the first range with lo > addr. */
static size_t range_upper(const struct ep__sub *pool, uintptr_t addr)
{
	size_t lo = 0, hi = pool->nranges;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pool->ranges[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const struct ep__range *range_find(const struct ep__sub *pool, uintptr_t addr)
{
	size_t i = range_upper(pool, addr);

	if (i == 0)
		return NULL;
	const struct ep__range *r = &pool->ranges[i - 1];

	return addr < r->hi ? r : NULL;
}

/* Reserve room first so that a later insert cannot fail half-way. */
static int range_reserve(struct ep__sub *pool)
{
	if (pool->nranges < pool->cap_ranges)
		return 0;
	size_t nc = pool->cap_ranges ? pool->cap_ranges * 2 : 16;
	struct ep__range *nr = realloc(pool->ranges, nc * sizeof(*nr));

	if (!nr)
		return -ENOMEM;
	pool->ranges = nr;
	pool->cap_ranges = nc;
	return 0;
}

static void range_insert(struct ep__sub *pool, const struct ep__region *reg,
			 struct ep__pack *pack, struct ep__alloc *large)
{
	uintptr_t lo = (uintptr_t)reg->exec;
	size_t i = range_upper(pool, lo);

	memmove(&pool->ranges[i + 1], &pool->ranges[i],
		(pool->nranges - i) * sizeof(pool->ranges[0]));
	pool->ranges[i] = (struct ep__range){ lo, lo + reg->size, pack, large };
	pool->nranges++;
}

static void range_remove(struct ep__sub *pool, const struct ep__region *reg)
{
	size_t i = range_upper(pool, (uintptr_t)reg->exec) - 1;

	memmove(&pool->ranges[i], &pool->ranges[i + 1],
		(pool->nranges - i - 1) * sizeof(pool->ranges[0]));
	pool->nranges--;
}

/* ---- packs ---------------------------------------------------------------- */

static void pack_release(struct ep__sub *pool, struct ep__pack *p)
{
	range_remove(pool, &p->r);
	if (p->prev)
		p->prev->next = p->next;
	else
		pool->head = p->next;
	if (p->next)
		p->next->prev = p->prev;
	else
		pool->tail = p->prev;
	pool->npacks--;
	region_drop(pool, &p->r);
	ep__fit_destroy(&p->fit);
	free(p->used);
	free(p->start);
	free(p);
}

static int pack_new(struct ep__sub *pool, struct ep__pack **out)
{
	struct ep__pack *p = calloc(1, sizeof(*p));
	int rc = -ENOMEM;

	if (!p)
		return -ENOMEM;
	p->nchunks = pool->pack_size / CHUNK;
	p->used = calloc(EP__BITMAP_WORDS(p->nchunks), sizeof(uint64_t));
	p->start = calloc(EP__BITMAP_WORDS(p->nchunks), sizeof(uint64_t));
	if (!p->used || !p->start || range_reserve(pool))
		goto fail;
	if (ep__fit_init(&p->fit, p->used, p->nchunks))
		goto fail;
	rc = pool->ops->map(pool->be, pool->pack_size, pool->fill, pool->fill_ctx, &p->r);
	if (rc)
		goto fail;
	if ((rc = seal_region(pool, &p->r))) {
		pool->ops->unmap(pool->be, &p->r);
		goto fail;
	}
	p->r.gen = ep__fork_generation();
	p->free_chunks = p->nchunks;
	range_insert(pool, &p->r, p, NULL);
	p->prev = pool->tail;
	if (pool->tail)
		pool->tail->next = p;
	else
		pool->head = p;
	pool->tail = p;
	pool->npacks++;
	*out = p;
	return 0;
fail:
	ep__fit_destroy(&p->fit);
	free(p->used);
	free(p->start);
	free(p);
	return rc;
}

/*
 * First fit over packs in creation order; *pos gets the chunk index.  The
 * summary tree makes a pack that cannot fit n cost one comparison, and the
 * lowest fitting run O(log chunks), however fragmented the pack is.
 */
static int pack_find(struct ep__sub *pool, size_t n, struct ep__pack **outp, size_t *pos)
{
	unsigned gen = ep__fork_generation();

	for (struct ep__pack *p = pool->head; p; p = p->next) {
		if (p->free_chunks < n)
			continue;
		if (p->r.sealed && p->r.gen != gen)
			continue; /* inherited across fork and sealed: frozen */
		/* No chunk below first_free is free, so a long enough run that
		 * starts there is the first fit: no need to consult the tree. */
		size_t ff = p->first_free;

		if (n <= p->nchunks - ff && ep__bitmap_next_set(p->used, ff + n, ff) >= ff + n) {
			*outp = p;
			*pos = ff;
			return 0;
		}
		ep__fit_flush(&p->fit, p->used);
		if (ep__fit_longest(&p->fit) < n)
			continue;
		*outp = p;
		*pos = ep__fit_find(&p->fit, p->used, n);
		return 0;
	}
	int rc = pack_new(pool, outp);

	*pos = 0;
	return rc;
}

static void pack_take(struct ep__sub *pool, struct ep__pack *p, size_t pos, size_t n)
{
	if (p->cached) {
		p->cached = 0;
		__atomic_fetch_sub(&pool->root->empty_packs, 1, __ATOMIC_RELAXED);
	}
	ep__bitmap_set(p->used, pos, n);
	ep__bitmap_set(p->start, pos, 1);
	ep__fit_mark(&p->fit, pos, n);
	if (pos == p->first_free)
		p->first_free = ep__bitmap_next_zero(p->used, p->nchunks, pos + n);
	p->free_chunks -= n;
	pool->used_bytes += n * CHUNK;
}

static void pack_give_back(struct ep__sub *pool, struct ep__pack *p, size_t pos, size_t n)
{
	ep__bitmap_clear(p->used, pos, n);
	ep__bitmap_clear(p->start, pos, 1);
	ep__fit_mark(&p->fit, pos, n);
	if (pos < p->first_free)
		p->first_free = pos;
	p->free_chunks += n;
	pool->used_bytes -= n * CHUNK;
	if (p->free_chunks == p->nchunks) {
		/* keep one empty pack against alloc/free churn, release others */
		/* (one per pool, not per sub-pool: a claim on a shared count) */
		size_t none = 0;

		if (p->r.sealed ||
		    __atomic_compare_exchange_n(&pool->root->empty_packs, &none, 1, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			if (p->r.sealed)
				__atomic_fetch_add(&pool->root->empty_packs, 1, __ATOMIC_RELAXED);
			p->cached = 1;
		} else {
			pack_release(pool, p);
		}
	}
}

/* ---- records and staging buffers, reused ----------------------------------- */

/* malloc() and free() for every program were a third of a small
 * alloc/finalize/free cycle; spares kept under the lock cost a few loads. */
static struct ep__alloc *rec_get(struct ep__sub *pool)
{
	struct ep__alloc *a = pool->spare_recs;

	if (!a)
		return calloc(1, sizeof(*a));
	pool->spare_recs = a->hnext;
	pool->nspare_recs--;
	a->hnext = NULL;
	return a;
}

static void rec_put(struct ep__sub *pool, struct ep__alloc *a)
{
	if (pool->nspare_recs >= SPARE_RECORDS) {
		free(a);
		return;
	}
	/* zeroed now: ready for rec_get, and no stale code address lingers
	 * for memcheck's leak scan (a struct copy: gcc turns a memset of this
	 * size into "rep stos", a third of ep_free's time) */
	static const struct ep__alloc zero;

	*a = zero;
	a->hnext = pool->spare_recs;
	pool->spare_recs = a;
	pool->nspare_recs++;
}

static int stash_class(size_t size)
{
	if (size <= CHUNK)
		return 0;
	int k = 64 - __builtin_clzll((unsigned long long)(size - 1)) - 6;

	return k < STASH_CLASSES ? k : -1;
}

static unsigned char *stage_get(struct ep__sub *pool, size_t size, int *cls)
{
	int k = stash_class(size);

	*cls = k;
	if (k < 0)
		return malloc(size);
	if (pool->nstash[k])
		return pool->stash[k][--pool->nstash[k]];
	return malloc((size_t)CHUNK << k);
}

static void stage_put(struct ep__sub *pool, unsigned char *buf, int cls)
{
	if (!buf)
		return;
	if (cls >= 0 && pool->nstash[cls] < STASH_DEPTH)
		pool->stash[cls][pool->nstash[cls]++] = buf;
	else
		free(buf);
}

static void pending_push(struct ep__sub *pool, struct ep__alloc *a)
{
	struct ep__alloc *head = __atomic_load_n(&pool->pending, __ATOMIC_RELAXED);

	do {
		a->pnext = head;
		VG_HAPPENS_BEFORE(&pool->pending);
	} while (!__atomic_compare_exchange_n(&pool->pending, &head, a, true, __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
}

static void hash_remove(struct ep__sub *pool, struct ep__alloc *a);

static void uncharge(struct ep__sub *pool, size_t bytes)
{
	if (pool->limit)
		__atomic_fetch_sub(&pool->root->charged, bytes, __ATOMIC_RELAXED);
}

/* A finalized pack allocation with nothing but its chunks to remember
 * gives its record up (see the top of this file). */
static void rec_settle(struct ep__sub *pool, struct ep__alloc *a)
{
	if (a->view || !a->pack || a->staging || a->diag || a->offset)
		return;
	hash_remove(pool, a);
	rec_put(pool, a);
}

/* The allocation is gone (its chunks or mapping already given back): its
 * diagnostics, its charge against the limit, and its record if it has one. */
static void alloc_forget(struct ep__sub *pool, struct ep__alloc *a, bool unmapped)
{
	/* diag.c: drop the name and libunwind entry, free the memcheck chunk */
	ep__diag_free(pool, &a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec,
		      unmapped);
	uncharge(pool, a->reserved);
	pool->nlive--;
	if (!a->view) {
		hash_remove(pool, a);
		stage_put(pool, a->staging, a->stash_class);
		rec_put(pool, a);
	}
}

/* Under the lock: finish what threads did without it. */
static void drain(struct ep__sub *pool)
{
	if (!__atomic_load_n(&pool->pending, __ATOMIC_RELAXED))
		return;
	struct ep__alloc *a = __atomic_exchange_n(&pool->pending, NULL, __ATOMIC_ACQUIRE);

	VG_HAPPENS_AFTER(&pool->pending);

	while (a) {
		struct ep__alloc *next = a->pnext;

		if (state_of(a) == ST_BUSY) {
			/* copied in by ep_finalize(): the staging buffer goes */
			stage_put(pool, a->staging, a->stash_class);
			a->staging = NULL;
			__atomic_store_n(&a->state, ST_LIVE, __ATOMIC_RELAXED);
			rec_settle(pool, a);
		} else {
			/* refilled by ep_free(): give the chunks back */
			pack_give_back(pool, a->pack, a->chunk, a->reserved / CHUNK);
			alloc_forget(pool, a, false);
		}
		a = next;
	}
}

/* Every call takes the lock this way: lookups see drained state. */
static void sub_lock(struct ep__sub *pool)
{
	ep__lock(&pool->lock);
	drain(pool);
}

/* ---- lookups -------------------------------------------------------------- */

static struct ep__region *alloc_region(struct ep__alloc *a)
{
	return a->pack ? &a->pack->r : &a->large;
}

/* Offset of the reservation inside its region. */
static size_t alloc_region_off(const struct ep__alloc *a)
{
	return a->pack ? a->chunk * CHUNK : 0;
}

/*
 * A pack allocation without a record, described in *v: it begins at chunk
 * pos and runs to the next start bit or free chunk, whichever is first.
 */
static size_t alloc_end(const struct ep__pack *p, size_t pos)
{
	/* one pass over both maps: stop at a start bit or a clear used bit
	 * (bits past nchunks are clear in used, so the scan stops there) */
	for (size_t i = pos + 1; i < p->nchunks; i = (i / 64 + 1) * 64) {
		size_t w = i / 64;
		uint64_t stop = (p->start[w] | ~p->used[w]) & (~(uint64_t)0 << (i % 64));

		if (stop) {
			size_t e = w * 64 + (size_t)__builtin_ctzll(stop);

			return e < p->nchunks ? e : p->nchunks;
		}
	}
	return p->nchunks;
}

static struct ep__alloc *alloc_view(struct ep__pack *p, size_t pos, struct ep__alloc *v)
{
	/* (the fields a pack allocation's paths read; the rest stay unset) */
	v->hnext = v->pnext = NULL;
	v->key = (uintptr_t)p->r.exec + pos * CHUNK;
	v->exec = (void *)v->key;
	v->pack = p;
	v->chunk = pos;
	v->reserved = (alloc_end(p, pos) - pos) * CHUNK;
	v->offset = 0;
	v->staging = NULL;
	v->stash_class = -1;
	v->state = ST_LIVE;
	v->view = 1;
	v->diag = NULL;
	return v;
}

/* Give a view a record of its own (to mark it, or attach diagnostics).
 * NULL without memory for one: ep_set_name()/ep_set_unwind() then fail with
 * -ENOMEM (they need a record to hold what they attach), while ep_free()
 * only wanted one to refill without the lock and refills under it instead. */
static struct ep__alloc *rec_keep(struct ep__sub *pool, struct ep__alloc *v)
{
	if (!v->view)
		return v;
	if (pool->nrecs + 1 > pool->hash_mask + 1 && hash_grow(pool))
		return NULL;
	struct ep__alloc *a = rec_get(pool);

	if (!a)
		return NULL;
	*a = *v;
	memset(&a->large, 0, sizeof(a->large)); /* never set in a view */
	a->view = 0;
	hash_insert(pool, a);
	return a;
}

/* The live allocation whose handed-out bytes contain addr, or NULL; *v may
 * be filled in and returned (a view: no record). */
static struct ep__alloc *alloc_containing(const struct ep__sub *pool, uintptr_t addr,
					  struct ep__alloc *v)
{
	const struct ep__range *r = range_find(pool, addr);
	struct ep__alloc *a;

	if (!r)
		return NULL;
	if (r->large) {
		a = r->large;
	} else {
		size_t c = (addr - r->lo) / CHUNK;

		if (!ep__bitmap_test(r->pack->used, c))
			return NULL;
		size_t s = ep__bitmap_prev_set(r->pack->start, c);

		if (s == SIZE_MAX)
			return NULL;
		a = hash_find(pool, r->lo + s * CHUNK);
		if (!a)
			a = alloc_view(r->pack, s, v);
	}
	uintptr_t lo = (uintptr_t)a->exec, hi = a->key + a->reserved;

	if (state_of(a) == ST_DYING)
		return NULL; /* freed; its refill is under way or done */
	return addr >= lo && addr < hi ? a : NULL;
}

/* The live allocation ep_alloc() returned as exec, or NULL; may be *v. */
static struct ep__alloc *alloc_exact(const struct ep__sub *pool, const void *exec,
				     struct ep__alloc *v)
{
	/* Usually exec is the key itself (or, with EP_F_RANDOMIZE, inside the
	 * first chunk): one hash probe, then for a chunk-aligned address with
	 * no record, its start bit.  A hash hit is only trusted for a record
	 * with exactly this address. */
	uintptr_t x = (uintptr_t)exec, key = x & ~(uintptr_t)(CHUNK - 1);
	struct ep__alloc *a = hash_find(pool, key);

	if (a && a->exec == exec)
		return state_of(a) == ST_DYING ? NULL : a;
	if (!a && x == key) {
		const struct ep__range *r = range_find(pool, x);

		if (!r)
			return NULL;
		if (r->large) /* always a record, keyed by the mapping's start */
			return r->large->exec == exec && state_of(r->large) != ST_DYING ? r->large
											 : NULL;
		size_t c = (x - r->lo) / CHUNK;

		return ep__bitmap_test(r->pack->start, c) ? alloc_view(r->pack, c, v) : NULL;
	}
	a = alloc_containing(pool, x, v);
	return a && a->exec == exec ? a : NULL;
}

/* ---- pool set-up ---------------------------------------------------------- */

static const struct ep__backend_ops *backend_ops(enum ep_backend b)
{
	switch (b) {
	case EP_BACKEND_MEMFD: return &ep__backend_memfd;
	case EP_BACKEND_HUGETLB: return &ep__backend_hugetlb;
	case EP_BACKEND_KMOD: return &ep__backend_kmod;
	default: return NULL;
	}
}

static void add_reason(struct ep__sub *pool, const char *why)
{
	size_t used = strlen(pool->reasons);

	if (!why[0] || used + 3 >= sizeof(pool->reasons))
		return;
	snprintf(pool->reasons + used, sizeof(pool->reasons) - used, "%s%s",
		 used ? "; " : "", why);
}

/* Copy a caller's config of any known-compatible size (libbpf opts rules:
 * fields past the caller's sz are zero; bytes past ours must be zero). */
static int config_copy(const struct ep_config *in, struct ep_config *out)
{
	memset(out, 0, sizeof(*out));
	if (!in)
		return 0;
	if (in->sz < offsetof(struct ep_config, backend) + sizeof(in->backend))
		return -EINVAL;
	if (in->sz > sizeof(*out)) {
		const unsigned char *tail = (const unsigned char *)in + sizeof(*out);

		for (size_t i = 0; i < in->sz - sizeof(*out); i++)
			if (tail[i])
				return -E2BIG;
		memcpy(out, in, sizeof(*out));
	} else {
		memcpy(out, in, in->sz);
	}
	out->sz = sizeof(*out);
	return 0;
}

static int open_backend(struct ep__sub *pool, const struct ep_config *cfg)
{
	char why[256];
	enum ep_backend want = cfg->backend;
	const char *env = getenv("EXECPACK_BACKEND");

	if (want == EP_BACKEND_AUTO && env && *env) {
		if (!strcmp(env, "memfd"))
			want = EP_BACKEND_MEMFD;
		else if (!strcmp(env, "hugetlb"))
			want = EP_BACKEND_HUGETLB;
		else if (!strcmp(env, "kmod"))
			want = EP_BACKEND_KMOD;
		else if (strcmp(env, "auto"))
			return -EINVAL;
	}
	if (want != EP_BACKEND_AUTO) {
		const struct ep__backend_ops *ops = backend_ops(want);

		if (!ops)
			return (unsigned)want > EP_BACKEND_KMOD ? -EINVAL : -ENODEV;
		why[0] = 0;
		int rc = ops->open(cfg, &pool->be, why, sizeof(why));

		if (rc) {
			add_reason(pool, why);
			return rc;
		}
		pool->ops = ops;
		return 0;
	}

	static const enum ep_backend order[] = { EP_BACKEND_HUGETLB, EP_BACKEND_MEMFD,
						 EP_BACKEND_KMOD };
	int first = -ENODEV;

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		const struct ep__backend_ops *ops = backend_ops(order[i]);

		if (!ops)
			continue;
		why[0] = 0;
		int rc = ops->open(cfg, &pool->be, why, sizeof(why));

		if (rc == 0) {
			pool->ops = ops;
			return 0;
		}
		if (first == -ENODEV)
			first = rc;
		add_reason(pool, why);
	}
	return first;
}

/* Lock, random seed, and a place in the list the fork handlers walk. */
static void sub_start(struct ep__sub *pool)
{
	seed_random(pool);
	ep__lock_init(&pool->lock);

	pthread_once(&g_atfork_once, atfork_install);
	pthread_mutex_lock(&g_pools_lock);
	pool->gnext = g_pools;
	if (g_pools)
		g_pools->gprev = pool;
	g_pools = pool;
	pthread_mutex_unlock(&g_pools_lock);
}

/* Another sub-pool on the same backend and settings as first. */
static struct ep__sub *sub_clone(const struct ep__sub *first)
{
	struct ep__sub *pool = calloc(1, sizeof(*pool));

	if (!pool)
		return NULL;
	pool->hash = calloc(64, sizeof(*pool->hash));
	if (!pool->hash) {
		free(pool);
		return NULL;
	}
	pool->hash_mask = 63;
	pool->ops = first->ops;
	pool->be = first->be;
	pool->shares_backend = 1;
	pool->fill = first->fill;
	pool->fill_ctx = first->fill_ctx;
	pool->flags = first->flags;
	pool->limit = first->limit;
	pool->pack_size = first->pack_size;
	pool->page_size = first->page_size;
	pool->root = first->root;
	sub_start(pool);
	return pool;
}

static int sub_create(const struct ep_config *cfg_in, struct ep__sub **out)
{
	struct ep_config cfg;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	rc = config_copy(cfg_in, &cfg);
	if (rc)
		return rc;
	if (cfg.flags & ~EP_F_ALL)
		return -EINVAL;
	if ((unsigned)cfg.backend > EP_BACKEND_KMOD)
		return -EINVAL;

	struct ep__sub *pool = calloc(1, sizeof(*pool));

	if (!pool)
		return -ENOMEM;
	pool->hash = calloc(64, sizeof(*pool->hash));
	if (!pool->hash) {
		free(pool);
		return -ENOMEM;
	}
	pool->hash_mask = 63;
	rc = open_backend(pool, &cfg);
	if (rc) {
		free(pool->hash);
		free(pool);
		return rc;
	}
#ifdef EP_TEST_HOOKS
	pool->ops = ep__test_wrap_backend(pool->ops);
#endif
	if ((cfg.flags & EP_F_SEAL) && sys_mseal(NULL, 0) == -ENOSYS) {
		/* mseal(addr, 0) is a no-op where the call exists (Linux 6.10+) */
		add_reason(pool, "seal: mseal() not supported by this kernel");
		pool->ops->close(pool->be);
		free(pool->hash);
		free(pool);
		return -EOPNOTSUPP;
	}
	pool->page_size = pool->ops->page_size(pool->be);
	pool->pack_size = cfg.pack_size ? cfg.pack_size : pool->ops->default_pack_size(pool->be);
	if (pool->pack_size % pool->page_size || pool->pack_size > EP__MAX_PACK_SIZE) {
		pool->ops->close(pool->be);
		free(pool->hash);
		free(pool);
		return -EINVAL;
	}
	pool->fill = cfg.fill ? cfg.fill : ep__fill_default;
	pool->fill_ctx = cfg.fill_ctx;
	pool->flags = cfg.flags;
	pool->limit = cfg.limit;
	sub_start(pool);
	*out = pool;
	return 0;
}

static void sub_destroy(struct ep__sub *pool)
{
	if (!pool)
		return;
	pthread_mutex_lock(&g_pools_lock);
	if (pool->gprev)
		pool->gprev->gnext = pool->gnext;
	else
		g_pools = pool->gnext;
	if (pool->gnext)
		pool->gnext->gprev = pool->gprev;
	pthread_mutex_unlock(&g_pools_lock);

	drain(pool);
	for (size_t i = 0; i <= pool->hash_mask; i++) {
		for (struct ep__alloc *a = pool->hash[i], *n; a; a = n) {
			n = a->hnext;
			ep__diag_forget(&a->diag); /* diag.c: name, libunwind */
			if (!a->pack)
				region_drop(pool, &a->large);
			free(a->staging);
			free(a);
		}
	}
	while (pool->head) {
		struct ep__pack *p = pool->head;

		pool->head = p->next;
		region_drop(pool, &p->r);
		ep__fit_destroy(&p->fit);
		free(p->used);
		free(p->start);
		free(p);
	}
	for (int k = 0; k < STASH_CLASSES; k++)
		for (unsigned i = 0; i < pool->nstash[k]; i++)
			free(pool->stash[k][i]);
	for (struct ep__alloc *a = pool->spare_recs, *n; a; a = n) {
		n = a->hnext;
		free(a);
	}
	ep__diag_pool_destroy(pool); /* diag.c: the pool's memcheck mempool */
	if (!pool->shares_backend)
		pool->ops->close(pool->be);
	ep__lock_destroy(&pool->lock);
	free(pool->ranges);
	free(pool->hash);
	free(pool);
}

/* ---- the public calls ----------------------------------------------------- */

static int sub_alloc(struct ep__sub *pool, size_t size, struct ep_image *out)
{
	if (!pool || !out || size == 0)
		return -EINVAL;
	if (size > SIZE_MAX / 2)
		return -ENOMEM;

	bool large = size > pool->pack_size;
	size_t want = size + ((pool->flags & EP_F_RANDOMIZE) ? RANDOMIZE_SLACK : 0);
	size_t reserved;

	if (large)
		reserved = round_up(want, pool->page_size);
	else
		reserved = round_up(want < pool->pack_size ? want : pool->pack_size, CHUNK);

	struct ep__alloc *a = NULL;
	int rc;

	sub_lock(pool);
	size_t limit = pool->limit;

	if (limit) {
		/* charged is shared by the sub-pools: reserve first, then check */
		size_t was = __atomic_fetch_add(&pool->root->charged, reserved, __ATOMIC_RELAXED);

		if (reserved > limit || was > limit - reserved) {
			__atomic_fetch_sub(&pool->root->charged, reserved, __ATOMIC_RELAXED);
			ep__unlock(&pool->lock);
			return -EPERM;
		}
	}
	if (pool->nrecs + 1 > (pool->hash_mask + 1) && (rc = hash_grow(pool)))
		goto fail;
	rc = -ENOMEM;
	a = rec_get(pool);
	if (!a)
		goto fail;
	a->staging = stage_get(pool, reserved, &a->stash_class);
	if (!a->staging)
		goto fail;

	if (large) {
		if ((rc = range_reserve(pool)))
			goto fail;
		rc = pool->ops->map(pool->be, reserved, pool->fill, pool->fill_ctx, &a->large);
		if (rc)
			goto fail;
		if ((rc = seal_region(pool, &a->large))) {
			pool->ops->unmap(pool->be, &a->large);
			goto fail;
		}
		a->large.gen = ep__fork_generation();
		a->key = (uintptr_t)a->large.exec;
		range_insert(pool, &a->large, NULL, a);
		pool->large_allocs++;
		pool->large_bytes += a->large.size;
	} else {
		struct ep__pack *p;
		size_t n = reserved / CHUNK, pos;

		if ((rc = pack_find(pool, n, &p, &pos)))
			goto fail;
		pack_take(pool, p, pos, n);
		a->pack = p;
		a->chunk = pos;
		a->key = (uintptr_t)p->r.exec + pos * CHUNK;
	}
	if (pool->flags & EP_F_RANDOMIZE) {
		size_t slack = reserved - size, slots = slack / 16 + 1;

		if (!large && slots > CHUNK / 16)
			slots = CHUNK / 16; /* keep exec inside the first chunk */
		a->offset = (size_t)(next_random(pool) % slots) * 16;
	}
	a->reserved = reserved;
	a->exec = (void *)(a->key + a->offset);
	hash_insert(pool, a);
	pool->nlive++;

	unsigned char *staging = a->staging;

	out->exec = a->exec;
	out->rw = staging + a->offset;
	out->size = reserved - a->offset;
	ep__diag_alloc(pool, a->exec, out->size); /* diag.c: memcheck mempool chunk */
	ep__unlock(&pool->lock);
	/* staging is private until this call returns: fill it unlocked */
	pool->fill(staging, reserved, pool->fill_ctx);
	return 0;
fail:
	if (limit)
		__atomic_fetch_sub(&pool->root->charged, reserved, __ATOMIC_RELAXED);
	if (a) {
		stage_put(pool, a->staging, a->stash_class);
		rec_put(pool, a);
	}
	ep__unlock(&pool->lock);
	return rc;
}

static int sub_write(struct ep__sub *pool, void *dst, const void *src, size_t len)
{
	if (!pool || !dst || (!src && len))
		return -EINVAL;

	int rc = 0;
	struct ep__alloc view;

	sub_lock(pool);
	struct ep__alloc *a = alloc_containing(pool, (uintptr_t)dst, &view);
	uintptr_t d = (uintptr_t)dst;

	if (!a || len > a->key + a->reserved - d) {
		rc = -EINVAL;
	} else if (state_of(a) == ST_BUSY) {
		rc = -EBUSY; /* being finalized by another thread */
	} else if (len == 0) {
		rc = 0;
	} else if (a->staging) {
		memcpy(a->staging + (d - a->key), src, len);
	} else {
		struct ep__region *r = alloc_region(a);

		rc = own_region(pool, r);
		if (!rc)
			rc = pool->ops->write(pool->be, r, d - (uintptr_t)r->exec, src, len);
		if (!rc)
			code_changed(dst, len);
	}
	ep__unlock(&pool->lock);
	return rc;
}

/*
 * Copy or refill this allocation with the lock released?  Only while other
 * threads want this lock: alone, the atomics and the hand-off through the
 * pending list cost more than they save.
 */
static bool work_unlocked(struct ep__sub *pool, const struct ep__alloc *a)
{
	if (!pool->ops->threadsafe)
		return false; /* the backend keeps state its calls share (kmod) */
	/* diag.c registrations (names, unwind info) want the lock */
	return a->reserved > INLINE_COPY && !a->diag && ep__lock_contended(&pool->lock);
}

/* ep_finalize()'s work: one bulk copy, then one coherence step for the
 * whole range. */
static int copy_in(struct ep__sub *pool, struct ep__alloc *a)
{
	int rc = pool->ops->write(pool->be, alloc_region(a), alloc_region_off(a), a->staging,
				  a->reserved);

	if (rc)
		return rc;
	code_changed((void *)a->key, a->reserved);
	/* diag.c: libunwind registration, perf map (without the lock: none
	 * of those, see work_unlocked(); memcheck only) */
	ep__diag_finalize(pool, &a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec,
			  pool->flags);
	return 0;
}

/* ep_free()'s work on a finalized pack allocation: traps where it was, so
 * that a stale jump there stops. */
static int refill(struct ep__sub *pool, struct ep__alloc *a)
{
	int rc = pool->ops->fill(pool->be, &a->pack->r, a->chunk * CHUNK, a->reserved, pool->fill,
				 pool->fill_ctx);

	if (!rc)
		code_changed((void *)a->key, a->reserved);
	return rc;
}

/*
 * Do work (copy_in or refill) on a with the lock released; the chunks stay
 * taken meanwhile.  st (BUSY, DYING) turns other calls on a away; inflight
 * holds fork() back until the work is whole.  Work that was done puts a on
 * the pending list, still marked: the next lock holder (drain(), before any
 * lookup) finishes the bookkeeping.  Work that failed changed nothing: a is
 * live again and intact, and the caller may retry.
 */
static int work_without_lock(struct ep__sub *pool, struct ep__alloc *a, int st,
			     int (*work)(struct ep__sub *, struct ep__alloc *))
{
	__atomic_store_n(&a->state, st, __ATOMIC_RELAXED);
	__atomic_add_fetch(&pool->inflight, 1, __ATOMIC_RELAXED);
	ep__unlock(&pool->lock);
	int rc = work(pool, a);

	if (rc)
		state_publish(a, ST_LIVE);
	else
		pending_push(pool, a);
	__atomic_sub_fetch(&pool->inflight, 1, __ATOMIC_RELEASE);
	return rc;
}

static int sub_finalize(struct ep__sub *pool, void *exec)
{
	if (!pool || !exec)
		return -EINVAL;

	int rc;
	struct ep__alloc view;

	sub_lock(pool);
	struct ep__alloc *a = alloc_exact(pool, exec, &view);

	if (!a) {
		rc = -EINVAL;
		goto out;
	}
	if (state_of(a) == ST_BUSY) {
		rc = -EBUSY;
		goto out;
	}
	if (!a->staging) {
		rc = -EINVAL; /* finalized already */
		goto out;
	}
	struct ep__region *r = alloc_region(a);

	rc = own_region(pool, r);
	if (rc)
		goto out;
	/* (drain() drops the staging buffer of a copy done unlocked) */
	if (work_unlocked(pool, a))
		return work_without_lock(pool, a, ST_BUSY, copy_in);
	rc = copy_in(pool, a);
	if (rc)
		goto out; /* staging kept: nothing is lost, the caller may retry or free */
	stage_put(pool, a->staging, a->stash_class);
	a->staging = NULL;
	rec_settle(pool, a);
out:
	ep__unlock(&pool->lock);
	return rc;
}

static int sub_free(struct ep__sub *pool, void *exec)
{
	if (!pool || !exec)
		return -EINVAL;

	int rc = 0;
	struct ep__alloc view;

	sub_lock(pool);
	struct ep__alloc *a = alloc_exact(pool, exec, &view);

	if (!a) {
		rc = -EINVAL;
		goto out;
	}
	if (state_of(a) == ST_BUSY) {
		rc = -EBUSY;
		goto out;
	}
	if (a->pack) {
		if (!a->staging) {
			/* finalized: refill so a stale jump here traps */
			struct ep__region *r = &a->pack->r;
			struct ep__alloc *k;

			rc = own_region(pool, r);
			if (rc)
				goto out;
			/* DYING: invisible to lookups, chunks still taken until
			 * drain() gives them back after the refill.  To be marked,
			 * a view needs a record; without memory for one, the
			 * refill is done under the lock. */
			if (work_unlocked(pool, a) && (k = rec_keep(pool, a)))
				return work_without_lock(pool, k, ST_DYING, refill);
			rc = refill(pool, a);
			if (rc)
				goto out; /* still live and intact; the caller may retry */
		}
		pack_give_back(pool, a->pack, a->chunk, a->reserved / CHUNK);
	} else {
		if (a->large.sealed && (rc = own_region(pool, &a->large)))
			goto out; /* its refill could not be done: still live */
		range_remove(pool, &a->large);
		pool->large_allocs--;
		pool->large_bytes -= a->large.size;
		region_drop(pool, &a->large);
		code_changed(a->large.exec, a->large.size);
	}
	alloc_forget(pool, a, a->pack == NULL);
out:
	ep__unlock(&pool->lock);
	return rc;
}

/* Adds this sub-pool's figures to out. */
static void sub_stats(struct ep__sub *pool, struct ep_stats *out)
{
	sub_lock(pool); /* frees refilled without the lock count as done */
	out->packs += pool->npacks;
	out->pack_bytes += pool->npacks * pool->pack_size;
	out->used_bytes += pool->used_bytes;
	out->live_allocs += pool->nlive;
	out->large_allocs += pool->large_allocs;
	out->large_bytes += pool->large_bytes;
	ep__unlock(&pool->lock);
}

EP_API int ep_backend_probe(enum ep_backend backend, const struct ep_config *cfg_in,
			    char *why, size_t whylen)
{
	struct ep_config cfg;
	struct ep__sub probe;
	int rc = config_copy(cfg_in, &cfg);

	if (why && whylen)
		why[0] = 0;
	if (rc)
		return rc;
	if ((unsigned)backend > EP_BACKEND_KMOD)
		return -EINVAL;
	cfg.backend = backend;
	memset(&probe, 0, sizeof(probe));
	rc = open_backend(&probe, &cfg);
	if (rc) {
		ep__why(why, whylen, "%s", probe.reasons);
		return rc;
	}
	if (backend == EP_BACKEND_AUTO)
		ep__why(why, whylen, "%s", probe.ops->name);
	probe.ops->close(probe.be);
	return 0;
}

/* ---- diagnostics (diag.c) -------------------------------------------------- */

/* Resolve exec to a live allocation with a record (diag.c keeps a pointer
 * in it) and call diag.c with the pool locked. */
static struct ep__alloc *alloc_for_diag(struct ep__sub *pool, void *exec, struct ep__alloc *v,
					int *rc)
{
	struct ep__alloc *a = alloc_exact(pool, exec, v);

	*rc = -EINVAL;
	if (a && state_of(a) == ST_BUSY)
		*rc = -EBUSY;
	else if (a && !(a = rec_keep(pool, a)))
		*rc = -ENOMEM;
	else if (a)
		*rc = 0;
	return *rc ? NULL : a;
}

static int sub_set_name(struct ep__sub *pool, void *exec, const char *name)
{
	if (!pool || !exec || !name)
		return -EINVAL;

	struct ep__alloc view;
	int rc;

	sub_lock(pool);
	struct ep__alloc *a = alloc_for_diag(pool, exec, &view, &rc);

	if (a) {
		rc = ep__diag_set_name(pool, &a->diag, exec,
				       a->key + a->reserved - (uintptr_t)exec, !a->staging,
				       pool->flags, name);
		rec_settle(pool, a); /* (nothing attached after all) */
	}
	ep__unlock(&pool->lock);
	return rc;
}

static int sub_set_unwind(struct ep__sub *pool, void *exec, int kind, size_t prologue,
			 size_t frame)
{
	if (!pool || !exec)
		return -EINVAL;

	struct ep__alloc view;
	int rc;

	sub_lock(pool);
	struct ep__alloc *a = alloc_for_diag(pool, exec, &view, &rc);

	if (a) {
		rc = ep__diag_set_unwind(&a->diag, exec, a->key + a->reserved - (uintptr_t)exec,
					 !a->staging, kind, prologue, frame);
		rec_settle(pool, a);
	}
	ep__unlock(&pool->lock);
	return rc;
}

/* ---- the public calls: pick the sub-pool ---------------------------------- */

/* Sub-pools per pool: one per CPU, up to MAX_SUBS; one when the backend's
 * calls must not overlap.  EXECPACK_SUBPOOLS=N overrides (1..MAX_SUBS). */
static unsigned subs_wanted(const struct ep__sub *first)
{
	if (!first->ops->threadsafe)
		return 1;
	const char *env = getenv("EXECPACK_SUBPOOLS");
	long n = env && *env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		n = 1;
	return n > MAX_SUBS ? MAX_SUBS : (unsigned)n;
}

static unsigned g_next_thread;
static __thread unsigned tl_thread __attribute__((tls_model("initial-exec")));

/* The calling thread's sub-pool: threads are numbered in order of their
 * first call and spread round-robin. */
static struct ep__sub *home(struct ep_pool *pool)
{
	unsigned t = tl_thread;

	if (__builtin_expect(!t, 0)) {
		t = __atomic_add_fetch(&g_next_thread, 1, __ATOMIC_RELAXED);
		if (!t) /* wrapped: 0 means "not numbered yet" */
			t = __atomic_add_fetch(&g_next_thread, 1, __ATOMIC_RELAXED);
		tl_thread = t;
	}
	/* (a division here was a tenth of a small alloc/finalize/free cycle) */
	return pool->pick[t & (PICKS - 1)];
}

int ep__valgrind;

EP_API int ep_pool_create(const struct ep_config *cfg, struct ep_pool **out)
{
	/* (every pool call comes after this one: the hooks may test a word) */
	__atomic_store_n(&ep__valgrind, RUNNING_ON_VALGRIND ? 1 : 0, __ATOMIC_RELAXED);
	if (!out)
		return -EINVAL;
	*out = NULL;

	struct ep_pool *pool = calloc(1, sizeof(*pool));
	struct ep__sub *first;

	if (!pool)
		return -ENOMEM;
	int rc = sub_create(cfg, &first);

	if (rc) {
		free(pool);
		return rc;
	}
	first->root = pool;
	pool->sub[0] = first;
	pool->nsub = 1;
	pool->limit = first->limit;
	for (unsigned i = 1, n = subs_wanted(first); i < n; i++) {
		struct ep__sub *s = sub_clone(first);

		if (!s)
			break; /* fewer sub-pools is only slower */
		pool->sub[pool->nsub++] = s;
	}
	for (unsigned i = 0; i < PICKS; i++)
		pool->pick[i] = pool->sub[i % pool->nsub];
	*out = pool;
	return 0;
}

EP_API void ep_pool_destroy(struct ep_pool *pool)
{
	if (!pool)
		return;
	/* sub-pool 0 last: it closes the backend the others share */
	for (unsigned i = pool->nsub; i-- > 0;)
		sub_destroy(pool->sub[i]);
	free(pool);
}

EP_API int ep_alloc(struct ep_pool *pool, size_t size, struct ep_image *out)
{
	if (!pool)
		return -EINVAL;
	return sub_alloc(home(pool), size, out);
}

/*
 * Calls on an existing allocation try the caller's sub-pool first (a thread
 * usually finalizes and frees what it allocated), then the others; a
 * sub-pool that does not hold exec answers -EINVAL without side effects.
 */
#define EACH_SUB(pool, call)                                                 \
	do {                                                                 \
		struct ep__sub *h_ = home(pool);                             \
		struct ep__sub *pool_ = h_;                                  \
		int rc_ = call;                                              \
		for (unsigned i_ = 0; rc_ == -EINVAL && i_ < (pool)->nsub; i_++) { \
			pool_ = (pool)->sub[i_];                             \
			if (pool_ != h_)                                     \
				rc_ = call;                                  \
		}                                                            \
		return rc_;                                                  \
	} while (0)

EP_API int ep_write(struct ep_pool *pool, void *dst, const void *src, size_t len)
{
	if (!pool || !dst || (!src && len))
		return -EINVAL;
	EACH_SUB(pool, sub_write(pool_, dst, src, len));
}

EP_API int ep_finalize(struct ep_pool *pool, void *exec)
{
	if (!pool || !exec)
		return -EINVAL;
	EACH_SUB(pool, sub_finalize(pool_, exec));
}

EP_API int ep_free(struct ep_pool *pool, void *exec)
{
	if (!pool || !exec)
		return -EINVAL;
	EACH_SUB(pool, sub_free(pool_, exec));
}

EP_API int ep_set_name(struct ep_pool *pool, void *exec, const char *name)
{
	if (!pool || !exec || !name)
		return -EINVAL;
	EACH_SUB(pool, sub_set_name(pool_, exec, name));
}

EP_API int ep_set_unwind(struct ep_pool *pool, void *exec, int kind, size_t prologue,
			 size_t frame)
{
	if (!pool || !exec)
		return -EINVAL;
	EACH_SUB(pool, sub_set_unwind(pool_, exec, kind, prologue, frame));
}

EP_API int ep_pool_stats(const struct ep_pool *pool, struct ep_stats *out)
{
	if (!pool || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < pool->nsub; i++)
		sub_stats(pool->sub[i], out);
	return 0;
}

EP_API const char *ep_pool_backend(const struct ep_pool *pool)
{
	return pool ? pool->sub[0]->ops->name : NULL;
}

EP_API const char *ep_pool_reasons(const struct ep_pool *pool)
{
	return pool ? pool->sub[0]->reasons : NULL;
}

/*
 * Under Valgrind, at exit (diag.c's destructor): the pool's own copies of
 * the addresses it handed out are made invisible to memcheck's leak scan,
 * so that an allocation the program lost is reported "definitely lost".
 */
void ep__pool_hide_from_leak_check(void)
{
	pthread_mutex_lock(&g_pools_lock);
	for (struct ep__sub *p = g_pools; p; p = p->gnext) {
		/* frees refilled without the lock: their memcheck chunks go now */
		sub_lock(p);
		ep__unlock(&p->lock);
		for (size_t i = 0; i < p->nranges; i++)
			ep__diag_hide_word(&p->ranges[i], 2 * sizeof(uintptr_t));
		for (struct ep__pack *k = p->head; k; k = k->next)
			ep__diag_hide_word(&k->r.exec, sizeof(k->r.exec));
		for (size_t i = 0; i <= p->hash_mask; i++) {
			for (struct ep__alloc *a = p->hash[i]; a; a = a->hnext) {
				ep__diag_hide_word(&a->key, sizeof(a->key));
				ep__diag_hide_word(&a->exec, sizeof(a->exec));
				ep__diag_hide_word(&a->large.exec, sizeof(a->large.exec));
			}
		}
	}
	pthread_mutex_unlock(&g_pools_lock);
}
