/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * commit.h - the committed (filled, executable) prefix of a pack (commit.c).
 */
#ifndef EP_COMMIT_H
#define EP_COMMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "holes.h"
#include "types.h"

#define EP__COMMIT_FIRST ((size_t)4 << 10)  /* a new pack's prefix: a page */
#define EP__COMMIT_STEP ((size_t)64 << 10)  /* the least it grows by */
/* the shortest run of free pages a live pack gives back (a hole) */
#define EP__HOLE_MIN ((size_t)64 << 10)
/* Map a region for p into *r (not yet p's: pack.c publishes it) and
 * commit its first part, room for n chunks at least; sets p->nchunks. */
int ep__pack_map(struct ep__heap *h, struct ep__pack *p, size_t n, struct ep__region *r);
/* Commit more of p, for n chunks after its last used one (-ENOSPC: no). */
int ep__pack_grow(struct ep__heap *h, struct ep__pack *p, size_t n);
/* Uncommit p past its last used chunk (ep_pool_trim()); bytes given back. */
size_t ep__pack_uncommit(struct ep__heap *h, struct ep__pack *p);

/* Holes (commit.c): pages inside live packs' free runs given back. */
/* A look for them, from a free once EP_PURGE_AT_ONCE were freed since the
 * last (at most once per purge delay). */
void ep__heap_holes(struct ep__heap *h);
/* First fit found no room: a pack's holes back (filled, executable);
 * whether any came back. */
bool ep__pack_unhole(struct ep__heap *h, size_t n);
/* p goes: its holes' bits cleared; their bytes (uncounted already). */
size_t ep__pack_holes_forget(struct ep__heap *h, struct ep__pack *p);
#endif /* EP_COMMIT_H */
