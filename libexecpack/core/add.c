/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * add.c - finished code: ep_add() puts code the caller has already emitted
 * straight into a pack (no staging buffer, no fill of one, one copy), and
 * ep_finalize_size() finalizes a staged allocation that turned out shorter
 * than asked for, copying only what the program has.
 *
 * Both rely on what every pack keeps true: a chunk that is not handed out
 * holds the trap fill (a new pack and a grown part are filled before they
 * are executable, a free or a shrink refills what it gives back, a free by
 * another thread refills before it queues, and a shrink before
 * ep_finalize() gives back chunks that were never written).  So only the
 * program's own bytes are copied: the slack of its chunks, before and after
 * them, holds the fill already.  Filling it again cost ep_add() a sixth of
 * its instructions (a fill call for a few dozen bytes).
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "alloc-state.h"
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
#include "tally.h"

/* Undo ep__heap_reserve() after its code could not be written. */
static void unreserve(struct ep__heap *h, struct ep__alloc *a)
{
	if (a->pack) {
		ep__pack_give_back(h, a->pack, a->chunk, a->reserved >> h->shift, EP__GIVE_FREE);
	} else {
		ep__range_remove(h, &a->large);
		ep__route_clear((uintptr_t)a->large.exec, a->large.size);
		ep__tally(&h->tally.large_out, 1);
		ep__tally(&h->tally.lbytes_out, a->large.size);
		ep__region_drop(h, &a->large);
		ep__rec_forget(h, a); /* life.c: its entry for ep_lookup() */
	}
	ep__uncharge(h, a->reserved);
}

/* The code into the reservation (its slack holds the fill already). */
static inline int put_code(struct ep__heap *h, struct ep__region *r, size_t off, const void *code,
			   size_t len)
{
	int rc = ep__own_region(h, r);

	EP_YIELD("code write");
	if (!rc)
		rc = ep__region_write(h, r, off, code, len);
	if (!rc)
		ep__code_changed((unsigned char *)r->exec + off, len);
	return rc;
}

/* The common case, a pack allocation with no record (records.c): its chunks
 * and state byte are all there is to it.  (Inline in ep_add(), as in
 * add_lent()'s copy: a call there cost an add op 22 more instructions.) */
static inline __attribute__((always_inline)) int add_plain(struct ep__heap *h, const void *code,
							   size_t len, size_t reserved,
							   void **exec)
{
	struct ep__pack *p;
	size_t n = reserved >> h->shift, pos;
	int rc = ep__pack_find(h, n, &p, &pos);

	if (rc)
		return rc;
	if (h->limit && (rc = ep__charge(h->root, reserved))) {
		if (!p->cached && p->free_chunks == p->nchunks)
			ep__pack_emptied(h, p); /* made for this request */
		return rc;
	}
	/* (REC from here: a stray free of this address waits for the heap's
	 * lock, held until the code is in) */
	ep__pack_take(h, p, pos, n);
	if ((rc = put_code(h, &p->r, pos << h->shift, code, len))) {
		ep__pack_give_back(h, p, pos, n, EP__GIVE_FREE);
		ep__uncharge(h, reserved);
		return rc;
	}
	void *x = (unsigned char *)p->r.exec + (pos << h->shift);
	struct ep__diag *none = NULL;

	ep__tally(&h->tally.allocs, 1);
	/* diag.c: memcheck's chunk, then what finalizing tells the tools */
	ep__diag_alloc(h, x, reserved);
	ep__diag_finalize(h, &none, x, reserved, h->flags);
	ep__st_leave(p, pos, EP__ST_PLAIN);
	*exec = x;
	return 0;
}

/* A large allocation, or one at a random offset: a record, as ep_alloc()
 * gives it. */
static inline __attribute__((always_inline)) int add_rec(struct ep__heap *h, const void *code,
							 size_t len, size_t reserved, bool large,
							 void **exec)
{
	struct ep__alloc *a;
	int rc;

	if (h->nrecs + 1 > (h->hash_mask + 1) && (rc = ep__hash_grow(h)))
		return rc;
	if (!(a = ep__rec_get(h)))
		return -ENOMEM;
	a->stash_class = -1;
	if ((rc = ep__heap_reserve(h, a, len, reserved, large))) {
		ep__rec_put(h, a);
		return rc;
	}
	if ((rc = put_code(h, ep__alloc_region(a), ep__alloc_region_off(a) + a->offset, code,
			   len))) {
		unreserve(h, a);
		ep__rec_put(h, a);
		return rc;
	}
	ep__hash_insert(h, a);
	ep__rec_changed(h, a); /* (a large one's entry for ep_lookup(): finalized) */
	ep__tally(&h->tally.allocs, 1);
	ep__diag_alloc(h, a->exec, reserved - a->offset);
	ep__diag_finalize(h, &a->diag, a->exec, reserved - a->offset, h->flags);
	struct ep__pack *p = a->pack;
	size_t c = a->chunk;

	*exec = a->exec;
	/* (a record may settle here: nothing of a is read after it) */
	if (p)
		ep__st_leave(p, c, ep__rec_settle(h, a));
	return 0;
}

struct add_args {
	const void *code;
	size_t len, reserved;
	void **exec;
};

/* ep_add()'s work in h, under its lock. */
static inline __attribute__((always_inline)) int add_in(struct ep__heap *h, const void *code,
							size_t len, size_t reserved, bool large,
							void **exec)
{
	ep__lock(&h->lock);
	ep__remote_drain_check(h);
	int rc = large || (h->flags & EP_F_RANDOMIZE) ? add_rec(h, code, len, reserved, large, exec)
						      : add_plain(h, code, len, reserved, exec);

	ep__unlock(&h->lock);
	return rc;
}

static int add_lent(struct ep__heap *o, void *arg)
{
	const struct add_args *x = arg;

	return add_in(o, x->code, x->len, x->reserved, false, x->exec);
}

/* ep_add() failed in h: in a full code range, another heap's pack may
 * have room (ep__heap_borrow(); a large mapping needs room of its own). */
static __attribute__((noinline, cold)) int add_failed(struct ep__heap *h, const void *code,
						      size_t len, size_t reserved, void **exec,
						      int rc)
{
	struct add_args x = { code, len, reserved, exec };

	if (rc != -ENOMEM || !h->crange || len > h->pack_size)
		return rc;
	return ep__heap_borrow(h, add_lent, &x);
}

int ep__heap_add(struct ep__heap *h, const void *code, size_t len, void **exec)
{
	if (!h || !code || !exec || len == 0)
		return -EINVAL;
	if (len > SIZE_MAX / 2)
		return -ENOMEM;

	bool large = len > h->pack_size;
	size_t reserved = ep__heap_reserved(h, len, large);

	if (h->limit && reserved > h->limit)
		return -EPERM; /* could never fit */
	int rc = add_in(h, code, len, reserved, large, exec);

	/* (a call, out of line: the path that succeeds keeps its instructions) */
	if (__builtin_expect(rc != 0, 0))
		rc = add_failed(h, code, len, reserved, exec, rc);
	return rc;
}

/*
 * ep_shrink() and ep_finalize() under one lock: the first size bytes of the
 * program are copied, the chunks (pages of a large allocation) past them
 * given back untouched, as they still hold the fill.
 */
int ep__heap_finalize_size(struct ep__heap *h, void *exec, size_t size)
{
	if (!h || !exec || size == 0)
		return -EINVAL;

	int rc;
	struct ep__alloc view;

	ep__lock(&h->lock);
	struct ep__alloc *a = ep__alloc_exact(h, NULL, exec, &view);

	if (!a || !a->staging || size > a->reserved - a->offset) {
		rc = -EINVAL; /* not live, finalized already, or a size it never had */
		goto out;
	}
	struct ep__pack *p = a->pack;
	size_t c = a->chunk;

	if (p && (rc = ep__st_enter(p, c)))
		goto out;
	struct ep__region *r = ep__alloc_region(a);

	rc = ep__rec_finalizing(h, a); /* life.c: what EP_F_KEEP_STAGING keeps */
	if (!rc)
		rc = ep__own_region(h, r);
	EP_YIELD("code write");
	if (!rc)
		rc = ep__region_write(h, r, ep__alloc_region_off(a) + a->offset,
				      a->staging + a->offset, size);
	if (rc) {
		/* staging kept, nothing given back: the caller may retry or free */
		if (p)
			ep__st_leave(p, c, EP__ST_REC);
		goto out;
	}
	ep__code_changed(a->exec, size);

	size_t old = a->reserved - a->offset;
	size_t keep = p ? (a->offset + size + h->cmask) & ~(size_t)h->cmask
			: ep__round_up(a->offset + size, h->page_size);

	if (keep > a->reserved)
		keep = a->reserved;
	/* diag.c: names end at size */
	ep__diag_shrink(h, &a->diag, a->exec, old, keep - a->offset, size, h->flags);
	if (keep < a->reserved) {
		size_t cut = a->reserved - keep;

		if (p) {
			ep__pack_give_back(h, p, c + (keep >> h->shift), cut >> h->shift, EP__GIVE_TAIL);
			ep__st_resize(p, c, keep >> h->shift);
		}
		a->reserved = keep;
		ep__uncharge(h, cut);
	}
	ep__diag_finalize(h, &a->diag, a->exec, a->reserved - a->offset, h->flags);
	ep__rec_finalized(h, a); /* the staging buffer given back or kept; the entry */
	if (p)
		ep__st_leave(p, c, ep__rec_settle(h, a));
	else
		ep__rec_settle(h, a);
out:
	ep__unlock(&h->lock);
	return rc;
}
