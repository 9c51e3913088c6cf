/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pack.h - a heap's packs (pack.c).
 */
#ifndef EP_PACK_H
#define EP_PACK_H

#include <stdbool.h>
#include <stdint.h>

#include "atomic.h"
#include "interleave.h"
#include "pack-seq.h"
#include "types.h"

/* First fit: room for n chunks, in a pack that has it, one grown or a new
 * one; *pos gets the chunk index. */
int ep__pack_find(struct ep__heap *h, size_t n, struct ep__pack **outp, size_t *pos);
/* The same for n chunks whose address is a multiple of a chunks (a a
 * power of two, at most the backend's page). */
int ep__pack_find_aligned(struct ep__heap *h, size_t n, size_t a, struct ep__pack **outp,
			  size_t *pos);
/* Chunks [pos, pos+n) of p go to a new allocation (state REC). */
void ep__pack_take(struct ep__heap *h, struct ep__pack *p, size_t pos, size_t n);
/* How chunks are given back: an allocation's end, the tail of one that
 * shrank (it stays, starting where it did), or a free that a lock-free
 * ep_free() counted itself (remote.c). */
enum ep__give {
	EP__GIVE_FREE,
	EP__GIVE_TAIL,
	EP__GIVE_COUNTED_FREE,
};
/* Chunks [pos, pos+n) are free again (how: enum ep__give). */
void ep__pack_give_back(struct ep__heap *h, struct ep__pack *p, size_t pos, size_t n,
			enum ep__give how);
/* Whether h's thread has exited, or it has none yet (any thread, no lock;
 * thread.c keeps the flag). */
static inline bool ep__heap_orphaned(const struct ep__heap *h)
{
	EP_YIELD("heap orphaned?");
	return ep__load_seq_cst(&h->orphaned);
}
/* p is empty: keep it or release it. */
void ep__pack_emptied(struct ep__heap *h, struct ep__pack *p);
void ep__pack_free(struct ep__pack *p);
/* The heap's thread has exited: give back the empty pack it kept (the
 * heap's lock held). */
void ep__pack_trim(struct ep__heap *h);
/* ep_pool_trim(): empty packs released, the others uncommitted past their
 * last used chunk; bytes given back.  With the heap's lock. */
size_t ep__pack_trim_all(struct ep__heap *h);

#endif /* EP_PACK_H */
