/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * heap.h - one heap and the calls on it (heap.c).
 */
#ifndef EP_HEAP_H
#define EP_HEAP_H

#include <stdbool.h>
#include <stddef.h>

#include "types.h"

int ep__heap_create(const struct ep_config *cfg, struct ep__heap **out);
/* Another heap on the same backend and settings as first. */
struct ep__heap *ep__heap_clone(const struct ep__heap *first);
struct ep__heap *ep__heap_clone_data(const struct ep__heap *first, unsigned char data);
void ep__heap_destroy(struct ep__heap *h);
int ep__heap_alloc(struct ep__heap *h, size_t size, struct ep_image *out);
/* ep_alloc_aligned(3) */
int ep__heap_alloc_aligned(struct ep__heap *h, size_t size, size_t align, struct ep_image *out);
/* The bytes an allocation of size bytes reserves (large: its own mapping). */
size_t ep__heap_reserved(const struct ep__heap *h, size_t size, bool large);
/* Heap lock held: reserve them for a, in a pack or (large) a mapping of
 * its own, charged against the limit; sets a's key, pack and chunk or
 * large, offset (EP_F_RANDOMIZE), reserved and exec.  Not a record yet. */
int ep__heap_reserve(struct ep__heap *h, struct ep__alloc *a, size_t size, size_t reserved,
		     bool large);
/* A code range that has no room for a pack: fn(other, arg) on the pool's
 * other heaps, one at a time, until one says anything but -ENOMEM; fn
 * takes that heap's lock.  What the last one said. */
int ep__heap_borrow(struct ep__heap *h, int (*fn)(struct ep__heap *, void *), void *arg);
/* ep_add(), ep_finalize_size() (add.c) */
int ep__heap_add(struct ep__heap *h, const void *code, size_t len, void **exec);
int ep__heap_finalize_size(struct ep__heap *h, void *exec, size_t size);
int ep__heap_write(struct ep__heap *h, void *dst, const void *src, size_t len);
/* (hint: the pack route.h named for exec, or NULL: ep__alloc_exact()) */
int ep__heap_finalize(struct ep__heap *h, struct ep__pack *hint, void *exec);
int ep__heap_free(struct ep__heap *h, struct ep__pack *hint, void *exec);

/* One member of ep_finalize_group(): exec, the heap route.h names as its
 * owner and that pack (the hint); a is the heap's (under its lock). */
struct ep__group_item {
	void *exec;
	struct ep__heap *h;
	struct ep__pack *hint;
	struct ep__alloc *a;
};

/* ep_finalize_group(3): m (n > 0, reordered) all finalized or none.  The
 * heaps are locked there, each member's owner checked under its lock. */
int ep__heap_finalize_group(struct ep__group_item *m, size_t n);
/* ep_keep_staging(3), ep_release_staging(3) */
int ep__heap_keep_staging(struct ep__heap *h, struct ep__pack *hint, void *exec);
int ep__heap_release_staging(struct ep__heap *h, struct ep__pack *hint, void *exec);
int ep__heap_shrink(struct ep__heap *h, void *exec, size_t size);
int ep__heap_set_name(struct ep__heap *h, void *exec, const char *name, size_t size);
int ep__heap_set_unwind(struct ep__heap *h, void *exec, int kind, size_t prologue, size_t frame);
struct ep_symbol;
int ep__heap_set_symbols(struct ep__heap *h, void *exec, const struct ep_symbol *syms, size_t n);
/* fn on the region of every pack and large allocation of the heap */
void ep__heap_each_region(struct ep__heap *h, void (*fn)(struct ep__heap *, struct ep__region *));
/* Nonzero while this thread runs a caller's fill (ep_pool_create(3)). */
extern __thread int ep__in_fill __attribute__((tls_model("initial-exec")));

#endif /* EP_HEAP_H */
