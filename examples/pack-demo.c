/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pack-demo.c - JIT many small functions into packs, run them all, and
 * show what packing saves against one page per function.
 *
 * Usage: pack-demo [count]   (default 10000)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "execpack.h"

typedef uint32_t (*fn_t)(uint32_t);

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
	struct ep_pool *pool;
	int rc = ep_pool_create(NULL, &pool);

	if (n <= 0 || n > 10000000)
		n = 10000;
	if (rc) {
		fprintf(stderr, "pack-demo: ep_pool_create: %s\n", ep_strerror(rc));
		return 1;
	}
	void **fns = calloc((size_t)n, sizeof(*fns));
	size_t code_bytes = 0;

	if (!fns)
		return 1;
	for (long i = 0; i < n; i++) {
		/* lea eax, [rdi + imm32]; then i % 50 nops; ret */
		size_t pad = (size_t)(i % 50), len = 6 + pad + 1;
		struct ep_image img;

		rc = ep_alloc(pool, len, &img);
		if (rc) {
			fprintf(stderr, "pack-demo: ep_alloc #%ld: %s\n", i, ep_strerror(rc));
			return 1;
		}
		unsigned char *p = img.rw;
		uint32_t imm = (uint32_t)i;

		p[0] = 0x8d;
		p[1] = 0x87; /* lea eax, [rdi + disp32] */
		memcpy(p + 2, &imm, 4);
		memset(p + 6, 0x90, pad);
		p[6 + pad] = 0xc3;
		rc = ep_finalize(pool, img.exec);
		if (rc) {
			fprintf(stderr, "pack-demo: ep_finalize: %s\n", ep_strerror(rc));
			return 1;
		}
		fns[i] = img.exec;
		code_bytes += len;
	}
	long bad = 0;

	for (long i = 0; i < n; i++) {
		fn_t f;

		memcpy(&f, &fns[i], sizeof(f));
		if (f(1000) != (uint32_t)i + 1000)
			bad++;
	}
	struct ep_stats st;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	ep_pool_stats(pool, &st);
	printf("backend:            %s\n", ep_pool_backend(pool));
	printf("functions:          %ld JIT'd and called, %ld wrong results\n", n, bad);
	printf("code bytes:         %zu\n", code_bytes);
	printf("packs:              %zu (%zu KiB mapped, %zu KiB in use)\n", st.packs,
	       st.pack_bytes / 1024, st.used_bytes / 1024);
	printf("one page each:      %zu KiB in %ld mappings\n", (size_t)n * page / 1024, n);
	printf("memory saved:       %.1fx less, %.0fx fewer mappings\n",
	       (double)n * (double)page / (double)st.pack_bytes,
	       (double)n / (double)(st.packs ? st.packs * 2 : 1));
	for (long i = 0; i < n; i++)
		ep_free(pool, fns[i]);
	free(fns);
	ep_pool_destroy(pool);
	return bad ? 1 : 0;
}
