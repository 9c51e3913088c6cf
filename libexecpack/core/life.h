/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * life.h - the steps of an allocation's life that its record carries
 * besides its chunks (life.c): its entry for ep_lookup(), a kept staging
 * buffer, and what a patch window (patch.c) hangs on it (a->patch).
 * heap.c and add.c call these with the heap's lock held.
 */
#ifndef EP_LIFE_H
#define EP_LIFE_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

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
	unsigned char *kept;   /* EP_F_KEEP_STAGING, ep_keep_staging(): the staging buffer */
	int kept_class;
	int keep;              /* ep_keep_staging() asked for kept (not the pool's flag) */
};

/* The window's buffers (the kept staging buffer is not one of them). */
static inline void ep__patch_buffers_free(struct ep__patch *w)
{
	free(w->own);
	if (!w->own)
		free(w->snap); /* (one block with own otherwise) */
	w->own = w->snap = w->win_rw = NULL;
	w->win = 0;
	w->win_len = 0;
}

/* A large allocation is born (its entry for ep_lookup()): 0 or -ENOMEM. */
int ep__rec_large(struct ep__heap *h, struct ep__alloc *a);
/* ep_finalize() is about to copy a's staging in: -ENOMEM if what it must
 * keep cannot be made (nothing changed then). */
int ep__rec_finalizing(struct ep__heap *h, struct ep__alloc *a);
/* ... and has: the staging buffer is kept or given back (a->staging NULL). */
void ep__rec_finalized(struct ep__heap *h, struct ep__alloc *a);
/* ep_keep_staging(): a (staged, entered) keeps its staging buffer past
 * ep_finalize().  -ENOMEM if what that needs cannot be made (nothing
 * changed then); ep_finalize() then cannot fail for want of it. */
int ep__rec_keep_staging(struct ep__heap *h, struct ep__alloc *a);
/* ep_release_staging(): a (entered) gives its kept buffer up (staged: the
 * request is withdrawn).  -EINVAL: none kept or asked for; -EBUSY: a patch
 * window is open in it. */
int ep__rec_release_staging(struct ep__heap *h, struct ep__alloc *a);
/* a's exec or length changed (a large one placed, a shrink done). */
void ep__rec_changed(struct ep__heap *h, struct ep__alloc *a);
/* The allocation is gone (ep_free(), ep_pool_destroy()): an open window
 * closes, its buffers, the kept staging and the entry go now. */
void ep__rec_forget(struct ep__heap *h, struct ep__alloc *a);

/* ep_shrink() to keep bytes: -EBUSY where an open window lies past them
 * (it would lose its bytes), else 0. */
static inline int ep__rec_shrink_check(const struct ep__alloc *a, size_t keep)
{
	const struct ep__patch *w = a->patch;

	return w && w->win && w->win + w->win_len > a->key + keep ? -EBUSY : 0;
}

#endif /* EP_LIFE_H */
