/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * records.h - a heap's allocation records and staging buffers (records.c).
 */
#ifndef EP_RECORDS_H
#define EP_RECORDS_H

#include <stdbool.h>

#include "alloc-state.h"
#include "types.h"

static inline size_t ep__hash_index(const struct ep__heap *h, uintptr_t key)
{
	uint64_t x = (uint64_t)(key >> 4) * 0x9e3779b97f4a7c15ull;

	return (size_t)(x >> 32) & h->hash_mask;
}

static inline struct ep__alloc *ep__hash_find(const struct ep__heap *h, uintptr_t key)
{
	for (struct ep__alloc *a = h->hash[ep__hash_index(h, key)]; a; a = a->hnext)
		if (a->key == key)
			return a;
	return NULL;
}

int ep__hash_grow(struct ep__heap *h);
void ep__hash_insert(struct ep__heap *h, struct ep__alloc *a);
void ep__hash_remove(struct ep__heap *h, struct ep__alloc *a);
/* Records, reused (calloc'd when none is spare). */
struct ep__alloc *ep__rec_get(struct ep__heap *h);
void ep__rec_put(struct ep__heap *h, struct ep__alloc *a);
/* Staging buffers of 64 << k bytes, reused; *cls gets k or -1.  A
 * buffer starts on an EP_STAGE_ALIGN boundary; with chunks smaller than
 * that, the record's staging points key % EP_STAGE_ALIGN bytes into it
 * (ep__stage_skew()), so that rw == exec (mod EP_STAGE_ALIGN) whatever
 * chunk the allocation starts on; put (and free) take either pointer. */
unsigned char *ep__stage_get(struct ep__heap *h, size_t size, int *cls);
void ep__stage_put(struct ep__heap *h, unsigned char *buf, int cls);
/* Give a buffer of class cls back, past the stash (NULL: nothing). */
void ep__stage_free(unsigned char *buf, int cls);
/* A buffer for a pack allocation aligned past EP_STAGE_ALIGN
 * (ep_alloc_aligned()): on min(align, page), never stashed (*cls -1). */
unsigned char *ep__stage_get_aligned(struct ep__heap *h, size_t size, size_t align, int *cls);

/* A kept buffer's (of class cls) pages past its first len bytes back to
 * the kernel. */
void ep__stage_trim(unsigned char *buf, size_t len, int cls);

static inline unsigned char *ep__stage_skew(unsigned char *buf, uintptr_t key)
{
	return buf + (key & (EP_STAGE_ALIGN - 1));
}

static inline unsigned char *ep__stage_base(unsigned char *buf)
{
	return (unsigned char *)((uintptr_t)buf & ~(uintptr_t)(EP_STAGE_ALIGN - 1));
}
/* Give a record-less allocation (a view) a record of its own, to attach
 * diagnostics to.  NULL without memory for one. */
struct ep__alloc *ep__rec_keep(struct ep__heap *h, struct ep__alloc *v);
/* A finalized pack allocation with nothing but its chunks to remember
 * gives its record up.  The state it is left in: EP__ST_REC if it has one
 * after, else EP__ST_PLAIN. */
enum ep__st ep__rec_settle(struct ep__heap *h, struct ep__alloc *a);

#endif /* EP_RECORDS_H */
