/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * internal.h - declarations shared by the library's own files.
 * Internal names carry the ep__ prefix and are never exported.
 */
#ifndef EP_INTERNAL_H
#define EP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arch.h"
#include "atomic.h"
#include "backend.h"

#define EP__DEFAULT_PACK_SIZE ((size_t)2 << 20)
#define EP__MAX_PACK_SIZE ((size_t)1 << 30)

static inline size_t ep__round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* pages.c: the base page size of the running kernel (4, 16 or 64 KiB), and
 * the size of the huge pages vm.nr_hugepages reserves (its PMD size: 2 MiB
 * with 4 KiB pages, 32 MiB with 16 KiB, 512 MiB with 64 KiB). */
size_t ep__page_size(void);
size_t ep__huge_page_size(void);

/*
 * Nonzero when running under Valgrind (set by ep_pool_create(), which comes
 * before any other call on a pool): the Valgrind hooks on the hot paths test
 * this one word instead of issuing a client request every time.
 */
extern int ep__valgrind;

static inline int ep__under_valgrind(void)
{
	return __builtin_expect(ep__load_relaxed(&ep__valgrind), 0);
}

/*
 * Store len bytes at dst.  A store of up to 8 bytes that does not cross an
 * 8-byte boundary is done as one aligned access where possible, so that a
 * concurrent reader sees the old or the new bytes, never a mix (instruction
 * fetch sees up to EP__ARCH_PATCH_WORD bytes of it whole, arch.h).
 */
void ep__copy_code_word(void *dst, const void *src, size_t len);

static inline void ep__copy_code(void *dst, const void *src, size_t len)
{
	if (len > 8)
		memcpy(dst, src, len); /* (past 8 bytes nothing is promised whole) */
	else
		ep__copy_code_word(dst, src, len);
}

/*
 * near.c: reserve (PROT_NONE) size bytes at an align-aligned address whose
 * every byte lies within 2 GiB minus margin of near, for a backend to map
 * over with MAP_FIXED.  -EADDRNOTAVAIL when no such range is free.
 */
int ep__near_reserve(const void *near, size_t margin, size_t size, size_t align, void **out);

/* snprintf into why (may be NULL) for a backend's failure reason. */
void ep__why(char *why, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * The C library's description of errno value e (either sign) for a why
 * message: thread-safe and locale-independent, unlike strerror().
 */
const char *ep__errno_text(int e);

/* The fork generation: raised in a child of fork(), never in the parent
 * (fork.c); a region made or copied in an older one is shared. */
extern _Atomic unsigned ep__fork_gen;

static inline unsigned ep__fork_generation(void)
{
	return ep__load_relaxed(&ep__fork_gen);
}

#endif /* EP_INTERNAL_H */
