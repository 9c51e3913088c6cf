/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * trim.c - ep_pool_trim(): what a heap keeps against churn goes back now,
 * not at ep_pool_destroy(): empty packs, the committed tails of the others
 * (pack.c, commit.c), stashed staging buffers and spare records
 * (records.c).  It costs the next allocations their pack or buffer again,
 * which is what the caller asks for (pcre2_jit_free_unused_memory()).
 */
#include "config.h"

#include <stdlib.h>

#include "lock.h"
#include "pack.h"
#include "records.h"
#include "remote.h"
#include "small.h"
#include "trim.h"

size_t ep__heap_trim(struct ep__heap *h)
{
	size_t n = 0;

	ep__lock(&h->lock);
	ep__remote_drain_check(h); /* (frees by other threads empty packs too) */
	for (int k = 0; k < STASH_CLASSES; k++) {
		while (h->nstash[k]) {
			ep__stage_free(h->stash[k][--h->nstash[k]], k);
			n += (size_t)STASH_MIN << k;
		}
	}
	while (h->spare_recs) {
		struct ep__alloc *a = h->spare_recs;

		h->spare_recs = a->hnext;
		h->nspare_recs--;
		ep__small_put(a, sizeof(*a));
		n += sizeof(*a);
	}
	n += ep__pack_trim_all(h);
	ep__unlock(&h->lock);
	return n;
}
