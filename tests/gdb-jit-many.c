/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gdb-jit-many.c - run by tests/gdb-jit.sh, under gdb: many named JIT
 * functions ("jit_many_<i>", each push rbp; mov rbp, rsp; call
 * gdb_many_stop; pop rbp; ret).
 *
 *   gdb-jit-many N        names N functions (512 in the middle last, the
 *                         even ones first, then the odd ones between
 *                         them, so that names arrive inside ranges gdb
 *                         already has); then it calls
 *                         five of them (0, 7, N/2, N-2, N-1; gdb stops in
 *                         gdb_many_stop each time, with the JIT frame
 *                         under it), renames 1 to "jit_many_renamed",
 *                         frees N/2+1 (g_freed: its address) and stops in
 *                         gdb_many_freed(), then takes the same address
 *                         again, names it "jit_many_reused" and stops in
 *                         gdb_many_reused();
 *   gdb-jit-many N wait   the same, then prints "ready <pid>" and waits in
 *                         gdb_many_wait(), called from jit_many_<N-1>,
 *                         for a debugger to attach and set g_release (or
 *                         60 s).
 * x86-64 only (the script runs it there).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "execpack.h"

void *g_freed, *g_renamed;
volatile int g_release;

__attribute__((noinline)) int gdb_many_stop(void);
int gdb_many_stop(void)
{
	__asm__ volatile("" ::: "memory");
	return 42;
}

__attribute__((noinline)) int gdb_many_wait(void);
int gdb_many_wait(void)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	for (int i = 0; i < 6000 && !g_release; i++)
		nanosleep(&ts, NULL);
	return 42;
}

__attribute__((noinline)) void gdb_many_ready(void);
void gdb_many_ready(void)
{
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void gdb_many_freed(void);
void gdb_many_freed(void)
{
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void gdb_many_reused(void);
void gdb_many_reused(void)
{
	__asm__ volatile("" ::: "memory");
}

/* push rbp; mov rbp, rsp; movabs rax, target; call rax; pop rbp; ret */
static size_t emit(unsigned char *p, int (*target)(void))
{
	uint64_t t;
	size_t n = 0;

	memcpy(&t, &target, sizeof(t));
	p[n++] = 0x55;
	p[n++] = 0x48, p[n++] = 0x89, p[n++] = 0xe5;
	p[n++] = 0x48, p[n++] = 0xb8;
	memcpy(p + n, &t, 8), n += 8;
	p[n++] = 0xff, p[n++] = 0xd0;
	p[n++] = 0x5d;
	p[n++] = 0xc3;
	return n;
}

static int call(void *exec)
{
	int (*f)(void);

	memcpy(&f, &exec, sizeof(f));
	return f();
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	int wait = argc > 2 && !strcmp(argv[2], "wait");
	struct ep_pool *pool;
	struct ep_image img;
	char name[32];
	size_t len = 0;
	void **fn;

#ifndef __x86_64__
	printf("SKIP: the JIT code here is x86-64 code\n");
	return 77;
#endif
	if (n < 16 || !(fn = calloc((size_t)n, sizeof(*fn)))) {
		fprintf(stderr, "usage: %s N [wait] (N >= 16)\n", argv[0]);
		return 2;
	}
	if (ep_pool_create(NULL, &pool) != 0) {
		printf("SKIP: no executable memory\n");
		return 77;
	}
	for (int i = 0; i < n; i++) {
		if (ep_alloc(pool, 32, &img) != 0)
			return 1;
		len = emit(img.rw, i == n - 1 && wait ? gdb_many_wait : gdb_many_stop);
		if (ep_finalize(pool, img.exec) != 0)
			return 1;
		fn[i] = img.exec;
	}
	/* named with the program's size, so that disassemble ends at its ret;
	 * in order, as JITs name their code, but for 512 in the middle named
	 * last, the even ones first, then the odd ones between them: names
	 * that arrive inside ranges gdb already has */
	int w0 = n / 2 - 256 > 0 ? n / 2 - 256 : 0, w1 = n / 2 + 256 < n ? n / 2 + 256 : n;

	for (int pass = 0; pass < 3; pass++) {
		for (int i = pass ? w0 + pass - 1 : 0; i < (pass ? w1 : n); i += pass ? 2 : 1) {
			if (!pass && i >= w0 && i < w1)
				continue;
			snprintf(name, sizeof(name), "jit_many_%d", i);
			if (ep_set_name_size(pool, fn[i], name, len) != 0)
				return 1;
		}
	}
	gdb_many_ready();
	int calls[] = { 0, 7, n / 2, n - 2 }, sum = 0;

	for (size_t k = 0; k < sizeof(calls) / sizeof(calls[0]); k++)
		sum += call(fn[calls[k]]);
	if (!wait)
		sum += call(fn[n - 1]);
	if (ep_set_name(pool, fn[1], "jit_many_renamed") != 0)
		return 1;
	g_renamed = fn[1];

	/* free one; its address again for another function */
	int k = n / 2 + 1;

	g_freed = fn[k];
	if (ep_free(pool, fn[k]) != 0)
		return 1;
	gdb_many_freed();
	if (ep_alloc(pool, 32, &img) != 0)
		return 1;
	if (img.exec != g_freed) {
		printf("FAIL: the freed address %p was not taken again (%p)\n", g_freed, img.exec);
		return 1;
	}
	emit(img.rw, gdb_many_stop);
	if (ep_set_name_size(pool, img.exec, "jit_many_reused", len) != 0 ||
	    ep_finalize(pool, img.exec) != 0)
		return 1;
	gdb_many_reused();
	if (wait) {
#ifdef PR_SET_PTRACER
		prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* Yama: any debugger */
#endif
		printf("ready %ld %p %p %p\n", (long)getpid(), fn[n - 1], g_freed, g_renamed);
		fflush(stdout);
		sum += call(fn[n - 1]);
		printf("released: %s\n", g_release ? "yes" : "no (timeout)");
	}
	ep_pool_destroy(pool);
	free(fn);
	return sum == 5 * 42 ? 0 : 1;
}
