/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * route.c - setting and clearing the address-to-heap table (route.h).
 * Readers never lock; a new node is published with a compare-exchange, so
 * two heaps mapping regions in the same 16 MiB at once both see one node.
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <stdbool.h>

#include "internal.h"
#include "meta.h"
#include "route.h"

#ifdef HAVE_VALGRIND_HELGRIND_H
#include <valgrind/helgrind.h>
#endif
#ifndef VALGRIND_HG_DISABLE_CHECKING
#define VALGRIND_HG_DISABLE_CHECKING(a, n) ((void)(a), (void)(n))
#endif
#ifndef ANNOTATE_HAPPENS_BEFORE
#define ANNOTATE_HAPPENS_BEFORE(obj) ((void)(obj))
#endif

struct ep__route_mid *ep__route_top[EP__ROUTE_FAN];

/* *slot, made (zeroed, size bytes) and published if it is still NULL. */
static void *node_get(void **slot, size_t size)
{
	void *n = ep__load_acquire(slot);

	if (n)
		return n;
	void *fresh = ep__meta_get(size); /* (resident where written: meta.c) */

	if (!fresh)
		return NULL;
	/* Helgrind does not follow the acquire loads of readers: the table
	 * is read without locks by design */
	if (ep__under_valgrind())
		VALGRIND_HG_DISABLE_CHECKING(fresh, size);
	if (ep__cas_acq_rel(slot, &n, fresh))
		return fresh;
	ep__meta_put(fresh, size); /* another thread published one first: n is it */
	return n;
}

/* Whether entry() makes the nodes on the way to a page's entry. */
enum entry_how {
	ENTRY_FIND, /* NULL where one is missing */
	ENTRY_MAKE, /* NULL without memory for one */
};

static void **entry(uintptr_t page, enum entry_how how)
{
	const bool make = how == ENTRY_MAKE;

	if (page >> (3 * EP__ROUTE_BITS))
		return NULL;
	void **top = (void **)&ep__route_top[(page >> (2 * EP__ROUTE_BITS)) & EP__ROUTE_MASK];
	struct ep__route_mid *m = make ? node_get(top, sizeof(*m))
				       : ep__load_acquire(top);

	if (!m)
		return NULL;
	void **mid = (void **)&m->leaf[(page >> EP__ROUTE_BITS) & EP__ROUTE_MASK];
	struct ep__route_leaf *l = make ? node_get(mid, sizeof(*l))
					: ep__load_acquire(mid);

	return l ? &l->owner[page & EP__ROUTE_MASK] : NULL;
}

int ep__route_set(uintptr_t lo, size_t len, void *owner)
{
	if (ep__under_valgrind()) {
		VALGRIND_HG_DISABLE_CHECKING(ep__route_top, sizeof(ep__route_top));
		ANNOTATE_HAPPENS_BEFORE(owner); /* what readers then read of it */
	}
	uintptr_t first = lo >> EP__ROUTE_PAGE_SHIFT;
	uintptr_t end = (lo + len + ((uintptr_t)1 << EP__ROUTE_PAGE_SHIFT) - 1) >>
			EP__ROUTE_PAGE_SHIFT;

	/* make every node first, so that a failure leaves nothing set */
	for (uintptr_t p = first; p < end; p = (p | EP__ROUTE_MASK) + 1)
		if (!entry(p, ENTRY_MAKE))
			return -ENOMEM;
	EP_YIELD("route set");
	for (uintptr_t p = first; p < end; p++)
		ep__store_release(entry(p, ENTRY_FIND), owner);
	return 0;
}

void ep__route_clear(uintptr_t lo, size_t len)
{
	uintptr_t first = lo >> EP__ROUTE_PAGE_SHIFT;
	uintptr_t end = (lo + len + ((uintptr_t)1 << EP__ROUTE_PAGE_SHIFT) - 1) >>
			EP__ROUTE_PAGE_SHIFT;

	EP_YIELD("route clear");
	for (uintptr_t p = first; p < end; p++) {
		void **e = entry(p, ENTRY_FIND);

		if (e)
			ep__store_release(e, NULL);
	}
}
