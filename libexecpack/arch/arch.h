/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * arch.h - what differs between the CPU architectures the library runs on.
 *
 * One arch-<cpu>.c per architecture implements it, chosen by configure from
 * the host triplet: the default trap fill, making code written through
 * another mapping visible to instruction fetch on every core, and the
 * constants the diagnostics (diag-*.c) and heap.c need (ELF machine, DWARF
 * registers, the frame-record layout, signal frames, the mseal system
 * call).
 */
#ifndef EP_ARCH_H
#define EP_ARCH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The architecture's trap fill, used when ep_config.fill is NULL. */
void ep__fill_default(void *dst, size_t len, void *ctx);

/* fill(dst, len, ctx); the default fill inline where it is one memset (on
 * every ep_alloc() and ep_free()). */
static inline void ep__fill_with(void (*fill)(void *, size_t, void *), void *dst, size_t len,
				 void *ctx)
{
#if defined(__x86_64__) || defined(__i386__)
	if (fill == ep__fill_default) {
		memset(dst, 0xcc, len); /* INT3, as ep_fill_x86_int3() */
		return;
	}
#endif
	fill(dst, len, ctx);
}

/*
 * Make [exec, exec+len), written through another mapping (the RW alias, the
 * kernel's), visible to instruction fetch at its executable address on every
 * core that may run it: nothing on x86, whose caches snoop stores; on arm64
 * a clean to the point of unification and an instruction cache invalidate by
 * the executable address, then a context synchronisation of the process's
 * other threads (membarrier SYNC_CORE, where the kernel has it); on riscv64
 * a fence.i on every hart (the riscv_flush_icache system call).
 */
#if defined(__x86_64__) || defined(__i386__)
static inline void ep__sync_icache(void *exec, size_t len)
{
	(void)exec;
	(void)len;
}
#else
void ep__sync_icache(void *exec, size_t len);
#endif

/* A spinning wait's pause: lets the other hyperthread and the holder's
 * cache line go (x86's PAUSE; a plain loop elsewhere). */
static inline void ep__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/*
 * Per architecture:
 *   EP__ARCH_NAME        for messages
 *   EP__ARCH_ELF_MACHINE e_machine of the GDB JIT interface's ELF files
 *   EP__ARCH_PATCH_WORD  the largest aligned store that instruction fetch
 *                        sees whole (ep_write(3)'s atomic patch)
 *   EP__ARCH_USER_TOP    where user mappings end without a hint above it
 *                        (near.c's search stops there)
 *   EP__ARCH_SYS_MSEAL   mseal(2)'s number (the generic table's on arm64
 *                        and riscv64; x86-64's own table gives it the same)
 *   EP__DW_SP, EP__DW_FP, EP__DW_RA  DWARF register numbers of the stack
 *                        pointer, the frame pointer and the return address
 *   EP__CFA_AT_ENTRY     the CFA minus sp on entry (the return address that
 *                        x86's call pushed); the return address is in
 *                        EP__DW_RA's register on entry elsewhere
 *   EP__FP_*             the frame-record prologue of EP_UNWIND_DWARF_FP:
 *                        after EP__FP_GROW bytes sp is 16 lower; after
 *                        EP__FP_SAVED the caller's fp is at CFA-16 and the
 *                        return address at CFA-8; after EP__FP_SET the CFA
 *                        is fp + EP__FP_CFA_OFF
 *   EP__FRAME_RECORD     where the [caller's fp, return address] pair lies
 *                        relative to fp, for the frame-pointer backtrace
 *   EP__UNW_FP           libunwind's number of the frame pointer register
 *                        (its aarch64 header has no UNW_TDEP_BP); used only
 *                        where <libunwind.h> is included
 *   EP__ARCH_SIGFRAMES   defined where the frame-pointer backtrace crosses
 *                        signal frames (x86-64), with EP__UC_PC, EP__UC_SP,
 *                        EP__UC_FP (the interrupted context's registers) and
 *                        EP__UC_END (the end of the registers) of a
 *                        ucontext_t (<ucontext.h>)
 */
#if defined(__x86_64__)
#define EP__ARCH_NAME "x86_64"
#define EP__ARCH_ELF_MACHINE 62 /* EM_X86_64 */
#define EP__ARCH_PATCH_WORD 8
#define EP__ARCH_USER_TOP ((uintptr_t)1 << 47)
#define EP__ARCH_SYS_MSEAL 462
#define EP__DW_SP 7
#define EP__DW_FP 6
#define EP__DW_RA 16
#define EP__CFA_AT_ENTRY 8
#define EP__FP_GROW 1  /* push rbp */
#define EP__FP_SAVED 1
#define EP__FP_SET 4   /* mov rbp, rsp */
#define EP__FP_CFA_OFF 16
#define EP__FRAME_RECORD 0
#define EP__UNW_FP UNW_X86_64_RBP
#define EP__ARCH_SIGFRAMES 1
#define EP__UC_PC(uc) ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RIP])
#define EP__UC_SP(uc) ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RSP])
#define EP__UC_FP(uc) ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RBP])
#define EP__UC_END(uc) ((uintptr_t)&(uc)->uc_mcontext.gregs[NGREG])
#elif defined(__aarch64__)
#define EP__ARCH_NAME "aarch64"
#define EP__ARCH_ELF_MACHINE 183 /* EM_AARCH64 */
#define EP__ARCH_PATCH_WORD 4
#define EP__ARCH_USER_TOP ((uintptr_t)1 << 48) /* 48-bit VA, 4 and 16 KiB pages */
#define EP__ARCH_SYS_MSEAL 462
#define EP__DW_SP 31
#define EP__DW_FP 29
#define EP__DW_RA 30
#define EP__CFA_AT_ENTRY 0
#define EP__FP_GROW 4  /* stp x29, x30, [sp, #-16]! */
#define EP__FP_SAVED 4
#define EP__FP_SET 8   /* mov x29, sp */
#define EP__FP_CFA_OFF 16
#define EP__FRAME_RECORD 0
#define EP__UNW_FP UNW_AARCH64_X29
#elif defined(__riscv) && __riscv_xlen == 64
#define EP__ARCH_NAME "riscv64"
#define EP__ARCH_ELF_MACHINE 243 /* EM_RISCV */
#define EP__ARCH_PATCH_WORD 4
#define EP__ARCH_USER_TOP ((uintptr_t)1 << 47) /* sv48 */
#define EP__ARCH_SYS_MSEAL 462
#define EP__DW_SP 2
#define EP__DW_FP 8
#define EP__DW_RA 1
#define EP__CFA_AT_ENTRY 0
#define EP__FP_GROW 4  /* addi sp, sp, -16 */
#define EP__FP_SAVED 12 /* sd ra, 8(sp); sd s0, 0(sp) */
#define EP__FP_SET 16  /* addi s0, sp, 16 */
#define EP__FP_CFA_OFF 0
#define EP__FRAME_RECORD (-16)
#define EP__UNW_FP UNW_RISCV_X8
#else
#error "libexecpack: unsupported architecture (x86_64, aarch64 and riscv64 are)"
#endif

#endif /* EP_ARCH_H */
