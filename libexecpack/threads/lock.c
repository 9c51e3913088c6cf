/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lock.c - the slow half of the heap lock's bias (lock.h): revoking it,
 * and whether this process can bias at all; the barrier on every thread
 * that revoking and some waits (wait.h) need.
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <limits.h>
#include <linux/membarrier.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "lock.h"

__thread char ep__self_anchor __attribute__((tls_model("initial-exec")));
int ep__bias_ok;

#if defined(__x86_64__) || defined(__i386__)
#define EP__LOCK_BIAS 1
#else
#define EP__LOCK_BIAS 0
#endif

#ifdef EP_LOCK_TEST
/* check_lock's build only: revoke with the mprotect() fallback barrier */
int ep__lock_test_no_membarrier;
#else
#define ep__lock_test_no_membarrier 0
#endif

#ifndef SYS_membarrier
#define ep__membarrier(cmd) (errno = ENOSYS, -1)
#else
static int ep__membarrier(int cmd)
{
	return (int)syscall(SYS_membarrier, cmd, 0u, 0);
}
#endif

/* A page of our own whose protection ep__barrier_all() may change (x86),
 * mapped by the first barrier that membarrier(2) refuses: published once. */
#if defined(__x86_64__) || defined(__i386__)
static unsigned char *g_barrier_page;
#endif

#if defined(__x86_64__) || defined(__i386__)
static int protect(unsigned char *page, int prot)
{
	for (int tries = 0; tries < 1000; tries++) {
		if (mprotect(page, ep__page_size(), prot) == 0)
			return 0;
		/* (the kernel short of memory for a moment: not a spin) */
		struct timespec ts = { 0, 20 * 1000 };

		nanosleep(&ts, NULL);
	}
	return -1;
}
#endif

/*
 * Every running thread of this process passes a full memory barrier before
 * this returns (membarrier(2), registered by the first call that needs it:
 * a process whose locks no second thread takes never asks).  Should the
 * call fail (an old kernel, a seccomp filter), on x86 changing a
 * page's protection makes the kernel interrupt every CPU that runs this
 * process to flush its TLB, which serves as the barrier there.  Not
 * elsewhere: arm64 invalidates TLBs by a broadcast instruction that
 * interrupts nobody, and so may others; false then.
 */
bool ep__barrier_all(void)
{
	if (!ep__lock_test_no_membarrier) {
		if (ep__membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
			return true;
		if (ep__membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
		    ep__membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
			return true;
	}
#if defined(__x86_64__) || defined(__i386__)
	unsigned char *page = ep__load_acquire(&g_barrier_page);

	if (!page) {
		void *m = mmap(NULL, ep__page_size(), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			return false;
		page = m;
		if (!ep__cas_acq_rel(&g_barrier_page, &(unsigned char *){ NULL }, page)) {
			munmap(m, ep__page_size()); /* another revoker's came first */
			page = ep__load_acquire(&g_barrier_page);
		}
	}
	ep__store_seq_cst(page, 1);
	if (protect(page, PROT_READ) == 0 && protect(page, PROT_READ | PROT_WRITE) == 0)
		return true;
#endif
	return false;
}

void ep__futex_wake_cold(const void *word)
{
	ep__futex_wake(word);
}

/* For a revocation, which cannot go on without it: fails closed, the
 * process stops rather than let two threads in.  (x86 only: there is no
 * bias elsewhere, lock.h.) */
static void heavy_barrier(void)
{
	if (ep__barrier_all())
		return;
	static const char msg[] =
		"libexecpack: no memory barrier can be issued (membarrier and mprotect fail)\n";

	(void)!write(2, msg, sizeof(msg) - 1);
	abort();
}

/*
 * Called by ep_pool_create() (under its once-lock) and in fork children.
 * The bias is x86's only (lock.h), where ep__barrier_all() has its
 * mprotect() fallback: no system call here; membarrier(2) is registered,
 * or the fallback page mapped, by the first revocation (the start-up of a
 * process that JITs once, issue 42).  Should both fail then, the
 * revocation stops the process (heavy_barrier()), as it did before when a
 * seccomp filter came after the pool.
 */
void ep__lock_setup(void)
{
	ep__store_relaxed(&ep__bias_ok, !ep__under_valgrind() && EP__LOCK_BIAS);
}

/* A lock whose bias was revoked this often stays a plain futex lock (each
 * revocation interrupts every CPU running the process). */
#define FOREIGN_MAX 4

void ep__lock_revoke(struct ep__lock *l)
{
	ep__store_relaxed(&l->revoked, 1);
	heavy_barrier();
	/* the owner is out, or will see revoked and take the word instead;
	 * it may hold the lock for long (a caller's fill, a new pack's mmap,
	 * a copy after fork): sleep then, until its ep__lock_owner_out() */
	for (unsigned spins = 0; ep__load_acquire(&l->owner_in); spins++) {
		if (EP_SPIN(spins, "lock revoke"))
			continue;
		ep__store_relaxed(&l->sleeper, 1);
		/* the owner's store of owner_in then load of sleeper, against
		 * this store then load: either it sees the flag and wakes us,
		 * or we see it out */
		heavy_barrier();
		while (ep__load_acquire(&l->owner_in))
			ep__futex_wait(&l->owner_in, 1, NULL);
		ep__store_relaxed(&l->sleeper, 0);
		break;
	}
	if (++l->foreign >= FOREIGN_MAX)
		ep__store_relaxed(&l->owner, NULL); /* revoked stays set */
	else
		l->revoking = 1; /* given back at unlock */
}

void ep__lock_wake_revoker(struct ep__lock *l)
{
	ep__futex_wake(&l->owner_in);
}

void ep__lock_word(struct ep__lock *l)
{
	const void *self = ep__self();

	if (__builtin_expect(!ep__lock_try(l), 0))
		ep__lock_slow(l);
	if (ep__under_valgrind())
		ANNOTATE_RWLOCK_ACQUIRED(l, 1);
	/* the word is ours; the owner may only just have been set or dropped
	 * by the previous holder, so read it again */
	const void *owner = ep__load_relaxed(&l->owner);

	if (owner && owner != self)
		ep__lock_revoke(l);
	else if (!owner && ep__bias_ok && !ep__load_relaxed(&l->revoked))
		ep__store_relaxed(&l->owner, self); /* the first taker */
	EP_IL_ENTER(l);
}
