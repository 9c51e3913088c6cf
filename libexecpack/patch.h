/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * patch.h - patch windows on finalized code and kept staging buffers
 * (patch.c).  What a window leaves on an allocation's record, and the
 * steps of its life that must know of it, are the records' (life.h).
 */
#ifndef EP_PATCH_H
#define EP_PATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "types.h"

/* ep_patch_begin(), ep_patch_commit(), ep_patch_abort() on h, the heap
 * that owns exec (api.c checked the arguments and found it). */
int ep__patch_begin(struct ep__heap *h, void *exec, size_t len, void **rw);
int ep__patch_commit(struct ep__heap *h, void *exec);
int ep__patch_abort(struct ep__heap *h, void *exec);

#endif /* EP_PATCH_H */
