/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * vg-jit.c - programs for tests/valgrind-diag.sh, run under Valgrind:
 *
 *   vg-jit reuse   JIT `mov eax,1; ret`, call, free; JIT `mov eax,2; ret`
 *                  at the same address, call (must give 2); patch it with
 *                  ep_write twice, call after each.  Exit 0 when every call
 *                  ran the new code.
 *   vg-jit leak    JIT one named function and drop its only pointer without
 *                  ep_free(); the pool stays alive until exit.  Memcheck
 *                  must report the block as "definitely lost".
 *   vg-jit clean   the same, freed properly, and a second pool destroyed
 *                  with live allocations: no leak at all.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "execpack.h"

static struct ep_pool *g_pool; /* the pool stays reachable */

typedef int (*fn)(void);

static int call(void *exec)
{
	fn f;

	memcpy(&f, &exec, sizeof(f));
	return f();
}

static void emit(unsigned char *p, uint32_t v)
{
	p[0] = 0xb8;
	memcpy(p + 1, &v, 4);
	p[5] = 0xc3;
}

static void *jit(struct ep_pool *pool, uint32_t v)
{
	struct ep_image img;

	if (ep_alloc(pool, 6, &img) != 0)
		return NULL;
	emit(img.rw, v);
	if (ep_finalize(pool, img.exec) != 0)
		return NULL;
	return img.exec;
}

static int reuse(void)
{
	void *a = jit(g_pool, 1);
	int bad = 0;

	if (!a || call(a) != 1)
		return 1;
	ep_free(g_pool, a);
	void *b = jit(g_pool, 2);

	if (b != a) {
		fprintf(stderr, "vg-jit: the freed address was not reused\n");
		return 1;
	}
	int r = call(b);

	printf("reused %p: returned %d (want 2)\n", b, r);
	bad |= r != 2;

	unsigned char patch[6];

	emit(patch, 3);
	ep_write(g_pool, b, patch, sizeof(patch));
	r = call(b);
	printf("ep_write whole: returned %d (want 3)\n", r);
	bad |= r != 3;
	uint32_t imm = 4;

	ep_write(g_pool, (char *)b + 1, &imm, sizeof(imm));
	r = call(b);
	printf("ep_write imm32: returned %d (want 4)\n", r);
	bad |= r != 4;
	ep_free(g_pool, b);
	ep_pool_destroy(g_pool);
	return bad;
}

/* noinline, and the pointer wiped from this frame's registers by the calls
 * that follow: only the pool could still know the address */
__attribute__((noinline)) static int leak_one(void)
{
	volatile uintptr_t hide;
	void *a = jit(g_pool, 5);

	if (!a || call(a) != 5)
		return 1;
	/* named: the name table, libunwind and gdb entries must not keep it
	 * "reachable" either */
	if (ep_set_name(g_pool, a, "leaked_prog") != 0)
		return 1;
	hide = (uintptr_t)a ^ 0x5a5a5a5aul; /* keep it printable, not a pointer */
	printf("leaking the JIT allocation at %#lx\n", (unsigned long)(hide ^ 0x5a5a5a5aul));
	return 0;
}

static int clean(void)
{
	void *a = jit(g_pool, 5);

	if (!a || call(a) != 5)
		return 1;
	ep_set_name(g_pool, a, "clean_prog");
	ep_free(g_pool, a);

	/* destroying a pool releases what is still allocated in it */
	struct ep_pool *p2;

	if (ep_pool_create(NULL, &p2) != 0)
		return 1;
	void *b = jit(p2, 6);

	if (!b || call(b) != 6)
		return 1;
	ep_set_name(p2, b, "released_by_destroy");
	ep_pool_destroy(p2);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "reuse";

	if (ep_pool_create(NULL, &g_pool) != 0) {
		printf("SKIP: no executable memory\n");
		return 77;
	}
	if (!strcmp(mode, "reuse"))
		return reuse();
	if (!strcmp(mode, "leak"))
		return leak_one();
	if (!strcmp(mode, "clean"))
		return clean();
	fprintf(stderr, "usage: vg-jit reuse|leak|clean\n");
	return 2;
}
