/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * info.h - what ep_lookup() reads without locks besides the route and the
 * state bytes: a process-wide table of the allocations whose extent or
 * buffers no state byte keeps (large allocations, patch windows, kept
 * staging), and ep_lookup() itself (info.c).
 */
#ifndef EP_INFO_H
#define EP_INFO_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

/* (taken by the fork handlers, fork.c) */
extern pthread_mutex_t ep__info_lock;

/* What an entry says (its flags, set by ep__info_update()). */
#define EP__INFO_LARGE 1u     /* the allocation is large */
#define EP__INFO_FINALIZED 2u /* its code is live */
#define EP__INFO_SYMBOLS 4u   /* it has symbols (ep_set_symbols()) */

/*
 * An entry describes one allocation: its executable bytes [lo, hi), its
 * exec, and its patch buffer: exec bytes [plo, plo + plen) map to
 * [prw, prw + plen) (plen 0: none).  The writer of an entry holds the
 * allocation's heap lock, so fork() (which takes every heap lock) never
 * copies a half-written one.
 */
struct ep__info_entry {
	uintptr_t lo, hi, exec;
	uintptr_t plo, prw;
	size_t plen;
	size_t name;   /* its name's slot in the names table + 1; 0: none */
	unsigned flags;
	struct ep_pool *pool;
};

/* An entry for a (a->info set): 0 or -ENOMEM.  Heap lock held. */
int ep__info_claim(struct ep__alloc *a);
/* Make a's entry again from a (claiming one if needed): a large one, one
 * with a window or kept staging (patch.h), or a finalized pack allocation
 * with a record has one; others none.  0 or -ENOMEM.  Heap lock held. */
int ep__info_update(struct ep__heap *h, struct ep__alloc *a);
/* Forget a's entry, if any.  Heap lock held. */
void ep__info_drop(struct ep__alloc *a);

/* ep_lookup_rw()'s part after ep_lookup(): addr in a window's buffer,
 * kept staging or (under the heap locks) a staging buffer.  0 or -ENOENT
 * (*out zeroed). */
int ep__info_lookup_buffer(const void *addr, struct ep_info *out);

/* Under Valgrind, at exit: the entries' addresses are no pointers to the
 * leak scan (a lost allocation must be reported lost). */
void ep__info_hide(void);

/* In a child made without fork()'s handlers, every lock held (fork.c): a
 * slot a vanished writer left mid-write is made whole and even. */
void ep__info_fork_reset(void);
#ifdef EP_TEST_HOOKS
unsigned long *ep__info_seq_for_test(size_t slot);
#endif

#endif /* EP_INFO_H */
