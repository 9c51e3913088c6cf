/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ranges.c - a heap's regions by address: a sorted array searched in
 * binary, so that an address is resolved to its pack or large mapping
 * without masking (packs are not aligned to their size).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ranges.h"
#include "small.h"

/* Index of the first range with lo > addr. */
static size_t range_upper(const struct ep__heap *h, uintptr_t addr)
{
	size_t lo = 0, hi = h->nranges;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (h->ranges[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}
const struct ep__range *ep__range_find(const struct ep__heap *h, uintptr_t addr)
{
	size_t i = range_upper(h, addr);

	if (i == 0)
		return NULL;
	const struct ep__range *r = &h->ranges[i - 1];

	return addr < r->hi ? r : NULL;
}
/* Reserve room first so that a later insert cannot fail half-way. */
int ep__range_reserve(struct ep__heap *h)
{
	if (h->nranges < h->cap_ranges)
		return 0;
	size_t nc = h->cap_ranges ? h->cap_ranges * 2 : 16;
	struct ep__range *nr = ep__small_get(nc * sizeof(*nr));

	if (!nr)
		return -ENOMEM;
	if (h->nranges)
		memcpy(nr, h->ranges, h->nranges * sizeof(*nr));
	ep__small_put(h->ranges, h->cap_ranges * sizeof(*nr));
	h->ranges = nr;
	h->cap_ranges = nc;
	return 0;
}
void ep__range_insert(struct ep__heap *h, const struct ep__region *reg,
			 struct ep__pack *pack, struct ep__alloc *large)
{
	uintptr_t lo = (uintptr_t)reg->exec;
	size_t i = range_upper(h, lo);

	memmove(&h->ranges[i + 1], &h->ranges[i],
		(h->nranges - i) * sizeof(h->ranges[0]));
	h->ranges[i] = (struct ep__range){ lo, lo + reg->size, pack, large };
	h->nranges++;
}
void ep__range_remove(struct ep__heap *h, const struct ep__region *reg)
{
	size_t i = range_upper(h, (uintptr_t)reg->exec) - 1;

	memmove(&h->ranges[i], &h->ranges[i + 1],
		(h->nranges - i - 1) * sizeof(h->ranges[0]));
	h->nranges--;
}
