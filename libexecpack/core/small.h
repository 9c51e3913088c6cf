/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * small.h - small zeroed blocks for what every thread's calls make (a
 * thread's record, its heap and tables, a program's record, a pack's
 * struct and first-fit tree) and staging buffers (small.c).
 */
#ifndef EP_SMALL_H
#define EP_SMALL_H

#include <stddef.h>

/* Blocks up to this many bytes come from the library's own pages off the
 * main thread; larger ones are malloc()'s. */
#define EP__SMALL_MAX ((size_t)4096)

/* size zeroed bytes; NULL when out of memory. */
void *ep__small_get(size_t size);
/* Give back what ep__small_get(size) returned (NULL: nothing). */
void ep__small_put(void *p, size_t size);
/* A staging buffer of size bytes: 64-byte aligned, not zeroed (the fill
 * writes it), apart from the records (an overrun reaches other staging
 * buffers only). */
void *ep__stage_block_get(size_t size);
void ep__stage_block_put(void *p, size_t size);

#endif /* EP_SMALL_H */
