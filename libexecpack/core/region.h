/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * region.h - calls on a whole region (region.c).
 */
#ifndef EP_REGION_H
#define EP_REGION_H

#include <errno.h>

#include "guard.h"
#include "internal.h"
#include "track.h"
#include "types.h"

int ep__mseal(void *addr, size_t len);
/* EP_F_SEAL: seal r's exec view (sets r->sealed). */
int ep__region_seal(struct ep__heap *h, struct ep__region *r);
/* Drop a region; a sealed one is first refilled, as its exec view stays. */
void ep__region_drop(struct ep__heap *h, struct ep__region *r);
/* Code at [addr, addr+len) changed through another mapping (inline: every
 * ep_finalize() and ep_free() comes here, and on x86 it is one test). */
static inline void ep__code_changed(void *addr, size_t len)
{
	ep__sync_icache(addr, len);
	if (ep__under_valgrind())
		VALGRIND_DISCARD_TRANSLATIONS(addr, len);
}

/* 1 while a child of fork() makes its copies inside the fork, its parent
 * waiting (fork.c): the pages are then as the maps say.  Any other copy is
 * made later, and a pack's free chunks are refilled after it. */
extern int ep__copy_prompt;
int ep__own_region_slow(struct ep__heap *h, struct ep__region *r);
/* Before a change to a region: in a child whose copy of it is not made
 * yet, make it (never in the process that created the region). */
static inline int ep__own_region(struct ep__heap *h, struct ep__region *r)
{
	return r->gen == ep__fork_generation() ? 0 : ep__own_region_slow(h, r);
}

/* The backend's write and fill of [off, off+len) of r (the caller makes
 * the change visible to instruction fetch: ep__code_changed()). */
static inline int ep__region_write(struct ep__heap *h, struct ep__region *r, size_t off,
				   const void *src, size_t len)
{
	if (!h->ops->alias_io)
		return h->ops->write(h->be, r, off, src, len);
	if (off > r->size || len > r->size - off)
		return -EINVAL;
	ep__alias_copy(r->guards, (unsigned char *)r->rw + off, src, len);
	return 0;
}

static inline int ep__region_fill(struct ep__heap *h, struct ep__region *r, size_t off,
				  size_t len)
{
	if (!h->ops->alias_io)
		return h->ops->fill(h->be, r, off, len, h->fill, h->fill_ctx);
	if (off > r->size || len > r->size - off)
		return -EINVAL;
	ep__alias_fill(r->guards, h->fill, (unsigned char *)r->rw + off, len, h->fill_ctx);
	return 0;
}

#endif /* EP_REGION_H */
