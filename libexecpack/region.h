/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * region.h - calls on a whole region (region.c).
 */
#ifndef EP_REGION_H
#define EP_REGION_H

#include "internal.h"
#include "types.h"

int ep__mseal(void *addr, size_t len);
/* EP_F_SEAL: seal r's exec view (sets r->sealed). */
int ep__region_seal(struct ep__heap *h, struct ep__region *r);
/* Drop a region; a sealed one is first refilled, as its exec view stays. */
void ep__region_drop(struct ep__heap *h, struct ep__region *r);
/* Code at [addr, addr+len) changed through another mapping. */
void ep__code_changed(void *addr, size_t len);

int ep__own_region_slow(struct ep__heap *h, struct ep__region *r);
/* Before a change to a region: in a child whose copy of it is not made
 * yet, make it (never in the process that created the region). */
static inline int ep__own_region(struct ep__heap *h, struct ep__region *r)
{
	return r->gen == ep__fork_generation() ? 0 : ep__own_region_slow(h, r);
}

#endif /* EP_REGION_H */
