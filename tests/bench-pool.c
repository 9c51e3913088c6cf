/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-pool.c - what one JIT'd program costs: alloc + write + finalize +
 * free through libexecpack, next to the page-per-program baseline most JITs
 * use (mmap RW, write, mprotect RX, munmap), in the same run.  Prints the
 * median of several rounds in ns/op and the ratio baseline/libexecpack.
 *
 * Usage: bench-pool [rounds]   (default 7)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "execpack.h"

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static unsigned char code[65536];

static void make_code(size_t len)
{
	memset(code, 0x90, len);
	code[len - 6] = 0xb8;
	memset(code + len - 5, 0, 4);
	code[len - 1] = 0xc3;
}

typedef int (*fn_t)(void);

static volatile int sink;

static void call(void *p)
{
	fn_t f;

	memcpy(&f, &p, sizeof(f));
	sink += f();
}

/* ---- one program at a time ---- */

static double bench_pack_once(struct ep_pool *pool, size_t len, int iters)
{
	double t0 = now_ns();

	for (int i = 0; i < iters; i++) {
		struct ep_image img;

		if (ep_alloc(pool, len, &img)) {
			fprintf(stderr, "ep_alloc failed\n");
			exit(1);
		}
		memcpy(img.rw, code, len);
		ep_finalize(pool, img.exec);
		call(img.exec);
		ep_free(pool, img.exec);
	}
	return (now_ns() - t0) / iters;
}

static double bench_mmap_once(size_t len, int iters)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t sz = (len + page - 1) / page * page;
	double t0 = now_ns();

	for (int i = 0; i < iters; i++) {
		void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		memcpy(p, code, len);
		mprotect(p, sz, PROT_READ | PROT_EXEC);
		call(p);
		munmap(p, sz);
	}
	return (now_ns() - t0) / iters;
}

/* ---- churn: 10,000 live programs of random size, replace one at a time ---- */

#define LIVE 10000

static unsigned rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static double bench_pack_churn(struct ep_pool *pool, int iters)
{
	static void *live[LIVE];
	unsigned s = 1;

	for (int i = 0; i < LIVE; i++) {
		struct ep_image img;
		size_t len = 16 + rnd(&s) % 1000;

		ep_alloc(pool, len, &img);
		memcpy(img.rw, code + sizeof(code) - len, len);
		ep_finalize(pool, img.exec);
		live[i] = img.exec;
	}
	double t0 = now_ns();

	for (int i = 0; i < iters; i++) {
		unsigned k = rnd(&s) % LIVE;
		size_t len = 16 + rnd(&s) % 1000;
		struct ep_image img;

		ep_free(pool, live[k]);
		if (ep_alloc(pool, len, &img)) {
			fprintf(stderr, "ep_alloc failed in churn\n");
			exit(1);
		}
		memcpy(img.rw, code + sizeof(code) - len, len);
		ep_finalize(pool, img.exec);
		call(img.exec);
		live[k] = img.exec;
	}
	double t = (now_ns() - t0) / iters;

	for (int i = 0; i < LIVE; i++)
		ep_free(pool, live[i]);
	return t;
}

static double bench_mmap_churn(int iters)
{
	static void *live[LIVE];
	static size_t sz[LIVE];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned s = 1;

	for (int i = 0; i < LIVE; i++) {
		size_t len = 16 + rnd(&s) % 1000;

		sz[i] = (len + page - 1) / page * page;
		live[i] = mmap(NULL, sz[i], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		memcpy(live[i], code + sizeof(code) - len, len);
		mprotect(live[i], sz[i], PROT_READ | PROT_EXEC);
	}
	double t0 = now_ns();

	for (int i = 0; i < iters; i++) {
		unsigned k = rnd(&s) % LIVE;
		size_t len = 16 + rnd(&s) % 1000;

		munmap(live[k], sz[k]);
		sz[k] = (len + page - 1) / page * page;
		live[k] = mmap(NULL, sz[k], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (live[k] == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		memcpy(live[k], code + sizeof(code) - len, len);
		mprotect(live[k], sz[k], PROT_READ | PROT_EXEC);
		call(live[k]);
	}
	double t = (now_ns() - t0) / iters;

	for (int i = 0; i < LIVE; i++)
		munmap(live[i], sz[i]);
	return t;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 7;
	struct ep_pool *pool;
	int rc = ep_pool_create(NULL, &pool);

	if (rounds < 1 || rounds > 100)
		rounds = 7;
	if (rc) {
		fprintf(stderr, "ep_pool_create: %s\n", ep_strerror(rc));
		return 1;
	}
	make_code(sizeof(code));
	printf("libexecpack %s, backend %s, median of %d rounds\n", ep_version(),
	       ep_pool_backend(pool), rounds);
	printf("%-34s %12s %12s %8s\n", "operation", "execpack", "mmap+mprot", "ratio");

	const size_t sizes[] = { 64, 256, 1024, 4096 };

	for (size_t si = 0; si < 4; si++) {
		double a[100], b[100];
		size_t len = sizes[si];

		make_code(len);
		for (int r = 0; r < rounds; r++) {
			a[r] = bench_pack_once(pool, len, 20000);
			b[r] = bench_mmap_once(len, 20000);
		}
		double ma = median(a, rounds), mb = median(b, rounds);

		printf("alloc+write+finalize+call+free %4zuB %9.0f ns %9.0f ns %7.1fx\n", len, ma, mb,
		       mb / ma);
	}
	make_code(sizeof(code));
	{
		double a[100], b[100];

		for (int r = 0; r < rounds; r++) {
			a[r] = bench_pack_churn(pool, 20000);
			b[r] = bench_mmap_churn(20000);
		}
		double ma = median(a, rounds), mb = median(b, rounds);

		printf("churn, 10000 live, 16-1015B %8s %9.0f ns %9.0f ns %7.1fx\n", "", ma, mb, mb / ma);
	}
	struct ep_stats st;

	ep_pool_stats(pool, &st);
	printf("after: packs=%zu pack_bytes=%zu live=%zu\n", st.packs, st.pack_bytes, st.live_allocs);
	ep_pool_destroy(pool);
	return 0;
}
