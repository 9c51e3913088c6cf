/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * arch-riscv64.c - riscv64: c.ebreak fills, and fence.i on every hart.
 *
 * 0xcccc, the x86 fill, is a store here (c.sw); c.ebreak at every 2-byte
 * boundary traps wherever a stray jump lands.  The instruction fetch of a
 * hart sees stores only after a fence.i on that hart; the
 * riscv_flush_icache system call with no flags has the kernel make every
 * hart running the process (and any it moves to later) execute one.
 */
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "execpack.h"
#include "arch.h"

#ifndef SYS_riscv_flush_icache
#define SYS_riscv_flush_icache 259 /* the generic table's arch-specific 244 + 15 */
#endif

void ep__fill_default(void *dst, size_t len, void *ctx)
{
	ep_fill_riscv_ebreak(dst, len, ctx);
}

void ep__sync_icache(void *exec, size_t len)
{
	int saved = errno;

	if (!len)
		return;
	/* flags 0: all threads of the process, not only this hart.  It fails
	 * only for a bad range, which the pool never passes. */
	(void)syscall(SYS_riscv_flush_icache, exec, (char *)exec + len, 0UL);
	errno = saved;
}
