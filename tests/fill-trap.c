/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fill-trap.c - a jump into the trap fill stops with SIGTRAP, at every
 * instruction boundary of the architecture it runs on (every byte on x86,
 * every 4-byte word on arm64, every 2-byte parcel on riscv64, where
 * compressed instructions start), and the fill is the architecture's own
 * public fill.  Needs no test framework, so that it also runs where Check
 * is not available (the riscv64 stage runs it under qemu-user: it executes
 * only code that was never run before, which qemu-user translates as it is).
 *
 * Exit: 0 pass, 1 fail, 77 skip.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "execpack.h"

#if defined(__x86_64__)
#define STEP 1
#define FILL ep_fill_x86_int3
#define ARCH "x86_64"
#elif defined(__aarch64__)
#define STEP 4
#define FILL ep_fill_arm64_brk
#define ARCH "aarch64"
#elif defined(__riscv)
#define STEP 2
#define FILL ep_fill_riscv_ebreak
#define ARCH "riscv64"
#endif

static int failures;

static void check(int ok, const char *what, long at)
{
	if (!ok) {
		printf("FAIL: %s (offset %ld)\n", what, at);
		failures++;
	}
}

/* Jump to p in a child: how it ended (a signal number, or 0 if it did not
 * end by a signal). */
static int jump_in_child(void *p)
{
	fflush(stdout);
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		void (*fn)(void);

		/* no core files for the expected crash */
		signal(SIGTRAP, SIG_DFL);
		memcpy(&fn, &p, sizeof(fn));
		fn();
		_exit(0); /* ran on: the fill did not trap */
	}
	int st = 0;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

int main(void)
{
	struct ep_pool *pool;
	struct ep_image img;
	int rc = ep_pool_create(NULL, &pool);

	if (rc) {
		printf("SKIP: no pool: %s\n", ep_strerror(rc));
		return 77;
	}
	/* nothing written: the finalized program is the fill alone */
	rc = ep_alloc(pool, 256, &img);
	if (rc == 0)
		rc = ep_finalize(pool, img.exec);
	if (rc) {
		printf("FAIL: alloc/finalize: %s\n", ep_strerror(rc));
		return 1;
	}

	/* the bytes are the architecture's public fill for those addresses */
	unsigned char want[256];

	FILL(want, sizeof(want), NULL);
	check(memcmp(img.exec, want, sizeof(want)) == 0, "the fill is " ARCH "'s public fill", 0);

	/* every boundary in the first 64 bytes, then a few further on, and in
	 * the pack's free chunks past the allocation */
	unsigned char *base = img.exec;
	long offs[64 / STEP + 8];
	int n = 0;

	for (long o = 0; o < 64; o += STEP)
		offs[n++] = o;
	offs[n++] = 128;
	offs[n++] = 256 - STEP;
	offs[n++] = 1024;       /* a free chunk of the same pack (its first page) */
	offs[n++] = 1024 + STEP;
	for (int i = 0; i < n; i++) {
		int sig = jump_in_child(base + offs[i]);

		check(sig == SIGTRAP, "a jump into the fill ends by SIGTRAP", offs[i]);
		if (sig != SIGTRAP)
			printf("  ended by %s\n", sig > 0 ? strsignal(sig) : "no signal");
	}

	/* after ep_free() the refilled chunks trap as well (the child's
	 * address space is a copy: its first jump there translates afresh) */
	check(ep_free(pool, img.exec) == 0, "ep_free", 0);
	check(jump_in_child(base) == SIGTRAP, "a jump into freed code ends by SIGTRAP", 0);

	ep_pool_destroy(pool);
	if (failures)
		return 1;
	printf("PASS: fill-trap (" ARCH "): %d jumps into the fill trapped\n", n + 1);
	return 0;
}
