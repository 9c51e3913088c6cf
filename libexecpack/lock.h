/*
 * lock.h - the sub-pool lock: one futex word.
 *
 * An uncontended pthread mutex lock and unlock cost about 35 cycles here,
 * against 7 for a compare-exchange and an exchange, and a small
 * alloc/finalize/free cycle takes the lock three times.  The word is 0 (free),
 * 1 (held) or 2 (held, and a thread may be asleep on it).  A contended
 * locker spins briefly, then sleeps in futex(2); unlock wakes one sleeper.
 * Helgrind is told what the lock is (it does not see atomics).
 */
#ifndef EP_LOCK_H
#define EP_LOCK_H

#include <linux/futex.h>
#include <stdbool.h>
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
	/* Set to CONTENDED_OPS by a locker that had to wait, counted down by
	 * the holder (ep__lock_contended()): says whether it pays to release
	 * the lock for long copies.  Only read or written with the lock held. */
	unsigned contended;
};

#define CONTENDED_OPS 4096

/* (the annotations are client requests: issued only under Valgrind) */
static inline void ep__lock_init(struct ep__lock *l)
{
	l->word = 0;
	l->contended = 0;
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

/* With the lock held: has another thread wanted it lately? */
static inline bool ep__lock_contended(struct ep__lock *l)
{
	if (!l->contended)
		return false;
	l->contended--;
	return true;
}

static inline void ep__lock(struct ep__lock *l)
{
	int z = 0;

	if (__builtin_expect(!__atomic_compare_exchange_n(&l->word, &z, 1, false,
							  __ATOMIC_ACQUIRE, __ATOMIC_RELAXED),
			     0)) {
		ep__lock_slow(l);
		if (ep__under_valgrind())
			ANNOTATE_RWLOCK_ACQUIRED(l, 1);
		/* (after the annotation: helgrind must see this written with
		 * the lock held) */
		l->contended = CONTENDED_OPS;
		return;
	}
	if (ep__under_valgrind())
		ANNOTATE_RWLOCK_ACQUIRED(l, 1);
}

static inline void ep__unlock(struct ep__lock *l)
{
	if (ep__under_valgrind())
		ANNOTATE_RWLOCK_RELEASED(l, 1);
	if (__builtin_expect(__atomic_exchange_n(&l->word, 0, __ATOMIC_RELEASE) == 2, 0))
		syscall(SYS_futex, &l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

#endif /* EP_LOCK_H */
