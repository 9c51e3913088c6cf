/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lookup.h - address to allocation within a heap (lookup.c).
 */
#ifndef EP_LOOKUP_H
#define EP_LOOKUP_H

#include <stdint.h>

#include "alloc-state.h"
#include "atomic.h"
#include "bitmap.h"
#include "records.h"
#include "types.h"

static inline struct ep__region *ep__alloc_region(struct ep__alloc *a)
{
	return a->pack ? &a->pack->r : &a->large;
}

/* Offset of the reservation inside its region. */
static inline size_t ep__alloc_region_off(const struct ep__alloc *a)
{
	return a->pack ? a->chunk << a->pack->shift : 0;
}

/* The end (chunk index) of the allocation that starts at chunk pos. */
size_t ep__alloc_end(const struct ep__pack *p, size_t pos);
/* The live allocation whose handed-out bytes contain addr, or NULL; *v may
 * be filled in and returned (a view: no record). */
struct ep__alloc *ep__alloc_containing(const struct ep__heap *h, uintptr_t addr,
				       struct ep__alloc *v);
/* A pack allocation without a record, described in *v (a view): it begins
 * at chunk pos and is n chunks long, or where n is 0 (its state byte could
 * not keep the length), runs to the next start bit or free chunk. */
struct ep__alloc *ep__alloc_view(struct ep__pack *p, size_t pos, size_t n, struct ep__alloc *v);
struct ep__alloc *ep__alloc_exact_slow(const struct ep__heap *h, const void *exec,
				       struct ep__alloc *v);

/* The live allocation ep_alloc() returned as exec, or NULL; may be *v.
 * p: the pack route.h named for exec, read without the lock, or NULL (a
 * hint, checked).  Inline: every ep_finalize() and ep_free() comes here. */
static inline struct ep__alloc *ep__alloc_exact(const struct ep__heap *h, struct ep__pack *p,
						const void *exec, struct ep__alloc *v)
{
	/* If the hinted pack's region still holds exec, exec's start chunk
	 * says at once whether it has a record.  Otherwise the region was
	 * released (and maybe the struct reused) meanwhile, and the ranges
	 * decide. */
	if (p && !((uintptr_t)exec & p->cmask)) {
		uintptr_t base = (uintptr_t)ep__load_relaxed(&p->r.exec);
		size_t c = ((uintptr_t)exec - base) >> p->shift;

		if (p->heap == h && base && c < ep__load_relaxed(&p->nchunks)) {
			unsigned char b = ep__st_byte(p, c), s = b & EP__ST_MASK;

			/* (a live state is on a first chunk only) */
			if (s == EP__ST_PLAIN)
				return ep__alloc_view(p, c, ep__st_len(b), v);
			if (s != EP__ST_REC)
				return NULL; /* not live, not a start, or being freed */
			struct ep__alloc *a = ep__hash_find(h, (uintptr_t)exec);

			return a && a->exec == exec ? a : NULL;
		}
	}
	return ep__alloc_exact_slow(h, exec, v);
}

#endif /* EP_LOOKUP_H */
