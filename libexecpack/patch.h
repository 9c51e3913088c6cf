/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * patch.h - patch windows on finalized code and kept staging buffers
 * (patch.c), and the steps of an allocation's life that must know of them
 * (heap.c calls these with the heap's lock held).
 */
#ifndef EP_PATCH_H
#define EP_PATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "types.h"

/* What an allocation with a window or kept staging has besides its record
 * (a->patch).  While a->patch is set the allocation keeps its record (REC),
 * so a free takes the heap's lock (alloc-state.h). */
struct ep__patch {
	uintptr_t win;         /* the open window's first exec byte; 0: none */
	size_t win_len;
	unsigned char *win_rw; /* where the caller writes */
	unsigned char *own;    /* the window's own buffer (NULL: in kept) */
	unsigned char *snap;   /* the live bytes at begin */
	unsigned char *kept;   /* EP_F_KEEP_STAGING: the staging buffer */
	int kept_class;
};

/* A large allocation is born (its entry for ep_lookup()): 0 or -ENOMEM. */
int ep__patch_large(struct ep__heap *h, struct ep__alloc *a);
/* ep_finalize() is about to copy a's staging in: -ENOMEM if what it must
 * keep cannot be made (nothing changed then). */
int ep__patch_finalizing(struct ep__heap *h, struct ep__alloc *a);
/* ... and has: the staging buffer is kept or given back (a->staging NULL). */
void ep__patch_finalized(struct ep__heap *h, struct ep__alloc *a);
/* ep_shrink() to keep bytes from a->key: -EBUSY while a window reaches past. */
int ep__patch_shrink_check(const struct ep__alloc *a, size_t keep);
/* a's exec or length changed (a large one placed, a shrink done). */
void ep__patch_changed(struct ep__heap *h, struct ep__alloc *a);
/* The allocation is gone (ep_free(), ep_pool_destroy()): an open window
 * closes, its buffers, the kept staging and the entry go now. */
void ep__patch_forget(struct ep__heap *h, struct ep__alloc *a);

/* ep_patch_begin(), ep_patch_commit(), ep_patch_abort() on h, the heap
 * that owns exec (api.c checked the arguments and found it). */
int ep__patch_begin(struct ep__heap *h, void *exec, size_t len, void **rw);
int ep__patch_commit(struct ep__heap *h, void *exec);
int ep__patch_abort(struct ep__heap *h, void *exec);

#endif /* EP_PATCH_H */
