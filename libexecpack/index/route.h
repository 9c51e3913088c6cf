/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * route.h - which heap owns an address, without taking any lock.
 *
 * A process-wide radix table maps every 4 KiB page of every region (pack or
 * large mapping) of every pool to the heap that owns it.  A call on an
 * existing allocation finds its owner in three dependent loads, whichever
 * thread makes it, and no heap's lock is taken to learn it.  Entries are
 * set before an address is handed out and cleared before its region is
 * unmapped; nodes, once published, are never freed (they index address
 * space, which is reused).
 */
#ifndef EP_ROUTE_H
#define EP_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "atomic.h"
#include "interleave.h"
#include "types.h"

#define EP__ROUTE_PAGE_SHIFT 12
#define EP__ROUTE_BITS 12 /* per level; three levels cover 48-bit addresses */
#define EP__ROUTE_FAN ((size_t)1 << EP__ROUTE_BITS)
#define EP__ROUTE_MASK (EP__ROUTE_FAN - 1)

struct ep__route_leaf {
	void *owner[EP__ROUTE_FAN];
};

struct ep__route_mid {
	struct ep__route_leaf *leaf[EP__ROUTE_FAN];
};

/* The table's word for a pack's pages (its low bit set; a heap's large
 * mappings are the heap itself), and back: here, below the packs, so that
 * finding an owner from an address calls nothing above the index. */
static inline void *ep__route_pack(struct ep__pack *p)
{
	return (void *)((uintptr_t)p | 1);
}

static inline struct ep__heap *ep__route_heap(void *v, struct ep__pack **pack)
{
	uintptr_t w = (uintptr_t)v;

	if (w & 1) {
		*pack = (struct ep__pack *)(w & ~(uintptr_t)1);
		return (*pack)->heap;
	}
	*pack = NULL;
	return v;
}

extern struct ep__route_mid *ep__route_top[EP__ROUTE_FAN];

/* Map [lo, lo+len) (page aligned) to owner; -ENOMEM if a node cannot be
 * made or the range lies beyond what the table covers. */
int ep__route_set(uintptr_t lo, size_t len, void *owner);
/* Forget [lo, lo+len). */
void ep__route_clear(uintptr_t lo, size_t len);

/* The owner of addr, or NULL. */
static inline void *ep__route_get(uintptr_t addr)
{
	uintptr_t page = addr >> EP__ROUTE_PAGE_SHIFT;

	EP_YIELD("route get");
	if (__builtin_expect(page >> (3 * EP__ROUTE_BITS), 0))
		return NULL;
	struct ep__route_mid *m = ep__load_acquire(
		&ep__route_top[(page >> (2 * EP__ROUTE_BITS)) & EP__ROUTE_MASK]);

	if (!m)
		return NULL;
	struct ep__route_leaf *l =
		ep__load_acquire(&m->leaf[(page >> EP__ROUTE_BITS) & EP__ROUTE_MASK]);

	if (!l)
		return NULL;
	return ep__load_acquire(&l->owner[page & EP__ROUTE_MASK]);
}

#endif /* EP_ROUTE_H */
