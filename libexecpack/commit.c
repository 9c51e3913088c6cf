/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * commit.c - how much of a pack is committed: filled and executable.
 *
 * A pack reserves its whole pack_size of address space and file, which cost
 * nothing until touched, but fills and maps executable only a prefix: the
 * first EP__COMMIT_FIRST bytes, grown when first fit finds no room in
 * the committed part of any pack, before a new pack is made.  The chunks
 * past the prefix are outside the pack as the rest of the library sees it
 * (p->nchunks counts the committed ones; the bitmaps are sized for the
 * whole pack and clear past it), and its exec view there is PROT_NONE, so
 * a stray jump faults.  A pool with one small program costs one prefix of
 * resident memory instead of a whole trap-filled pack.  A heap that has
 * committed a pack's worth of code already gets whole packs: their tails
 * would be committed soon anyway, and growing them in steps moved their
 * fill into the allocations of a busy pool (doc/performance.md).
 *
 * Whole packs are committed at once where a prefix cannot grow: sealed
 * views (EP_F_SEAL: mseal() forbids the mprotect() of a later commit),
 * processes that refuse gaining exec (PR_SET_MDWE: the same mprotect()),
 * huge pages (one page is the whole pack), and backends without map_part
 * (kmod: the module maps and fills its packs itself).
 */
#include "config.h"

#include <errno.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "commit.h"
#include "pack.h"
#include "region.h"
#include "tally.h"

/* The first prefix: what a few small programs need, rounded to pages,
 * doubled until the first request (n chunks) fits. */
static size_t commit_first(const struct ep__heap *h, size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), c = EP__COMMIT_FIRST;

	c = (c + page - 1) / page * page;
	while (c < n * CHUNK && c < h->pack_size)
		c *= 2;
	return c < h->pack_size ? c : h->pack_size;
}

/*
 * How much a prefix of have bytes grows by: doubling up to
 * EP__COMMIT_STEP, then that step while it is small, an eighth of it
 * after.  Doubling all the way would leave up to half of a pool's last
 * pack committed and unused; an eighth keeps that small, in about twenty
 * steps to a whole 2 MiB pack, each an mprotect() and a rebuilt first-fit
 * summary, taken only when first fit finds no room.
 */
static size_t grow_step(size_t have)
{
	if (have / 8 > EP__COMMIT_STEP)
		return have / 8;
	return have < EP__COMMIT_STEP ? have : EP__COMMIT_STEP;
}

#ifndef PR_GET_MDWE
#define PR_GET_MDWE 66
#endif
#ifndef PR_MDWE_REFUSE_EXEC_GAIN
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif

/* Whether mprotect() may not add PROT_EXEC here (PR_SET_MDWE): then a
 * prefix could never grow, and every pack is committed whole.  Asked at
 * each new pack, as a process may turn it on at any time. */
static bool exec_gain_refused(void)
{
	int r = prctl(PR_GET_MDWE, 0L, 0L, 0L, 0L);

	return r > 0 && (r & PR_MDWE_REFUSE_EXEC_GAIN);
}

static size_t heap_committed(const struct ep__heap *h)
{
	return (size_t)(h->tally.commit_in - h->tally.commit_out);
}

int ep__pack_map(struct ep__heap *h, struct ep__pack *p, size_t n, struct ep__region *r)
{
	int rc;

	size_t held = heap_committed(h);

	/* a heap that holds a pack's worth of code already: whole packs, as
	 * their tails would soon be committed anyway (see doc/performance.md) */
	if (h->ops->map_part && !(h->flags & EP_F_SEAL))
		rc = h->ops->map_part(h->be, h->pack_size,
				      held >= h->pack_size || exec_gain_refused()
					      ? h->pack_size
					      : commit_first(h, n),
				      held, h->fill, h->fill_ctx, r);
	else
		rc = h->ops->map(h->be, h->pack_size, h->fill, h->fill_ctx, r);
	if (rc)
		return rc;
	if (!r->committed)
		r->committed = r->size; /* (a backend that maps whole regions) */
	/* (a reused pack: a stale remote free may still read it, remote.c) */
	__atomic_store_n(&p->nchunks, r->committed / CHUNK, __ATOMIC_RELAXED);
	ep__tally(&h->tally.commit_in, r->committed);
	return 0;
}

/*
 * Commit enough of p for a run of n chunks after its last used one, in
 * grow_step()s, filling the new part before it is executable.  Only when first fit found no room in any
 * pack, never on the common path.  -ENOSPC: p cannot grow that far.
 */
int ep__pack_grow(struct ep__heap *h, struct ep__pack *p, size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t size = p->r.size, have = p->r.committed;

	if (!h->ops->commit || have >= size || p->r.sealed)
		return -ENOSPC;
	size_t last = p->nchunks ? ep__bitmap_prev_set(p->used, p->nchunks - 1) : SIZE_MAX;
	size_t from = last == SIZE_MAX ? 0 : last + 1;

	if (n > size / CHUNK - from)
		return -ENOSPC;
	size_t need = (from + n) * CHUNK, want = have;

	while (want < need)
		want += grow_step(want);
	want = (want + page - 1) / page * page;
	if (want > size)
		want = size;
	if (want <= have)
		return -ENOSPC;

	int rc = ep__own_region(h, &p->r); /* (after fork: never fill the parent's) */

	if (rc)
		return rc;
	struct ep__fit fit;
	size_t nchunks = want / CHUNK;

	/* (the bits past the prefix are clear: the new tree sees them free) */
	if (ep__fit_init(&fit, p->used, nchunks))
		return -ENOMEM;
	if ((rc = h->ops->commit(h->be, &p->r, want, h->fill, h->fill_ctx))) {
		ep__fit_destroy(&fit);
		return rc;
	}
	ep__fit_destroy(&p->fit);
	p->fit = fit;
	ep__pack_write_begin(p); /* (remote.c reads nchunks) */
	__atomic_store_n(&p->nchunks, nchunks, __ATOMIC_RELAXED);
	ep__pack_write_end(p);
	p->free_chunks += nchunks - have / CHUNK;
	ep__tally(&h->tally.commit_in, want - have);
	return 0;
}
