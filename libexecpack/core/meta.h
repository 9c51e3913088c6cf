/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * meta.h - zeroed memory for the library's large tables (a pack's maps,
 * the route table's nodes) that becomes resident only where it is
 * written (meta.c).
 */
#ifndef EP_META_H
#define EP_META_H

#include <pthread.h>
#include <stddef.h>

/* size zeroed bytes, page aligned; NULL when out of memory. */
void *ep__meta_get(size_t size);
/* Give back what ep__meta_get(size) returned (NULL: nothing). */
void ep__meta_put(void *p, size_t size);

/* Taken by the fork handlers after every heap lock (fork.c); small.c's
 * blocks are given out under it too. */
extern pthread_mutex_t ep__meta_lock;

#endif /* EP_META_H */
