/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fill.c - the trap fills of every architecture (what every hole and freed
 * range holds, so that a stray jump into it stops the program instead of
 * running stale code) and the single-store copy of code bytes.  Every fill
 * is built on every architecture: a JIT may write code for another one.
 */
#include <string.h>

#include "atomic.h"
#include "execpack.h"
#include "internal.h"

EP_API void ep_fill_x86_int3(void *dst, size_t len, void *ctx)
{
	(void)ctx;
	if (dst)
		memset(dst, 0xcc, len); /* INT3: a one-byte trap, valid at any offset */
}

/*
 * The instruction at each address is chosen by the address, not by the
 * offset in the range, so that a fill of any part of a buffer lines up with
 * the instruction boundaries of the code around it.
 */
EP_API void ep_fill_arm64_brk(void *dst, size_t len, void *ctx)
{
	/* BRK #0x3e8 (0xd4207d00), little endian; instructions are 4-byte aligned */
	static const unsigned char brk[4] = { 0x00, 0x7d, 0x20, 0xd4 };
	unsigned char *p = dst;

	(void)ctx;
	if (!p)
		return;
	for (size_t i = 0; i < len; i++)
		p[i] = brk[((uintptr_t)(p + i)) & 3];
}

EP_API void ep_fill_riscv_ebreak(void *dst, size_t len, void *ctx)
{
	/* c.ebreak (0x9002): a trap at every 2-byte boundary; 0x90029002 read
	 * as a 32-bit word is two of them, not a 4-byte instruction */
	static const unsigned char ebreak[2] = { 0x02, 0x90 };
	unsigned char *p = dst;

	(void)ctx;
	if (!p)
		return;
	for (size_t i = 0; i < len; i++)
		p[i] = ebreak[((uintptr_t)(p + i)) & 1];
}

void ep__copy_code_word(void *dst, const void *src, size_t len)
{
	uintptr_t a = (uintptr_t)dst;

	if (len && len <= 8 && (a & ~(uintptr_t)7) == ((a + len - 1) & ~(uintptr_t)7) &&
	    (a & (len - 1)) == 0 && (len & (len - 1)) == 0) {
		/* naturally aligned 1/2/4/8-byte store: single-copy atomic */
		switch (len) {
		case 1: { uint8_t v; memcpy(&v, src, 1); ep__store_release((uint8_t *)dst, v); return; }
		case 2: { uint16_t v; memcpy(&v, src, 2); ep__store_release((uint16_t *)dst, v); return; }
		case 4: { uint32_t v; memcpy(&v, src, 4); ep__store_release((uint32_t *)dst, v); return; }
		default: { uint64_t v; memcpy(&v, src, 8); ep__store_release((uint64_t *)dst, v); return; }
		}
	}
	if (len && len <= 8 && (a & ~(uintptr_t)7) == ((a + len - 1) & ~(uintptr_t)7)) {
		/* inside one 8-byte word but unaligned: read-modify-write that word
		 * with a compare-exchange so the update is still one store */
		uint64_t *w = (uint64_t *)(a & ~(uintptr_t)7);
		size_t sh = a & 7;
		uint64_t old = ep__load_relaxed(w), nv;

		do {
			nv = old;
			memcpy((unsigned char *)&nv + sh, src, len);
		} while (!ep__cas_weak_release(w, &old, nv));
		return;
	}
	memcpy(dst, src, len);
}
