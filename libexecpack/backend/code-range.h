/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * code-range.h - one contiguous reservation that every region of a pool
 * is placed in (ep_config.code_range; code-range.c).
 */
#ifndef EP_CODE_RANGE_H
#define EP_CODE_RANGE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

struct ep__crange;

/* A full range, as the placement calls say it: the backends' map ops turn
 * it into -ENOMEM (hugetlb must not take it for "no huge page"). */
#define EP__CRANGE_FULL (-EXFULL)

static inline int ep__crange_rc(int rc)
{
	return rc == EP__CRANGE_FULL ? -ENOMEM : rc;
}

/*
 * Reserve size bytes (a multiple of align, a power of two) PROT_NONE at an
 * align-aligned address; with near, every byte within 2 GiB minus margin
 * of it (near.c).  0, -ENOMEM, -EADDRNOTAVAIL (nothing that near).
 */
int ep__crange_open(size_t size, const void *near, size_t margin, size_t align,
		    struct ep__crange **out);
/* Unmap what is free of the range (a sealed region stays) and forget it. */
void ep__crange_close(struct ep__crange *cr);
/* First fit: *out gets size bytes at an align-aligned address inside the
 * range, still PROT_NONE, for a MAP_FIXED mapping.  EP__CRANGE_FULL. */
int ep__crange_take(struct ep__crange *cr, size_t size, size_t align, void **out);
/* Whether some free extent of the range is size bytes long (alignment
 * aside): false means a take of size bytes fails now, so a heap looks in
 * the packs of the others instead of mapping a new one (heap.c). */
bool ep__crange_room(struct ep__crange *cr, size_t size);
/* [addr, addr+size) is PROT_NONE again and free.  false when it is not in
 * the range at all (the caller unmaps it). */
bool ep__crange_give(struct ep__crange *cr, void *addr, size_t size);
/* A child of fork() that ran no handler: a vanished thread's hold is gone. */
void ep__crange_reset(struct ep__crange *cr);

#endif /* EP_CODE_RANGE_H */
