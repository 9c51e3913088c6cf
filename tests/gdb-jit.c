/*
 * gdb-jit.c - run by tests/gdb-jit.sh under gdb -batch: JIT code named
 * "gdb_jit_prog" (push rbp; mov rbp, rsp; call gdb_stop_here; pop rbp; ret)
 * is registered through the GDB JIT interface; gdb stops in gdb_stop_here
 * and its `bt` must show the JIT frame by name.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "execpack.h"

__attribute__((noinline)) int gdb_stop_here(void);
int gdb_stop_here(void)
{
	__asm__ volatile("" ::: "memory");
	return 42;
}

int main(void)
{
	struct ep_pool *pool;
	struct ep_image img;
	int (*cb)(void) = gdb_stop_here;
	uint64_t target;
	unsigned char *p;
	size_t n = 0;

	if (ep_pool_create(NULL, &pool) != 0 || ep_alloc(pool, 32, &img) != 0) {
		printf("SKIP: no executable memory\n");
		return 77;
	}
	memcpy(&target, &cb, sizeof(target));
	p = img.rw;
	p[n++] = 0x55;
	p[n++] = 0x48, p[n++] = 0x89, p[n++] = 0xe5;
	p[n++] = 0x48, p[n++] = 0xb8;
	memcpy(p + n, &target, 8), n += 8;
	p[n++] = 0xff, p[n++] = 0xd0;
	p[n++] = 0x5d;
	p[n++] = 0xc3;
	if (ep_set_name(pool, img.exec, "gdb_jit_prog") != 0 || ep_finalize(pool, img.exec) != 0)
		return 1;

	int (*prog)(void);

	memcpy(&prog, &img.exec, sizeof(prog));
	int r = prog();

	printf("gdb_jit_prog returned %d\n", r);
	ep_free(pool, img.exec);
	ep_pool_destroy(pool);
	return r == 42 ? 0 : 1;
}
