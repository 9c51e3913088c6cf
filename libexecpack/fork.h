/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fork.h - fork() and the processes it makes; the lists of every pool and
 * every heap that its handlers walk (fork.c).
 */
#ifndef EP_FORK_H
#define EP_FORK_H

#include <pthread.h>

#include "atomic.h"
#include "types.h"

extern int *ep__fork_mark;
void ep__fork_missed(void);
/* Every heap, from its creation to its destruction (the handlers are
 * installed with the first). */
void ep__fork_track(struct ep__heap *h);
void ep__fork_untrack(struct ep__heap *h);
void ep__fork_track_pool(struct ep_pool *pool);
void ep__fork_untrack_pool(struct ep_pool *pool);
/* fn on every heap of every pool (the list locked meanwhile). */
void ep__each_heap(void (*fn)(struct ep__heap *, void *), void *arg);

/* On every call: one load tells a child that no fork handler told. */
static inline void ep__fork_check(void)
{
	int *mark = ep__fork_mark;

	if (__builtin_expect(mark && ep__load_acquire(mark) != 1, 0))
		ep__fork_missed();
}

#endif /* EP_FORK_H */
