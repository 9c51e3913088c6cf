/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * wait.h - how a thread of the library waits for another: it spins a
 * little (EP_SPIN: the step it waits for is usually a few hundred cycles
 * long), then sleeps in futex(2) until the other thread wakes it.
 *
 * A waker pays for the wake only when a waiter said that it sleeps (a flag
 * next to the word), so that the path nobody waits on stays as it was.  A
 * sleeper sets its flag and then reads the word again before it sleeps;
 * the waker changes the word and then reads the flag: a store then a load
 * on each side, which needs a full barrier on both.  Where the waker is a
 * hot path without one (the biased owner's unlock, a pack's seq end), the
 * sleeper issues the barrier for both sides with ep__barrier_all()
 * (lock.c: membarrier(2)) between its store and its load.
 *
 * In the interleaving build EP_SPIN never ends: a thread that waits yields
 * to the test's scheduler (ep__il_blocked), which runs one thread at a
 * time and would stop for good on a thread asleep in the kernel.
 */
#ifndef EP_WAIT_H
#define EP_WAIT_H

#include <limits.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "interleave.h"

/* Spins before a wait sleeps: a few microseconds of PAUSE. */
#define EP_SPIN_MAX 128u

/* Whether the wait should go on spinning; spins counts the tries so far. */
#ifdef EP_INTERLEAVE
#define EP_SPIN(spins, where) ((void)(spins), ep__il_blocked(where), true)
#else
#define EP_SPIN(spins, where) ((spins) < EP_SPIN_MAX ? (ep__cpu_relax(), true) : false)
#endif

/* Sleep while *word == val (or until woken, or ts passes: the caller
 * looks again either way).  Private futexes: the words are in this
 * process's own memory. */
static inline void ep__futex_wait(const void *word, unsigned val, const struct timespec *ts)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, ts, NULL, 0);
}

static inline void ep__futex_wake(const void *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* ep__futex_wake() out of line, for a hot path's rare wake (lock.c). */
void ep__futex_wake_cold(const void *word) __attribute__((cold));

/* Every running thread of the process passes a full memory barrier before
 * this returns (lock.c); false where none can be issued. */
bool ep__barrier_all(void);

#endif /* EP_WAIT_H */
