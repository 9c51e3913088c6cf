/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pack-seq.h - the writer's side of the sequence count over a pack's maps
 * (struct ep__pack's seq): pack.c and commit.c change used and start
 * between these two calls, with the heap's lock; readers without the lock
 * (remote.c, info.c) retry while it is odd or has moved.  Below pack.h, so
 * that commit.c, which pack.c calls, needs nothing of pack.c.
 */
#ifndef EP_PACK_SEQ_H
#define EP_PACK_SEQ_H

#include "atomic.h"
#include "interleave.h"
#include "types.h"

/* With the heap's lock: the pack's maps change (see struct ep__pack). */
static inline void ep__pack_write_begin(struct ep__pack *p)
{
	EP_YIELD("pack seq");
	ep__store_relaxed(&p->seq, p->seq + 1);
	ep__fence_release();
}

static inline void ep__pack_write_end(struct ep__pack *p)
{
	ep__store_release(&p->seq, p->seq + 1);
}

#endif /* EP_PACK_SEQ_H */
