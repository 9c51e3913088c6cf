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

/*
 * Small zeroed blocks (size up to EP__SMALL_MAX) for the records every
 * thread's calls make (a thread's record, its heap, a program's record,
 * a pack's struct and first-fit tree), carved from the same pages: glibc gives a thread a malloc arena of its
 * own at its first malloc(), two pages resident, which a thread that only
 * JITs through the library would then pay for nothing else.  Under
 * Valgrind or a sanitizer, calloc() and free(), which they follow.
 */
#define EP__SMALL_MAX ((size_t)4096)
void *ep__small_get(size_t size);
/* Give back what ep__small_get(size) returned (NULL: nothing). */
void ep__small_put(void *p, size_t size);
/* The same for staging buffers, in pages of their own: 64-byte aligned,
 * not zeroed (the fill writes them). */
void *ep__stage_block_get(size_t size);
void ep__stage_block_put(void *p, size_t size);

/* Taken by the fork handlers after every heap lock (fork.c). */
extern pthread_mutex_t ep__meta_lock;

#endif /* EP_META_H */
