/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * crash-handler.c - a SIGTRAP/SIGSEGV handler that names the JIT code a
 * program crashed in, with ep_symbolize() and ep_backtrace().
 *
 * The JIT program "bpf_prog_x" is 0x1c bytes of code that does not return
 * (a frame set-up and padding); execution runs on into the trap fill after
 * it (INT3 on x86-64, BRK on arm64, c.ebreak on riscv64), and the handler
 * prints
 *     SIGTRAP in JIT code bpf_prog_x+0x1c
 * and a backtrace, then exits with status 128+signal.
 *
 * The handler uses no stdio and no malloc.  ep_symbolize() is
 * async-signal-safe; ep_backtrace() is only when it walks frame pointers
 * (EXECPACK_BACKTRACE=fp), not with libunwind, which this example uses
 * where the library has it, to name the frames outside JIT code too (see
 * ep_backtrace(3)).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "execpack.h"

static void say(const char *s)
{
	if (write(2, s, strlen(s)) < 0) {
		/* nowhere to report it */
	}
}

static void say_hex(uintptr_t v)
{
	char t[19];
	int i = sizeof(t) - 1;

	t[i] = 0;
	do {
		t[--i] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	t[--i] = 'x';
	t[--i] = '0';
	say(t + i);
}

/* The interrupted pc, and how far past the trap instruction it is. */
#if defined(__x86_64__)
#define SIGNAL_PC(uc) ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RIP])
#define TRAP_PC_AFTER 1 /* INT3 is reported one past itself */
#elif defined(__aarch64__)
#define SIGNAL_PC(uc) ((uintptr_t)(uc)->uc_mcontext.pc)
#define TRAP_PC_AFTER 0 /* BRK is reported at itself */
#elif defined(__riscv)
#define SIGNAL_PC(uc) ((uintptr_t)(uc)->uc_mcontext.__gregs[REG_PC])
#define TRAP_PC_AFTER 0 /* so is ebreak */
#else
#error "crash-handler: no signal pc for this architecture"
#endif

static void on_crash(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	uintptr_t pc = SIGNAL_PC(uc);
	char name[EP_NAME_MAX + 1];
	size_t off;
	/* a frame record in the handler lets the frame-pointer walk (no
	 * libunwind) cross the signal frame into the interrupted code */
	volatile uintptr_t frame = (uintptr_t)__builtin_frame_address(0);

	(void)si, (void)frame;
	/* name the trap itself, wherever the architecture left the pc */
	if (sig == SIGTRAP)
		pc -= TRAP_PC_AFTER;
	say(sig == SIGTRAP ? "SIGTRAP" : sig == SIGSEGV ? "SIGSEGV" : "signal");
	int rc = ep_symbolize((const void *)pc, name, sizeof(name), &off);

	if (rc == 0 || rc == -ERANGE) {
		say(" in JIT code ");
		say(name);
		say("+");
		say_hex(off);
	} else {
		say(" at ");
		say_hex(pc);
		say(" (not JIT code)");
	}
	say("\nbacktrace:\n");
	ep_backtrace(2);
	_exit(128 + sig);
}

int main(void)
{
#if defined(__x86_64__)
	static const unsigned char prologue[] = { 0x55, 0x48, 0x89, 0xe5 }; /* push rbp; mov rbp,rsp */
	static const unsigned char nop[] = { 0x90 };
#elif defined(__aarch64__)
	static const unsigned char prologue[] = {
		0xfd, 0x7b, 0xbf, 0xa9, /* stp x29, x30, [sp, #-16]! */
		0xfd, 0x03, 0x00, 0x91, /* mov x29, sp */
	};
	static const unsigned char nop[] = { 0x1f, 0x20, 0x03, 0xd5 };
#elif defined(__riscv)
	static const unsigned char prologue[] = {
		0x41, 0x11,             /* c.addi sp, -16 */
		0x06, 0xe4,             /* c.sdsp ra, 8(sp) */
		0x22, 0xe0,             /* c.sdsp s0, 0(sp) */
		0x00, 0x08,             /* c.addi4spn s0, sp, 16 */
	};
	static const unsigned char nop[] = { 0x01, 0x00 }; /* c.nop */
#endif
	struct ep_pool *pool;
	struct ep_image img;
	struct sigaction sa;
	int rc;

	if ((rc = ep_pool_create(NULL, &pool)) != 0) {
		printf("SKIP: ep_pool_create: %s\n", ep_strerror(rc));
		return 77;
	}
	if ((rc = ep_alloc(pool, 0x1c, &img)) != 0) {
		printf("ep_alloc: %s\n", ep_strerror(rc));
		return 1;
	}
	memcpy(img.rw, prologue, sizeof(prologue));
	for (size_t i = sizeof(prologue); i < 0x1c; i += sizeof(nop))
		memcpy((unsigned char *)img.rw + i, nop, sizeof(nop));
	if ((rc = ep_finalize(pool, img.exec)) != 0 ||
	    (rc = ep_set_name(pool, img.exec, "bpf_prog_x")) != 0) {
		printf("ep_finalize/ep_set_name: %s\n", ep_strerror(rc));
		return 1;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_crash;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTRAP, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);

	void (*prog)(void);

	memcpy(&prog, &img.exec, sizeof(prog));
	printf("running bpf_prog_x at %p\n", img.exec);
	fflush(stdout);
	prog(); /* runs into the trap fill at +0x1c */
	printf("bpf_prog_x returned?\n");
	return 1;
}
