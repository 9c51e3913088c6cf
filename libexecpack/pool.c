/*
 * pool.c - packs, the allocation table and the public calls.
 *
 * A pool owns a list of packs in creation order (first fit walks it in that
 * order, as the kernel's bpf_prog_pack does) and a separate mapping for each
 * request larger than a pack.  No metadata lives in executable memory: each
 * pack has two out-of-band bitmaps, "used" (chunk is allocated) and "start"
 * (an allocation begins here), and each allocation has a record in a hash
 * table keyed by the address of its first chunk.  An address is resolved by
 * a binary search over the address ranges of all regions (never by masking:
 * packs are not aligned to their size), then the start bitmap.
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
#ifndef VALGRIND_DISCARD_TRANSLATIONS
#define VALGRIND_DISCARD_TRANSLATIONS(addr, len) ((void)(addr), (void)(len))
#endif

#include "bitmap.h"
#include "diag.h"
#include "execpack.h"
#include "internal.h"

#define CHUNK EP_CHUNK_SIZE
#define RANDOMIZE_SLACK 48 /* extra bytes reserved for EP_F_RANDOMIZE */

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
};

/* One region's address range, sorted by lo, for address lookups. */
struct ep__range {
	uintptr_t lo, hi;
	struct ep__pack *pack;   /* or */
	struct ep__alloc *large;
};

struct ep_pool {
	pthread_mutex_t lock;
	const struct ep__backend_ops *ops;
	struct ep__backend *be;
	ep_fill_fn fill;
	void *fill_ctx;
	unsigned flags;
	size_t limit;
	size_t pack_size;
	size_t page_size;

	struct ep__pack *head, *tail;
	size_t npacks, empty_packs;

	struct ep__range *ranges;
	size_t nranges, cap_ranges;

	struct ep__alloc **hash;
	size_t hash_mask; /* buckets - 1 */
	size_t nallocs;

	size_t charged, used_bytes, large_allocs, large_bytes;
	uint64_t rng;

	struct ep_pool *gnext, *gprev; /* all pools, for the fork handlers */
	char reasons[512];             /* why other backends were not chosen */
};

/* ---- fork generation ------------------------------------------------------ */

static pthread_mutex_t g_pools_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ep_pool *g_pools;
static unsigned g_fork_gen;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

/* Holding every pool lock across fork() means no copy is half-done in the
 * child and no region is being written while the generation changes. */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&g_pools_lock);
	for (struct ep_pool *p = g_pools; p; p = p->gnext)
		pthread_mutex_lock(&p->lock);
}

static void atfork_release(void)
{
	__atomic_add_fetch(&g_fork_gen, 1, __ATOMIC_RELAXED);
	for (struct ep_pool *p = g_pools; p; p = p->gnext)
		pthread_mutex_unlock(&p->lock);
	pthread_mutex_unlock(&g_pools_lock);
}

static void atfork_install(void)
{
	pthread_atfork(atfork_prepare, atfork_release, atfork_release);
}

unsigned ep__fork_generation(void)
{
	return __atomic_load_n(&g_fork_gen, __ATOMIC_RELAXED);
}

/* Before the first change to a region after a fork(): make it ours alone. */
static int own_region(struct ep_pool *pool, struct ep__region *r)
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

static uint64_t next_random(struct ep_pool *pool)
{
	/* xorshift64*: placement randomness, not a secret key */
	uint64_t x = pool->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	pool->rng = x;
	return x * 2685821657736338717ull;
}

static void seed_random(struct ep_pool *pool)
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
static int seal_region(struct ep_pool *pool, struct ep__region *r)
{
	if (!(pool->flags & EP_F_SEAL))
		return 0;
	int rc = sys_mseal(r->exec, r->size);

	if (rc == 0)
		r->sealed = 1;
	return rc;
}

/* Drop a region; a sealed one is first refilled, as its exec view stays. */
static void region_drop(struct ep_pool *pool, struct ep__region *r)
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
	VALGRIND_DISCARD_TRANSLATIONS(addr, len);
}

/* ---- the allocation hash -------------------------------------------------- */

static size_t hash_index(const struct ep_pool *pool, uintptr_t key)
{
	uint64_t h = (uint64_t)(key >> 4) * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 32) & pool->hash_mask;
}

static int hash_grow(struct ep_pool *pool)
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

static void hash_insert(struct ep_pool *pool, struct ep__alloc *a)
{
	size_t i = hash_index(pool, a->key);

	a->hnext = pool->hash[i];
	pool->hash[i] = a;
	pool->nallocs++;
}

static struct ep__alloc *hash_find(const struct ep_pool *pool, uintptr_t key)
{
	for (struct ep__alloc *a = pool->hash[hash_index(pool, key)]; a; a = a->hnext)
		if (a->key == key)
			return a;
	return NULL;
}

static void hash_remove(struct ep_pool *pool, struct ep__alloc *a)
{
	struct ep__alloc **pp = &pool->hash[hash_index(pool, a->key)];

	while (*pp != a)
		pp = &(*pp)->hnext;
	*pp = a->hnext;
	pool->nallocs--;
}

/* ---- region ranges -------------------------------------------------------- */

/* Index of the first range with lo > addr. */
static size_t range_upper(const struct ep_pool *pool, uintptr_t addr)
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

static const struct ep__range *range_find(const struct ep_pool *pool, uintptr_t addr)
{
	size_t i = range_upper(pool, addr);

	if (i == 0)
		return NULL;
	const struct ep__range *r = &pool->ranges[i - 1];

	return addr < r->hi ? r : NULL;
}

/* Reserve room first so that a later insert cannot fail half-way. */
static int range_reserve(struct ep_pool *pool)
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

static void range_insert(struct ep_pool *pool, const struct ep__region *reg,
			 struct ep__pack *pack, struct ep__alloc *large)
{
	uintptr_t lo = (uintptr_t)reg->exec;
	size_t i = range_upper(pool, lo);

	memmove(&pool->ranges[i + 1], &pool->ranges[i],
		(pool->nranges - i) * sizeof(pool->ranges[0]));
	pool->ranges[i] = (struct ep__range){ lo, lo + reg->size, pack, large };
	pool->nranges++;
}

static void range_remove(struct ep_pool *pool, const struct ep__region *reg)
{
	size_t i = range_upper(pool, (uintptr_t)reg->exec) - 1;

	memmove(&pool->ranges[i], &pool->ranges[i + 1],
		(pool->nranges - i - 1) * sizeof(pool->ranges[0]));
	pool->nranges--;
}

/* ---- packs ---------------------------------------------------------------- */

static void pack_release(struct ep_pool *pool, struct ep__pack *p)
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

static int pack_new(struct ep_pool *pool, struct ep__pack **out)
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
	pool->empty_packs++;
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
static int pack_find(struct ep_pool *pool, size_t n, struct ep__pack **outp, size_t *pos)
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

static void pack_take(struct ep_pool *pool, struct ep__pack *p, size_t pos, size_t n)
{
	if (p->free_chunks == p->nchunks)
		pool->empty_packs--;
	ep__bitmap_set(p->used, pos, n);
	ep__bitmap_set(p->start, pos, 1);
	ep__fit_mark(&p->fit, pos, n);
	if (pos == p->first_free)
		p->first_free = ep__bitmap_next_zero(p->used, p->nchunks, pos + n);
	p->free_chunks -= n;
	pool->used_bytes += n * CHUNK;
}

static void pack_give_back(struct ep_pool *pool, struct ep__pack *p, size_t pos, size_t n)
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
		if (pool->empty_packs && !p->r.sealed)
			pack_release(pool, p);
		else
			pool->empty_packs++;
	}
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

/* The live allocation whose handed-out bytes contain addr, or NULL. */
static struct ep__alloc *alloc_containing(const struct ep_pool *pool, uintptr_t addr)
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
			return NULL;
	}
	uintptr_t lo = (uintptr_t)a->exec, hi = a->key + a->reserved;

	return addr >= lo && addr < hi ? a : NULL;
}

static struct ep__alloc *alloc_exact(const struct ep_pool *pool, const void *exec)
{
	struct ep__alloc *a = alloc_containing(pool, (uintptr_t)exec);

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

static void add_reason(struct ep_pool *pool, const char *why)
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

static int open_backend(struct ep_pool *pool, const struct ep_config *cfg)
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

EP_API int ep_pool_create(const struct ep_config *cfg_in, struct ep_pool **out)
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

	struct ep_pool *pool = calloc(1, sizeof(*pool));

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
	seed_random(pool);
	pthread_mutex_init(&pool->lock, NULL);

	pthread_once(&g_atfork_once, atfork_install);
	pthread_mutex_lock(&g_pools_lock);
	pool->gnext = g_pools;
	if (g_pools)
		g_pools->gprev = pool;
	g_pools = pool;
	pthread_mutex_unlock(&g_pools_lock);

	*out = pool;
	return 0;
}

EP_API void ep_pool_destroy(struct ep_pool *pool)
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
	ep__diag_pool_destroy(pool); /* diag.c: the pool's memcheck mempool */
	pool->ops->close(pool->be);
	pthread_mutex_destroy(&pool->lock);
	free(pool->ranges);
	free(pool->hash);
	free(pool);
}

/* ---- the public calls ----------------------------------------------------- */

EP_API int ep_alloc(struct ep_pool *pool, size_t size, struct ep_image *out)
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

	struct ep__alloc *a = calloc(1, sizeof(*a));

	if (!a)
		return -ENOMEM;
	/* staging is private memory: fill it before taking the lock */
	a->staging = malloc(reserved);
	if (!a->staging) {
		free(a);
		return -ENOMEM;
	}
	pool->fill(a->staging, reserved, pool->fill_ctx);

	int rc;

	pthread_mutex_lock(&pool->lock);
	if (pool->limit && (reserved > pool->limit || pool->charged > pool->limit - reserved)) {
		rc = -EPERM;
		goto fail;
	}
	if (pool->nallocs + 1 > (pool->hash_mask + 1) && (rc = hash_grow(pool)))
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
	pool->charged += reserved;

	out->exec = a->exec;
	out->rw = a->staging + a->offset;
	out->size = reserved - a->offset;
	ep__diag_alloc(pool, a->exec, out->size); /* diag.c: memcheck mempool chunk */
	pthread_mutex_unlock(&pool->lock);
	return 0;
fail:
	pthread_mutex_unlock(&pool->lock);
	free(a->staging);
	free(a);
	return rc;
}

EP_API int ep_write(struct ep_pool *pool, void *dst, const void *src, size_t len)
{
	if (!pool || !dst || (!src && len))
		return -EINVAL;

	int rc = 0;

	pthread_mutex_lock(&pool->lock);
	struct ep__alloc *a = alloc_containing(pool, (uintptr_t)dst);
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
	pthread_mutex_unlock(&pool->lock);
	return rc;
}

EP_API int ep_finalize(struct ep_pool *pool, void *exec)
{
	if (!pool || !exec)
		return -EINVAL;

	int rc;

	pthread_mutex_lock(&pool->lock);
	struct ep__alloc *a = alloc_exact(pool, exec);

	if (!a || !a->staging) {
		rc = -EINVAL;
		goto out;
	}
	struct ep__region *r = alloc_region(a);

	rc = own_region(pool, r);
	if (rc)
		goto out;
	/* one bulk copy, then one coherence step for the whole range */
	rc = pool->ops->write(pool->be, r, alloc_region_off(a), a->staging, a->reserved);
	if (rc)
		goto out; /* staging kept: nothing is lost, the caller may retry or free */
	code_changed((void *)a->key, a->reserved);
	free(a->staging);
	a->staging = NULL;
	/* diag.c: libunwind registration, perf map */
	ep__diag_finalize(pool, &a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec,
			  pool->flags);
out:
	pthread_mutex_unlock(&pool->lock);
	return rc;
}

EP_API int ep_free(struct ep_pool *pool, void *exec)
{
	if (!pool || !exec)
		return -EINVAL;

	int rc = 0;

	pthread_mutex_lock(&pool->lock);
	struct ep__alloc *a = alloc_exact(pool, exec);

	if (!a) {
		rc = -EINVAL;
		goto out;
	}
	if (a->pack) {
		if (!a->staging) {
			/* finalized: refill so a stale jump here traps */
			struct ep__region *r = &a->pack->r;

			rc = own_region(pool, r);
			if (!rc)
				rc = pool->ops->fill(pool->be, r, a->chunk * CHUNK, a->reserved,
						     pool->fill, pool->fill_ctx);
			if (rc)
				goto out; /* still live and intact; the caller may retry */
			code_changed((void *)a->key, a->reserved);
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
	/* diag.c: drop the name and libunwind entry, free the memcheck chunk */
	ep__diag_free(pool, &a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec,
		      a->pack == NULL);
	hash_remove(pool, a);
	pool->charged -= a->reserved;
	free(a->staging);
	free(a);
out:
	pthread_mutex_unlock(&pool->lock);
	return rc;
}

EP_API int ep_pool_stats(const struct ep_pool *cpool, struct ep_stats *out)
{
	if (!cpool || !out)
		return -EINVAL;

	struct ep_pool *pool = (struct ep_pool *)cpool; /* the lock is not state */

	pthread_mutex_lock(&pool->lock);
	out->packs = pool->npacks;
	out->pack_bytes = pool->npacks * pool->pack_size;
	out->used_bytes = pool->used_bytes;
	out->live_allocs = pool->nallocs;
	out->large_allocs = pool->large_allocs;
	out->large_bytes = pool->large_bytes;
	pthread_mutex_unlock(&pool->lock);
	return 0;
}

EP_API const char *ep_pool_backend(const struct ep_pool *pool)
{
	return pool ? pool->ops->name : NULL;
}

EP_API const char *ep_pool_reasons(const struct ep_pool *pool)
{
	return pool ? pool->reasons : NULL;
}

EP_API int ep_backend_probe(enum ep_backend backend, const struct ep_config *cfg_in,
			    char *why, size_t whylen)
{
	struct ep_config cfg;
	struct ep_pool probe;
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

/* Resolve exec to a live allocation and call diag.c with the pool locked. */
EP_API int ep_set_name(struct ep_pool *pool, void *exec, const char *name)
{
	if (!pool || !exec || !name)
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	struct ep__alloc *a = alloc_exact(pool, exec);
	int rc = a ? ep__diag_set_name(pool, &a->diag, exec,
				       a->key + a->reserved - (uintptr_t)exec, !a->staging,
				       pool->flags, name)
		   : -EINVAL;

	pthread_mutex_unlock(&pool->lock);
	return rc;
}

EP_API int ep_set_unwind(struct ep_pool *pool, void *exec, int kind, size_t prologue,
			 size_t frame)
{
	if (!pool || !exec)
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	struct ep__alloc *a = alloc_exact(pool, exec);
	int rc = a ? ep__diag_set_unwind(&a->diag, exec, a->key + a->reserved - (uintptr_t)exec,
					 !a->staging, kind, prologue, frame)
		   : -EINVAL;

	pthread_mutex_unlock(&pool->lock);
	return rc;
}

/*
 * Under Valgrind, at exit (diag.c's destructor): the pool's own copies of
 * the addresses it handed out are made invisible to memcheck's leak scan,
 * so that an allocation the program lost is reported "definitely lost".
 */
void ep__pool_hide_from_leak_check(void)
{
	pthread_mutex_lock(&g_pools_lock);
	for (struct ep_pool *p = g_pools; p; p = p->gnext) {
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
