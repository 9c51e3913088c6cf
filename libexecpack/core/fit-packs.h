/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fit-packs.h - which of a heap's packs may hold n chunks (fit-packs.c).
 */
#ifndef EP_FIT_PACKS_H
#define EP_FIT_PACKS_H

#include <stdint.h>

#include "types.h"

static inline uint32_t ep__fits_get(const struct ep__heap *h, size_t slot)
{
	return h->fits[h->cap_slots + slot];
}

void ep__fits_set(struct ep__heap *h, size_t slot, uint32_t v);
/* The first slot whose bound is at least n; SIZE_MAX when none. */
size_t ep__fits_first(const struct ep__heap *h, size_t n);
/* Room for one more slot (before a pack is mapped). */
int ep__slots_reserve(struct ep__heap *h);
void ep__slot_add(struct ep__heap *h, struct ep__pack *p);
void ep__slot_remove(struct ep__heap *h, struct ep__pack *p);
/* After chunks [pos, pos+n) of p were given back. */
void ep__fits_raise(struct ep__heap *h, struct ep__pack *p, size_t pos, size_t n, size_t run);

#endif /* EP_FIT_PACKS_H */
