/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lock.h - the heap lock: a futex word, biased to one thread.
 *
 * The word: 0 (free), 1 (held) or 2 (held, and a thread may be asleep on
 * it).  A contended locker spins briefly, then sleeps in futex(2); unlock
 * wakes one sleeper.  Helgrind is told what the lock is (it does not see
 * atomics).
 *
 * Bias: a heap is almost always used by one thread (each thread that
 * allocates has its own), and a locked instruction costs more than its cycles here:
 * it waits for the stores before it (a refill, a copy) to leave the store
 * buffer.  Three lock round trips were a sixth of a program's churn cycle.
 * So the first thread to take a lock becomes its owner, and the owner takes
 * and gives it back with plain stores: it says it is inside (owner_in = 1),
 * then checks that nobody revoked the bias.  Any other thread takes the word
 * first, then revokes: it sets revoked, makes every thread of the process
 * pass a full memory barrier (membarrier(2), so the owner itself needs
 * none: either the owner sees revoked, or the revoker sees owner_in), and
 * waits for the owner to be out.  A lock that other threads keep taking
 * drops its bias and is a plain futex lock, until one thread has it to
 * itself for a while again (EP__REBIAS_AFTER).
 */
#ifndef EP_LOCK_H
#define EP_LOCK_H

#include <linux/futex.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

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
	/* bias (atomics; see the top of this file) */
	const void *owner; /* the owning thread (ep__self()), or NULL */
	int owner_in;      /* the owner holds the lock without the word */
	int revoked;       /* the owner must take the word */
	/* with the word held: */
	unsigned foreign;  /* times another thread revoked the bias */
	int revoking;      /* this holder revoked it until its unlock */
	const void *last;  /* while shared: the last taker, and its run */
	unsigned streak;
};

/* A lock left unbiased (shared) is biased again to a thread that then
 * takes it this many times in a row with no other taker between: a burst
 * of calls from other threads (a monitor, a hand-off) does not cost its
 * owner the fast path for good. */
#define EP__REBIAS_AFTER 4096

/* This thread's identity for the bias: the address of a thread-local. */
extern __thread char ep__self_anchor __attribute__((tls_model("initial-exec")));

static inline const void *ep__self(void)
{
	return &ep__self_anchor;
}

/* Nonzero once membarrier(2) works in this process: locks may be biased
 * (never under Valgrind: Helgrind follows the word only). */
extern int ep__bias_ok;

/* Once per process and again in a fork child: can locks be biased? */
void ep__lock_setup(void);
/* In a fork child, which holds every lock: no thread of the parent is
 * here to use the fast path, so biases start afresh. */
void ep__lock_reset_child(struct ep__lock *l);
/* Out of line: revoke another thread's bias, with the word held. */
void ep__lock_revoke(struct ep__lock *l);
/* Revocations after which a lock stays unbiased (4). */
extern unsigned ep__lock_foreign_max;
/* For the lock's own test: revoke with the mprotect() fallback barrier. */
extern int ep__lock_test_no_membarrier;

/* (the annotations are client requests: issued only under Valgrind) */
static inline void ep__lock_init(struct ep__lock *l)
{
	l->word = 0;
	l->last = NULL;
	l->streak = 0;
	l->owner = NULL;
	l->owner_in = 0;
	l->revoked = 0;
	l->foreign = 0;
	l->revoking = 0;
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

static void ep__lock_slow(struct ep__lock *l)
{
	/* critical sections are short: a holder on another CPU is likely to
	 * be done within a few hundred cycles */
	for (int i = 0; i < 64; i++) {
		int z = 0;

		if (__atomic_load_n(&l->word, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&l->word, &z, 1, false, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	/* 2: whoever unlocks must wake someone; taking it as 2 is safe */
	while (__atomic_exchange_n(&l->word, 2, __ATOMIC_ACQUIRE) != 0)
		syscall(SYS_futex, &l->word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

/* With the word held, on a lock that is shared: bias it again to a thread
 * that has had it to itself for a while (EP__REBIAS_AFTER). */
static inline void ep__lock_shared_taken(struct ep__lock *l, const void *self, bool waited)
{
	if (l->last != self || waited) {
		l->last = self;
		l->streak = 0;
		return;
	}
	if (++l->streak < EP__REBIAS_AFTER)
		return;
	/* no thread can be inside on the fast path (there is no owner), and
	 * the next other taker revokes as for any owner */
	l->streak = 0;
	l->foreign = 0;
	__atomic_store_n(&l->revoked, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&l->owner, self, __ATOMIC_RELAXED);
}

static inline void ep__lock(struct ep__lock *l)
{
	const void *self = ep__self();
	const void *owner = __atomic_load_n(&l->owner, __ATOMIC_RELAXED);

	if (owner == self) {
		__atomic_store_n(&l->owner_in, 1, __ATOMIC_RELAXED);
		/* a compiler barrier only: the revoker's membarrier() is the
		 * other half of this store-then-load */
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (__builtin_expect(!__atomic_load_n(&l->revoked, __ATOMIC_ACQUIRE), 1))
			return;
		__atomic_store_n(&l->owner_in, 0, __ATOMIC_RELEASE);
	}

	int z = 0;
	bool waited = false;

	if (__builtin_expect(!__atomic_compare_exchange_n(&l->word, &z, 1, false,
							  __ATOMIC_ACQUIRE, __ATOMIC_RELAXED),
			     0)) {
		ep__lock_slow(l);
		waited = true;
	}
	if (ep__under_valgrind())
		ANNOTATE_RWLOCK_ACQUIRED(l, 1);
	/* the word is ours; the owner may only just have been set or cleared
	 * by the previous holder, so read it again */
	owner = __atomic_load_n(&l->owner, __ATOMIC_RELAXED);
	if (owner && owner != self)
		ep__lock_revoke(l);
	else if (!owner && ep__bias_ok && !__atomic_load_n(&l->revoked, __ATOMIC_RELAXED))
		__atomic_store_n(&l->owner, self, __ATOMIC_RELAXED); /* first taker */
	else if (!owner && ep__bias_ok)
		ep__lock_shared_taken(l, self, waited);
}

static inline void ep__unlock(struct ep__lock *l)
{
	if (__atomic_load_n(&l->owner, __ATOMIC_RELAXED) == ep__self() &&
	    __atomic_load_n(&l->owner_in, __ATOMIC_RELAXED)) {
		__atomic_store_n(&l->owner_in, 0, __ATOMIC_RELEASE);
		return;
	}
	if (l->revoking) {
		l->revoking = 0;
		__atomic_store_n(&l->revoked, 0, __ATOMIC_RELEASE); /* the owner's again */
	}
	if (ep__under_valgrind())
		ANNOTATE_RWLOCK_RELEASED(l, 1);
	if (__builtin_expect(__atomic_exchange_n(&l->word, 0, __ATOMIC_RELEASE) == 2, 0))
		syscall(SYS_futex, &l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

#endif /* EP_LOCK_H */
