/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * heap.c - one heap: its packs (first fit in creation order, as the
 * kernel's bpf_prog_pack does), its large mappings, the allocation table
 * and the staging buffers, and the calls on them; the caller picks the heap
 * (api.c) and each call here takes that heap's lock.
 *
 * No metadata lives in executable memory: each pack has two out-of-band
 * bitmaps, "used" (chunk is allocated) and "start" (an allocation begins
 * here).  Within a heap, an address is resolved by a binary search over the
 * address ranges of its regions (never by masking: packs are not aligned to
 * their size), then the start bitmap.
 *
 * Records: an allocation being staged, named, given unwind info or placed
 * at a random offset, or a large one, has a record in a hash table keyed by
 * the address of its first chunk.  A finalized plain pack allocation has
 * none: its two bitmaps say all there is (it begins at a start bit and runs
 * to the next start bit or free chunk).  With 10,000 live programs the
 * records were megabytes that every ep_free() missed in cache; now the
 * table holds a few hot entries.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "diag.h"
#include "pool.h"
#include "route.h"
#include "track.h"

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
#define SYS_mseal EP__ARCH_SYS_MSEAL
#endif

int ep__mseal(void *addr, size_t len)
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
	int rc = ep__mseal(r->exec, r->size);

	if (rc == 0)
		r->sealed = 1;
	return rc;
}

static void code_changed(void *addr, size_t len);

/* Drop a region; a sealed one is first refilled, as its exec view stays. */
static void region_drop(struct ep__sub *pool, struct ep__region *r)
{
	/* (not when inherited across fork(): the other process still runs it) */
	if (r->sealed && r->gen == ep__fork_generation() &&
	    pool->ops->fill(pool->be, r, 0, r->size, pool->fill, pool->fill_ctx) == 0)
		code_changed(r->exec, r->size);
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
	if (a->pack && !ep__bitmap_test(a->pack->recs, a->chunk)) {
		ep__pack_write_begin(a->pack);
		ep__bitmap_set(a->pack->recs, a->chunk, 1);
		ep__pack_write_end(a->pack);
	}
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
	if (a->pack && ep__bitmap_test(a->pack->recs, a->chunk)) {
		ep__pack_write_begin(a->pack);
		ep__bitmap_clear(a->pack->recs, a->chunk, 1);
		ep__pack_write_end(a->pack);
	}
}

void ep__heap_each_region(struct ep__sub *pool, void (*fn)(struct ep__sub *, struct ep__region *))
{
	for (struct ep__pack *p = pool->head; p; p = p->next)
		fn(pool, &p->r);
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

/*
 * First fit over hundreds of packs walked them all in creation order; the
 * walk was what grew with the live set.  The packs now also sit in slots
 * in creation order under a max tree (the per-pack summary's idea, one
 * level up): the first slot whose leaf is at least n is found in
 * O(log packs).  A leaf is an upper bound of its pack's longest free run,
 * kept cheap on the hot path: a give-back raises it to the run it
 * creates (so it stays exact if it was), a take leaves it as it is, and a
 * search that finds a pack cannot fit after all lowers it to the truth and
 * goes on; each take makes at most one leaf stale, so the misses are paid
 * for in advance.
 */
static void fits_set(struct ep__sub *pool, size_t slot, uint32_t v)
{
	size_t i = pool->cap_slots + slot;

	pool->fits[i] = v;
	for (i /= 2; i; i /= 2) {
		uint32_t l = pool->fits[2 * i], r = pool->fits[2 * i + 1];
		uint32_t m = l > r ? l : r;

		if (pool->fits[i] == m)
			break; /* the nodes above depend on nothing else */
		pool->fits[i] = m;
	}
}

static uint32_t fits_get(const struct ep__sub *pool, size_t slot)
{
	return pool->fits[pool->cap_slots + slot];
}

/* The first slot whose bound is at least n; SIZE_MAX when none. */
static size_t fits_first(const struct ep__sub *pool, size_t n)
{
	if (!pool->cap_slots || pool->fits[1] < n)
		return SIZE_MAX;
	size_t i = 1;

	while (i < pool->cap_slots)
		i = pool->fits[2 * i] >= n ? 2 * i : 2 * i + 1;
	return i - pool->cap_slots;
}

/*
 * Room for one more slot, made before a pack is mapped so that adding it
 * cannot fail: released packs' slots are squeezed out (order kept), and
 * the arrays doubled when the live packs fill more than half of them.
 */
static int slots_reserve(struct ep__sub *pool)
{
	if (pool->nslots < pool->cap_slots)
		return 0;
	size_t cap = pool->cap_slots ? pool->cap_slots : 8;

	if (pool->npacks >= cap / 2)
		cap *= 2;
	struct ep__pack **bs = malloc(cap * sizeof(*bs));
	uint32_t *fits = calloc(2 * cap, sizeof(*fits));

	if (!bs || !fits) {
		free(bs);
		free(fits);
		return -ENOMEM;
	}
	size_t k = 0;

	for (size_t i = 0; i < pool->nslots; i++) {
		struct ep__pack *p = pool->by_slot[i];

		if (!p)
			continue;
		fits[cap + k] = fits_get(pool, i);
		p->slot = k;
		bs[k++] = p;
	}
	for (size_t i = cap - 1; i >= 1; i--)
		fits[i] = fits[2 * i] > fits[2 * i + 1] ? fits[2 * i] : fits[2 * i + 1];
	free(pool->by_slot);
	free(pool->fits);
	pool->by_slot = bs;
	pool->fits = fits;
	pool->cap_slots = cap;
	pool->nslots = k;
	return 0;
}

static void slot_add(struct ep__sub *pool, struct ep__pack *p)
{
	p->slot = pool->nslots++;
	pool->by_slot[p->slot] = p;
	pool->npacks++;
	fits_set(pool, p->slot, (uint32_t)p->nchunks);
}

static void slot_remove(struct ep__sub *pool, struct ep__pack *p)
{
	fits_set(pool, p->slot, 0);
	pool->by_slot[p->slot] = NULL;
	pool->npacks--;
	while (pool->nslots && !pool->by_slot[pool->nslots - 1])
		pool->nslots--; /* the newest went: its slot is reused */
}

/*
 * After chunks [pos, pos+n) of p were freed: the run they are part of is
 * the only new one, so the bound becomes the larger of the two.  The run's
 * ends are looked for in two words on each side only (a scan would cost
 * as much as the free stretch is long); an end not found there is taken
 * to be the pack's end, and no run is longer than the free chunks, so the
 * bound stays a bound.
 */
static void fits_raise(struct ep__sub *pool, struct ep__pack *p, size_t pos, size_t n)
{
	uint32_t b = fits_get(pool, p->slot);

	if (b >= p->free_chunks)
		return;
	size_t lo = 0, hi = p->nchunks, end = pos + n;

	if (pos) {
		size_t w = (pos - 1) / 64;
		uint64_t m = p->used[w] & (~(uint64_t)0 >> (63 - (pos - 1) % 64));

		if (!m && w) {
			w--;
			m = p->used[w];
		}
		if (m)
			lo = w * 64 + 64 - (size_t)__builtin_clzll(m);
	}
	if (end < p->nchunks) {
		size_t w = end / 64;
		uint64_t m = p->used[w] & (~(uint64_t)0 << (end % 64));

		if (!m && w + 1 < EP__BITMAP_WORDS(p->nchunks)) {
			w++;
			m = p->used[w];
		}
		if (m)
			hi = w * 64 + (size_t)__builtin_ctzll(m);
	}
	size_t run = hi - lo < p->free_chunks ? hi - lo : p->free_chunks;

	if (run > b)
		fits_set(pool, p->slot, (uint32_t)run);
}

static void pack_release(struct ep__sub *pool, struct ep__pack *p)
{
	slot_remove(pool, p);
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
	ep__tally(&pool->tally.packs_out, 1);
	ep__tally(&pool->tally.commit_out, p->r.committed);
	region_drop(pool, &p->r);
	ep__fit_destroy(&p->fit);
	/* kept (struct ep__pack): a racing reader sees another seq, and no
	 * stale address stays for memcheck's leak scan */
	ep__pack_write_begin(p);
	memset(&p->r, 0, sizeof(p->r));
	ep__pack_write_end(p);
	p->next = pool->spare_packs;
	pool->spare_packs = p;
}

static void pack_free(struct ep__pack *p)
{
	ep__fit_destroy(&p->fit);
	free(p->used); /* (one block: see pack_get) */
	free(p);
}

/* A pack struct with clear maps: a spare, or a new one. */
static struct ep__pack *pack_get(struct ep__sub *pool)
{
	size_t nchunks = pool->pack_size / CHUNK, words = EP__BITMAP_WORDS(nchunks);
	size_t sum = EP__BITMAP_WORDS(words);
	struct ep__pack *p = pool->spare_packs;

	/* used, start, recs, done, done_sum; then freeing, a byte a chunk */
	size_t bytes = (4 * words + sum) * sizeof(uint64_t) + nchunks;

	if (p) {
		pool->spare_packs = p->next;
		p->next = p->prev = NULL;
		memset(p->used, 0, bytes);
		return p;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->used = calloc(1, bytes);
	if (!p->used) {
		free(p);
		return NULL;
	}
	p->start = p->used + words;
	p->recs = p->start + words;
	p->done = p->recs + words;
	p->done_sum = p->done + words;
	p->freeing = (unsigned char *)(p->done_sum + sum);
	p->heap = pool;
	p->nchunks = nchunks;
	return p;
}

static int pack_new(struct ep__sub *pool, size_t n, struct ep__pack **out)
{
	struct ep__pack *p = pack_get(pool);
	int rc = -ENOMEM;

	if (!p)
		return -ENOMEM;
	p->free_chunks = p->first_free = 0;
	p->cached = 0;
	if (range_reserve(pool) || slots_reserve(pool))
		goto fail;
	if ((rc = ep__pack_map(pool, p, n))) /* (commit.c: sets nchunks) */
		goto fail;
	if (ep__fit_init(&p->fit, p->used, p->nchunks) || (rc = seal_region(pool, &p->r))) {
		ep__tally(&pool->tally.commit_out, p->r.committed);
		rc = rc ? rc : -ENOMEM;
		pool->ops->unmap(pool->be, &p->r);
		goto fail;
	}
	if ((rc = ep__route_set((uintptr_t)p->r.exec, p->r.size, ep__route_pack(p)))) {
		ep__tally(&pool->tally.commit_out, p->r.committed);
		region_drop(pool, &p->r);
		goto fail;
	}
	p->r.gen = ep__fork_generation();
	p->free_chunks = p->nchunks;
	range_insert(pool, &p->r, p, NULL);
	slot_add(pool, p);
	p->prev = pool->tail;
	if (pool->tail)
		pool->tail->next = p;
	else
		pool->head = p;
	pool->tail = p;
	ep__tally(&pool->tally.packs_in, 1);
	*out = p;
	return 0;
fail:
	ep__fit_destroy(&p->fit);
	memset(&p->r, 0, sizeof(p->r));
	p->next = pool->spare_packs;
	pool->spare_packs = p;
	return rc;
}

/*
 * First fit over packs in creation order; *pos gets the chunk index.  The
 * max tree over the packs finds the first that may fit n (see fits_set()),
 * and that pack's summary (bitmap.h) the lowest fitting run, however
 * fragmented the pack is.
 */
static int pack_find(struct ep__sub *pool, size_t n, struct ep__pack **outp, size_t *pos)
{
	unsigned gen = ep__fork_generation();
	size_t slot;

	while ((slot = fits_first(pool, n)) != SIZE_MAX) {
		struct ep__pack *p = pool->by_slot[slot];

		if (p->free_chunks < n) {
			fits_set(pool, slot, (uint32_t)p->free_chunks); /* still a bound */
			continue;
		}
		if (p->r.sealed && p->r.gen != gen) {
			/* inherited across fork and sealed: frozen for good */
			fits_set(pool, slot, 0);
			continue;
		}
		/* No chunk below first_free is free, so a long enough run that
		 * starts there is the first fit: no need to consult the tree. */
		size_t ff = p->first_free;

		if (n <= p->nchunks - ff && ep__bitmap_next_set(p->used, ff + n, ff) >= ff + n) {
			*outp = p;
			*pos = ff;
			return 0;
		}
		size_t longest, at;

		ep__fit_flush(&p->fit, p->used);
		if ((at = ep__fit_find(&p->fit, p->used, n, &longest)) >= p->fit.nbits) {
			fits_set(pool, slot, (uint32_t)longest);
			continue;
		}
		*outp = p;
		*pos = at;
		return 0;
	}
	/* No room in what is committed: the newest pack grows first (commit.c;
	 * only the newest can be part-committed), then search again. */
	if (pool->tail && ep__pack_grow(pool, pool->tail, n) == 0) {
		fits_set(pool, pool->tail->slot, (uint32_t)pool->tail->free_chunks);
		return pack_find(pool, n, outp, pos);
	}
	int rc = pack_new(pool, n, outp);

	*pos = 0;
	return rc;
}

static void pack_take(struct ep__sub *pool, struct ep__pack *p, size_t pos, size_t n)
{
	if (p->cached) {
		p->cached = 0;
		if (pool->cached_pack == p)
			pool->cached_pack = NULL;
		__atomic_fetch_sub(&pool->root->empty_packs, 1, __ATOMIC_RELAXED);
	}
	/* (a record from the start: ep__heap_alloc() gives it one) */
	ep__pack_write_begin(p);
	ep__bitmap_set(p->recs, pos, 1);
	ep__bitmap_set(p->start, pos, 1);
	ep__bitmap_set(p->used, pos, n);
	ep__pack_write_end(p);
	ep__fit_mark(&p->fit, pos, n);
	if (pos == p->first_free)
		p->first_free = ep__bitmap_next_zero(p->used, p->nchunks, pos + n);
	p->free_chunks -= n;
	ep__tally(&pool->tally.used_in, n * CHUNK);
}

static void pack_emptied(struct ep__sub *pool, struct ep__pack *p);

/* (counted: not for a remote free, which counted itself; remote.c.  rec:
 * an allocation with a record starts at pos; without one its bit in recs
 * is clear already, and the line it lies on is not touched) */
static void pack_give_back(struct ep__sub *pool, struct ep__pack *p, size_t pos, size_t n,
			   bool counted, bool rec)
{
	ep__pack_write_begin(p);
	ep__bitmap_clear(p->used, pos, n);
	ep__bitmap_clear(p->start, pos, 1);
	if (rec)
		ep__bitmap_clear(p->recs, pos, 1);
	ep__pack_write_end(p);
	ep__fit_mark(&p->fit, pos, n);
	if (pos < p->first_free)
		p->first_free = pos;
	p->free_chunks += n;
	fits_raise(pool, p, pos, n);
	if (!counted)
		ep__tally(&pool->tally.used_out, n * CHUNK);
	if (p->free_chunks == p->nchunks)
		pack_emptied(pool, p);
}

/*
 * An empty pack is kept against alloc/free churn: one per heap while its
 * thread runs (a thread that JITs and frees one program at a time would
 * otherwise map, fill and unmap a pack for each), one per pool otherwise;
 * a heap's is given back when its thread exits (ep__heap_trim()).  Others
 * are released; a sealed one cannot be.
 */
static void pack_emptied(struct ep__sub *pool, struct ep__pack *p)
{
	size_t none = 0;

	if (p->r.sealed) {
		__atomic_fetch_add(&pool->root->empty_packs, 1, __ATOMIC_RELAXED);
		p->cached = 1;
	} else if (!pool->cached_pack && !ep__heap_orphaned(pool)) {
		__atomic_fetch_add(&pool->root->empty_packs, 1, __ATOMIC_RELAXED);
		p->cached = 1;
		pool->cached_pack = p;
	} else if (__atomic_compare_exchange_n(&pool->root->empty_packs, &none, 1, false,
					       __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		p->cached = 1;
		if (!pool->cached_pack)
			pool->cached_pack = p;
	} else {
		pack_release(pool, p);
	}
}

/* The heap's thread has exited: its empty pack goes, unless it is the last
 * one the pool keeps; and what other threads freed comes back. */
void ep__heap_trim(struct ep__sub *pool)
{
	ep__lock(&pool->lock);
	ep__heap_drain_check(pool);
	struct ep__pack *p = pool->cached_pack;

	if (p && __atomic_load_n(&pool->root->empty_packs, __ATOMIC_RELAXED) > 1) {
		p->cached = 0;
		pool->cached_pack = NULL;
		__atomic_fetch_sub(&pool->root->empty_packs, 1, __ATOMIC_RELAXED);
		pack_release(pool, p);
	}
	ep__unlock(&pool->lock);
}

static size_t alloc_end(const struct ep__pack *p, size_t pos);

/*
 * What other threads freed without the lock (remote.c) and refilled: give
 * it back.  A pack is taken off the list before its maps are read, so a
 * free that lands meanwhile queues the pack again.
 */
void ep__heap_drain(struct ep__sub *pool)
{
	struct ep__pack *p = __atomic_exchange_n(&pool->remote, NULL, __ATOMIC_ACQUIRE);

	while (p) {
		struct ep__pack *next = p->rnext;
		size_t nsum = EP__BITMAP_WORDS(EP__BITMAP_WORDS(p->nchunks));

		__atomic_store_n(&p->queued, 0, __ATOMIC_SEQ_CST);
		for (size_t i = 0; i < nsum; i++) {
			uint64_t sum = __atomic_exchange_n(&p->done_sum[i], 0, __ATOMIC_ACQUIRE);

			for (; sum; sum &= sum - 1) {
				size_t w = i * 64 + (size_t)__builtin_ctzll(sum);
				uint64_t d = __atomic_exchange_n(&p->done[w], 0, __ATOMIC_ACQUIRE);

				for (; d; d &= d - 1) {
					size_t c = w * 64 + (size_t)__builtin_ctzll(d);

					pack_give_back(pool, p, c, alloc_end(p, c) - c, true, false);
					ep__pack_unclaim(p, c);
				}
			}
		}
		p = next;
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
	ep__tally(&pool->tally.frees, 1);
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
		if (!a) {
			if (ep__pack_freeing(r->pack, s))
				return NULL; /* an ep_free() under way (remote.c) */
			a = alloc_view(r->pack, s, v);
		}
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

		return ep__bitmap_test(r->pack->start, c) && !ep__pack_freeing(r->pack, c)
			       ? alloc_view(r->pack, c, v)
			       : NULL;
	}
	a = alloc_containing(pool, x, v);
	return a && a->exec == exec ? a : NULL;
}


/*
 * A caller's fill runs with a heap locked (a new pack, a refill at free): a
 * call back into the library from it would wait for that lock forever, so
 * such a call fails with -EDEADLK instead (ep_pool_create(3)).
 */
__thread int ep__in_fill __attribute__((tls_model("initial-exec")));

static void fill_guarded(void *dst, size_t len, void *ctx)
{
	const struct ep__sub *first = ctx;

	ep__in_fill++;
	first->user_fill(dst, len, first->user_fill_ctx);
	ep__in_fill--;
}


/* Lock, random seed, and a place in the list the fork handlers walk. */
static void sub_start(struct ep__sub *pool)
{
	seed_random(pool);
	ep__lock_init(&pool->lock);
	/* (read without the lock, by design: the counts by ep_pool_stats(),
	 * the owner by an exiting thread and by frees from other threads) */
	if (ep__under_valgrind()) {
		VALGRIND_HG_DISABLE_CHECKING(&pool->tally, sizeof(pool->tally));
		VALGRIND_HG_DISABLE_CHECKING(&pool->owner, sizeof(pool->owner));
	}

	ep__fork_track(pool);
}

/* Another heap on the same backend and settings as first. */
struct ep__sub *ep__heap_clone(const struct ep__sub *first)
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

int ep__heap_create(const struct ep_config *cfg_in, struct ep__sub **out)
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
	rc = ep__config_open(cfg_in, -1, &cfg, pool);
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

void ep__heap_destroy(struct ep__sub *pool)
{
	if (!pool)
		return;
	ep__fork_untrack(pool);
	ep__thread_put(pool->owner);
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
		pack_free(p);
	}
	while (pool->spare_packs) {
		struct ep__pack *p = pool->spare_packs;

		pool->spare_packs = p->next;
		pack_free(p);
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
	if (ep__under_valgrind()) {
		VALGRIND_HG_ENABLE_CHECKING(&pool->tally, sizeof(pool->tally));
		VALGRIND_HG_ENABLE_CHECKING(&pool->owner, sizeof(pool->owner));
	}
	free(pool->by_slot);
	free(pool->fits);
	free(pool->ranges);
	free(pool->hash);
	free(pool);
}


/* ---- a heap's calls ------------------------------------------------------- */

int ep__heap_alloc(struct ep__sub *pool, size_t size, struct ep_image *out)
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
	ep__heap_drain_check(pool);
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
		ep__tally(&pool->tally.large_in, 1);
		ep__tally(&pool->tally.lbytes_in, a->large.size);
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
	ep__tally(&pool->tally.allocs, 1);

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

int ep__heap_write(struct ep__sub *pool, void *dst, const void *src, size_t len)
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

		rc = ep__own_region(pool, r);
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

int ep__heap_finalize(struct ep__sub *pool, void *exec)
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

	rc = ep__own_region(pool, r);
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

int ep__heap_free(struct ep__sub *pool, void *exec)
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
		/* against an ep_free() of the same address from another thread
		 * that takes no lock (remote.c) */
		if (!ep__pack_claim(a->pack, a->chunk)) {
			rc = -EINVAL;
			goto out;
		}
		if (!a->staging) {
			/* finalized: refill so a stale jump here traps */
			rc = ep__own_region(pool, &a->pack->r);
			if (!rc)
				rc = refill(pool, a);
			if (rc) {
				/* still live and intact; the caller may retry */
				ep__pack_unclaim(a->pack, a->chunk);
				goto out;
			}
		}
		pack_give_back(pool, a->pack, a->chunk, a->reserved / CHUNK, false, !a->view);
		ep__pack_unclaim(a->pack, a->chunk);
	} else {
		if (a->large.sealed && (rc = ep__own_region(pool, &a->large)))
			goto out; /* its refill could not be done: still live */
		range_remove(pool, &a->large);
		ep__route_clear((uintptr_t)a->large.exec, a->large.size);
		ep__tally(&pool->tally.large_out, 1);
		ep__tally(&pool->tally.lbytes_out, a->large.size);
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

/*
 * ep_shrink()'s work: keep [exec, exec+size), give back the whole chunks
 * past it.  Finalized bytes are refilled with traps before they are given
 * back.  Before ep_finalize() the chunks still hold the fill (code reaches
 * a pack only through copy_in(), which copies reserved bytes, so the
 * staging buffer's tail is simply never copied).  A large allocation keeps
 * its mapping: whole pages past size are refilled and no longer handed out
 * or charged, but stay mapped until ep_free() (ep_shrink(3)).
 */
int ep__heap_shrink(struct ep__sub *pool, void *exec, size_t size)
{
	if (!pool || !exec || size == 0)
		return -EINVAL;

	int rc = 0;
	struct ep__alloc view;

	sub_lock(pool);
	struct ep__alloc *a = alloc_exact(pool, exec, &view);

	if (!a || size > a->reserved - a->offset) {
		rc = -EINVAL; /* not live, or a size it never had: never grows */
		goto out;
	}
	size_t keep = round_up(a->offset + size, a->pack ? CHUNK : pool->page_size);

	if (keep >= a->reserved) {
		/* nothing whole to give back; diag.c: names end at size */
		ep__diag_shrink(pool, &a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec,
				a->key + a->reserved - (uintptr_t)a->exec, size, pool->flags);
		goto out;
	}
	size_t cut = a->reserved - keep;
	struct ep__region *r = alloc_region(a);

	/* against an ep_free() of the same address from another thread that
	 * takes no lock (remote.c): whichever claims it first goes on */
	if (a->pack && !ep__pack_claim(a->pack, a->chunk)) {
		rc = -EINVAL;
		goto out;
	}
	if (!a->staging) {
		rc = ep__own_region(pool, r);
		if (!rc)
			rc = pool->ops->fill(pool->be, r, alloc_region_off(a) + keep, cut, pool->fill,
					     pool->fill_ctx);
		if (rc) {
			if (a->pack)
				ep__pack_unclaim(a->pack, a->chunk);
			goto out; /* still whole and intact */
		}
		code_changed((void *)(a->key + keep), cut);
	}
	ep__diag_shrink(pool, &a->diag, a->exec, a->key + a->reserved - (uintptr_t)a->exec,
			a->key + keep - (uintptr_t)a->exec, size, pool->flags);
	if (a->pack) {
		/* (under the pack's seq: a lock-free free reads the extent from
		 * the maps, and sees it end where the kept chunks end) */
		pack_give_back(pool, a->pack, a->chunk + keep / CHUNK, cut / CHUNK, false,
			       false);
		ep__pack_unclaim(a->pack, a->chunk);
	}
	a->reserved = keep; /* (a view is dropped: its end is where the chunks now stop) */
	uncharge(pool, cut);
out:
	ep__unlock(&pool->lock);
	return rc;
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

int ep__heap_set_name(struct ep__sub *pool, void *exec, const char *name)
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

int ep__heap_set_unwind(struct ep__sub *pool, void *exec, int kind, size_t prologue,
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

