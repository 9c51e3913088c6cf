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
 * resident memory instead of a whole trap-filled pack, and every pack
 * starts so, the hundredth as the first: a pool's memory follows its code,
 * not its count of packs (doc/performance.md).  ep_pool_trim() gives back
 * what lies past a pack's last used chunk (ep__pack_uncommit()).
 *
 * Whole packs are committed at once where a prefix cannot grow: sealed
 * views (EP_F_SEAL: mseal() forbids the mprotect() of a later commit),
 * processes that refuse gaining exec (PR_SET_MDWE: the same mprotect()),
 * huge pages (one page is the whole pack), and backends without map_part
 * (kmod: the module maps and fills its packs itself).
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "commit.h"
#include "pack-seq.h"
#include "region.h"
#include "tally.h"

/* The first prefix: what a few small programs need, rounded to pages,
 * doubled until the first request (n chunks) fits. */
static size_t commit_first(const struct ep__heap *h, size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), c = EP__COMMIT_FIRST;

	c = (c + page - 1) / page * page;
	while (c < (n << h->shift) && c < h->pack_size)
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

	r->guards = h->data; /* (a data heap's packs: backend.h) */

	/* (held: hugetlb under AUTO takes huge pages from a pack's worth on) */
	if (h->ops->map_part && !(h->flags & EP_F_SEAL))
		rc = h->ops->map_part(h->be, h->pack_size,
				      exec_gain_refused() ? h->pack_size : commit_first(h, n), held,
				      h->fill, h->fill_ctx, r);
	else
		rc = h->ops->map(h->be, h->pack_size, h->fill, h->fill_ctx, r);
	if (rc)
		return rc;
	if (!r->committed)
		r->committed = r->size; /* (a backend that maps whole regions) */
	/* (a reused pack: a stale remote free may still read it, remote.c) */
	ep__store_relaxed(&p->nchunks, r->committed >> p->shift);
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

	if (n > (size >> p->shift) - from)
		return -ENOSPC;
	size_t need = (from + n) << p->shift, want = have;

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
	size_t nchunks = want >> p->shift;

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
	ep__store_relaxed(&p->nchunks, nchunks);
	ep__pack_write_end(p);
	p->free_chunks += nchunks - (have >> p->shift);
	ep__tally(&h->tally.commit_in, want - have);
	return 0;
}

/*
 * ep_pool_trim(): give back p's committed part past its last used chunk,
 * rounded up to a page (at least a page stays, as at a new pack).  The
 * chunks there are free and hold only the fill; a lock-free free (remote.c)
 * reads nchunks but only ever frees a used chunk, below the cut.  Bytes
 * given back; 0 where p cannot grow again (sealed, PR_SET_MDWE) or is
 * still shared with a parent after fork.
 */
size_t ep__pack_uncommit(struct ep__heap *h, struct ep__pack *p)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), have = p->r.committed;

	if (!h->ops->uncommit || !h->ops->commit || p->r.sealed ||
	    p->r.gen != ep__fork_generation() || exec_gain_refused())
		return 0;
	size_t last = p->nchunks ? ep__bitmap_prev_set(p->used, p->nchunks - 1) : SIZE_MAX;
	size_t keep = (((last == SIZE_MAX ? 0 : last + 1) << p->shift) + page - 1) / page * page;

	if (keep < page)
		keep = page;
	if (keep >= have)
		return 0;
	struct ep__fit fit;
	size_t nchunks = keep >> p->shift;

	if (ep__fit_init(&fit, p->used, nchunks))
		return 0;
	/* the chunks leave the pack before their memory goes (remote.c reads
	 * nchunks without the lock) */
	ep__pack_write_begin(p);
	ep__store_relaxed(&p->nchunks, nchunks);
	ep__pack_write_end(p);
	EP_YIELD("uncommit");
	if (h->ops->uncommit(h->be, &p->r, keep)) {
		ep__pack_write_begin(p); /* (still committed and filled: back) */
		ep__store_relaxed(&p->nchunks, have >> p->shift);
		ep__pack_write_end(p);
		ep__fit_destroy(&fit);
		return 0;
	}
	ep__fit_destroy(&p->fit);
	p->fit = fit;
	p->free_chunks -= (have >> p->shift) - nchunks;
	ep__tally(&h->tally.commit_out, have - keep);
	return have - keep;
}
