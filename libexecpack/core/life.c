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
	if (a->patch && (h->flags & EP_F_KEEP_STAGING)) {
		a->patch->kept = a->staging;
		a->patch->kept_class = a->stash_class;
		ep__stage_trim(a->staging, a->reserved); /* (ep_finalize_size: the used length) */
	} else {
		ep__stage_put(h, a->staging, a->stash_class);
	}
	a->staging = NULL;
	if (a->info)
		(void)ep__info_update(h, a); /* (claimed: cannot fail) */
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
