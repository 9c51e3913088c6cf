/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * holes.h - a pack's holes as commit.c makes them and region.c gives them
 * back again in a fork child's copy: pages inside free runs, uncommitted.
 */
#ifndef EP_HOLES_H
#define EP_HOLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "types.h"

/* Chunks per base page in p, and whether p's page g is in a hole. */
static inline size_t ep__page_chunks(const struct ep__pack *p)
{
	return (size_t)sysconf(_SC_PAGESIZE) >> p->shift;
}

static inline bool ep__page_holed(const struct ep__pack *p, size_t g)
{
	return p->holes && ((p->holes[g / 64] >> (g % 64)) & 1);
}

/* CLOCK_MONOTONIC in ns. */
static inline uint64_t ep__now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

#endif /* EP_HOLES_H */
