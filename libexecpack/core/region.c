/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * region.c - what is done to a whole region (a pack's or a large
 * allocation's mapping): sealing it (EP_F_SEAL), dropping it, telling the
 * CPU and Valgrind that code in it changed, and making it this process's
 * own after fork() (a pack copied late: its free chunks trapped again).
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc-state.h"
#include "lookup.h"
#include "commit.h"
#include "holes.h"
#include "region.h"
#include "track.h"

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
int ep__region_seal(struct ep__heap *h, struct ep__region *r)
{
	if (!(h->flags & EP_F_SEAL))
		return 0;
	int rc = ep__mseal(r->exec, r->size);

	if (rc == 0)
		r->sealed = 1;
	return rc;
}
/* Drop a region; a sealed one is first refilled, as its exec view stays. */
void ep__region_drop(struct ep__heap *h, struct ep__region *r)
{
	/* (not when inherited across fork(): the other process still runs it) */
	if (r->sealed && r->gen == ep__fork_generation() &&
	    ep__region_fill(h, r, 0, r->size) == 0)
		ep__code_changed(r->exec, r->size);
	h->ops->unmap(h->be, r);
}

int ep__copy_prompt;

/* Chunks [s, e) of p (clipped to its committed ones) get the trap fill. */
static int retrap_run(struct ep__heap *h, struct ep__pack *p, size_t s, size_t e)
{
	e = e < p->nchunks ? e : p->nchunks;
	if (s >= e)
		return 0;
	int rc = ep__region_fill(h, &p->r, s << p->shift, (e - s) << p->shift);

	if (!rc)
		ep__code_changed((unsigned char *)p->r.exec + (s << p->shift), (e - s) << p->shift);
	return rc;
}

/*
 * A pack's copy made after the other process may have gone on (any copy
 * but the one a child makes inside fork() while its parent waits): the
 * copy holds the pages as they are now, the maps are as at the fork, so
 * what the other process wrote since into chunks that are free here
 * would be handed out as it is.  Every chunk the maps say is free, and
 * every allocation a free was taking when the fork came (FREEING: a
 * vanished thread's, or queued for a drain), gets the trap fill again:
 * one fill per run of clear bits, the runs read a word at a time.  (The
 * part past the committed chunks is filled when it is committed.)
 */
static int retrap(struct ep__heap *h, struct ep__pack *p)
{
	size_t words = EP__BITMAP_WORDS(p->nchunks), run = SIZE_MAX;
	int rc = 0;

	for (size_t w = 0; w < words && !rc; w++) {
		uint64_t u = p->used[w];
		size_t base = w * 64;

		for (size_t b = 0; b < 64 && !rc;) {
			uint64_t rest = u >> b;

			if (rest & 1) {
				if (run != SIZE_MAX)
					rc = retrap_run(h, p, run, base + b);
				run = SIZE_MAX;
				b += ~rest ? (size_t)__builtin_ctzll(~rest) : 64 - b;
			} else {
				if (run == SIZE_MAX)
					run = base + b;
				b += rest ? (size_t)__builtin_ctzll(rest) : 64 - b;
			}
		}
	}
	if (run != SIZE_MAX && !rc)
		rc = retrap_run(h, p, run, p->nchunks);
	for (size_t w = 0; w < words && !rc; w++) {
		for (uint64_t st = p->start[w]; st && !rc; st &= st - 1) {
			size_t c = w * 64 + (size_t)__builtin_ctzll(st);

			if (ep__st_get(p, c) == EP__ST_FREEING)
				rc = retrap_run(h, p, c, ep__alloc_end(p, c));
		}
	}
	return rc;
}

/* A fork child's private copy of p maps its holes too: they go again. */
static int rehole(struct ep__heap *h, struct ep__pack *p)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = p->nchunks / ep__page_chunks(p);

	if (!p->hole_chunks)
		return 0;
	for (size_t a = 1; a < pages; a++) {
		if (!ep__page_holed(p, a))
			continue;
		size_t b = a + 1;
		int rc;

		while (b < pages && ep__page_holed(p, b))
			b++;
		if ((rc = h->ops->hole(h->be, &p->r, a * page, (b - a) * page)))
			return rc;
		a = b;
	}
	return 0;
}

/* Before the first change to a region after a fork(): make it ours alone. */
int ep__own_region_slow(struct ep__heap *h, struct ep__region *r)
{
	unsigned gen = ep__fork_generation();
	int rc;

	if (r->gen == gen)
		return 0;
	if (r->sealed)
		return -EPERM; /* a sealed view cannot be replaced by a private copy */
	if (h->ops->privatize && (rc = h->ops->privatize(h->be, r)))
		return rc;
	/* (the copy maps the whole committed part executable, holes too:
	 * theirs go again before any allocation can come near them) */
	if (r->pack && (rc = rehole(h, (struct ep__pack *)((char *)r - offsetof(struct ep__pack, r)))))
		return rc;
	/* (a failed refill: the old generation stays, and all is done again
	 * before the next change) */
	if (r->pack && !ep__copy_prompt &&
	    (rc = retrap(h, (struct ep__pack *)((char *)r - offsetof(struct ep__pack, r)))))
		return rc;
	r->gen = gen;
	return 0;
}
