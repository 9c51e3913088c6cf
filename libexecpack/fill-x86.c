/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fill-x86.c - trap fills: what every hole and freed range holds, so that a
 * stray jump into it stops the program instead of running stale code.
 */
#include <string.h>

#include "execpack.h"
#include "internal.h"

EP_API void ep_fill_x86_int3(void *dst, size_t len, void *ctx)
{
	(void)ctx;
	if (dst)
		memset(dst, 0xcc, len); /* INT3: a one-byte trap, valid at any offset */
}

#if defined(__aarch64__)
/* BRK #0x3e8, little endian; code there is 4-byte aligned. */
static void fill_arm64_brk(void *dst, size_t len)
{
	static const unsigned char brk[4] = { 0x00, 0x7d, 0x20, 0xd4 };
	unsigned char *p = dst;

	for (size_t i = 0; i < len; i++)
		p[i] = brk[((uintptr_t)(p + i)) & 3];
}
#endif

void ep__fill_default(void *dst, size_t len, void *ctx)
{
#if defined(__aarch64__)
	(void)ctx;
	fill_arm64_brk(dst, len);
#else
	ep_fill_x86_int3(dst, len, ctx);
#endif
}

#if !defined(__x86_64__) && !defined(__i386__)
void ep__sync_icache(void *addr, size_t len)
{
	__builtin___clear_cache((char *)addr, (char *)addr + len);
}
#endif

void ep__copy_code(void *dst, const void *src, size_t len)
{
	uintptr_t a = (uintptr_t)dst;

	if (len && len <= 8 && (a & ~(uintptr_t)7) == ((a + len - 1) & ~(uintptr_t)7) &&
	    (a & (len - 1)) == 0 && (len & (len - 1)) == 0) {
		/* naturally aligned 1/2/4/8-byte store: single-copy atomic */
		switch (len) {
		case 1: { uint8_t v; memcpy(&v, src, 1); __atomic_store_n((uint8_t *)dst, v, __ATOMIC_RELEASE); return; }
		case 2: { uint16_t v; memcpy(&v, src, 2); __atomic_store_n((uint16_t *)dst, v, __ATOMIC_RELEASE); return; }
		case 4: { uint32_t v; memcpy(&v, src, 4); __atomic_store_n((uint32_t *)dst, v, __ATOMIC_RELEASE); return; }
		default: { uint64_t v; memcpy(&v, src, 8); __atomic_store_n((uint64_t *)dst, v, __ATOMIC_RELEASE); return; }
		}
	}
	if (len && len <= 8 && (a & ~(uintptr_t)7) == ((a + len - 1) & ~(uintptr_t)7)) {
		/* inside one 8-byte word but unaligned: read-modify-write that word
		 * with a compare-exchange so the update is still one store */
		uint64_t *w = (uint64_t *)(a & ~(uintptr_t)7);
		size_t sh = a & 7;
		uint64_t old = __atomic_load_n(w, __ATOMIC_RELAXED), nv;

		do {
			nv = old;
			memcpy((unsigned char *)&nv + sh, src, len);
		} while (!__atomic_compare_exchange_n(w, &old, nv, 1, __ATOMIC_RELEASE,
						      __ATOMIC_RELAXED));
		return;
	}
	memcpy(dst, src, len);
}
