/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * registry.h - the lists of every pool and every heap of the process
 * (registry.c): what fork()'s handlers, a thread's exit and ep_lookup()'s
 * staging walk.
 */
#ifndef EP_REGISTRY_H
#define EP_REGISTRY_H

#include <pthread.h>

#include "types.h"

/* Read directly only by fork.c, which holds the locks across fork() (in
 * the order written at its top) and resets them in a child that ran no
 * handler; everyone else goes through the calls below. */
extern pthread_mutex_t ep__roots_lock;
extern struct ep_pool *ep__roots; /* every pool (ep__roots_lock) */
extern pthread_mutex_t ep__heaps_lock;
extern struct ep__heap *ep__heaps; /* every heap of every pool (ep__heaps_lock) */

/* Every heap, from its creation to its destruction. */
void ep__registry_add(struct ep__heap *h);
void ep__registry_remove(struct ep__heap *h);
void ep__registry_add_pool(struct ep_pool *pool);
void ep__registry_remove_pool(struct ep_pool *pool);
/* fn on every heap of every pool (the list locked meanwhile). */
void ep__each_heap(void (*fn)(struct ep__heap *, void *), void *arg);

#endif /* EP_REGISTRY_H */
