/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * guard.h - what the hardware adds to guard code memory, for the backends
 * that map a region twice (memfd, hugetlb):
 *
 * - protection keys (x86-64, EP_GUARD_PKEY): the RW alias of every region
 *   carries one key of the library's (pkey_mprotect), and every thread has
 *   that key access-disabled in its PKRU at all times, except in the
 *   window in which the backends make every access through the alias
 *   (ep__alias_fill(), ep__alias_copy()).  A store to the alias from
 *   anywhere else faults (SIGSEGV, si_code SEGV_PKUERR), in any thread.
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
 * The window (guard.c): it clears the key's two bits and no other (a
 * caller's own keys stay as they are) and counts its depth in the thread;
 * at its end it puts back the value it found, except that the outermost
 * window disables the key whatever it found: a thread that had allowed the
 * key itself (WRPKRU) is covered again after its first copy.
 * A signal handler that interrupts a window runs with the key disabled,
 * and opens a window of its own if it calls the library.  The caller's
 * fill (ep_config.fill) never runs in a window: ep__fill_caller() closes
 * the key around it and copies what it wrote, so that a thread it makes
 * starts with the key disabled.  Not covered: a thread that allows the key
 * itself (the WRPKRU gadget of libexecpack(7)).
 */
#ifndef EP_GUARD_H
#define EP_GUARD_H

#include <sys/mman.h>

#include "backend.h"
#include "execpack.h"
#include "internal.h"

#if defined(__x86_64__)
#define EP__HAVE_PKEY 1
#endif

/* The same, in a window that allows the key (guard.c; EP_GUARD_PKEY only). */
void ep__alias_fill_keyed(ep_fill_fn fill, void *dst, size_t len, void *ctx);
void ep__alias_copy_keyed(void *dst, const void *src, size_t len);

/* The caller's fill(dst, len, ctx), called by a fill that may run in a
 * window: inside one, with the key disabled, through a buffer (guard.c). */
void ep__fill_caller(ep_fill_fn fill, void *dst, size_t len, void *ctx);

/*
 * Every access through an alias of guards goes through one of these two:
 * fill(dst, len, ctx), or ep__copy_code(dst, src, len), with dst or src in
 * the alias.  With EP_GUARD_PKEY they run in a window that allows the key
 * in this thread only; without it, as they did before keys, one test more
 * (the window, out of line, costs far more than the call the hint adds).
 */
static inline void ep__alias_fill(unsigned guards, ep_fill_fn fill, void *dst, size_t len,
				  void *ctx)
{
	if (__builtin_expect(guards & EP_GUARD_PKEY, 0))
		ep__alias_fill_keyed(fill, dst, len, ctx);
	else
		ep__fill_with(fill, dst, len, ctx);
}

static inline void ep__alias_copy(unsigned guards, void *dst, const void *src, size_t len)
{
	if (__builtin_expect(guards & EP_GUARD_PKEY, 0))
		ep__alias_copy_keyed(dst, src, len);
	else
		ep__copy_code(dst, src, len);
}

#ifndef PROT_BTI
#define PROT_BTI 0x10 /* arm64's; guard.c never sets EP_GUARD_BTI elsewhere */
#endif

/* The protection of an exec view with guards: a data region's is never
 * executable (backend.h). */
static inline int ep__exec_prot(unsigned guards)
{
	if (__builtin_expect(guards & EP__GUARD_DATA, 0))
		return guards & EP__GUARD_DATA_RW ? PROT_READ | PROT_WRITE : PROT_READ;
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
