/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * interleave.h - the preemption points of the interleaving test build.
 *
 * Every access of state that threads share without a common lock (the
 * route, an allocation's state, remote lists and counts, heap adoption, the
 * fork gate, the limit, the stats counts), and every lock taken, passes
 * through EP_YIELD().  In the library these are nothing.  Built with
 * -DEP_INTERLEAVE (tests/check_interleave), each is a call into the test's
 * scheduler, which runs one thread at a time and picks at every point which
 * one goes on, so that racing calls are driven through chosen schedules
 * rather than left to the machine's timing.  A lock that cannot be taken
 * there yields (ep__il_blocked) instead of sleeping, and EP_IL_ENTER /
 * EP_IL_LEAVE let the scheduler check that no lock ever has two holders.
 */
#ifndef EP_INTERLEAVE_H
#define EP_INTERLEAVE_H

#include "arch.h"

#ifdef EP_INTERLEAVE
void ep__il_yield(const char *where);
void ep__il_blocked(const char *where);
void ep__il_enter(const void *lock);
void ep__il_leave(const void *lock);
void ep__default_pool_reset_for_test(void); /* (api.c) */
#define EP_YIELD(where) ep__il_yield(where)
#define EP_IL_ENTER(l) ep__il_enter(l)
#define EP_IL_LEAVE(l) ep__il_leave(l)
#else
#define EP_YIELD(where) ((void)0)
#define EP_IL_ENTER(l) ((void)(l))
#define EP_IL_LEAVE(l) ((void)(l))
#endif

/* (waiting for another thread: wait.h) */

#endif /* EP_INTERLEAVE_H */
