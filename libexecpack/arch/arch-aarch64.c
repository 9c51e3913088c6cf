/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * arch-aarch64.c - arm64: BRK fills, and instruction-cache maintenance.
 *
 * The instruction cache does not snoop stores.  After code is written
 * through another mapping, the data cache is cleaned to the point of
 * unification and the instruction cache invalidated by the executable
 * address (__builtin___clear_cache, which ends with DSB and ISB on this
 * core).  Another thread may have fetched the old instructions already;
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) makes every core
 * that runs the process pass a context synchronisation before the call
 * returns.  Where the kernel refuses it (too old, seccomp, Valgrind) the
 * other threads synchronise at their next exception return, as they would
 * without the library's help.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "atomic.h"
#include "execpack.h"
#include "arch.h"

void ep__fill_default(void *dst, size_t len, void *ctx)
{
	ep_fill_arm64_brk(dst, len, ctx);
}

/* 0: not tried yet, 1: registered, -1: not available */
static _Atomic int g_sync_core;

static int membarrier_cmd(int cmd)
{
	return (int)syscall(SYS_membarrier, cmd, 0u, 0);
}

static int sync_core_register(void)
{
	int cmds = membarrier_cmd(MEMBARRIER_CMD_QUERY);

	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) ||
	    membarrier_cmd(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE) != 0)
		return -1;
	return 1;
}

static void sync_other_cores(void)
{
	int s = ep__load_relaxed(&g_sync_core);
	int saved = errno;

	if (s == 0) {
		/* registering twice is harmless, so racing threads need no lock */
		s = sync_core_register();
		ep__store_relaxed(&g_sync_core, s);
	}
	if (s > 0 && membarrier_cmd(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) != 0 &&
	    errno == EPERM) {
		/* a child of fork() or exec() is not registered: once more */
		s = sync_core_register();
		ep__store_relaxed(&g_sync_core, s);
		if (s > 0)
			(void)membarrier_cmd(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE);
	}
	errno = saved;
}

void ep__sync_icache(void *exec, size_t len)
{
	if (!len)
		return;
	__builtin___clear_cache((char *)exec, (char *)exec + len);
	sync_other_cores();
}
