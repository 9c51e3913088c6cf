/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * life.c - the steps of an allocation's life that its record carries
 * besides its chunks: its entry for ep_lookup() (info.c), the staging
 * buffer that EP_F_KEEP_STAGING keeps past ep_finalize(), and at its end
 * whatever a patch window (patch.c) left on it.  heap.c and add.c call
 * these with the heap's lock held; nothing here calls patch.c, which only
 * opens and ends windows.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "heap.h"
#include "info.h"
#include "life.h"
#include "records.h"

int ep__rec_large(struct ep__heap *h, struct ep__alloc *a)
{
	return ep__info_update(h, a);
}

int ep__rec_finalizing(struct ep__heap *h, struct ep__alloc *a)
{
	if (!(h->flags & EP_F_KEEP_STAGING) || a->patch)
		return 0;
	a->patch = calloc(1, sizeof(*a->patch));
	if (!a->patch)
		return -ENOMEM;
	int rc = ep__info_claim(a);

	if (rc) {
		free(a->patch);
		a->patch = NULL;
	}
	return rc;
}

void ep__rec_finalized(struct ep__heap *h, struct ep__alloc *a)
{
	if (a->patch && ((h->flags & EP_F_KEEP_STAGING) || a->patch->keep)) {
		a->patch->kept = a->staging;
		a->patch->kept_class = a->stash_class;
		ep__stage_trim(a->staging, a->reserved, a->stash_class); /* (ep_finalize_size: the used length) */
	} else {
		ep__stage_put(h, a->staging, a->stash_class);
	}
	a->staging = NULL;
	if (a->info)
		(void)ep__info_update(h, a); /* (claimed: cannot fail) */
}

int ep__rec_keep_staging(struct ep__heap *h, struct ep__alloc *a)
{
	(void)h;
	if (a->patch) {
		a->patch->keep = 1; /* (asked again, or the pool's flag made it) */
		return 0;
	}
	struct ep__patch *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	/* the entry that will map the kept copy (ep_lookup_rw()), claimed now,
	 * so that ep_finalize() and groups find nothing left to fail here */
	int rc = ep__info_claim(a);

	if (rc) {
		free(w);
		return rc;
	}
	w->keep = 1;
	a->patch = w;
	return 0;
}

int ep__rec_release_staging(struct ep__heap *h, struct ep__alloc *a)
{
	struct ep__patch *w = a->patch;

	if (!w || (a->staging ? !w->keep : !w->kept))
		return -EINVAL;
	if (w->win)
		return -EBUSY; /* the window's bytes are in it */
	unsigned char *kept = w->kept;
	int cls = w->kept_class;

	/* the entry stops naming the buffer before it goes (a lookup that read
	 * it earlier only ever holds the address) */
	free(w);
	a->patch = NULL;
	if (a->info)
		(void)ep__info_update(h, a); /* (claimed, or dropped: cannot fail) */
	ep__stage_put(h, kept, cls);
	return 0;
}

void ep__rec_changed(struct ep__heap *h, struct ep__alloc *a)
{
	if (a->info)
		(void)ep__info_update(h, a);
}

void ep__rec_forget(struct ep__heap *h, struct ep__alloc *a)
{
	struct ep__patch *w = a->patch;

	ep__info_drop(a);
	if (!w)
		return;
	a->patch = NULL;
	/* an open window ends with its code, as ep_free(3) says: nothing of it
	 * outlives the allocation (its rw is the caller's no more) */
	ep__patch_buffers_free(w);
	ep__stage_put(h, w->kept, w->kept_class);
	free(w);
}
