/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lock.h - the heap lock and the library's mutexes.
 *
 * The heap lock is a futex word: 0 (free), 1 (held) or 2 (held, and a
 * thread may be asleep on it).  A contended locker spins briefly, then
 * sleeps in futex(2); unlock wakes one sleeper.  Each thread allocates from
 * a heap of its own (thread.c), so the lock is almost never contended: its
 * cost is one locked instruction to take and one to give back.  (A lock
 * biased to its owner thread once saved those two; it let two threads in
 * when a stale owner resumed after a rebias, and is gone: design.md.)
 *
 * Helgrind is told what the lock is (it does not see atomics).  The
 * interleaving test build (interleave.h) sees every acquisition: a lock it
 * cannot take yields to the test's scheduler instead of sleeping.
 */
#ifndef EP_LOCK_H
#define EP_LOCK_H

#include <linux/futex.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interleave.h"
#include "internal.h"

#ifdef HAVE_VALGRIND_HELGRIND_H
#include <valgrind/helgrind.h>
#endif
#ifndef ANNOTATE_RWLOCK_CREATE
#define ANNOTATE_RWLOCK_CREATE(l) ((void)(l))
#define ANNOTATE_RWLOCK_DESTROY(l) ((void)(l))
#define ANNOTATE_RWLOCK_ACQUIRED(l, w) ((void)(l), (void)(w))
#define ANNOTATE_RWLOCK_RELEASED(l, w) ((void)(l), (void)(w))
#endif
#ifndef VALGRIND_HG_DISABLE_CHECKING
#define VALGRIND_HG_DISABLE_CHECKING(a, n) ((void)(a), (void)(n))
#endif

struct ep__lock {
	int word;
};

/* (the annotations are client requests: issued only under Valgrind) */
static inline void ep__lock_init(struct ep__lock *l)
{
	__atomic_store_n(&l->word, 0, __ATOMIC_RELAXED);
	if (ep__under_valgrind()) {
		VALGRIND_HG_DISABLE_CHECKING(&l->word, sizeof(l->word));
		ANNOTATE_RWLOCK_CREATE(l);
	}
}

static inline void ep__lock_destroy(struct ep__lock *l)
{
	if (ep__under_valgrind())
		ANNOTATE_RWLOCK_DESTROY(l);
	(void)l;
}

static inline bool ep__lock_try(struct ep__lock *l)
{
	int z = 0;

	return __atomic_compare_exchange_n(&l->word, &z, 1, false, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED);
}

static inline void ep__lock_slow(struct ep__lock *l)
{
#ifdef EP_INTERLEAVE
	/* the scheduler runs one thread at a time: let the holder go on */
	while (!ep__lock_try(l))
		ep__il_blocked("lock");
	return;
#endif
	/* critical sections are short: a holder on another CPU is likely to
	 * be done within a few hundred cycles */
	for (int i = 0; i < 64; i++) {
		if (__atomic_load_n(&l->word, __ATOMIC_RELAXED) == 0 && ep__lock_try(l))
			return;
		ep__cpu_relax();
	}
	/* 2: whoever unlocks must wake someone; taking it as 2 is safe */
	while (__atomic_exchange_n(&l->word, 2, __ATOMIC_ACQUIRE) != 0)
		syscall(SYS_futex, &l->word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

static inline void ep__lock(struct ep__lock *l)
{
	EP_YIELD("lock");
	if (__builtin_expect(!ep__lock_try(l), 0))
		ep__lock_slow(l);
	EP_IL_ENTER(l);
	if (ep__under_valgrind())
		ANNOTATE_RWLOCK_ACQUIRED(l, 1);
}

static inline void ep__unlock(struct ep__lock *l)
{
	EP_IL_LEAVE(l);
	if (ep__under_valgrind())
		ANNOTATE_RWLOCK_RELEASED(l, 1);
	if (__builtin_expect(__atomic_exchange_n(&l->word, 0, __ATOMIC_RELEASE) == 2, 0))
		syscall(SYS_futex, &l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	EP_YIELD("unlock");
}

/* In a fork child, which has one thread: whatever the parent's threads
 * held is free (only for a child that ran no fork handler). */
static inline void ep__lock_reset(struct ep__lock *l)
{
	__atomic_store_n(&l->word, 0, __ATOMIC_RELAXED);
}

/*
 * The library's pthread mutexes (pool list, heaps list, thread records,
 * diagnostics), through one pair of calls so that the interleaving build
 * can schedule around them and the fork handlers' list (fork.c) is the
 * complete set.
 */
static inline void ep__mutex_lock(pthread_mutex_t *m)
{
	EP_YIELD("mutex");
#ifdef EP_INTERLEAVE
	while (pthread_mutex_trylock(m))
		ep__il_blocked("mutex");
	EP_IL_ENTER(m);
#else
	pthread_mutex_lock(m);
#endif
}

static inline void ep__mutex_unlock(pthread_mutex_t *m)
{
	EP_IL_LEAVE(m);
	pthread_mutex_unlock(m);
	EP_YIELD("mutex unlock");
}

#endif /* EP_LOCK_H */
