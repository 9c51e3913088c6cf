/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ranges.h - a heap's regions by address (ranges.c).
 */
#ifndef EP_RANGES_H
#define EP_RANGES_H

#include "types.h"

/* The range that holds addr, or NULL. */
const struct ep__range *ep__range_find(const struct ep__heap *h, uintptr_t addr);
/* Room for one more range, made before a region is mapped so that the
 * insert cannot fail half-way. */
int ep__range_reserve(struct ep__heap *h);
void ep__range_insert(struct ep__heap *h, const struct ep__region *reg, struct ep__pack *pack,
		      struct ep__alloc *large);
void ep__range_remove(struct ep__heap *h, const struct ep__region *reg);

#endif /* EP_RANGES_H */
