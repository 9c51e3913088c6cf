/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lock.h - the heap lock and the library's mutexes.
 *
 * The heap lock is a futex word: 0 (free), 1 (held) or 2 (held, and a
 * thread may be asleep on it).  A contended locker spins briefly, then
 * sleeps in futex(2); unlock wakes one sleeper.
 *
 * Bias (x86 only): a heap is almost always used by the one thread it
 * belongs to, and an x86 locked instruction costs more than its cycles (it
 * waits for the stores before it, a refill, a copy, to leave the store
 * buffer).  So the first thread to take a lock becomes its owner, once and
 * for good, and the owner takes and gives it back with plain stores: it
 * says it is inside (owner_in = 1), then checks that nobody revoked the
 * bias.  Any other thread takes the word, sets revoked, makes every thread
 * of the process pass a full memory barrier (membarrier(2), or the
 * mprotect() fallback of lock.c: either the owner sees revoked, or the
 * revoker sees owner_in), and waits for the owner to be out: it spins
 * briefly, then sleeps in futex(2) on owner_in, and the owner's unlock
 * wakes it (wait.h; the flag "sleeper" says it sleeps).  At its unlock the
 * revoker clears revoked again.  After four revocations the bias is
 * dropped for good (owner NULL, revoked set): a plain futex lock.  The
 * owner never changes to another thread: a thread that read "owner == me"
 * and was preempted can only ever race the revokers of its own bias, and
 * owner_in is written by that one thread only.  design.md has the proof;
 * the interleaving test replays the schedule that broke the rebiasing this
 * lock once had.
 *
 * Elsewhere there is no bias: an acquiring compare-and-swap does not wait
 * for the store buffer there (arm64, riscv64), and the fallback barrier is
 * none (arm64 invalidates TLBs by broadcast, without interrupting the
 * other CPUs), so nothing could revoke a bias once membarrier(2) is
 * refused.
 *
 * Helgrind is told what the lock is (it does not see atomics); under
 * Valgrind there is no bias.  The interleaving test build (interleave.h)
 * sees every acquisition: a lock it cannot take yields to the test's
 * scheduler instead of sleeping.
 */
#ifndef EP_LOCK_H
#define EP_LOCK_H

#include <linux/futex.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "atomic.h"
#include "interleave.h"
#include "internal.h"
#include "wait.h"

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
	_Atomic int word;
	/* bias (see the top of this file) */
	const void *_Atomic owner; /* the owning thread (ep__self()), set once; or NULL */
	_Atomic int owner_in;      /* the owner holds the lock without the word */
	_Atomic int revoked;       /* the owner must take the word */
	_Atomic int sleeper;       /* a revoker sleeps on owner_in: the owner wakes it */
	/* with the word held: */
	unsigned foreign;  /* times another thread revoked the bias */
	int revoking;      /* this holder revoked it until its unlock */
};

/* This thread's identity for the bias: the address of a thread-local. */
extern __thread char ep__self_anchor __attribute__((tls_model("initial-exec")));

static inline const void *ep__self(void)
{
	return &ep__self_anchor;
}

/* Nonzero where a revocation can always issue its barrier (membarrier(2),
 * or x86's mprotect() fallback): locks may be biased (never under
 * Valgrind: Helgrind follows the word only). */
extern int ep__bias_ok;

/* Once per process and again in a fork child: can locks be biased? */
void ep__lock_setup(void);
/* Out of line: revoke the owner's bias, with the word held. */
void ep__lock_revoke(struct ep__lock *l);

/* In a fork child, which has one thread: no thread of the parent is here
 * to hold the lock or use the fast path, so it is free and unbiased. */
static inline void ep__lock_reset(struct ep__lock *l)
{
	ep__store_relaxed(&l->word, 0);
	ep__store_relaxed(&l->owner, NULL);
	ep__store_relaxed(&l->owner_in, 0);
	ep__store_relaxed(&l->revoked, 0);
	ep__store_relaxed(&l->sleeper, 0);
	l->foreign = 0;
	l->revoking = 0;
}

/* (the annotations are client requests: issued only under Valgrind) */
static inline void ep__lock_init(struct ep__lock *l)
{
	ep__lock_reset(l);
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

	return ep__cas_acquire(&l->word, &z, 1);
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
		if (ep__load_relaxed(&l->word) == 0 && ep__lock_try(l))
			return;
		ep__cpu_relax();
	}
	/* 2: whoever unlocks must wake someone; taking it as 2 is safe */
	while (ep__xchg_acquire(&l->word, 2) != 0)
		syscall(SYS_futex, &l->word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

/* Out of line: the lock taken through its word (a thread that is not
 * the owner, or an owner whose bias was revoked). */
void ep__lock_word(struct ep__lock *l);

/* Out of line, rarely: wake the revoker asleep on owner_in. */
void ep__lock_wake_revoker(struct ep__lock *l) __attribute__((cold));

/* The owner is out: a revoker that fell asleep waiting for that is woken.
 * Only a compiler barrier between the store and the load: the sleeper's
 * ep__barrier_all() is the other half (lock.c, ep__lock_revoke()). */
static inline void ep__lock_owner_out(struct ep__lock *l)
{
	ep__store_release(&l->owner_in, 0);
	ep__signal_fence();
	if (__builtin_expect(ep__load_relaxed(&l->sleeper), 0))
		ep__lock_wake_revoker(l);
}

/* Inline only the owner's path: with the word's path in the same
 * function, every call saved and restored registers it never used. */
static inline void ep__lock(struct ep__lock *l)
{
	EP_YIELD("lock");
	if (ep__load_relaxed(&l->owner) == ep__self()) {
		EP_YIELD("lock owner read");
		ep__store_relaxed(&l->owner_in, 1);
		/* a compiler barrier only: the revoker's membarrier() is the
		 * other half of this store-then-load */
		ep__signal_fence();
		if (__builtin_expect(!ep__load_acquire(&l->revoked), 1)) {
			EP_IL_ENTER(l);
			return;
		}
		ep__lock_owner_out(l);
	}
	ep__lock_word(l);
}

static inline void ep__unlock(struct ep__lock *l)
{
	EP_IL_LEAVE(l);
	if (ep__load_relaxed(&l->owner) == ep__self() &&
	    ep__load_relaxed(&l->owner_in)) {
		ep__lock_owner_out(l);
		EP_YIELD("unlock");
		return;
	}
	if (l->revoking) {
		l->revoking = 0;
		ep__store_release(&l->revoked, 0); /* the owner's again */
	}
	if (ep__under_valgrind())
		ANNOTATE_RWLOCK_RELEASED(l, 1);
	if (__builtin_expect(ep__xchg_release(&l->word, 0) == 2, 0))
		syscall(SYS_futex, &l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	EP_YIELD("unlock");
}

/*
 * The core's pthread mutexes (the lists of pools and heaps, each pool's
 * heaps_lock, the thread records' two, info.c's slots, meta.c's, a code
 * range's), through one pair of calls so that the
 * interleaving build can schedule around them.  diag.c's lock is not one
 * of them: diag.c takes it with pthread_mutex_lock() directly (and the
 * fork handlers through ep__diag_fork_prepare()).
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
