/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * atomic.h - every atomic access of the library, through names that say
 * their memory order, so that each order is chosen once, at the call, and
 * reviewed here.  No other file of libexecpack/ spells an __atomic builtin.
 *
 * The orders, and why each exists:
 *
 *   relaxed   a value read or written alone: a flag or counter nothing else
 *             is published through (stats, the fork generation, lazily
 *             probed settings), a seqlock's fields between its fences, and
 *             every access made with the lock held that a lock-free reader
 *             may race (bitmap words, pack lengths);
 *   acquire / release
 *             publication: a writer fills an object, then stores its
 *             pointer or count with release; a reader that loads it with
 *             acquire sees the filling (route tables, symbol and info
 *             segments, a heap list, a lock word, a seqlock's count);
 *   acq_rel   a read-modify-write that both takes and hands over (a
 *             reference drop that may free, a CAS that installs a table);
 *   seq_cst   the Dekker-style pairs where each side stores, then loads
 *             what the other stored, and both must not miss each other: a
 *             remote free's pin against the drain's gate, a heap's orphan
 *             flag against its remote list, a pack's unmap against its
 *             pins.  Only seq_cst orders a store before a later load.
 *   fences    a seqlock writer's release fence after its odd count and a
 *             reader's acquire fence before its re-check; the signal fence
 *             keeps the compiler (only) from moving the biased lock's
 *             owner_in store past its revoked load: the other side is a
 *             process-wide barrier (lock.h).
 *
 * A compare-and-swap named by its success order fails with the strongest
 * order a failure may have (acquire after acquire or acq_rel, else
 * relaxed); the _weak ones may fail spuriously, and so sit in retry loops,
 * and fail relaxed: the loop reloads.  The add/sub helpers return the new
 * value.
 *
 * The helpers take a pointer to a plain or an _Atomic object.  Fields that
 * only these helpers touch are _Atomic (a plain access to one would be a
 * seq_cst atomic, so none may be left): the lock's word and bias fields, a
 * heap's remote-free fields, owner and orphan flag, a pack's pins and
 * queued flag, the pool's heap list and counts, thread references, the
 * lazily probed settings, diag-symtab.c's seqlock slots.  Fields that code holding a lock also reads and
 * writes plainly stay plain, as their hot paths are written for that, and
 * only their racing accesses come here: bitmap words (used, start, and the
 * done maps that share their allocation), chunk states, a pack's length,
 * seq and region (r.exec, r.gen: struct ep__region is every backend's),
 * the stats tally, info.c's seqlock slots (a plain struct ep__info_entry,
 * copied field by field), the route table's slots (void * nodes), info.c's
 * hint table, and the test knobs ep__valgrind and ep__bias_ok.  The
 * cast drops _Atomic (the comma makes an rvalue, whose type has no
 * qualifier), which clang's builtins require: _Atomic and plain objects of
 * these sizes have the same representation on the targets the library
 * builds for.
 */
#ifndef EP_ATOMIC_H
#define EP_ATOMIC_H

#define EP__A(p) ((__typeof__((void)0, *(p)) *)(p))

#define ep__load_relaxed(p)	__atomic_load_n(EP__A(p), __ATOMIC_RELAXED)
#define ep__load_acquire(p)	__atomic_load_n(EP__A(p), __ATOMIC_ACQUIRE)
#define ep__load_seq_cst(p)	__atomic_load_n(EP__A(p), __ATOMIC_SEQ_CST)

#define ep__store_relaxed(p, v)	__atomic_store_n(EP__A(p), (v), __ATOMIC_RELAXED)
#define ep__store_release(p, v)	__atomic_store_n(EP__A(p), (v), __ATOMIC_RELEASE)
#define ep__store_seq_cst(p, v)	__atomic_store_n(EP__A(p), (v), __ATOMIC_SEQ_CST)

#define ep__xchg_acquire(p, v)	__atomic_exchange_n(EP__A(p), (v), __ATOMIC_ACQUIRE)
#define ep__xchg_release(p, v)	__atomic_exchange_n(EP__A(p), (v), __ATOMIC_RELEASE)
#define ep__xchg_seq_cst(p, v)	__atomic_exchange_n(EP__A(p), (v), __ATOMIC_SEQ_CST)

/* true when *p was *expected and is now desired; else *expected is *p */
#define ep__cas_relaxed(p, expected, desired)                                   \
	__atomic_compare_exchange_n(EP__A(p), (expected), (desired), 0,        \
				    __ATOMIC_RELAXED, __ATOMIC_RELAXED)
#define ep__cas_acquire(p, expected, desired)                                   \
	__atomic_compare_exchange_n(EP__A(p), (expected), (desired), 0,        \
				    __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)
#define ep__cas_acq_rel(p, expected, desired)                                   \
	__atomic_compare_exchange_n(EP__A(p), (expected), (desired), 0,        \
				    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
#define ep__cas_weak_acquire(p, expected, desired)                              \
	__atomic_compare_exchange_n(EP__A(p), (expected), (desired), 1,        \
				    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)
#define ep__cas_weak_release(p, expected, desired)                              \
	__atomic_compare_exchange_n(EP__A(p), (expected), (desired), 1,        \
				    __ATOMIC_RELEASE, __ATOMIC_RELAXED)
#define ep__cas_weak_seq_cst(p, expected, desired)                              \
	__atomic_compare_exchange_n(EP__A(p), (expected), (desired), 1,        \
				    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)

#define ep__add_relaxed(p, v)	__atomic_add_fetch(EP__A(p), (v), __ATOMIC_RELAXED)
#define ep__add_release(p, v)	__atomic_add_fetch(EP__A(p), (v), __ATOMIC_RELEASE)
#define ep__add_seq_cst(p, v)	__atomic_add_fetch(EP__A(p), (v), __ATOMIC_SEQ_CST)
#define ep__sub_relaxed(p, v)	__atomic_sub_fetch(EP__A(p), (v), __ATOMIC_RELAXED)
#define ep__sub_release(p, v)	__atomic_sub_fetch(EP__A(p), (v), __ATOMIC_RELEASE)
#define ep__sub_acq_rel(p, v)	__atomic_sub_fetch(EP__A(p), (v), __ATOMIC_ACQ_REL)
#define ep__sub_seq_cst(p, v)	__atomic_sub_fetch(EP__A(p), (v), __ATOMIC_SEQ_CST)
#define ep__or_release(p, v)	__atomic_fetch_or(EP__A(p), (v), __ATOMIC_RELEASE)

#define ep__fence_acquire()	__atomic_thread_fence(__ATOMIC_ACQUIRE)
#define ep__fence_release()	__atomic_thread_fence(__ATOMIC_RELEASE)
#define ep__fence_seq_cst()	__atomic_thread_fence(__ATOMIC_SEQ_CST)
#define ep__signal_fence()	__atomic_signal_fence(__ATOMIC_SEQ_CST)

#endif
