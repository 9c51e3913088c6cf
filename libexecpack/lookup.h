/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lookup.h - address to allocation within a heap (lookup.c).
 */
#ifndef EP_LOOKUP_H
#define EP_LOOKUP_H

#include <stdint.h>

#include "types.h"

static inline struct ep__region *ep__alloc_region(struct ep__alloc *a)
{
	return a->pack ? &a->pack->r : &a->large;
}

/* Offset of the reservation inside its region. */
static inline size_t ep__alloc_region_off(const struct ep__alloc *a)
{
	return a->pack ? a->chunk * CHUNK : 0;
}

/* The end (chunk index) of the allocation that starts at chunk pos. */
size_t ep__alloc_end(const struct ep__pack *p, size_t pos);
/* The live allocation whose handed-out bytes contain addr, or NULL; *v may
 * be filled in and returned (a view: no record). */
struct ep__alloc *ep__alloc_containing(const struct ep__heap *h, uintptr_t addr,
				       struct ep__alloc *v);
/* The live allocation ep_alloc() returned as exec, or NULL; may be *v.
 * p: the pack route.h named for exec, read without the lock, or NULL (a
 * hint, checked). */
struct ep__alloc *ep__alloc_exact(const struct ep__heap *h, struct ep__pack *p, const void *exec,
				     struct ep__alloc *v);

#endif /* EP_LOOKUP_H */
