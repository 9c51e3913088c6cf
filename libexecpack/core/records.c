/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * records.c - a heap's allocation records: the hash table keyed by an
 * allocation's first byte, records and staging buffers kept for reuse.
 *
 * Records: an allocation being staged, named, given unwind info or placed
 * at a random offset, or a large one, has a record.  A finalized plain pack
 * allocation has none: its chunks say all there is (lookup.c), and its
 * state byte says so (alloc-state.h).  With 10,000 live programs the
 * records were megabytes that every ep_free() missed in cache; now the
 * table holds a few hot entries.
 */
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc-state.h"
#include "info.h"
#include "internal.h"
#include "records.h"
#include "small.h"

int ep__hash_grow(struct ep__heap *h)
{
	size_t nb = (h->hash_mask + 1) * 2;
	struct ep__alloc **nh = ep__small_get(nb * sizeof(*nh));

	if (!nh)
		return -ENOMEM;
	size_t old = h->hash_mask + 1;
	struct ep__alloc **oh = h->hash;

	h->hash = nh;
	h->hash_mask = nb - 1;
	for (size_t i = 0; i < old; i++) {
		for (struct ep__alloc *a = oh[i], *n; a; a = n) {
			n = a->hnext;
			size_t j = ep__hash_index(h, a->key);

			a->hnext = nh[j];
			nh[j] = a;
		}
	}
	ep__small_put(oh, old * sizeof(*oh));
	return 0;
}
void ep__hash_insert(struct ep__heap *h, struct ep__alloc *a)
{
	size_t i = ep__hash_index(h, a->key);

	a->hnext = h->hash[i];
	h->hash[i] = a;
	h->nrecs++;
}
void ep__hash_remove(struct ep__heap *h, struct ep__alloc *a)
{
	struct ep__alloc **pp = &h->hash[ep__hash_index(h, a->key)];

	while (*pp != a)
		pp = &(*pp)->hnext;
	*pp = a->hnext;
	h->nrecs--;
}
/* malloc() and free() for every program were a third of a small
 * alloc/finalize/free cycle; spares kept under the lock cost a few loads. */
struct ep__alloc *ep__rec_get(struct ep__heap *h)
{
	struct ep__alloc *a = h->spare_recs;

	if (!a)
		return ep__small_get(sizeof(*a));
	h->spare_recs = a->hnext;
	h->nspare_recs--;
	a->hnext = NULL;
	return a;
}
void ep__rec_put(struct ep__heap *h, struct ep__alloc *a)
{
	if (h->nspare_recs >= SPARE_RECORDS) {
		ep__small_put(a, sizeof(*a));
		return;
	}
	/* zeroed now: ready for ep__rec_get, and no stale code address lingers
	 * for memcheck's leak scan (a struct copy: gcc turns a memset of this
	 * size into "rep stos", a third of ep_free's time) */
	static const struct ep__alloc zero;

	*a = zero;
	a->hnext = h->spare_recs;
	h->spare_recs = a;
	h->nspare_recs++;
}
static int stash_class(size_t size)
{
	if (size <= STASH_MIN)
		return 0;
	int k = 64 - __builtin_clzll((unsigned long long)(size - 1)) - 6;

	return k < STASH_CLASSES ? k : -1;
}
/*
 * Staging buffers start on an EP_STAGE_ALIGN boundary (a page for a large
 * allocation, which starts on one): the caller's rw then lines up with
 * exec, and an emitter that aligns its write pointer aligns the code.
 * Stashed buffers keep their alignment, so the common path is unchanged.
 */
unsigned char *ep__stage_get(struct ep__heap *h, size_t size, int *cls)
{
	/* chunks under EP_STAGE_ALIGN: room for the skew that lines the
	 * buffer up with a key that is not on a boundary (ep__stage_skew()) */
	if (size <= h->pack_size && h->cmask < EP_STAGE_ALIGN - 1)
		size += EP_STAGE_ALIGN - 1 - h->cmask;
	int k = stash_class(size);

	*cls = k;
	if (k < 0)
		return aligned_alloc(size > h->pack_size ? h->page_size : EP_STAGE_ALIGN,
				     ep__round_up(size, size > h->pack_size ? h->page_size
									: EP_STAGE_ALIGN));
	if (h->nstash[k])
		return h->stash[k][--h->nstash[k]];
	/* (small.c's: a thread that only JITs gets no malloc arena for it) */
	return ep__stage_block_get((size_t)STASH_MIN << k);
}
/* (the stash keeps EP_STAGE_ALIGN only: an aligned request's buffer is
 * its own, and its exec is on align, so no skew) */
unsigned char *ep__stage_get_aligned(struct ep__heap *h, size_t size, size_t align, int *cls)
{
	size_t al = align < h->page_size ? align : h->page_size;

	*cls = -1;
	return aligned_alloc(al, ep__round_up(size, al));
}
void ep__stage_put(struct ep__heap *h, unsigned char *buf, int cls)
{
	if (!buf)
		return;
	buf = ep__stage_base(buf);
	if (cls >= 0 && h->nstash[cls] < STASH_DEPTH)
		h->stash[cls][h->nstash[cls]++] = buf;
	else
		ep__stage_free(buf, cls);
}
void ep__stage_free(unsigned char *buf, int cls)
{
	if (cls >= 0)
		ep__stage_block_put(ep__stage_base(buf), (size_t)STASH_MIN << cls);
	else
		free(ep__stage_base(buf));
}
/*
 * A kept buffer (EP_F_KEEP_STAGING) holds [buf, buf+len) from now on: its
 * whole pages past that go back to the kernel.  The buffer was sized for
 * the request (an emitter's upper bound) rounded up to its class; kept
 * whole, it cost twice the code.  The pages read as zeros if the buffer is
 * stashed and handed out again, which fills what it hands out.
 */
void ep__stage_trim(unsigned char *buf, size_t len, int cls)
{
	unsigned char *base = ep__stage_base(buf);
	size_t page = ep__page_size();
	size_t have = cls >= 0 ? (size_t)STASH_MIN << cls : malloc_usable_size(base);
	uintptr_t lo = ep__round_up((uintptr_t)buf + len, page);
	uintptr_t hi = ((uintptr_t)base + have) & ~(uintptr_t)(page - 1);

	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}
/* Give a view a record of its own, to attach diagnostics to.  NULL without
 * memory for one: ep_set_name()/ep_set_unwind() then fail with -ENOMEM. */
struct ep__alloc *ep__rec_keep(struct ep__heap *h, struct ep__alloc *v)
{
	if (!v->norec)
		return v;
	if (h->nrecs + 1 > h->hash_mask + 1 && ep__hash_grow(h))
		return NULL;
	struct ep__alloc *a = ep__rec_get(h);

	if (!a)
		return NULL;
	*a = *v;
	memset(&a->large, 0, sizeof(a->large)); /* never set in a view */
	a->norec = 0;
	ep__hash_insert(h, a);
	return a;
}
/* A finalized pack allocation with nothing but its chunks to remember
 * gives its record up (see the top of this file).  The state it is left in. */
enum ep__st ep__rec_settle(struct ep__heap *h, struct ep__alloc *a)
{
	if (a->norec)
		return EP__ST_PLAIN;
	if (!a->pack || a->staging || a->diag || a->offset || a->patch) {
		/* info.c: finalized code with a record, for ep_lookup() (no
		 * entry without memory: it is then reported not finalized) */
		if (a->info || !a->staging || a->diag)
			(void)ep__info_update(h, a); /* (a staged one: its name) */
		return EP__ST_REC;
	}
	if (a->info)
		ep__st_settle(a->pack, a->chunk); /* before its entry goes */
	ep__info_drop(a);
	ep__hash_remove(h, a);
	ep__rec_put(h, a);
	return EP__ST_PLAIN;
}
