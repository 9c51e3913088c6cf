/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * trim.h - giving back what a heap keeps for reuse (trim.c).
 */
#ifndef EP_TRIM_H
#define EP_TRIM_H

#include <stddef.h>

#include "types.h"

/* ep_pool_trim() on one heap: bytes given back. */
size_t ep__heap_trim(struct ep__heap *h);

#endif /* EP_TRIM_H */
