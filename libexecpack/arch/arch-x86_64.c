/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * arch-x86_64.c - x86-64: INT3 fills every byte, and the caches snoop
 * stores, so code written through another mapping needs no maintenance
 * (arch.h's ep__sync_icache() is an empty inline here).
 */
#include "execpack.h"
#include "arch.h"

void ep__fill_default(void *dst, size_t len, void *ctx)
{
	ep_fill_x86_int3(dst, len, ctx);
}
