/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * guard.h - what the hardware adds to guard code memory, for the backends
 * that map a region twice (memfd, hugetlb):
 *
 * - protection keys (x86-64, EP_GUARD_PKEY): the RW alias of every region
 *   carries one key of the library's (pkey_mprotect), and every thread has
 *   that key access-disabled in its PKRU at all times, except between
 *   ep__alias_open() and ep__alias_close(), which the backends put around
 *   every access through the alias.  A store to the alias from anywhere
 *   else faults (SIGSEGV, si_code SEGV_PKUERR), whatever the thread.
 * - BTI (arm64, EP_GUARD_BTI): the exec views are mapped PROT_BTI
 *   (EP_F_BTI, EXECPACK_BTI=1), so an indirect branch into them must land
 *   on a BTI landing pad.
 *
 * Why every thread has the key access-disabled (Linux, arch/x86): a
 * process starts with init_pkru, every key but 0 access-disabled; a new
 * thread copies its creator's PKRU at clone, and a fork child the forking
 * thread's; pkey_alloc() sets the rights of the calling thread only; a
 * signal handler starts with init_pkru and sigreturn puts the interrupted
 * value back.  So guard.c allocates the key access-disabled, once per
 * process, and takes only a key whose rights were still access-disabled in
 * the allocating thread before (a key that this process used and freed
 * before may be allowed in threads made meanwhile): threads made before
 * the key have init_pkru's rights for it, threads made after copy a
 * disabled key from their creator.
 *
 * The window: ep__alias_open() clears the key's two bits and no other (a
 * caller's own keys stay as they are) and counts its depth in the thread;
 * ep__alias_close() puts back the value it found, except that the
 * outermost close disables the key whatever it found: a thread that had
 * allowed the key itself (WRPKRU) is covered again after its first copy.
 * A signal handler that interrupts a window runs with the key disabled,
 * and opens a window of its own if it calls the library.  Not covered: a
 * thread that allows the key itself (the WRPKRU gadget of libexecpack(7)),
 * and a fill function that never returns to its window's close.
 */
#ifndef EP_GUARD_H
#define EP_GUARD_H

#include <stdint.h>
#include <sys/mman.h>

#include "backend.h"
#include "execpack.h"

#if defined(__x86_64__)
#define EP__HAVE_PKEY 1

/* The library's protection key, -1 until a pool allocates it; read only
 * where a region has EP_GUARD_PKEY, which it has only once set. */
extern int ep__pkey;
extern __thread unsigned ep__pkey_depth __attribute__((tls_model("initial-exec")));

/* RDPKRU and WRPKRU, spelled out for assemblers that do not know them */
static inline uint32_t ep__rdpkru(void)
{
	uint32_t eax, edx;

	__asm__ volatile(".byte 0x0f, 0x01, 0xee" : "=a"(eax), "=d"(edx) : "c"(0));
	(void)edx;
	return eax;
}

/* ("memory": no access through the alias moves across it) */
static inline void ep__wrpkru(uint32_t pkru)
{
	__asm__ volatile(".byte 0x0f, 0x01, 0xef" : : "a"(pkru), "c"(0), "d"(0) : "memory");
}
#endif

/*
 * Allow this thread, and no other, to access an alias of guards until
 * ep__alias_close(guards, what this returned).  Nothing without
 * EP_GUARD_PKEY: one test of a byte the caller has at hand.
 */
static inline uint32_t ep__alias_open(unsigned guards)
{
#ifdef EP__HAVE_PKEY
	if (guards & EP_GUARD_PKEY) {
		uint32_t was = ep__rdpkru(), bits = 3u << (2 * (unsigned)ep__pkey);

		if (was & bits)
			ep__wrpkru(was & ~bits);
		ep__pkey_depth++;
		return was;
	}
#endif
	(void)guards;
	return 0;
}

static inline void ep__alias_close(unsigned guards, uint32_t was)
{
#ifdef EP__HAVE_PKEY
	if (guards & EP_GUARD_PKEY) {
		unsigned shift = 2 * (unsigned)ep__pkey;
		uint32_t now = was & ~(3u << shift);
		uint32_t want = --ep__pkey_depth ? was : now | PKEY_DISABLE_ACCESS << shift;

		if (want != now)
			ep__wrpkru(want);
	}
#endif
	(void)guards;
	(void)was;
}

#ifndef PROT_BTI
#define PROT_BTI 0x10 /* arm64's; guard.c never sets EP_GUARD_BTI elsewhere */
#endif

/* The protection of an exec view with guards. */
static inline int ep__exec_prot(unsigned guards)
{
	return PROT_READ | PROT_EXEC | (guards & EP_GUARD_BTI ? PROT_BTI : 0);
}

/*
 * For a backend's open: the EP_GUARD_* its regions get with cfg (its
 * flags, EXECPACK_PKEY, EXECPACK_BTI), and in *pkey_off why not the key
 * (a static string; NULL when it is on).  -EOPNOTSUPP, with a reason in
 * why, when BTI is asked for and cannot be had.
 */
int ep__guards_open(const struct ep_config *cfg, const char *backend, unsigned *guards,
		    const char **pkey_off, char *why, size_t whylen);

/* Whether cfg (EP_F_BTI) or EXECPACK_BTI asks for BTI. */
int ep__bti_wanted(const struct ep_config *cfg);

/* Put a new alias mapping under the key (EP_GUARD_PKEY), else nothing. */
int ep__guard_alias(unsigned guards, void *rw, size_t size);

#endif /* EP_GUARD_H */
