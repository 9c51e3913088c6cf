/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api.c - the public calls on pools: creating and destroying a pool, which
 * heap serves a call (the caller's own for ep_alloc(), the owner of the
 * address for the others), and the statistics.  Every call that may take a
 * lock of the library first runs the fork check (fork.h): it may be the
 * first call of a child made without fork handlers.
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config-open.h"
#include "fork.h"
#include "heap.h"
#include "interleave.h"
#include "info.h"
#include "pack.h"
#include "patch.h"
#include "registry.h"
#include "remote.h"
#include "thread.h"
#include "trim.h"
#include "route.h"
#include "track.h"

/* The heap of pool that owns addr (route.h), or NULL, and *pack, the
 * pack addr lies in (NULL for a large mapping): no lock is taken. */
static inline struct ep__heap *owner_of(const struct ep_pool *pool, const void *addr,
				       struct ep__pack **pack)
{
	void *v = ep__route_get((uintptr_t)addr);

	if (!v)
		return NULL;
	struct ep__heap *h = ep__route_heap(v, pack);

	VG_HAPPENS_AFTER(h); /* route.c published it */
	return h->root == pool ? h : NULL;
}

/* Whether h is the calling thread's own heap in pool (its cached one). */
static inline bool is_home(const struct ep_pool *pool, const struct ep__heap *h)
{
	const struct ep__tl_slot *slot = &ep__tl_cache[((uintptr_t)pool >> 6) % EP__TL_SLOTS];

	return slot->heap == h && slot->pool == pool && slot->id == pool->id;
}

static _Atomic uint64_t g_pool_ids;

EP_API int ep_pool_create(const struct ep_config *cfg, struct ep_pool **out)
{
	/* (every pool call comes after this one: the hooks may test a word;
	 * written only when it changes, so that later pools, made while other
	 * threads read it, never write it) */
	int vg = RUNNING_ON_VALGRIND ? 1 : 0;

	/* (a child made without fork handlers: its first call, this one
	 * included, resets what a vanished thread held; fork.c) */
	ep__fork_check();
	if (ep__load_relaxed(&ep__valgrind) != vg)
		ep__store_relaxed(&ep__valgrind, vg);
	if (!out)
		return -EINVAL;
	*out = NULL;

	struct ep_pool *pool = calloc(1, sizeof(*pool));
	struct ep__heap *first;

	if (!pool)
		return -ENOMEM;
	int rc = ep__heap_create(cfg, &first);

	if (rc) {
		free(pool);
		return rc;
	}
	first->root = pool;
	ep__fork_setup();
	ep__registry_add(first);
	pool->first = first;
	ep__store_relaxed(&pool->heaps, first);
	pool->nheaps = 1;
	pool->limit = first->limit;
	pool->max_heaps = ep__heaps_wanted(first);
	pool->id = ep__add_relaxed(&g_pool_ids, 1);
	pthread_mutex_init(&pool->heaps_lock, NULL);
	ep__registry_add_pool(pool);
	if (ep__under_valgrind()) {
		/* read without locks by design (limit; stats, after the annotated
		 * publication of each heap) */
		VALGRIND_HG_DISABLE_CHECKING(&pool->charged, sizeof(pool->charged));
		VALGRIND_HG_DISABLE_CHECKING(&pool->heaps, sizeof(pool->heaps));
		VALGRIND_HG_DISABLE_CHECKING(pool->data_heaps, sizeof(pool->data_heaps));
	}
	*out = pool;
	return 0;
}

/* ep_default_pool()'s pool, published once; never destroyed. */
static struct ep_pool *_Atomic g_default;

EP_API void ep_pool_destroy(struct ep_pool *pool)
{
	if (!pool || pool == ep__load_acquire(&g_default))
		return; /* (the default pool outlives every library that shares it) */
	ep__fork_check();
	ep__registry_remove_pool(pool);
	/* the first heap last: it closes the backend the others share */
	for (struct ep__heap *h = ep__load_relaxed(&pool->heaps), *n; h; h = n) {
		n = h->next_heap;
		ep__registry_remove(h);
		ep__thread_put(ep__load_relaxed(&h->owner));
		if (h != pool->first)
			ep__heap_destroy(h);
	}
	ep__heap_destroy(pool->first);
	pthread_mutex_destroy(&pool->heaps_lock);
	if (ep__under_valgrind())
		VALGRIND_HG_ENABLE_CHECKING(pool, sizeof(*pool));
	free(pool);
}

/*
 * The process-wide pool, for libraries with no allocator hook: made by the
 * first call, with the defaults, and published by a compare-and-swap, so
 * that threads racing to make it agree (the losers destroy theirs) and no
 * lock or once-flag is ever held: a fork() at any moment leaves the child
 * either the parent's pool, which the child's first call makes its own
 * (fork.h) as any pool, or none yet.  NULL when none can be made now; a
 * later call tries again.
 */
EP_API struct ep_pool *ep_default_pool(void)
{
	struct ep_pool *p = ep__load_acquire(&g_default);

	if (__builtin_expect(p != NULL, 1)) {
		VG_HAPPENS_AFTER(&g_default);
		return p;
	}
	struct ep_pool *mine;

	if (ep_pool_create(NULL, &mine))
		return NULL;
	EP_YIELD("default pool");
	VG_HAPPENS_BEFORE(&g_default);
	if (ep__cas_acq_rel(&g_default, &p, mine))
		return mine;
	VG_HAPPENS_AFTER(&g_default);
	ep_pool_destroy(mine); /* another thread's came first */
	return p;
}

#ifdef EP_INTERLEAVE
/* The interleaving test's: the default pool unpublished and destroyed,
 * with no thread calling, so that each schedule races a first call. */
void ep__default_pool_reset_for_test(void)
{
	struct ep_pool *p = ep__load_acquire(&g_default);

	ep__store_release(&g_default, NULL);
	ep_pool_destroy(p);
}
#endif

/* Whether a call may go on: -EDEADLK inside a fill function, else 0 (a
 * raw fork child reset first). */
static inline int call_refused(void)
{
	if (__builtin_expect(ep__in_fill, 0))
		return -EDEADLK;
	ep__fork_check();
	return 0;
}

/* The start of every call on an existing allocation: call_refused(), then
 * the heap that owns addr (owner_of()), whichever thread makes the call.
 * 0 and *h, *pack set; or call_refused()'s error, or -EINVAL where pool
 * owns nothing at addr. */
static inline int call_owner(const struct ep_pool *pool, const void *addr, struct ep__heap **h,
			     struct ep__pack **pack)
{
	int rc = call_refused();

	if (rc)
		return rc;
	*h = owner_of(pool, addr, pack);
	return *h ? 0 : -EINVAL;
}

EP_API int ep_alloc(struct ep_pool *pool, size_t size, struct ep_image *out)
{
	if (!pool)
		return -EINVAL;
	int rc = call_refused();

	if (rc)
		return rc;
	struct ep__heap *h = ep__home(pool);

	rc = h ? ep__heap_alloc(h, size, out) : -ENOMEM;
	/* no tail call: memcheck's report of a lost allocation names ep_alloc */
	__asm__ volatile("");
	return rc;
}

EP_API int ep_alloc_aligned(struct ep_pool *pool, size_t size, size_t align,
			    struct ep_image *out)
{
	if (!pool)
		return -EINVAL;
	int rc = call_refused();

	if (rc)
		return rc;
	struct ep__heap *h = ep__home(pool);

	rc = h ? ep__heap_alloc_aligned(h, size, align, out) : -ENOMEM;
	__asm__ volatile(""); /* (as ep_alloc()) */
	return rc;
}

/*
 * The pool's heap of data of kind (EP_DATA_RO or EP_DATA_RW), made on
 * first use: one per kind, owned by no thread (thread.c never hands it
 * out, and every call takes its lock).  It shares the first heap's
 * backend, so its packs are placed as code packs are (the code range, or
 * near's window).  NULL without memory.
 */
static struct ep__heap *data_heap(struct ep_pool *pool, unsigned kind)
{
	struct ep__heap *_Atomic *slot = &pool->data_heaps[kind - 1];
	struct ep__heap *h = ep__load_acquire(slot);

	if (h) {
		VG_HAPPENS_AFTER(slot); /* (published whole, below) */
		return h;
	}
	/* (another thread may publish it from here on: read again, locked) */
	EP_YIELD("data heap: none yet");
	ep__mutex_lock(&pool->heaps_lock);
	h = ep__load_relaxed(slot);
	if (!h) {
		h = ep__heap_clone_data(pool->first, (unsigned char)(kind == EP_DATA_RO
								       ? EP__GUARD_DATA_RO
								       : EP__GUARD_DATA_RW));
		if (h) {
			ep__registry_add(h); /* (fork handlers, lookups: as any heap) */
			h->next_heap = ep__load_relaxed(&pool->heaps);
			VG_HAPPENS_BEFORE(&pool->heaps);
			EP_YIELD("heap published");
			ep__store_release(&pool->heaps, h);
			VG_HAPPENS_BEFORE(slot);
			ep__store_release(slot, h);
		}
	}
	ep__mutex_unlock(&pool->heaps_lock);
	return h;
}

EP_API int ep_alloc_data(struct ep_pool *pool, size_t size, size_t align, unsigned kind,
			 struct ep_image *out)
{
	if (!pool || !out || size == 0 || (kind != EP_DATA_RO && kind != EP_DATA_RW) ||
	    (align & (align - 1)))
		return -EINVAL;
	int rc = call_refused();

	if (rc)
		return rc;
	if (!pool->first->ops->data)
		return -EOPNOTSUPP; /* (kmod: its module maps code views only) */
	struct ep__heap *h = data_heap(pool, kind);

	if (!h)
		return -ENOMEM;
	return align ? ep__heap_alloc_aligned(h, size, align, out) : ep__heap_alloc(h, size, out);
}

EP_API int ep_write(struct ep_pool *pool, void *dst, const void *src, size_t len)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!pool || !dst || (!src && len))
		return -EINVAL;
	int rc = call_owner(pool, dst, &h, &pack);

	return rc ? rc : ep__heap_write(h, dst, src, len);
}

EP_API int ep_finalize(struct ep_pool *pool, void *exec)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!pool || !exec)
		return -EINVAL;
	int rc = call_owner(pool, exec, &h, &pack);

	return rc ? rc : ep__heap_finalize(h, pack, exec);
}

/* (members on the stack up to this many: a module's few segments) */
#define GROUP_FEW 8

EP_API int ep_finalize_group(struct ep_pool *pool, void *const *execs, size_t n)
{
	if (!pool || !execs || n == 0 || n > SIZE_MAX / sizeof(struct ep__group_item))
		return -EINVAL;
	int rc = call_refused();

	if (rc)
		return rc;
	struct ep__group_item few[GROUP_FEW];
	struct ep__group_item *m = n <= GROUP_FEW ? few : malloc(n * sizeof(*m));

	if (!m)
		return -ENOMEM;
	for (size_t i = 0; i < n && !rc; i++) {
		m[i].exec = execs[i];
		m[i].h = execs[i] ? owner_of(pool, execs[i], &m[i].hint) : NULL;
		if (!m[i].h)
			rc = -EINVAL; /* (before any lock: nothing to undo) */
	}
	if (!rc)
		rc = ep__heap_finalize_group(m, n);
	if (m != few)
		free(m);
	return rc;
}

EP_API int ep_keep_staging(struct ep_pool *pool, void *exec)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!pool || !exec)
		return -EINVAL;
	int rc = call_owner(pool, exec, &h, &pack);

	return rc ? rc : ep__heap_keep_staging(h, pack, exec);
}

EP_API int ep_release_staging(struct ep_pool *pool, void *exec)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!pool || !exec)
		return -EINVAL;
	int rc = call_owner(pool, exec, &h, &pack);

	return rc ? rc : ep__heap_release_staging(h, pack, exec);
}

EP_API int ep_free(struct ep_pool *pool, void *exec)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!pool || !exec)
		return -EINVAL;
	int rc = call_owner(pool, exec, &h, &pack);

	if (rc)
		return rc;
	/* another thread's heap: free without its lock (remote.c) if it can;
	 * a data heap has no thread to drain such frees: always its lock */
	if (pack && !is_home(pool, h) && !h->data) {
		rc = ep__remote_free(pack, exec);
		if (rc <= 0)
			return rc;
	}
	return ep__heap_free(h, pack, exec);
}

EP_API int ep_shrink(struct ep_pool *pool, void *exec, size_t size)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!pool || !exec)
		return -EINVAL;
	int rc = call_owner(pool, exec, &h, &pack);

	return rc ? rc : ep__heap_shrink(h, exec, size);
}

/* Patch windows (patch.c): the owner's lock is taken there. */
EP_API int ep_patch_begin(struct ep_pool *pool, void *exec, size_t len, void **rw)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!pool || !exec || !rw || len == 0)
		return -EINVAL;
	int rc = call_owner(pool, exec, &h, &pack);

	return rc ? rc : ep__patch_begin(h, exec, len, rw);
}

EP_API int ep_patch_commit(struct ep_pool *pool, void *exec)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!pool || !exec)
		return -EINVAL;
	int rc = call_owner(pool, exec, &h, &pack);

	return rc ? rc : ep__patch_commit(h, exec);
}

EP_API int ep_patch_abort(struct ep_pool *pool, void *exec)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!pool || !exec)
		return -EINVAL;
	int rc = call_owner(pool, exec, &h, &pack);

	return rc ? rc : ep__patch_abort(h, exec);
}

EP_API int ep_add(struct ep_pool *pool, const void *code, size_t len, void **exec)
{
	if (exec)
		*exec = NULL;
	if (!pool || !code || !exec || len == 0)
		return -EINVAL;
	int rc = call_refused();

	if (rc)
		return rc;
	struct ep__heap *h = ep__home(pool);

	return h ? ep__heap_add(h, code, len, exec) : -ENOMEM;
}

EP_API int ep_finalize_size(struct ep_pool *pool, void *exec, size_t size)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!pool || !exec || size == 0)
		return -EINVAL;
	int rc = call_owner(pool, exec, &h, &pack);

	return rc ? rc : ep__heap_finalize_size(h, exec, size);
}

EP_API int ep_lookup_rw(const void *addr, struct ep_info *out)
{
	if (!out)
		return -EINVAL;
	ep__fork_check(); /* (its locks: a raw child's are reset first) */
	int rc = ep_lookup(addr, out); /* (code first: no lock) */

	return rc == -ENOENT && addr ? ep__info_lookup_buffer(addr, out) : rc;
}

EP_API int ep_set_name(struct ep_pool *pool, void *exec, const char *name)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!pool || !exec || !name)
		return -EINVAL;
	int rc = call_owner(pool, exec, &h, &pack);

	return rc ? rc : ep__heap_set_name(h, exec, name, 0);
}

EP_API int ep_set_name_size(struct ep_pool *pool, void *exec, const char *name, size_t size)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!size || !pool || !exec || !name)
		return -EINVAL;
	int rc = call_owner(pool, exec, &h, &pack);

	return rc ? rc : ep__heap_set_name(h, exec, name, size);
}

EP_API int ep_set_symbols(struct ep_pool *pool, void *exec, const struct ep_symbol *syms,
			  size_t n)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!pool || !exec || (!syms && n))
		return -EINVAL;
	int rc = call_owner(pool, exec, &h, &pack);

	return rc ? rc : ep__heap_set_symbols(h, exec, syms, n);
}

EP_API int ep_set_unwind(struct ep_pool *pool, void *exec, int kind, size_t prologue,
			 size_t frame)
{
	struct ep__heap *h;
	struct ep__pack *pack;

	if (!pool || !exec)
		return -EINVAL;
	int rc = call_owner(pool, exec, &h, &pack);

	return rc ? rc : ep__heap_set_unwind(h, exec, kind, prologue, frame);
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
	ep__fork_check(); /* (any call makes a child's copies: libexecpack(7)) */

	struct ep__heap *heaps = ep__load_acquire(&pool->heaps);

	VG_HAPPENS_AFTER(&pool->heaps);
	uint64_t packs_out = 0, allocs = 0, used_in = 0, large_in = 0, lbytes_in = 0;
	uint64_t frees = 0, used_out = 0, large_out = 0, lbytes_out = 0, packs_in = 0;
	uint64_t commit_out = 0, commit_in = 0;

#define READ(field) ep__load_acquire(&h->tally.field)
	/* (within a pass, a count before the one its writer raises after it,
	 * or the other way round, so that large_bytes covers large_allocs) */
	for (const struct ep__heap *h = heaps; h; h = h->next_heap) {
		packs_out += READ(packs_out);
		commit_out += READ(commit_out);
	}
	for (const struct ep__heap *h = heaps; h; h = h->next_heap) {
		allocs += READ(allocs);
		used_in += READ(used_in);
		large_in += READ(large_in);
		lbytes_in += READ(lbytes_in);
	}
	for (const struct ep__heap *h = heaps; h; h = h->next_heap) {
		lbytes_out += READ(lbytes_out);
		large_out += READ(large_out);
		used_out += READ(used_out);
		frees += READ(frees);
		/* (frees by other threads: remote.c) */
		used_out += ep__load_acquire(&h->remote_used_out);
		frees += ep__load_acquire(&h->remote_frees);
	}
	for (const struct ep__heap *h = heaps; h; h = h->next_heap) {
		commit_in += READ(commit_in);
		packs_in += READ(packs_in);
	}
#undef READ
	memset(out, 0, sizeof(*out));
	out->packs = (size_t)(packs_in - packs_out);
	/* committed bytes (commit.c), what the packs cost */
	out->pack_bytes = commit_in > commit_out ? (size_t)(commit_in - commit_out) : 0;
	out->live_allocs = allocs > frees ? (size_t)(allocs - frees) : 0;
	out->used_bytes = used_in > used_out ? (size_t)(used_in - used_out) : 0;
	out->large_allocs = large_in > large_out ? (size_t)(large_in - large_out) : 0;
	if (out->large_allocs > out->live_allocs)
		out->large_allocs = out->live_allocs; /* (both bound what was alive) */
	out->large_bytes = lbytes_in > lbytes_out ? (size_t)(lbytes_in - lbytes_out) : 0;
	return 0;
}

EP_API int ep_backend_probe(enum ep_backend backend, const struct ep_config *cfg, char *why,
			    size_t whylen)
{
	ep__fork_check(); /* (it may take the library's locks: as any call) */
	return ep__backend_probe(backend, cfg, why, whylen);
}

EP_API int ep_pool_trim(struct ep_pool *pool, size_t *released)
{
	if (released)
		*released = 0;
	if (!pool)
		return -EINVAL;
	int rc = call_refused();

	if (rc)
		return rc;
	size_t n = 0;

	/* one heap's lock at a time: the heaps of threads still running are
	 * trimmed as well, between their calls */
	for (struct ep__heap *h = ep__load_acquire(&pool->heaps); h;
	     h = h->next_heap) {
		VG_HAPPENS_AFTER(&pool->heaps);
		n += ep__heap_trim(h);
	}
	if (released)
		*released = n;
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

