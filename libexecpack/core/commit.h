/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * commit.h - the committed (filled, executable) prefix of a pack (commit.c).
 */
#ifndef EP_COMMIT_H
#define EP_COMMIT_H

#include <stddef.h>

#include "types.h"

#define EP__COMMIT_FIRST ((size_t)4 << 10)  /* a new pack's prefix: a page */
#define EP__COMMIT_STEP ((size_t)64 << 10)  /* the least it grows by */
/* Map a region for p into *r (not yet p's: pack.c publishes it) and
 * commit its first part, room for n chunks at least; sets p->nchunks. */
int ep__pack_map(struct ep__heap *h, struct ep__pack *p, size_t n, struct ep__region *r);
/* Commit more of p, for n chunks after its last used one (-ENOSPC: no). */
int ep__pack_grow(struct ep__heap *h, struct ep__pack *p, size_t n);
/* Uncommit p past its last used chunk (ep_pool_trim()); bytes given back. */
size_t ep__pack_uncommit(struct ep__heap *h, struct ep__pack *p);

#endif /* EP_COMMIT_H */
