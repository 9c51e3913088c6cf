/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * heap.c - one heap: what one thread allocates from, created, cloned and
 * destroyed here, and the calls on it.  The caller picks the heap (api.c)
 * and each call takes that heap's lock; a call on an existing allocation
 * enters the allocation's state (alloc-state.h) while it works.
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "alloc-state.h"
#include "config-open.h"
#include "diag.h"
#include "heap.h"
#include "life.h"
#include "limit.h"
#include "lookup.h"
#include "pack.h"
#include "ranges.h"
#include "records.h"
#include "region.h"
#include "remote.h"
#include "route.h"
#include "small.h"
#include "tally.h"
#include "track.h"

static uint64_t next_random(struct ep__heap *h)
{
	/* xorshift64*: placement randomness, not a secret key */
	uint64_t x = h->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	h->rng = x;
	return x * 2685821657736338717ull;
}

static void seed_random(struct ep__heap *h)
{
	uint64_t s = 0;

	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uintptr_t)h;
	}
	h->rng = s | 1;
}

void ep__heap_each_region(struct ep__heap *h, void (*fn)(struct ep__heap *, struct ep__region *))
{
	for (struct ep__pack *p = h->head; p; p = p->next)
		fn(h, &p->r);
	for (size_t i = 0; i <= h->hash_mask; i++)
		for (struct ep__alloc *a = h->hash[i]; a; a = a->hnext)
			if (!a->pack)
				fn(h, &a->large);
}

/* diag.c: its name, libunwind entry and memcheck chunk go, before its
 * address is anyone else's (a large mapping's range may be taken at once:
 * by another heap in a code range, by anything after munmap). */
static void alloc_undiag(struct ep__heap *h, struct ep__alloc *a, enum ep__freed how)
{
	ep__diag_free(h, &a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec, how);
}

/* The allocation is gone (chunks or mapping given back, diagnostics
 * dropped): its charge against the limit, and its record if any. */
static void alloc_forget(struct ep__heap *h, struct ep__alloc *a)
{
	ep__uncharge(h, a->reserved);
	ep__tally(&h->tally.frees, 1);
	if (!a->norec) {
		ep__rec_forget(h, a); /* life.c: its window, kept staging */
		ep__hash_remove(h, a);
		ep__stage_put(h, a->staging, a->stash_class);
		ep__rec_put(h, a);
	}
}

/*
 * A caller's fill runs with a heap locked (a new pack, a refill at free): a
 * call back into the library from it would wait for that lock forever, so
 * such a call fails with -EDEADLK instead (ep_pool_create(3)).
 */
__thread int ep__in_fill __attribute__((tls_model("initial-exec")));


static void fill_guarded(void *dst, size_t len, void *ctx)
{
	const struct ep__heap *first = ctx;

	ep__in_fill++;
	ep__fill_caller(first->user_fill, dst, len, first->user_fill_ctx);
	ep__in_fill--;
}

/* Lock and random seed. */
static void heap_start(struct ep__heap *h)
{
	seed_random(h);
	ep__lock_init(&h->lock);
	/* (read without the lock, by design: the counts by ep_pool_stats(),
	 * the owner by an exiting thread and by frees from other threads) */
	if (ep__under_valgrind()) {
		VALGRIND_HG_DISABLE_CHECKING(&h->tally, sizeof(h->tally));
		VALGRIND_HG_DISABLE_CHECKING(&h->owner, sizeof(h->owner));
		VALGRIND_HG_DISABLE_CHECKING(&h->orphaned, sizeof(h->orphaned));
	}
	ep__store_relaxed(&h->orphaned, 1); /* (no owner yet) */
}

/* Another heap on the same backend and settings as first. */
struct ep__heap *ep__heap_clone(const struct ep__heap *first)
{
	struct ep__heap *h = ep__small_get(sizeof(*h));

	if (!h)
		return NULL;
	h->hash = ep__small_get(64 * sizeof(*h->hash));
	if (!h->hash) {
		ep__small_put(h, sizeof(*h));
		return NULL;
	}
	h->hash_mask = 63;
	h->ops = first->ops;
	h->be = first->be;
	h->shares_backend = 1;
	h->crange = first->crange;
	h->fill = first->fill;
	h->fill_ctx = first->fill_ctx;
	h->flags = first->flags;
	h->shift = first->shift;
	h->cmask = first->cmask;
	h->slack = first->slack;
	h->limit = first->limit;
	h->purge_ms = first->purge_ms;
	h->pack_size = first->pack_size;
	h->page_size = first->page_size;
	h->root = first->root;
	heap_start(h);
	return h;
}

/* A data region's fill: zeros, as fresh data is (no trap: nothing runs there). */
static void fill_zero(void *dst, size_t len, void *ctx)
{
	(void)ctx;
	memset(dst, 0, len);
}

/* A heap of data packs (ep_alloc_data()) on first's backend: data is EP__GUARD_DATA_RO or _RW. */
struct ep__heap *ep__heap_clone_data(const struct ep__heap *first, unsigned char data)
{
	struct ep__heap *h = ep__heap_clone(first);

	if (h) {
		h->data = data;
		h->fill = fill_zero;
		h->fill_ctx = NULL;
		/* (perf's map and jitdump describe code: data stays out of them) */
		h->flags &= ~(unsigned)(EP_F_PERFMAP | EP_F_JITDUMP);
	}
	return h;
}

int ep__heap_create(const struct ep_config *cfg_in, struct ep__heap **out)
{
	struct ep_config cfg;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;

	struct ep__heap *h = ep__small_get(sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->hash = ep__small_get(64 * sizeof(*h->hash));
	if (!h->hash) {
		ep__small_put(h, sizeof(*h));
		return -ENOMEM;
	}
	h->hash_mask = 63;
	rc = ep__config_open(cfg_in, -1, &cfg, h);
	if (rc) {
		ep__small_put(h->hash, 64 * sizeof(*h->hash));
		ep__small_put(h, sizeof(*h));
		return rc;
	}
#ifdef EP_TEST_HOOKS
	h->ops = ep__test_wrap_backend(h->ops);
#endif
	h->page_size = h->ops->page_size(h->be);
	h->pack_size = cfg.pack_size ? cfg.pack_size : h->ops->default_pack_size(h->be);
	h->fill = ep__fill_default;
	if (cfg.fill) {
		h->user_fill = cfg.fill;
		h->user_fill_ctx = cfg.fill_ctx;
		h->fill = fill_guarded;
		h->fill_ctx = h;
	}
	h->flags = cfg.flags;
	h->shift = (unsigned char)(cfg.chunk_size ? __builtin_ctzll(cfg.chunk_size)
						  : CHUNK_SHIFT_DEFAULT);
	h->cmask = (unsigned char)((1u << h->shift) - 1);
	/* EP_F_RANDOMIZE: exec stays in the first chunk, in 16-byte steps */
	h->slack = (unsigned char)((cfg.flags & EP_F_RANDOMIZE) ? h->cmask + 1 - 16 : 0);
	h->limit = cfg.limit;
	h->purge_ms = ep__purge_delay(cfg.purge_delay_ms);
	heap_start(h);
	*out = h;
	return 0;
}

/* What a destroyed heap kept for lock-free readers (grace.h). */
static void heap_free_late(struct ep__grace *g)
{
	struct ep__heap *h = (struct ep__heap *)((char *)g - offsetof(struct ep__heap, grace));

	while (h->spare_packs) {
		struct ep__pack *p = h->spare_packs;

		h->spare_packs = p->next;
		ep__pack_free(p);
	}
	ep__small_put(h, sizeof(*h));
}

void ep__heap_destroy(struct ep__heap *h)
{
	if (!h)
		return;
	for (size_t i = 0; i <= h->hash_mask; i++) {
		for (struct ep__alloc *a = h->hash[i], *n; a; a = n) {
			n = a->hnext;
			ep__diag_forget(&a->diag); /* diag.c: name, libunwind */
			ep__rec_forget(h, a);
			if (!a->pack) {
				ep__route_clear((uintptr_t)a->large.exec, a->large.size);
				ep__region_drop(h, &a->large);
			}
			ep__stage_free(a->staging, a->stash_class);
			ep__small_put(a, sizeof(*a));
		}
	}
	/* (the pack structs stay for ep_lookup() until heap_free_late()) */
	while (h->head) {
		struct ep__pack *p = h->head;

		h->head = p->next;
		ep__route_clear((uintptr_t)p->r.exec, p->r.size);
		/* (a lookup may still read r.exec: the address goes first, the
		 * mapping through a copy, as pack_release() does) */
		struct ep__region r = p->r;

		ep__store_seq_cst(&p->r.exec, NULL);
		ep__region_drop(h, &r);
		p->next = h->spare_packs;
		h->spare_packs = p;
	}
	for (int k = 0; k < STASH_CLASSES; k++)
		for (unsigned i = 0; i < h->nstash[k]; i++)
			ep__stage_free(h->stash[k][i], k);
	for (struct ep__alloc *a = h->spare_recs, *n; a; a = n) {
		n = a->hnext;
		ep__small_put(a, sizeof(*a));
	}
	ep__diag_pool_destroy(h); /* diag.c: the pool's memcheck mempool */
	if (!h->shares_backend)
		h->ops->close(h->be);
	ep__lock_destroy(&h->lock);
	if (ep__under_valgrind()) {
		VALGRIND_HG_ENABLE_CHECKING(&h->tally, sizeof(h->tally));
		VALGRIND_HG_ENABLE_CHECKING(&h->owner, sizeof(h->owner));
	}
	ep__small_put(h->by_slot, h->cap_slots * sizeof(*h->by_slot));
	ep__small_put(h->fits, 2 * h->cap_slots * sizeof(*h->fits));
	ep__small_put(h->ranges, h->cap_ranges * sizeof(*h->ranges));
	ep__small_put(h->hash, (h->hash_mask + 1) * sizeof(*h->hash));
	/* ep_lookup() may still read the heap and its packs (grace.h) */
	ep__grace_retire(&h->grace, heap_free_late);
}

/*
 * Every call on an existing allocation finds it with the heap's lock held,
 * then enters its state (alloc-state.h) and leaves it when done: a pack
 * allocation that a lock-free ep_free() owns is not live for it, and that
 * free waits while the call works.  Large allocations need only the lock.
 */
static inline int alloc_enter(const struct ep__alloc *a)
{
	return a->pack ? ep__st_enter(a->pack, a->chunk) : 0;
}

static inline void alloc_leave(struct ep__pack *p, size_t c, enum ep__st to)
{
	if (p)
		ep__st_leave(p, c, to);
}

/* What an allocation of size bytes reserves (heap.h). */
size_t ep__heap_reserved(const struct ep__heap *h, size_t size, bool large)
{
	size_t want = size + h->slack; /* (EP_F_RANDOMIZE: chunk - 16 bytes) */

	if (large)
		return ep__round_up(want, h->page_size);
	/* (a mask, not ep__round_up()'s division: the chunk is not a constant) */
	return ((want < h->pack_size ? want : h->pack_size) + h->cmask) & ~(size_t)h->cmask;
}

/* Heap lock held: reserved bytes for a (heap.h), exec a multiple of align
 * (ep_alloc_aligned(); 0 from ep_alloc(), a constant the compiler drops).
 * (Inline in ep_alloc(): a call there cost a churn op 2% more instructions.) */
static inline __attribute__((always_inline)) int reserve(struct ep__heap *h, struct ep__alloc *a,
							 size_t size, size_t reserved, bool large,
							 size_t align)
{
	int rc;
	size_t limit = h->limit;

	if (large) {
		if ((rc = ep__range_reserve(h)))
			return rc;
		a->large.guards = h->data; /* (a data heap's: backend.h) */
		rc = h->ops->map(h->be, reserved, h->fill, h->fill_ctx, &a->large);
		if (rc)
			return rc;
		if (limit && (rc = ep__charge(h->root, reserved))) {
			ep__region_drop(h, &a->large);
			return rc;
		}
		a->key = (uintptr_t)a->large.exec;
		a->reserved = reserved;
		if ((rc = ep__region_seal(h, &a->large)) || (rc = ep__rec_large(h, a)) ||
		    (rc = ep__route_set((uintptr_t)a->large.exec, a->large.size, h))) {
			ep__rec_forget(h, a);
			ep__region_drop(h, &a->large);
			ep__uncharge(h, reserved);
			return rc;
		}
		a->large.gen = ep__fork_generation();
		ep__range_insert(h, &a->large, NULL, a);
		ep__tally(&h->tally.large_in, 1);
		ep__tally(&h->tally.lbytes_in, a->large.size);
	} else {
		struct ep__pack *p;
		size_t n = reserved >> h->shift, pos;

		if (align > (size_t)h->cmask + 1)
			rc = ep__pack_find_aligned(h, n, align >> h->shift, &p, &pos);
		else
			rc = ep__pack_find(h, n, &p, &pos);
		if (rc)
			return rc;
		if (limit && (rc = ep__charge(h->root, reserved))) {
			if (!p->cached && p->free_chunks == p->nchunks)
				ep__pack_emptied(h, p); /* made for this request */
			return rc;
		}
		ep__pack_take(h, p, pos, n);
		a->pack = p;
		a->chunk = pos;
		a->key = (uintptr_t)p->r.exec + (pos << h->shift);
	}
	if (h->flags & EP_F_RANDOMIZE) {
		/* (aligned: steps of align, inside the first chunk, large too) */
		size_t step = align > 16 ? align : 16, slack = reserved - size,
		       slots = slack / step + 1;

		if (slots > ((size_t)h->cmask + 1) / step && (!large || align > 16))
			slots = ((size_t)h->cmask + 1) / step; /* keep exec inside the first chunk */
		if (align > 16 && !slots)
			slots = 1; /* (align past the chunk: exec stays on it) */
		a->offset = (size_t)(next_random(h) % slots) * step;
	}
	if (large && align > h->page_size)
		a->offset = (size_t)-a->key & (align - 1); /* (ep__heap_alloc_aligned() mapped the pad) */
	a->reserved = reserved;
	a->exec = (void *)(a->key + a->offset);
	if (large)
		ep__rec_changed(h, a); /* (its entry has exec now) */
	return 0;
}

int ep__heap_reserve(struct ep__heap *h, struct ep__alloc *a, size_t size, size_t reserved,
		     bool large)
{
	return reserve(h, a, size, reserved, large, 0);
}

/*
 * A code range with no room for another pack (pack.c): h has no pack with
 * room either, but another heap of the pool may, and the range is there
 * for every thread.  fn is tried on each other heap until one has room
 * (fn takes that heap's lock: no two heaps' locks are ever held at once,
 * fork.c), and the allocation is that heap's: route.h names it as owner of
 * the pack, so every later call, from any thread, goes there.  The list
 * of heaps only grows, each published whole (thread.c): it is walked
 * without the pool's lock.
 */
int ep__heap_borrow(struct ep__heap *h, int (*fn)(struct ep__heap *, void *), void *arg)
{
	struct ep__heap *o = ep__load_acquire(&h->root->heaps);
	int rc = -ENOMEM;

	VG_HAPPENS_AFTER(&h->root->heaps);
	for (; o && rc == -ENOMEM; o = o->next_heap) {
		EP_YIELD("heap borrow");
		if (o != h && o->data == h->data) /* (code never in data packs, nor the other way) */
			rc = fn(o, arg);
	}
	return rc;
}

struct alloc_args {
	size_t size, reserved, align;
	struct ep_image *out;
};

/* ep_alloc()'s work in h, from its lock to the fill. */
static inline __attribute__((always_inline)) int alloc_in(struct ep__heap *h, size_t size,
							  size_t reserved, bool large, size_t align,
							  struct ep_image *out)
{
	struct ep__alloc *a = NULL;
	int rc;

	ep__lock(&h->lock);
	ep__remote_drain_check(h);
	if (h->nrecs + 1 > (h->hash_mask + 1) && (rc = ep__hash_grow(h)))
		goto fail;
	rc = -ENOMEM;
	a = ep__rec_get(h);
	if (!a)
		goto fail;
	if (align > EP_STAGE_ALIGN && !large)
		a->staging = ep__stage_get_aligned(h, reserved, align, &a->stash_class);
	else
		a->staging = ep__stage_get(h, reserved, &a->stash_class);
	if (!a->staging)
		goto fail;
	if ((rc = reserve(h, a, size, reserved, large, align)))
		goto fail;
	a->staging = ep__stage_skew(a->staging, a->key);
	ep__hash_insert(h, a);
	ep__tally(&h->tally.allocs, 1);

	unsigned char *staging = a->staging;

	out->exec = a->exec;
	out->rw = staging + a->offset;
	out->size = reserved - a->offset;
	ep__diag_alloc(h, a->exec, out->size); /* diag.c: memcheck mempool chunk */
	ep__unlock(&h->lock);
	/* staging is private until this call returns: fill it unlocked */
	ep__fill_with(h->fill, staging, reserved, h->fill_ctx);
	return 0;
fail:
	if (a) {
		ep__stage_put(h, a->staging, a->stash_class);
		ep__rec_put(h, a);
	}
	ep__unlock(&h->lock);
	return rc;
}

static int alloc_lent(struct ep__heap *o, void *arg)
{
	const struct alloc_args *x = arg;

	return alloc_in(o, x->size, x->reserved, false, x->align, x->out);
}

/* ep_alloc() failed in h: in a full code range, another heap's pack may
 * have room (a large mapping needs room of its own, which no heap has). */
static __attribute__((noinline, cold)) int alloc_failed(struct ep__heap *h, size_t size,
							size_t reserved, size_t align,
							struct ep_image *out, int rc)
{
	struct alloc_args x = { size, reserved, align, out };

	if (rc != -ENOMEM || !h->crange || size > h->pack_size)
		return rc;
	return ep__heap_borrow(h, alloc_lent, &x);
}

/*
 * Threads that share: a heap that has never had a pack of its own (its
 * thread has little code so far) allocates in another heap's packs, as a
 * full code range does (ep__heap_borrow()), until it has so allocated
 * EP__BORROW_MAX bytes; then it takes its own.  Four threads that compile
 * a few small programs each then fill one pack, not four, and their frees,
 * made in the lender's heap, are reused by the next allocation there of
 * any thread (each drains the lender's remote frees under its lock).  A
 * heap with packs lends first; where none has one yet, the pool's first
 * heap makes the pack (under its lock: threads that start at once wait
 * for that one pack instead of each making its own).  Not where
 * EXECPACK_HEAPS caps the heaps (or a backend allows one), nor data heaps.
 */
#define EP__BORROW_MAX ((size_t)256 << 10)

static int alloc_lent_shared(struct ep__heap *o, void *arg)
{
	/* (a hint: a lender whose packs go meanwhile makes one for the
	 * borrower under its own lock, as it would for its thread) */
	EP_YIELD("lender packs");
	if (ep__load_acquire(&o->tally.packs_in) == ep__load_acquire(&o->tally.packs_out))
		return -ENOMEM; /* (no pack to lend: the next heap) */
	return alloc_lent(o, arg);
}

/* 0: allocated in another heap; 1: h takes its own; else the error. */
static __attribute__((noinline, cold)) int alloc_shared(struct ep__heap *h, size_t size,
							 size_t reserved, struct ep_image *out)
{
	struct alloc_args x = { size, reserved, 0, out };

	/* (EXECPACK_HEAPS set: the threads' split is the caller's choice) */
	if (h->data || h->root->max_heaps || ep__load_relaxed(&h->borrowed) >= EP__BORROW_MAX)
		return 1;
	int rc = ep__heap_borrow(h, alloc_lent_shared, &x);
	struct ep__heap *first = h->root->first;

	if (rc == -ENOMEM && first != h && !first->data)
		rc = alloc_lent(first, &x);
	if (rc)
		return rc == -ENOMEM ? 1 : rc;
	ep__add_relaxed(&h->borrowed, reserved);
	return 0;
}

int ep__heap_alloc(struct ep__heap *h, size_t size, struct ep_image *out)
{
	if (!h || !out || size == 0)
		return -EINVAL;
	if (size > SIZE_MAX / 2)
		return -ENOMEM;

	bool large = size > h->pack_size;
	size_t reserved = ep__heap_reserved(h, size, large);

	if (h->limit && reserved > h->limit)
		return -EPERM; /* could never fit */
	int rc;

	/* (a heap that never had a pack: one load on the common path) */
	if (__builtin_expect(!ep__load_relaxed(&h->tally.packs_in), 0) && !large &&
	    (rc = alloc_shared(h, size, reserved, out)) <= 0)
		return rc;
	rc = alloc_in(h, size, reserved, large, 0, out);

	/* (a call, out of line: the path that succeeds keeps its instructions) */
	if (__builtin_expect(rc != 0, 0))
		rc = alloc_failed(h, size, reserved, 0, out, rc);
	return rc;
}

/*
 * ep_alloc_aligned(): up to the chunk size ep_alloc() itself (with
 * EP_F_RANDOMIZE past 16 bytes, its offsets in steps of align); in a pack
 * up to the backend's page, by aligned first fit (pack.c); a large
 * allocation up to the pack size, its mapping align - page bytes longer
 * and exec the aligned address inside it.
 */
int ep__heap_alloc_aligned(struct ep__heap *h, size_t size, size_t align, struct ep_image *out)
{
	if (!h || !out || size == 0 || (align & (align - 1)))
		return -EINVAL;
	if (align <= 16 || (align <= (size_t)h->cmask + 1 && !(h->flags & EP_F_RANDOMIZE)))
		return ep__heap_alloc(h, size, out);
	if (size > SIZE_MAX / 2)
		return -ENOMEM;

	bool large = size > h->pack_size;

	if (align > (large ? h->pack_size : h->page_size))
		return -EINVAL;
	size_t reserved = ep__heap_reserved(h, size, large);

	if (large && align > h->page_size)
		reserved += align - h->page_size;
	if (h->limit && reserved > h->limit)
		return -EPERM;
	int rc = alloc_in(h, size, reserved, large, align, out);

	if (rc)
		rc = alloc_failed(h, size, reserved, align, out, rc);
	return rc;
}

int ep__heap_write(struct ep__heap *h, void *dst, const void *src, size_t len)
{
	if (!h || !dst || (!src && len))
		return -EINVAL;

	int rc;
	struct ep__alloc view;

	ep__lock(&h->lock);
	struct ep__alloc *a = ep__alloc_containing(h, (uintptr_t)dst, &view);
	uintptr_t d = (uintptr_t)dst;

	if (!a || len > a->key + a->reserved - d) {
		rc = -EINVAL;
	} else if ((rc = alloc_enter(a)) == 0) {
		if (len == 0) {
			/* nothing to write: the allocation is live */
		} else if (a->staging) {
			memcpy(a->staging + (d - a->key), src, len);
		} else {
			struct ep__region *r = ep__alloc_region(a);

			rc = ep__own_region(h, r);
			EP_YIELD("code write");
			if (!rc)
				rc = ep__region_write(h, r, d - (uintptr_t)r->exec, src, len);
			if (!rc)
				ep__code_changed(dst, len);
		}
		alloc_leave(a->pack, a->chunk, ep__st_as_is(a));
	}
	ep__unlock(&h->lock);
	return rc;
}

/* ep_finalize()'s work: one bulk copy, then one coherence step for the
 * whole range. */
static int copy_in(struct ep__heap *h, struct ep__alloc *a)
{
	EP_YIELD("code write");
	int rc = ep__region_write(h, ep__alloc_region(a), ep__alloc_region_off(a), a->staging,
				  a->reserved);

	if (rc)
		return rc;
	ep__code_changed((void *)a->key, a->reserved);
	/* diag.c: libunwind registration, perf map, memcheck */
	ep__diag_finalize(h, &a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec,
			  h->flags);
	return 0;
}

/* ep_free()'s work on a finalized pack allocation: traps where it was, so
 * that a stale jump there stops. */
static int refill(struct ep__heap *h, struct ep__alloc *a)
{
	EP_YIELD("code write");
	int rc = ep__region_fill(h, &a->pack->r, a->chunk << h->shift, a->reserved);

	if (!rc)
		ep__code_changed((void *)a->key, a->reserved);
	return rc;
}

int ep__heap_finalize(struct ep__heap *h, struct ep__pack *hint, void *exec)
{
	if (!h || !exec)
		return -EINVAL;

	int rc;
	struct ep__alloc view;

	ep__lock(&h->lock);
	struct ep__alloc *a = ep__alloc_exact(h, hint, exec, &view);

	if (!a || !a->staging) {
		rc = -EINVAL; /* not live, or finalized already */
		goto out;
	}
	if ((rc = alloc_enter(a)))
		goto out;
	struct ep__pack *p = a->pack;
	size_t c = a->chunk;

	rc = ep__rec_finalizing(h, a); /* life.c: what EP_F_KEEP_STAGING keeps */
	if (!rc)
		rc = ep__own_region(h, ep__alloc_region(a));
	if (!rc)
		rc = copy_in(h, a);
	if (rc) {
		/* staging kept: nothing is lost, the caller may retry or free */
		alloc_leave(p, c, EP__ST_REC);
		goto out;
	}
	ep__rec_finalized(h, a); /* the staging buffer given back or kept */
	alloc_leave(p, c, ep__rec_settle(h, a));
out:
	ep__unlock(&h->lock);
	return rc;
}

static int group_order(const void *x, const void *y)
{
	const struct ep__group_item *a = x, *b = y;

	if (a->h != b->h)
		return (uintptr_t)a->h < (uintptr_t)b->h ? -1 : 1;
	if (a->exec != b->exec)
		return (uintptr_t)a->exec < (uintptr_t)b->exec ? -1 : 1;
	return 0;
}

/* Every heap of the group locked.  Two at once only under the pool's
 * heaps_lock: the fork handlers take every pool's first (fork.c), and no
 * other thread ever holds two heap locks, so none waits for this one. */
static void group_lock(struct ep__group_item *m, size_t n, bool many)
{
	if (many)
		ep__mutex_lock(&m[0].h->root->heaps_lock);
	for (size_t i = 0; i < n; i++)
		if (!i || m[i].h != m[i - 1].h)
			ep__lock(&m[i].h->lock);
}

static void group_unlock(struct ep__group_item *m, size_t n, bool many)
{
	for (size_t i = n; i-- > 0;)
		if (!i || m[i].h != m[i - 1].h)
			ep__unlock(&m[i].h->lock);
	if (many)
		ep__mutex_unlock(&m[0].h->root->heaps_lock);
}

/* The members entered so far go back to staged (REC, as they were). */
static void group_leave(struct ep__group_item *m, size_t n)
{
	for (size_t i = 0; i < n; i++)
		alloc_leave(m[i].a->pack, m[i].a->chunk, EP__ST_REC);
}

/*
 * ep_finalize_group()'s work, in two phases under every member's heap
 * lock.  First all that can fail, member by member: each found staged and
 * entered, what kept staging needs made, its region made ours after a
 * fork, its staging copied into place.  No member is finalized by any of
 * it: ep_lookup() (no lock) reads it staged until its staging buffer goes
 * and its state or entry says finalized, so an error leaves every member
 * staged, and the bytes already copied are refilled with traps, as a
 * staged allocation's chunks held them (only a refill that fails too
 * leaves them, as a failed ep_finalize() leaves a partial copy).  Then the
 * publication, which cannot fail: diagnostics, staging given back or
 * kept, the record settled, member by member.
 */
int ep__heap_finalize_group(struct ep__group_item *m, size_t n)
{
	size_t entered = 0, copied = 0;
	bool many = false;
	int rc = 0;

	qsort(m, n, sizeof(*m), group_order);
	for (size_t i = 1; i < n; i++) {
		if (m[i].exec == m[i - 1].exec)
			return -EINVAL; /* one allocation twice */
		many |= m[i].h != m[i - 1].h;
	}
	group_lock(m, n, many);
	for (size_t i = 0; i < n; i++) {
		struct ep__alloc view;

		m[i].a = ep__alloc_exact(m[i].h, m[i].hint, m[i].exec, &view);
		if (!m[i].a || !m[i].a->staging) {
			rc = -EINVAL; /* not live, or finalized already */
			goto undo;
		}
	}
	for (; entered < n; entered++) {
		struct ep__alloc *a = m[entered].a;

		if ((rc = alloc_enter(a)))
			goto undo;
		rc = ep__rec_finalizing(m[entered].h, a); /* life.c: what is kept */
		if (!rc)
			rc = ep__own_region(m[entered].h, ep__alloc_region(a));
		if (rc) {
			entered++;
			goto undo;
		}
	}
	for (; copied < n; copied++) {
		struct ep__alloc *a = m[copied].a;

		EP_YIELD("code write");
		rc = ep__region_write(m[copied].h, ep__alloc_region(a), ep__alloc_region_off(a),
				      a->staging, a->reserved);
		if (rc)
			goto undo;
		ep__code_changed((void *)a->key, a->reserved);
	}
	for (size_t i = 0; i < n; i++) {
		struct ep__heap *h = m[i].h;
		struct ep__alloc *a = m[i].a;
		struct ep__pack *p = a->pack;
		size_t c = a->chunk;

		EP_YIELD("group publish");
		ep__diag_finalize(h, &a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec,
				  h->flags);
		ep__rec_finalized(h, a); /* the staging buffer given back or kept */
		alloc_leave(p, c, ep__rec_settle(h, a));
	}
	group_unlock(m, n, many);
	return 0;
undo:
	while (copied-- > 0) {
		struct ep__alloc *a = m[copied].a;

		EP_YIELD("code write");
		if (!ep__region_fill(m[copied].h, ep__alloc_region(a), ep__alloc_region_off(a),
				     a->reserved))
			ep__code_changed((void *)a->key, a->reserved);
	}
	group_leave(m, entered);
	group_unlock(m, n, many);
	return rc;
}

/* ep_keep_staging(), ep_release_staging(): a's kept staging (life.c). */
static int staging_call(struct ep__heap *h, struct ep__pack *hint, void *exec, bool keep)
{
	struct ep__alloc view;
	int rc;

	ep__lock(&h->lock);
	struct ep__alloc *a = ep__alloc_exact(h, hint, exec, &view);

	if (!a || a->norec || (keep && !a->staging)) {
		/* not live; a view has nothing kept; too late to keep */
		rc = -EINVAL;
		goto out;
	}
	if ((rc = alloc_enter(a)))
		goto out;
	struct ep__pack *p = a->pack;
	size_t c = a->chunk;

	rc = keep ? ep__rec_keep_staging(h, a) : ep__rec_release_staging(h, a);
	alloc_leave(p, c, ep__rec_settle(h, a));
out:
	ep__unlock(&h->lock);
	return rc;
}

int ep__heap_keep_staging(struct ep__heap *h, struct ep__pack *hint, void *exec)
{
	return h && exec ? staging_call(h, hint, exec, true) : -EINVAL;
}

int ep__heap_release_staging(struct ep__heap *h, struct ep__pack *hint, void *exec)
{
	return h && exec ? staging_call(h, hint, exec, false) : -EINVAL;
}

int ep__heap_free(struct ep__heap *h, struct ep__pack *hint, void *exec)
{
	if (!h || !exec)
		return -EINVAL;

	int rc = 0;
	struct ep__alloc view;

	ep__lock(&h->lock);
	struct ep__alloc *a = ep__alloc_exact(h, hint, exec, &view);

	if (!a || (rc = alloc_enter(a))) {
		rc = -EINVAL;
		goto out;
	}
	if (a->pack) {
		if (!a->staging) {
			/* finalized: refill so a stale jump here traps */
			rc = ep__own_region(h, &a->pack->r);
			if (!rc)
				rc = refill(h, a);
			if (rc) {
				/* still live and intact; the caller may retry */
				alloc_leave(a->pack, a->chunk, ep__st_as_is(a));
				goto out;
			}
		}
		ep__pack_give_back(h, a->pack, a->chunk, a->reserved >> h->shift, EP__GIVE_FREE);
		alloc_undiag(h, a, EP__FREED_MAPPED);
	} else {
		if (a->large.sealed && (rc = ep__own_region(h, &a->large)))
			goto out; /* its refill could not be done: still live */
		ep__range_remove(h, &a->large);
		ep__route_clear((uintptr_t)a->large.exec, a->large.size);
		ep__tally(&h->tally.large_out, 1);
		ep__tally(&h->tally.lbytes_out, a->large.size);
		void *gone = a->large.exec;
		size_t len = a->large.size;

		alloc_undiag(h, a, EP__FREED_UNMAPPED);
		ep__region_drop(h, &a->large);
		/* unmapped: nothing for the CPU's caches; Valgrind must not run
		 * its old translations of whatever is mapped here next */
		if (ep__under_valgrind())
			VALGRIND_DISCARD_TRANSLATIONS(gone, len);
	}
	alloc_forget(h, a);
out:
	ep__unlock(&h->lock);
	return rc;
}

/*
 * ep_shrink()'s work: keep [exec, exec+size), give back the whole chunks
 * past it.  Finalized bytes are refilled with traps before they are given
 * back.  Before ep_finalize() the chunks still hold the fill (code reaches
 * a pack only through copy_in(), which copies reserved bytes, so the
 * staging buffer's tail is simply never copied).  A large allocation keeps
 * its mapping: whole pages past size are refilled and no longer handed out
 * or charged, but stay mapped until ep_free() (ep_shrink(3)).
 */
int ep__heap_shrink(struct ep__heap *h, void *exec, size_t size)
{
	if (!h || !exec || size == 0)
		return -EINVAL;

	int rc = 0;
	struct ep__alloc view;

	ep__lock(&h->lock);
	struct ep__alloc *a = ep__alloc_exact(h, NULL, exec, &view);

	if (!a || size > a->reserved - a->offset) {
		rc = -EINVAL; /* not live, or a size it never had: never grows */
		goto out;
	}
	size_t keep = a->pack ? (a->offset + size + h->cmask) & ~(size_t)h->cmask
			      : ep__round_up(a->offset + size, h->page_size);

	if (keep >= a->reserved) {
		/* nothing whole to give back; diag.c: names end at size */
		ep__diag_shrink(h, &a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec,
				a->key + a->reserved - (uintptr_t)a->exec, size, h->flags);
		goto out;
	}
	if ((rc = ep__rec_shrink_check(a, keep)) || (rc = alloc_enter(a)))
		goto out; /* (a window open past keep: -EBUSY) */
	size_t cut = a->reserved - keep;
	struct ep__region *r = ep__alloc_region(a);

	if (!a->staging) {
		rc = ep__own_region(h, r);
		EP_YIELD("code write");
		if (!rc)
			rc = ep__region_fill(h, r, ep__alloc_region_off(a) + keep, cut);
		if (rc) {
			alloc_leave(a->pack, a->chunk, ep__st_as_is(a));
			goto out; /* still whole and intact */
		}
		ep__code_changed((void *)(a->key + keep), cut);
	}
	ep__diag_shrink(h, &a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec,
			a->key + keep - (uintptr_t)a->exec, size, h->flags);
	if (a->pack) {
		ep__pack_give_back(h, a->pack, a->chunk + (keep >> h->shift), cut >> h->shift, EP__GIVE_TAIL);
		ep__st_resize(a->pack, a->chunk, keep >> h->shift);
	}
	a->reserved = keep; /* (a view is dropped: its end is where the chunks now stop) */
	ep__rec_changed(h, a);
	ep__uncharge(h, cut);
	alloc_leave(a->pack, a->chunk, ep__st_as_is(a));
out:
	ep__unlock(&h->lock);
	return rc;
}

/*
 * Attach a name or unwind info: the allocation at exec, entered, gets a
 * record (diag.c keeps a pointer in it) and fn is called with the heap
 * locked; the record goes again if nothing was attached after all.
 */
static int with_record(struct ep__heap *h, void *exec,
		       int (*fn)(struct ep__heap *, struct ep__alloc *, void *), void *arg)
{
	struct ep__alloc view;
	int rc;

	ep__lock(&h->lock);
	struct ep__alloc *a = ep__alloc_exact(h, NULL, exec, &view);

	if (!a || (rc = alloc_enter(a))) {
		rc = -EINVAL;
		goto out;
	}
	struct ep__pack *p = a->pack;
	size_t c = a->chunk;
	struct ep__alloc *kept = ep__rec_keep(h, a);

	if (!kept) {
		alloc_leave(p, c, EP__ST_PLAIN); /* (only a view lacks one) */
		rc = -ENOMEM;
		goto out;
	}
	rc = fn(h, kept, arg);
	alloc_leave(p, c, ep__rec_settle(h, kept));
out:
	ep__unlock(&h->lock);
	return rc;
}

struct name_args {
	const char *name;
	size_t size; /* ep_set_name_size()'s, or 0 */
};

static int name_it(struct ep__heap *h, struct ep__alloc *a, void *arg)
{
	const struct name_args *n = arg;

	return ep__diag_set_name(&a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec,
				 !a->staging, h->flags | (h->data ? EP__DIAG_DATA : 0), n->name,
				 n->size);
}

int ep__heap_set_name(struct ep__heap *h, void *exec, const char *name, size_t size)
{
	struct name_args n = { name, size };

	if (!h || !exec || !name)
		return -EINVAL;
	return with_record(h, exec, name_it, &n);
}

struct syms_args {
	const struct ep_symbol *syms;
	size_t n;
};

static int syms_it(struct ep__heap *h, struct ep__alloc *a, void *arg)
{
	const struct syms_args *y = arg;

	return ep__diag_set_symbols(&a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec,
				    !a->staging, h->flags | (h->data ? EP__DIAG_DATA : 0), y->syms,
				    y->n);
}

int ep__heap_set_symbols(struct ep__heap *h, void *exec, const struct ep_symbol *syms, size_t n)
{
	struct syms_args y = { syms, n };

	if (!h || !exec || (!syms && n))
		return -EINVAL;
	return with_record(h, exec, syms_it, &y);
}

struct unwind_args {
	int kind;
	size_t prologue, frame;
};


static int unwind_it(struct ep__heap *h, struct ep__alloc *a, void *arg)
{
	const struct unwind_args *u = arg;

	if (h->data)
		return -EINVAL; /* (data: no frame of code is ever in it) */
	return ep__diag_set_unwind(&a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec,
				   !a->staging, u->kind, u->prologue, u->frame);
}

int ep__heap_set_unwind(struct ep__heap *h, void *exec, int kind, size_t prologue,
			 size_t frame)
{
	if (!h || !exec)
		return -EINVAL;

	struct unwind_args u = { kind, prologue, frame };

	return with_record(h, exec, unwind_it, &u);
}
