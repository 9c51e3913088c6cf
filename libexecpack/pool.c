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
#include <fcntl.h>
#include <sys/mman.h>
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
#ifndef VALGRIND_HG_ENABLE_CHECKING
#define VALGRIND_HG_ENABLE_CHECKING(a, n) ((void)(a), (void)(n))
#endif
#ifndef VALGRIND_DISCARD_TRANSLATIONS
#define VALGRIND_DISCARD_TRANSLATIONS(addr, len) ((void)(addr), (void)(len))
#endif

#include "bitmap.h"
#include "diag.h"
#include "execpack.h"
#include "internal.h"
#include "lock.h"
#include "route.h"

#define CHUNK EP_CHUNK_SIZE
#define RANDOMIZE_SLACK 48 /* extra bytes reserved for EP_F_RANDOMIZE */

/* Staging buffers of 64 << k bytes (k < STASH_CLASSES) are kept for reuse. */
#define STASH_CLASSES 7
#define STASH_DEPTH 8
#define SPARE_RECORDS 64

struct ep__pack;
struct ep__thread;
static void thread_put(struct ep__thread *t);

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

	struct ep__range *ranges;
	size_t nranges, cap_ranges;

	struct ep__alloc **hash;
	size_t hash_mask; /* buckets - 1 */
	size_t nrecs;     /* records in the hash */

	struct ep__tally tally;
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
static inline void tally(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, *c + n, __ATOMIC_RELEASE);
}

/* ---- fork ----------------------------------------------------------------- */

/*
 * The mappings are MAP_SHARED, so a child of fork() shares its parent's code
 * pages.  The child, never the parent, makes them its own: the fork
 * generation changes only in the child, and there every region is given a
 * private copy at the same addresses (the backend's privatize op) before
 * fork() returns in it.  The parent holds every heap lock until the child has
 * done so (it waits on a pipe the child closes, or that closes when the
 * child dies), so no change of the parent's reaches code the child runs, and
 * the parent neither copies nor makes a file.
 *
 * A child made without fork()'s handlers (_Fork(), syscall(SYS_fork),
 * clone() without CLONE_VM) is recognised by a page with MADV_WIPEONFORK,
 * which reads as zeros there: its first call resets the locks and makes its
 * copies then (libexecpack(7) says what such a child may see before that).
 */
static pthread_mutex_t g_pools_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ep__sub *g_pools;
static unsigned g_fork_gen;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static int *g_fork_mark;       /* nonzero in the process that set it */
static int g_fork_pipe[2] = { -1, -1 };

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

static void hash_each_large(struct ep__sub *pool, void (*fn)(struct ep__sub *, struct ep__region *));

static void own_now(struct ep__sub *pool, struct ep__region *r)
{
	(void)own_region(pool, r); /* failed: tried again before a change */
}

/* In a new child, with every lock ours: a new generation, every region
 * copied. */
static void child_take_over(void)
{
	__atomic_add_fetch(&g_fork_gen, 1, __ATOMIC_RELAXED);
	for (struct ep__sub *h = g_pools; h; h = h->gnext) {
		for (struct ep__pack *p = h->head; p; p = p->next)
			own_now(h, &p->r);
		hash_each_large(h, own_now);
	}
	if (g_fork_mark)
		__atomic_store_n(g_fork_mark, 1, __ATOMIC_RELAXED);
}

/* Holding every heap lock across fork() means no change is half-done in
 * the child; diag.c's lock is taken too (a name or a destroy under way). */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&g_pools_lock);
	for (struct ep__sub *p = g_pools; p; p = p->gnext)
		ep__lock(&p->lock);
	ep__diag_fork_prepare();
	if (g_pools && pipe2(g_fork_pipe, O_CLOEXEC))
		g_fork_pipe[0] = g_fork_pipe[1] = -1; /* (then the parent does not wait) */
}

static void atfork_unlock(void)
{
	for (struct ep__sub *p = g_pools; p; p = p->gnext)
		ep__unlock(&p->lock);
	pthread_mutex_unlock(&g_pools_lock);
}

static void atfork_parent(void)
{
	ep__diag_fork_parent();
	if (g_fork_pipe[0] >= 0) {
		char c;

		close(g_fork_pipe[1]);
		/* EOF: the child has its copies, or has exited */
		while (read(g_fork_pipe[0], &c, 1) < 0 && errno == EINTR)
			;
		close(g_fork_pipe[0]);
		g_fork_pipe[0] = g_fork_pipe[1] = -1;
	}
	atfork_unlock();
}

/* The child has one thread: the biases of the parent's threads go, and
 * membarrier(2) is set up again for this process. */
static void atfork_child(void)
{
	if (g_fork_pipe[0] >= 0)
		close(g_fork_pipe[0]);
	for (struct ep__sub *p = g_pools; p; p = p->gnext)
		ep__lock_reset_child(&p->lock);
	ep__lock_setup();
	ep__diag_fork_child();
	child_take_over();
	if (g_fork_pipe[1] >= 0)
		close(g_fork_pipe[1]);
	g_fork_pipe[0] = g_fork_pipe[1] = -1;
	atfork_unlock();
}

/* A child that ran no fork handler: whatever a vanished thread held is
 * free now (see libexecpack(7) on what was under way). */
static void __attribute__((noinline)) fork_missed(void)
{
	pthread_mutex_init(&g_pools_lock, NULL);
	for (struct ep__sub *p = g_pools; p; p = p->gnext) {
		ep__lock_init(&p->lock);
		if (p == p->root->first)
			pthread_mutex_init(&p->root->heaps_lock, NULL);
	}
	ep__lock_setup();
	ep__diag_fork_reset();
	pthread_mutex_lock(&g_pools_lock);
	for (struct ep__sub *p = g_pools; p; p = p->gnext)
		ep__lock(&p->lock);
	child_take_over();
	atfork_unlock();
}

/* On every call: one load tells a child that no handler told. */
static inline void fork_check(void)
{
	int *mark = g_fork_mark;

	if (__builtin_expect(mark && !__atomic_load_n(mark, __ATOMIC_RELAXED), 0))
		fork_missed();
}

static void atfork_install(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	void *m = mmap(NULL, pg > 0 ? (size_t)pg : 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m != MAP_FAILED) {
		if (madvise(m, pg > 0 ? (size_t)pg : 4096, MADV_WIPEONFORK) == 0) {
			*(int *)m = 1;
			g_fork_mark = m;
		} else {
			munmap(m, pg > 0 ? (size_t)pg : 4096); /* (before Linux 4.14) */
		}
	}
	ep__lock_setup();
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/*
 * A caller's fill runs with a heap locked (a new pack, a refill at free): a
 * call back into the library from it would wait for that lock forever, so
 * such a call fails with -EDEADLK instead (ep_pool_create(3)).
 */
static __thread int tl_in_fill;

static void fill_guarded(void *dst, size_t len, void *ctx)
{
	const struct ep__sub *first = ctx;

	tl_in_fill++;
	first->user_fill(dst, len, first->user_fill_ctx);
	tl_in_fill--;
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

/* fn on the region of each large allocation of the heap */
static void hash_each_large(struct ep__sub *pool, void (*fn)(struct ep__sub *, struct ep__region *))
{
	for (size_t i = 0; i <= pool->hash_mask; i++)
		for (struct ep__alloc *a = pool->hash[i]; a; a = a->hnext)
			if (!a->pack)
				fn(pool, &a->large);
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
	ep__route_clear((uintptr_t)p->r.exec, p->r.size);
	if (p->prev)
		p->prev->next = p->next;
	else
		pool->head = p->next;
	if (p->next)
		p->next->prev = p->prev;
	else
		pool->tail = p->prev;
	tally(&pool->tally.packs_out, 1);
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
	if ((rc = ep__route_set((uintptr_t)p->r.exec, p->r.size, pool))) {
		region_drop(pool, &p->r);
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
	tally(&pool->tally.packs_in, 1);
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
	tally(&pool->tally.used_in, n * CHUNK);
}

static void pack_give_back(struct ep__sub *pool, struct ep__pack *p, size_t pos, size_t n)
{
	ep__bitmap_clear(p->used, pos, n);
	ep__bitmap_clear(p->start, pos, 1);
	ep__fit_mark(&p->fit, pos, n);
	if (pos < p->first_free)
		p->first_free = pos;
	p->free_chunks += n;
	tally(&pool->tally.used_out, n * CHUNK);
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

static void hash_remove(struct ep__sub *pool, struct ep__alloc *a);

/*
 * The limit is exact: a charge is taken only if it fits (compare-exchange,
 * never an add that is undone, which would make another thread's charge
 * fail that fits), and given back before ep_free() returns.
 */
static int charge(struct ep_pool *root, size_t bytes)
{
	size_t was = __atomic_load_n(&root->charged, __ATOMIC_RELAXED);

	do {
		if (bytes > root->limit || was > root->limit - bytes)
			return -EPERM;
	} while (!__atomic_compare_exchange_n(&root->charged, &was, was + bytes, true,
					      __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
	return 0;
}

static void uncharge(struct ep__sub *pool, size_t bytes)
{
	if (pool->limit)
		__atomic_fetch_sub(&pool->root->charged, bytes, __ATOMIC_RELEASE);
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
	tally(&pool->tally.frees, 1);
	if (!a->view) {
		hash_remove(pool, a);
		stage_put(pool, a->staging, a->stash_class);
		rec_put(pool, a);
	}
}

static void sub_lock(struct ep__sub *pool)
{
	ep__lock(&pool->lock);
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
	v->hnext = NULL;
	v->key = (uintptr_t)p->r.exec + pos * CHUNK;
	v->exec = (void *)v->key;
	v->pack = p;
	v->chunk = pos;
	v->reserved = (alloc_end(p, pos) - pos) * CHUNK;
	v->offset = 0;
	v->staging = NULL;
	v->stash_class = -1;
	v->view = 1;
	v->diag = NULL;
	return v;
}

/* Give a view a record of its own, to attach diagnostics to.  NULL without
 * memory for one: ep_set_name()/ep_set_unwind() then fail with -ENOMEM. */
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
		return a;
	if (!a && x == key) {
		const struct ep__range *r = range_find(pool, x);

		if (!r)
			return NULL;
		if (r->large) /* always a record, keyed by the mapping's start */
			return r->large->exec == exec ? r->large : NULL;
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
		/* EXECPACK_BACKEND=name means what the explicit backend means
		 * (no fallback the backend keeps for AUTO) */
		struct ep_config named = *cfg;

		if (!ops)
			return (unsigned)want > EP_BACKEND_KMOD ? -EINVAL : -ENODEV;
		named.backend = want;
		why[0] = 0;
		int rc = ops->open(&named, &pool->be, why, sizeof(why));

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

/*
 * The one validation of a config, for ep_pool_create() and
 * ep_backend_probe() alike: copied and checked, the backend (backend, or
 * cfg's own when negative) opened, and what depends on the backend checked.
 * On success pool->ops and pool->be are open and *cfg holds the copy.
 */
static int open_checked(const struct ep_config *cfg_in, int backend, struct ep_config *cfg,
			struct ep__sub *pool)
{
	int rc = config_copy(cfg_in, cfg);

	if (rc)
		return rc;
	if (backend >= 0)
		cfg->backend = (enum ep_backend)backend;
	if ((cfg->flags & ~EP_F_ALL) || (unsigned)cfg->backend > EP_BACKEND_KMOD)
		return -EINVAL;
	rc = open_backend(pool, cfg);
	if (rc)
		return rc;
	if ((cfg->flags & EP_F_SEAL) && sys_mseal(NULL, 0) == -ENOSYS) {
		/* mseal(addr, 0) is a no-op where the call exists (Linux 6.10+) */
		add_reason(pool, "seal: mseal() not supported by this kernel");
		rc = -EOPNOTSUPP;
	} else {
		size_t page = pool->ops->page_size(pool->be);
		size_t pack = cfg->pack_size ? cfg->pack_size : pool->ops->default_pack_size(pool->be);

		if (pack % page || pack > EP__MAX_PACK_SIZE)
			rc = -EINVAL;
	}
	if (rc) {
		pool->ops->close(pool->be);
		pool->ops = NULL;
		pool->be = NULL;
	}
	return rc;
}

/* Lock, random seed, and a place in the list the fork handlers walk. */
static void sub_start(struct ep__sub *pool)
{
	seed_random(pool);
	ep__lock_init(&pool->lock);
	/* (read by ep_pool_stats() without the lock, by design) */
	if (ep__under_valgrind())
		VALGRIND_HG_DISABLE_CHECKING(&pool->tally, sizeof(pool->tally));

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

	struct ep__sub *pool = calloc(1, sizeof(*pool));

	if (!pool)
		return -ENOMEM;
	pool->hash = calloc(64, sizeof(*pool->hash));
	if (!pool->hash) {
		free(pool);
		return -ENOMEM;
	}
	pool->hash_mask = 63;
	rc = open_checked(cfg_in, -1, &cfg, pool);
	if (rc) {
		free(pool->hash);
		free(pool);
		return rc;
	}
#ifdef EP_TEST_HOOKS
	pool->ops = ep__test_wrap_backend(pool->ops);
#endif
	pool->page_size = pool->ops->page_size(pool->be);
	pool->pack_size = cfg.pack_size ? cfg.pack_size : pool->ops->default_pack_size(pool->be);
	pool->fill = ep__fill_default;
	if (cfg.fill) {
		pool->user_fill = cfg.fill;
		pool->user_fill_ctx = cfg.fill_ctx;
		pool->fill = fill_guarded;
		pool->fill_ctx = pool;
	}
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

	thread_put(pool->owner);
	for (size_t i = 0; i <= pool->hash_mask; i++) {
		for (struct ep__alloc *a = pool->hash[i], *n; a; a = n) {
			n = a->hnext;
			ep__diag_forget(&a->diag); /* diag.c: name, libunwind */
			if (!a->pack) {
				ep__route_clear((uintptr_t)a->large.exec, a->large.size);
				region_drop(pool, &a->large);
			}
			free(a->staging);
			free(a);
		}
	}
	while (pool->head) {
		struct ep__pack *p = pool->head;

		pool->head = p->next;
		ep__route_clear((uintptr_t)p->r.exec, p->r.size);
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
	if (ep__under_valgrind())
		VALGRIND_HG_ENABLE_CHECKING(&pool->tally, sizeof(pool->tally));
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

	size_t limit = pool->limit;

	if (limit && (rc = charge(pool->root, reserved)))
		return rc;
	sub_lock(pool);
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
		if ((rc = seal_region(pool, &a->large)) ||
		    (rc = ep__route_set((uintptr_t)a->large.exec, a->large.size, pool))) {
			region_drop(pool, &a->large);
			goto fail;
		}
		a->large.gen = ep__fork_generation();
		a->key = (uintptr_t)a->large.exec;
		range_insert(pool, &a->large, NULL, a);
		tally(&pool->tally.large_in, 1);
		tally(&pool->tally.lbytes_in, a->large.size);
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
	tally(&pool->tally.allocs, 1);

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
	if (a) {
		stage_put(pool, a->staging, a->stash_class);
		rec_put(pool, a);
	}
	ep__unlock(&pool->lock);
	if (limit)
		__atomic_fetch_sub(&pool->root->charged, reserved, __ATOMIC_RELEASE);
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

/* ep_finalize()'s work: one bulk copy, then one coherence step for the
 * whole range. */
static int copy_in(struct ep__sub *pool, struct ep__alloc *a)
{
	int rc = pool->ops->write(pool->be, alloc_region(a), alloc_region_off(a), a->staging,
				  a->reserved);

	if (rc)
		return rc;
	code_changed((void *)a->key, a->reserved);
	/* diag.c: libunwind registration, perf map, memcheck */
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
	if (!a->staging) {
		rc = -EINVAL; /* finalized already */
		goto out;
	}
	struct ep__region *r = alloc_region(a);

	rc = own_region(pool, r);
	if (rc)
		goto out;
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
	if (a->pack) {
		if (!a->staging) {
			/* finalized: refill so a stale jump here traps */
			rc = own_region(pool, &a->pack->r);
			if (rc)
				goto out;
			rc = refill(pool, a);
			if (rc)
				goto out; /* still live and intact; the caller may retry */
		}
		pack_give_back(pool, a->pack, a->chunk, a->reserved / CHUNK);
	} else {
		if (a->large.sealed && (rc = own_region(pool, &a->large)))
			goto out; /* its refill could not be done: still live */
		range_remove(pool, &a->large);
		ep__route_clear((uintptr_t)a->large.exec, a->large.size);
		tally(&pool->tally.large_out, 1);
		tally(&pool->tally.lbytes_out, a->large.size);
		void *gone = a->large.exec;
		size_t len = a->large.size;

		region_drop(pool, &a->large);
		/* unmapped: nothing for the CPU's caches; Valgrind must not run
		 * its old translations of whatever is mapped here next */
		if (ep__under_valgrind())
			VALGRIND_DISCARD_TRANSLATIONS(gone, len);
	}
	alloc_forget(pool, a, a->pack == NULL);
out:
	ep__unlock(&pool->lock);
	return rc;
}

EP_API int ep_backend_probe(enum ep_backend backend, const struct ep_config *cfg_in,
			    char *why, size_t whylen)
{
	struct ep_config cfg;
	struct ep__sub probe;
	int rc;

	if (why && whylen)
		why[0] = 0;
	if ((unsigned)backend > EP_BACKEND_KMOD)
		return -EINVAL;
	memset(&probe, 0, sizeof(probe));
	rc = open_checked(cfg_in, (int)backend, &cfg, &probe);
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
	if (a && !(a = rec_keep(pool, a)))
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

/* ---- threads and their heaps ---------------------------------------------- */

/*
 * A thread that allocates is known by a small record that outlives it while
 * a heap still names it as owner: at exit the thread marks it dead, and the
 * next thread that wants a heap in that pool adopts the heap instead of
 * making one.  refs counts the thread itself and the heaps that name it.
 */
struct ep__thread {
	unsigned refs; /* atomic */
	int dead;      /* atomic */
};

static pthread_key_t g_thread_key;
static bool g_thread_key_made;                 /* g_thread_key_lock */
static pthread_mutex_t g_thread_key_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread struct ep__thread *tl_self;

/* The calling thread's last pools and its heap in each (a pool is told
 * from one made later at the same address by its id). */
#define TL_SLOTS 4
struct tl_slot {
	const struct ep_pool *pool;
	uint64_t id;
	struct ep__sub *heap;
};
static __thread struct tl_slot tl_cache[TL_SLOTS];
static uint64_t g_pool_ids;

static void thread_put(struct ep__thread *t)
{
	if (t && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		if (ep__under_valgrind())
			VALGRIND_HG_ENABLE_CHECKING(t, sizeof(*t));
		free(t);
	}
}

static void thread_exit(void *arg)
{
	struct ep__thread *t = arg;

	__atomic_store_n(&t->dead, 1, __ATOMIC_RELEASE);
	tl_self = NULL;
	memset(tl_cache, 0, sizeof(tl_cache));
	thread_put(t);
}

/* (a mutex, not pthread_once(): Helgrind follows it) */
static bool thread_key_make(void)
{
	pthread_mutex_lock(&g_thread_key_lock);
	if (!g_thread_key_made)
		g_thread_key_made = pthread_key_create(&g_thread_key, thread_exit) == 0;
	bool ok = g_thread_key_made;

	pthread_mutex_unlock(&g_thread_key_lock);
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
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	/* (atomics only, shared by the thread and the heaps naming it) */
	if (ep__under_valgrind())
		VALGRIND_HG_DISABLE_CHECKING(t, sizeof(*t));
	t->refs = 1;
	if (pthread_setspecific(g_thread_key, t)) {
		free(t);
		return NULL;
	}
	tl_self = t;
	return t;
}

static bool heap_orphaned(const struct ep__sub *h)
{
	return !h->owner || __atomic_load_n(&h->owner->dead, __ATOMIC_ACQUIRE);
}

/*
 * The heap the calling thread allocates from, found (its own), adopted (one
 * whose thread has exited) or made, in that order; with a cap on heaps
 * (EXECPACK_HEAPS, or a backend whose calls must not overlap) threads share
 * the heaps there are.  NULL without memory.
 */
static struct ep__sub *heap_claim(struct ep_pool *pool)
{
	struct ep__thread *self = thread_self();
	struct ep__sub *h, *pick = NULL;
	unsigned i = 0;

	pthread_mutex_lock(&pool->heaps_lock);
	for (h = pool->heaps; h; h = h->next_heap)
		if (self && h->owner == self)
			goto found;
	for (h = pool->heaps; h; h = h->next_heap) {
		if (heap_orphaned(h)) {
			thread_put(h->owner);
			h->owner = NULL;
			goto adopt;
		}
	}
	if (!pool->max_heaps || pool->nheaps < pool->max_heaps) {
		h = sub_clone(pool->first);
		if (h) {
			h->next_heap = pool->heaps;
			VG_HAPPENS_BEFORE(&pool->heaps);
			__atomic_store_n(&pool->heaps, h, __ATOMIC_RELEASE);
			pool->nheaps++;
			goto adopt;
		}
	}
	/* shared: spread the threads over the heaps there are */
	for (h = pool->heaps; h; h = h->next_heap, i++)
		if (!pick || (self && ((uintptr_t)self >> 4) % pool->nheaps == i))
			pick = h;
	h = pick;
	goto found;
adopt:
	if (self) {
		__atomic_add_fetch(&self->refs, 1, __ATOMIC_RELAXED);
		h->owner = self;
	}
found:
	pthread_mutex_unlock(&pool->heaps_lock);
	return h;
}

static struct ep__sub *home_slow(struct ep_pool *pool, struct tl_slot *slot)
{
	struct ep__sub *h = heap_claim(pool);

	if (h && tl_self) {
		slot->pool = pool;
		slot->id = pool->id;
		slot->heap = h;
	}
	return h;
}

/* The calling thread's heap in pool. */
static inline struct ep__sub *home(struct ep_pool *pool)
{
	struct tl_slot *slot = &tl_cache[((uintptr_t)pool >> 6) % TL_SLOTS];

	if (__builtin_expect(slot->pool == pool && slot->id == pool->id, 1))
		return slot->heap;
	return home_slow(pool, slot);
}

/* The heap of pool that owns addr (route.h), or NULL: no lock is taken. */
static inline struct ep__sub *owner_of(const struct ep_pool *pool, const void *addr)
{
	struct ep__sub *h = ep__route_get((uintptr_t)addr);

	if (!h)
		return NULL;
	VG_HAPPENS_AFTER(h); /* route.c published it */
	return h->root == pool ? h : NULL;
}

/* Heaps per pool: one per thread that allocates; one when the backend's
 * calls must not overlap.  EXECPACK_HEAPS=N caps them (N >= 1). */
static unsigned heaps_wanted(const struct ep__sub *first)
{
	if (!first->ops->threadsafe)
		return 1;
	const char *env = getenv("EXECPACK_HEAPS");

	if (!env || !*env)
		env = getenv("EXECPACK_SUBPOOLS"); /* the name it had first */
	long n = env && *env ? strtol(env, NULL, 10) : 0;

	return n < 1 ? 0 : n > 65536 ? 65536 : (unsigned)n;
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
	pool->first = pool->heaps = first;
	pool->nheaps = 1;
	pool->limit = first->limit;
	pool->max_heaps = heaps_wanted(first);
	pool->id = __atomic_add_fetch(&g_pool_ids, 1, __ATOMIC_RELAXED);
	pthread_mutex_init(&pool->heaps_lock, NULL);
	if (ep__under_valgrind()) {
		/* read without locks by design (limit; stats, after the annotated
		 * publication of each heap) */
		VALGRIND_HG_DISABLE_CHECKING(&pool->charged, sizeof(pool->charged));
		VALGRIND_HG_DISABLE_CHECKING(&pool->heaps, sizeof(pool->heaps));
	}
	*out = pool;
	return 0;
}

EP_API void ep_pool_destroy(struct ep_pool *pool)
{
	if (!pool)
		return;
	/* the first heap last: it closes the backend the others share */
	for (struct ep__sub *h = pool->heaps, *n; h; h = n) {
		n = h->next_heap;
		if (h != pool->first)
			sub_destroy(h);
	}
	sub_destroy(pool->first);
	pthread_mutex_destroy(&pool->heaps_lock);
	if (ep__under_valgrind())
		VALGRIND_HG_ENABLE_CHECKING(pool, sizeof(*pool));
	free(pool);
}

EP_API int ep_alloc(struct ep_pool *pool, size_t size, struct ep_image *out)
{
	if (!pool)
		return -EINVAL;
	if (__builtin_expect(tl_in_fill, 0))
		return -EDEADLK;
	fork_check();
	struct ep__sub *h = home(pool);

	return h ? sub_alloc(h, size, out) : -ENOMEM;
}

/* Calls on an existing allocation go to the heap that owns its address,
 * whichever thread makes them. */
#define ON_OWNER(pool, addr, call)                                 \
	do {                                                       \
		if (__builtin_expect(tl_in_fill, 0))               \
			return -EDEADLK;                           \
		fork_check();                                      \
		struct ep__sub *pool_ = owner_of(pool, addr);      \
		return pool_ ? (call) : -EINVAL;                   \
	} while (0)

EP_API int ep_write(struct ep_pool *pool, void *dst, const void *src, size_t len)
{
	if (!pool || !dst || (!src && len))
		return -EINVAL;
	ON_OWNER(pool, dst, sub_write(pool_, dst, src, len));
}

EP_API int ep_finalize(struct ep_pool *pool, void *exec)
{
	if (!pool || !exec)
		return -EINVAL;
	ON_OWNER(pool, exec, sub_finalize(pool_, exec));
}

EP_API int ep_free(struct ep_pool *pool, void *exec)
{
	if (!pool || !exec)
		return -EINVAL;
	ON_OWNER(pool, exec, sub_free(pool_, exec));
}

EP_API int ep_set_name(struct ep_pool *pool, void *exec, const char *name)
{
	if (!pool || !exec || !name)
		return -EINVAL;
	ON_OWNER(pool, exec, sub_set_name(pool_, exec, name));
}

EP_API int ep_set_unwind(struct ep_pool *pool, void *exec, int kind, size_t prologue,
			 size_t frame)
{
	if (!pool || !exec)
		return -EINVAL;
	ON_OWNER(pool, exec, sub_set_unwind(pool_, exec, kind, prologue, frame));
}

/*
 * Without a lock, from the heaps' monotonic counts, read in four passes:
 * what goes away first (packs and large mappings released), then what was
 * taken, then what was given back, then what was made.  A count read later
 * is at least what it was at any earlier moment, so with T the moment
 * between the second and third passes: live_allocs, used_bytes,
 * large_allocs and large_bytes are at most what they were at T (never more
 * than were alive at any moment of the call), and packs, pack_bytes are at
 * least what they were at T, so used_bytes <= pack_bytes always.  With no
 * other thread calling, the figures are exact.
 */
EP_API int ep_pool_stats(const struct ep_pool *pool, struct ep_stats *out)
{
	if (!pool || !out)
		return -EINVAL;
	fork_check(); /* (any call makes a child's copies: libexecpack(7)) */

	struct ep__sub *heaps = __atomic_load_n(&pool->heaps, __ATOMIC_ACQUIRE);

	VG_HAPPENS_AFTER(&pool->heaps);
	uint64_t packs_out = 0, allocs = 0, used_in = 0, large_in = 0, lbytes_in = 0;
	uint64_t frees = 0, used_out = 0, large_out = 0, lbytes_out = 0, packs_in = 0;

#define READ(field) __atomic_load_n(&h->tally.field, __ATOMIC_ACQUIRE)
	/* (within a pass, a count before the one its writer raises after it,
	 * or the other way round, so that large_bytes covers large_allocs) */
	for (const struct ep__sub *h = heaps; h; h = h->next_heap)
		packs_out += READ(packs_out);
	for (const struct ep__sub *h = heaps; h; h = h->next_heap) {
		allocs += READ(allocs);
		used_in += READ(used_in);
		large_in += READ(large_in);
		lbytes_in += READ(lbytes_in);
	}
	for (const struct ep__sub *h = heaps; h; h = h->next_heap) {
		lbytes_out += READ(lbytes_out);
		large_out += READ(large_out);
		used_out += READ(used_out);
		frees += READ(frees);
	}
	for (const struct ep__sub *h = heaps; h; h = h->next_heap)
		packs_in += READ(packs_in);
#undef READ
	memset(out, 0, sizeof(*out));
	out->packs = (size_t)(packs_in - packs_out);
	out->pack_bytes = out->packs * pool->first->pack_size;
	out->live_allocs = allocs > frees ? (size_t)(allocs - frees) : 0;
	out->used_bytes = used_in > used_out ? (size_t)(used_in - used_out) : 0;
	out->large_allocs = large_in > large_out ? (size_t)(large_in - large_out) : 0;
	if (out->large_allocs > out->live_allocs)
		out->large_allocs = out->live_allocs; /* (both bound what was alive) */
	out->large_bytes = lbytes_in > lbytes_out ? (size_t)(lbytes_in - lbytes_out) : 0;
	return 0;
}

EP_API const char *ep_pool_backend(const struct ep_pool *pool)
{
	return pool ? pool->first->ops->name : NULL;
}

EP_API const char *ep_pool_reasons(const struct ep_pool *pool)
{
	return pool ? pool->first->reasons : NULL;
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
