/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * near.c - address space within rel32 reach of an address (ep_config.near).
 *
 * The kernel puts a hint that is taken, or an address nobody asked for,
 * top-down from its mmap base: far from a PIE executable's code.  So the
 * free gaps inside the window around the address are read from
 * /proc/self/maps and one is reserved PROT_NONE with MAP_FIXED_NOREPLACE;
 * the backend then maps its file over the reservation with MAP_FIXED, which
 * replaces it in one step (no window in which another thread could take
 * the range).  Without /proc, candidates on a grid across the window are
 * tried instead.  Gaps below the address come first: above a program's
 * code lies its brk heap, which a mapping there would stop from growing.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "arch.h"
#include "internal.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define REACH ((uintptr_t)1 << 31)
#define LOWEST ((uintptr_t)1 << 20)       /* above any vm.mmap_min_addr */
#define HIGHEST EP__ARCH_USER_TOP          /* arch.h */
#define TRIES 8                           /* races lost before giving up */
#define GRID 64                           /* candidates per side without /proc */

struct window {
	uintptr_t lo, hi; /* every byte of a reservation lies in [lo, hi) */
	uintptr_t near;
	size_t size, align;
};

/* Reserve [a, a+size) exactly, or fail (taken, or not allowed there). */
static void *try_at(uintptr_t a, size_t size)
{
	void *want = (void *)a;
	void *got = mmap(want, size, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);

	if (got == MAP_FAILED)
		return NULL;
	if (got != want) { /* a kernel before 4.17 took the flag for a hint */
		munmap(got, size);
		return NULL;
	}
	return got;
}

/* The best aligned start in the free gap [glo, ghi) for w: the highest
 * below w->near, else the lowest above it; 0 if none fits. */
static uintptr_t gap_pick(const struct window *w, uintptr_t glo, uintptr_t ghi)
{
	if (glo < w->lo)
		glo = w->lo;
	if (ghi > w->hi)
		ghi = w->hi;
	if (ghi <= glo || ghi - glo < w->size)
		return 0;
	uintptr_t top = (ghi - w->size) & ~(uintptr_t)(w->align - 1);
	uintptr_t bottom = (glo + w->align - 1) & ~(uintptr_t)(w->align - 1);

	if (top < glo || bottom > top)
		return 0;
	if (top + w->size <= w->near)
		return top;
	if (w->near >= w->size) {
		uintptr_t below = (w->near - w->size) & ~(uintptr_t)(w->align - 1);

		if (below >= bottom)
			return below;
	}
	return bottom;
}

/* Distance rank: below near first (nearest first), then above it. */
static uintptr_t rank(const struct window *w, uintptr_t a)
{
	if (a + w->size <= w->near)
		return w->near - a;
	return a >= w->near ? HIGHEST + (a - w->near) : HIGHEST;
}

/* The best candidate among the gaps /proc/self/maps shows; 0: none; -1:
 * /proc unreadable. */
static intptr_t from_maps(const struct window *w)
{
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return -1;
	uintptr_t prev_end = LOWEST, best = 0;
	unsigned long lo, hi;
	char line[512];
	bool at_start = true; /* the piece read starts a line (paths may be long) */

	while (fgets(line, sizeof(line), f)) {
		bool start = at_start;

		at_start = strchr(line, '\n') != NULL;
		if (!start || sscanf(line, "%lx-%lx", &lo, &hi) != 2)
			continue;
		if (lo > prev_end) {
			uintptr_t a = gap_pick(w, prev_end, lo);

			if (a && (!best || rank(w, a) < rank(w, best)))
				best = a;
		}
		if (hi > prev_end)
			prev_end = hi;
	}
	fclose(f);
	if (prev_end < HIGHEST) {
		uintptr_t a = gap_pick(w, prev_end, HIGHEST);

		if (a && (!best || rank(w, a) < rank(w, best)))
			best = a;
	}
	return (intptr_t)best;
}

/* Without /proc: aligned addresses stepping away from near on both sides. */
static void *from_grid(const struct window *w)
{
	uintptr_t step = (w->hi - w->lo) / (2 * GRID);

	step = (step + w->align - 1) & ~(uintptr_t)(w->align - 1);
	if (step < w->align)
		step = w->align;
	for (unsigned k = 1; k <= GRID; k++) {
		uintptr_t d = (uintptr_t)k * step;
		uintptr_t below = (w->near - w->size - d) & ~(uintptr_t)(w->align - 1);
		uintptr_t above = (w->near + d) & ~(uintptr_t)(w->align - 1);
		void *p;

		if (w->near > w->size + d && below >= w->lo && (p = try_at(below, w->size)))
			return p;
		if (above + w->size <= w->hi && above + w->size > above && (p = try_at(above, w->size)))
			return p;
	}
	return NULL;
}

int ep__near_reserve(const void *near, size_t margin, size_t size, size_t align, void **out)
{
	struct window w = { .near = (uintptr_t)near, .size = size, .align = align };

	if (!align || (align & (align - 1)) || margin >= REACH || !size ||
	    size > 2 * (REACH - margin))
		return -EADDRNOTAVAIL;
	uintptr_t reach = REACH - margin;

	w.lo = w.near > LOWEST + reach ? w.near - reach : LOWEST;
	w.hi = w.near < HIGHEST - reach ? w.near + reach : HIGHEST;
	if (w.hi <= w.lo || w.hi - w.lo < size)
		return -EADDRNOTAVAIL;
	for (int i = 0; i < TRIES; i++) {
		intptr_t a = from_maps(&w);
		void *p;

		if (a < 0) {
			p = from_grid(&w);
			if (!p)
				return -EADDRNOTAVAIL;
			*out = p;
			return 0;
		}
		if (a == 0)
			return -EADDRNOTAVAIL;
		p = try_at((uintptr_t)a, size);
		if (p) {
			*out = p;
			return 0;
		}
		/* taken meanwhile by another thread: read the map again */
	}
	return -EADDRNOTAVAIL;
}
