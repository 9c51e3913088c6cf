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
#include <stdbool.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "commit.h"
#include "fit-packs.h"
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

static size_t last_live(const struct ep__pack *p);
static size_t holes_drop_from(struct ep__heap *h, struct ep__pack *p, size_t g, size_t pages);

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
	size_t last = last_live(p); /* (holes past it go with the rest) */
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
	/* (uncounted already, and their bits must be clear past the part) */
	size_t holed = p->hole_chunks ? holes_drop_from(h, p, keep / page, have / page) << p->shift
				      : 0;

	ep__fit_destroy(&p->fit);
	p->fit = fit;
	p->free_chunks -= (have >> p->shift) - nchunks;
	ep__tally(&h->tally.commit_out, have - keep - holed);
	return have - keep - holed;
}

/*
 * Holes: a live pack's long free runs given back by themselves.  Whole
 * pages inside a pack's free runs (never its first page, kept as at a new
 * pack) are given back by the backend's hole op: their exec view
 * PROT_NONE (a stray jump faults), their memory punched out, and their
 * chunks marked used, with a start bit at each hole's first chunk and the
 * state NONE, so that first fit never hands them out, an allocation before
 * one ends there (ep__alloc_end()) and no free or lookup takes one for an
 * allocation.  A look for them (ep__heap_holes()) comes from
 * ep__pack_give_back() once EP_PURGE_AT_ONCE bytes were freed since the
 * last look (one compare on the free path), at most once per purge delay.
 * They come back, filled and then executable, only when first fit found no
 * room in what is committed, before a pack grows (ep__pack_unhole()).
 * free_chunks still counts them (it is a bound for first fit, and a pack
 * is empty when it equals nchunks: ep__pack_emptied() cuts them with the
 * rest); the committed tally does not.  With the heap's lock throughout.
 */
/* The last used chunk outside the holes, SIZE_MAX when none. */
static size_t last_live(const struct ep__pack *p)
{
	size_t cpp = ep__page_chunks(p);
	size_t c = p->nchunks ? ep__bitmap_prev_set(p->used, p->nchunks - 1) : SIZE_MAX;

	/* (page 0 is never a hole) */
	while (c != SIZE_MAX && ep__page_holed(p, c / cpp))
		c = ep__bitmap_prev_set(p->used, c / cpp * cpp - 1);
	return c;
}

/* Pages [a, b) of p become a hole (set) or stop being one. */
static void holes_mark(struct ep__heap *h, struct ep__pack *p, size_t a, size_t b, bool set)
{
	size_t cpp = ep__page_chunks(p), c = a * cpp, n = (b - a) * cpp;
	size_t had = p->hole_chunks;

	ep__pack_write_begin(p);
	if (set) {
		ep__bitmap_set(p->used, c, n);
		ep__bitmap_set(p->start, c, 1);
	} else {
		ep__bitmap_clear(p->used, c, n);
		ep__bitmap_clear(p->start, c, n); /* (holes made side by side) */
	}
	ep__pack_write_end(p);
	if (set) {
		ep__bitmap_set(p->holes, a, b - a);
		p->hole_chunks += n;
	} else {
		ep__bitmap_clear(p->holes, a, b - a);
		p->hole_chunks -= n;
	}
	if (!had != !p->hole_chunks)
		h->hole_packs += p->hole_chunks ? 1 : (size_t)-1;
}

/* Pages of p from g on stop being holes, their fit summary left to the
 * caller (they leave the committed part, or the pack goes).  Chunks. */
static size_t holes_drop_from(struct ep__heap *h, struct ep__pack *p, size_t g, size_t pages)
{
	size_t n = p->hole_chunks;

	for (size_t a = g; a < pages; a++) {
		if (!ep__page_holed(p, a))
			continue;
		size_t b = a + 1;

		while (b < pages && ep__page_holed(p, b))
			b++;
		holes_mark(h, p, a, b, false);
		a = b;
	}
	return n - p->hole_chunks;
}

size_t ep__pack_holes_forget(struct ep__heap *h, struct ep__pack *p)
{
	if (!p->hole_chunks)
		return 0;
	return holes_drop_from(h, p, 1, h->pack_size / (size_t)sysconf(_SC_PAGESIZE)) << p->shift;
}

/* Pages [a, b) of p, fully free, given back. */
static void hole_run(struct ep__heap *h, struct ep__pack *p, size_t a, size_t b)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), cpp = ep__page_chunks(p);

	holes_mark(h, p, a, b, true); /* (out of first fit's way before the pages go) */ 
	EP_YIELD("hole");
	if (h->ops->hole(h->be, &p->r, a * page, (b - a) * page)) {
		holes_mark(h, p, a, b, false); /* (still filled: as it was) */
		return;
	}
	ep__fit_mark(&p->fit, p->used, a * cpp, (b - a) * cpp);
	ep__tally(&h->tally.commit_out, (b - a) * page);
}

/* Runs of clear words of used (a hole's words are set: no second look),
 * the whole pages inside each long enough run given back. */
static void pack_holes(struct ep__heap *h, struct ep__pack *p)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), wpp = ep__page_chunks(p) / 64;
	size_t words = p->nchunks / 64, min = EP__HOLE_MIN / page;

	if (!p->holes && !(p->holes = calloc(EP__BITMAP_WORDS(h->pack_size >> p->shift >> 6),
					     sizeof(uint64_t))))
		return;
	for (size_t w = wpp, run = wpp; w <= words; w++) {
		if (w < words && !p->used[w])
			continue;
		/* words [run, w) clear: pages [ceil(run), floor(w)) */
		if (w - run >= min * wpp) {
			size_t a = (run + wpp - 1) / wpp, b = w / wpp;

			if (b >= a + min)
				hole_run(h, p, a, b);
		}
		run = w + 1;
	}
}

void ep__heap_holes(struct ep__heap *h)
{
	h->hole_mark = h->tally.used_out;
	/* (not under Valgrind: memcheck 3.19 faults inside itself on a
	 * shared view's pages made inaccessible and punched out) */
	if (h->purge_ms < 0 || !h->ops->hole || !h->ops->unhole || h->data ||
	    (size_t)sysconf(_SC_PAGESIZE) >> h->shift < 64 || ep__under_valgrind())
		return;
	uint64_t now = ep__now_ns();

	if (now < h->hole_at)
		return;
	h->hole_at = now + (uint64_t)h->purge_ms * 1000000u;
	if (exec_gain_refused())
		return; /* (they could not come back) */
	for (struct ep__pack *p = h->head; p; p = p->next)
		if (!p->cached && !p->r.sealed && p->r.gen == ep__fork_generation() &&
		    p->free_chunks < p->nchunks)
			pack_holes(h, p);
}

/* Pages [a, b) of p's hole [a, e) back, filled and executable. */
static bool unhole_run(struct ep__heap *h, struct ep__pack *p, size_t a, size_t b, size_t e)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), cpp = ep__page_chunks(p);

	if (h->ops->unhole(h->be, &p->r, a * page, (b - a) * page, h->fill, h->fill_ctx))
		return false;
	holes_mark(h, p, a, b, false);
	if (b < e) {
		ep__pack_write_begin(p); /* (what stays of the hole keeps its start) */
		ep__bitmap_set(p->start, b * cpp, 1);
		ep__pack_write_end(p);
	}
	ep__fit_mark(&p->fit, p->used, a * cpp, (b - a) * cpp);
	ep__tally(&h->tally.commit_in, (b - a) * page);
	return true;
}

/*
 * The lowest hole that holds n chunks comes back, only as much of it as n
 * needs rounded up to EP__COMMIT_STEP (as a grow would commit: a churn
 * that reaches a long hole does not refill all of it); with none that
 * holds n, every hole of the first pack that has any.
 */
bool ep__pack_unhole(struct ep__heap *h, size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	for (int all = 0; all < 2; all++) {
		for (struct ep__pack *p = h->head; p; p = p->next) {
			if (!p->hole_chunks || p->hole_chunks < (all ? 1 : n) ||
			    ep__own_region(h, &p->r))
				continue;
			size_t cpp = ep__page_chunks(p), pages = p->nchunks / cpp, had = p->hole_chunks;
			size_t want = ((n << p->shift) + EP__COMMIT_STEP - 1) / EP__COMMIT_STEP *
				      EP__COMMIT_STEP / page;

			for (size_t a = 1; a < pages; a++) {
				if (!ep__page_holed(p, a))
					continue;
				size_t e = a + 1;

				while (e < pages && ep__page_holed(p, e))
					e++;
				if (!all && (e - a) * cpp < n) {
					a = e;
					continue;
				}
				(void)unhole_run(h, p, a, all || e - a < want ? e : a + want, e);
				if (!all)
					break;
				a = e;
			}
			if (p->hole_chunks < had) {
				ep__fits_set(h, p->slot, (uint32_t)p->free_chunks);
				return true;
			}
			if (all)
				return false;
		}
	}
	return false;
}
