/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * registry.c - the lists of every pool and every heap of the process.
 *
 * Below every file that walks them (fork.c's handlers, info.c, thread.c)
 * and calling none of them: a heap is on the list from its creation until
 * its destruction starts, and a walker holds the list's lock throughout.
 */
#include "config.h"

#include <pthread.h>

#include "lock.h"
#include "registry.h"

pthread_mutex_t ep__roots_lock = PTHREAD_MUTEX_INITIALIZER;
struct ep_pool *ep__roots;
pthread_mutex_t ep__heaps_lock = PTHREAD_MUTEX_INITIALIZER;
struct ep__heap *ep__heaps;

void ep__registry_add(struct ep__heap *h)
{
	ep__mutex_lock(&ep__heaps_lock);
	h->gnext = ep__heaps;
	if (ep__heaps)
		ep__heaps->gprev = h;
	ep__heaps = h;
	ep__mutex_unlock(&ep__heaps_lock);
}

void ep__registry_remove(struct ep__heap *h)
{
	ep__mutex_lock(&ep__heaps_lock);
	if (h->gprev)
		h->gprev->gnext = h->gnext;
	else
		ep__heaps = h->gnext;
	if (h->gnext)
		h->gnext->gprev = h->gprev;
	ep__mutex_unlock(&ep__heaps_lock);
}

void ep__each_heap(void (*fn)(struct ep__heap *, void *), void *arg)
{
	ep__mutex_lock(&ep__heaps_lock);
	for (struct ep__heap *h = ep__heaps; h; h = h->gnext)
		fn(h, arg);
	ep__mutex_unlock(&ep__heaps_lock);
}

/* A pool's heaps_lock is one of the set the fork handlers take. */
void ep__registry_add_pool(struct ep_pool *pool)
{
	ep__mutex_lock(&ep__roots_lock);
	pool->next_root = ep__roots;
	ep__roots = pool;
	ep__mutex_unlock(&ep__roots_lock);
}

void ep__registry_remove_pool(struct ep_pool *pool)
{
	ep__mutex_lock(&ep__roots_lock);
	struct ep_pool **pp = &ep__roots;

	while (*pp && *pp != pool)
		pp = &(*pp)->next_root;
	if (*pp)
		*pp = pool->next_root;
	ep__mutex_unlock(&ep__roots_lock);
}
