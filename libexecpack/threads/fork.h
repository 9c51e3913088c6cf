/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fork.h - fork() and the processes it makes (fork.c).
 */
#ifndef EP_FORK_H
#define EP_FORK_H

#include <pthread.h>

#include "atomic.h"
#include "types.h"

extern int *ep__fork_mark;
void ep__fork_missed(void);
/* The handlers, installed once, before the first pool's heap goes on
 * registry.c's lists (every later heap is a clone in some pool). */
void ep__fork_setup(void);

/* On every call: one load tells a child that no fork handler told. */
static inline void ep__fork_check(void)
{
	/* (set once by whichever thread makes the first pool, while others
	 * may already be calling: an atomic pointer) */
	int *mark = ep__load_acquire(&ep__fork_mark);

	if (__builtin_expect(mark && ep__load_acquire(mark) != 1, 0))
		ep__fork_missed();
}

#endif /* EP_FORK_H */
