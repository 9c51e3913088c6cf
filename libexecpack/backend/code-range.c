/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * code-range.c - ep_config.code_range: one PROT_NONE reservation made at
 * ep_pool_create(), in which the backends map every pack and large
 * allocation of the pool with MAP_FIXED, so that any two of them are as
 * close as the range is small.  A region given back is mapped PROT_NONE
 * again in one step (never unmapped: nothing else of the process may land
 * there), and its extent returns to a sorted list of free extents, merged
 * with its neighbours.  The list never needs to grow on a give back: it is
 * made large enough at each take for every region taken plus one.
 *
 * The lock is a leaf, taken inside a backend's map and unmap, which run
 * under a heap's lock (fork.c holds every heap's across fork(), so no
 * thread holds this one then; a child without the handlers resets it).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "code-range.h"
#include "internal.h"
#include "lock.h"

struct extent {
	uintptr_t lo, hi;
};

struct ep__crange {
	pthread_mutex_t lock;
	uintptr_t base;
	size_t size;
	struct extent *free; /* sorted, disjoint, none touching another */
	size_t nfree, cap;
	size_t ntaken;       /* regions placed and not given back */
};

static void *reserve(uintptr_t at, size_t size, int fixed)
{
	void *p = mmap((void *)at, size, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (fixed ? MAP_FIXED : 0), -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int ep__crange_open(size_t size, const void *near, size_t margin, size_t align,
		    struct ep__crange **out)
{
	struct ep__crange *cr = calloc(1, sizeof(*cr));
	void *at = NULL;

	if (!cr)
		return -ENOMEM;
	cr->cap = 4;
	cr->free = calloc(cr->cap, sizeof(*cr->free));
	if (!cr->free) {
		free(cr);
		return -ENOMEM;
	}
	if (near) {
		int rc = ep__near_reserve(near, margin, size, align, &at);

		if (rc) {
			free(cr->free);
			free(cr);
			return rc;
		}
	} else {
		/* over-reserve by align, then give back both ends */
		size_t page = ep__page_size(), extra = align > page ? align - page : 0;
		unsigned char *p = size + extra < size ? NULL : reserve(0, size + extra, 0);

		if (!p) {
			free(cr->free);
			free(cr);
			return -ENOMEM;
		}
		uintptr_t a = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);

		if (a > (uintptr_t)p)
			munmap(p, a - (uintptr_t)p);
		if ((uintptr_t)p + size + extra > a + size)
			munmap((void *)(a + size), (uintptr_t)p + size + extra - (a + size));
		at = (void *)a;
	}
	pthread_mutex_init(&cr->lock, NULL);
	cr->base = (uintptr_t)at;
	cr->size = size;
	cr->free[0] = (struct extent){ cr->base, cr->base + size };
	cr->nfree = 1;
	*out = cr;
	return 0;
}

void ep__crange_close(struct ep__crange *cr)
{
	if (!cr)
		return;
	for (size_t i = 0; i < cr->nfree; i++)
		munmap((void *)cr->free[i].lo, cr->free[i].hi - cr->free[i].lo);
	pthread_mutex_destroy(&cr->lock);
	free(cr->free);
	free(cr);
}

int ep__crange_take(struct ep__crange *cr, size_t size, size_t align, void **out)
{
	int rc = EP__CRANGE_FULL;

	ep__mutex_lock(&cr->lock);
	EP_YIELD("code range");
	/* room for every region after this one, plus one: give never grows */
	if (cr->cap < cr->ntaken + 3) {
		size_t cap = 2 * (cr->ntaken + 3);
		struct extent *f = realloc(cr->free, cap * sizeof(*f));

		if (!f) {
			rc = -ENOMEM;
			goto out;
		}
		cr->free = f;
		cr->cap = cap;
	}
	for (size_t i = 0; i < cr->nfree; i++) {
		struct extent *e = &cr->free[i];
		uintptr_t a = (e->lo + align - 1) & ~(uintptr_t)(align - 1);

		if (a < e->lo || a >= e->hi || e->hi - a < size)
			continue;
		uintptr_t end = a + size;

		if (a == e->lo && end == e->hi) {
			for (size_t j = i + 1; j < cr->nfree; j++)
				cr->free[j - 1] = cr->free[j];
			cr->nfree--;
		} else if (a == e->lo) {
			e->lo = end;
		} else if (end == e->hi) {
			e->hi = a;
		} else {
			for (size_t j = cr->nfree; j > i + 1; j--)
				cr->free[j] = cr->free[j - 1];
			cr->free[i + 1] = (struct extent){ end, e->hi };
			e->hi = a;
			cr->nfree++;
		}
		cr->ntaken++;
		*out = (void *)a;
		rc = 0;
		break;
	}
out:
	ep__mutex_unlock(&cr->lock);
	return rc;
}

bool ep__crange_room(struct ep__crange *cr, size_t size)
{
	bool room = false;

	ep__mutex_lock(&cr->lock);
	EP_YIELD("code range");
	for (size_t i = 0; i < cr->nfree && !room; i++)
		room = cr->free[i].hi - cr->free[i].lo >= size;
	ep__mutex_unlock(&cr->lock);
	return room;
}

bool ep__crange_give(struct ep__crange *cr, void *addr, size_t size)
{
	uintptr_t lo = (uintptr_t)addr, hi = lo + size;

	if (!cr || lo < cr->base || hi > cr->base + cr->size || hi < lo)
		return false;
	/* the region's views replaced by the reservation in one step; a
	 * sealed view cannot be, and its extent stays taken for good */
	if (!reserve(lo, size, 1))
		return true;
	ep__mutex_lock(&cr->lock);
	EP_YIELD("code range");
	size_t i = 0;

	while (i < cr->nfree && cr->free[i].lo < lo)
		i++;
	bool join_prev = i > 0 && cr->free[i - 1].hi == lo;
	bool join_next = i < cr->nfree && cr->free[i].lo == hi;

	if (join_prev && join_next) {
		cr->free[i - 1].hi = cr->free[i].hi;
		for (size_t j = i + 1; j < cr->nfree; j++)
			cr->free[j - 1] = cr->free[j];
		cr->nfree--;
	} else if (join_prev) {
		cr->free[i - 1].hi = hi;
	} else if (join_next) {
		cr->free[i].lo = lo;
	} else {
		for (size_t j = cr->nfree; j > i; j--)
			cr->free[j] = cr->free[j - 1];
		cr->free[i] = (struct extent){ lo, hi };
		cr->nfree++;
	}
	cr->ntaken--;
	ep__mutex_unlock(&cr->lock);
	return true;
}

void ep__crange_reset(struct ep__crange *cr)
{
	pthread_mutex_init(&cr->lock, NULL);
}
