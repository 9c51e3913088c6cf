/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-patch.c - what a patch window and ep_lookup() cost (run by hand:
 * tests/bench-patch [live]; doc/performance.md has the figures).
 *
 * live programs of 256 bytes, half of them named, on the memfd backend;
 * each figure is the median of 7 rounds of 100,000 calls:
 *   - ep_write() of a 4-byte displacement, the one-word patch it replaces;
 *   - a window on those 4 bytes: ep_patch_begin() + store + commit;
 *   - a window on a whole 256-byte program with two words changed (a JIT
 *     re-running its emitter over published code);
 *   - ep_lookup() of a byte of a plain (unnamed) program and of a named one;
 *   - beside 20,000 staged allocations in a second pool (what a profiler
 *     or crash handler meets in a JIT that compiles a lot): ep_lookup() of
 *     a staged program's code, and misses: an address in libc, in a free
 *     chunk, in a staging buffer (a miss is promised to cost a hit's order).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "execpack.h"

#define ROUNDS 7
#define CALLS 100000

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static struct ep_pool *g_pool;
static unsigned char **g_code;
static size_t g_live;
static uint32_t g_v;

static void op_write(size_t i)
{
	g_v++;
	ep_write(g_pool, g_code[i] + 8, &g_v, 4);
}

static void op_window4(size_t i)
{
	void *rw;

	if (ep_patch_begin(g_pool, g_code[i] + 8, 4, &rw) == 0) {
		g_v++;
		memcpy(rw, &g_v, 4);
		ep_patch_commit(g_pool, g_code[i] + 8);
	}
}

static void op_window256(size_t i)
{
	unsigned char *rw;

	if (ep_patch_begin(g_pool, g_code[i], 256, (void **)&rw) == 0) {
		g_v++;
		memcpy(rw + 64, &g_v, 4);
		memcpy(rw + 200, &g_v, 4);
		ep_patch_commit(g_pool, g_code[i]);
	}
}

static void op_lookup_plain(size_t i)
{
	struct ep_info in;

	ep_lookup(g_code[i & ~(size_t)1] + 100, &in);
}

static void op_lookup_named(size_t i)
{
	struct ep_info in;

	ep_lookup(g_code[i | 1] + 100, &in);
}

static unsigned char **g_staged_exec, **g_staged_rw;
static size_t g_nstaged;
static unsigned char *g_free_chunk;

static void op_lookup_staged(size_t i)
{
	struct ep_info in;

	ep_lookup(g_staged_exec[i % g_nstaged] + 10, &in);
}

static void op_miss_libc(size_t i)
{
	struct ep_info in;

	ep_lookup((const char *)(uintptr_t)&printf + (i & 63), &in);
}

static void op_miss_free_chunk(size_t i)
{
	struct ep_info in;

	ep_lookup(g_free_chunk + (i & 4095), &in);
}

static void op_miss_staging(size_t i)
{
	struct ep_info in;

	ep_lookup(g_staged_rw[i % g_nstaged] + 10, &in);
}

static double median_ns(void (*op)(size_t))
{
	double r[ROUNDS];

	for (int k = 0; k < ROUNDS; k++) {
		double t0 = now();

		for (size_t i = 0; i < CALLS; i++)
			op((i * 7919) % g_live);
		r[k] = (now() - t0) / CALLS * 1e9;
	}
	qsort(r, ROUNDS, sizeof(r[0]), cmp);
	return r[ROUNDS / 2];
}

int main(int argc, char **argv)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };

	g_live = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
	if (g_live < 2 || ep_pool_create(&cfg, &g_pool)) {
		fprintf(stderr, "usage: bench-patch [live >= 2] (and a memfd pool)\n");
		return 1;
	}
	g_code = calloc(g_live, sizeof(*g_code));
	for (size_t i = 0; i < g_live; i++) {
		struct ep_image img;
		char name[32];

		if (ep_alloc(g_pool, 256, &img))
			return 1;
		memset(img.rw, 0xc3, 256); /* ret */
		ep_finalize(g_pool, img.exec);
		g_code[i] = img.exec;
		snprintf(name, sizeof(name), "f%zu", i);
		if (i & 1)
			ep_set_name(g_pool, img.exec, name);
	}
	printf("%zu live programs of 256 bytes, half named (ns per call, median of %d x %d)\n",
	       g_live, ROUNDS, CALLS);
	printf("ep_write, 4 bytes                   %8.0f\n", median_ns(op_write));
	printf("window on 4 bytes, begin + commit   %8.0f\n", median_ns(op_window4));
	printf("window on 256 bytes, 2 words change %8.0f\n", median_ns(op_window256));
	printf("ep_lookup, plain program            %8.0f\n", median_ns(op_lookup_plain));
	printf("ep_lookup, named program            %8.0f\n", median_ns(op_lookup_named));

	struct ep_pool *staged;
	struct ep_image img;

	g_nstaged = 20000;
	g_staged_exec = calloc(g_nstaged, sizeof(*g_staged_exec));
	g_staged_rw = calloc(g_nstaged, sizeof(*g_staged_rw));
	if (ep_pool_create(&cfg, &staged))
		return 1;
	for (size_t i = 0; i < g_nstaged; i++) {
		if (ep_alloc(staged, 128, &img))
			return 1;
		g_staged_exec[i] = img.exec;
		g_staged_rw[i] = img.rw;
	}
	/* a program, then the free chunks after it */
	if (ep_alloc(staged, 64, &img) || ep_finalize(staged, img.exec))
		return 1;
	g_free_chunk = (unsigned char *)img.exec + 64 * 8;
	printf("%zu staged allocations in a second pool:\n", g_nstaged);
	printf("ep_lookup, a staged program's code  %8.0f\n", median_ns(op_lookup_staged));
	printf("ep_lookup miss, libc                %8.0f\n", median_ns(op_miss_libc));
	printf("ep_lookup miss, a free chunk        %8.0f\n", median_ns(op_miss_free_chunk));
	printf("ep_lookup miss, a staging buffer    %8.0f\n", median_ns(op_miss_staging));
	ep_pool_destroy(staged);
	free(g_staged_exec);
	free(g_staged_rw);
	ep_pool_destroy(g_pool);
	free(g_code);
	return 0;
}
