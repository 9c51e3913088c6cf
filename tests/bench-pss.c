/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-pss.c - the memory of many PCRE2-sized programs (`make bench-pss`,
 * doc/performance.md): the Pss a process gains (/proc/self/smaps_rollup)
 * for N programs of 300-3000 bytes, sizes uniform and the same for every
 * allocator, all live at the end, each allocator in a fresh child process.
 *
 *   execpack      ep_alloc() + copy into the staging buffer + ep_finalize()
 *   execpack-add  ep_add() of the finished code
 *   sljit-model   what sljit's own executable allocator does, modelled:
 *                 64 KiB chunks mmap()ed on demand, a 16-byte header per
 *                 block, sizes rounded up to 8, first fit over the free
 *                 blocks, nothing filled (a model for comparison, not
 *                 sljit's code; the PCRE2 figures themselves come from
 *                 PCRE2 built on libexecpack)
 * after ep_pool_trim() too, for execpack.
 *
 * Usage: bench-pss [N]   (10000)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "execpack.h"

static long pss_kib(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "re");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pss: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static size_t next_size(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return 300 + (size_t)(rng % 2701);
}

/* x86-64 "mov eax, imm32; ret" then no-ops: real code on every byte */
static void emit(unsigned char *p, size_t len, uint32_t imm)
{
	memset(p, 0x90, len);
	p[0] = 0xb8;
	memcpy(p + 1, &imm, 4);
	p[5] = 0xc3;
}

/* ---- the sljit model ---------------------------------------------------- */

#define MODEL_CHUNK ((size_t)64 << 10)
#define MODEL_HEADER 16

struct free_block {
	unsigned char *at;
	size_t size;
};

static struct free_block *model_free;
static size_t model_nfree, model_cap, model_mapped;

static void *model_alloc(size_t len)
{
	size_t need = (len + MODEL_HEADER + 7) & ~(size_t)7;

	for (size_t i = 0; i < model_nfree; i++) {
		struct free_block *b = &model_free[i];

		if (b->size >= need) {
			unsigned char *p = b->at;

			b->at += need;
			b->size -= need;
			memset(p, 0, MODEL_HEADER); /* the header is written */
			return p + MODEL_HEADER;
		}
	}
	size_t chunk = need <= MODEL_CHUNK ? MODEL_CHUNK : (need + MODEL_CHUNK - 1) & ~(MODEL_CHUNK - 1);
	unsigned char *c = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);

	if (c == MAP_FAILED)
		return NULL;
	model_mapped += chunk;
	if (model_nfree == model_cap) {
		model_cap = model_cap ? 2 * model_cap : 64;
		model_free = realloc(model_free, model_cap * sizeof(*model_free));
		if (!model_free)
			return NULL;
	}
	model_free[model_nfree++] = (struct free_block){ c + need, chunk - need };
	memset(c, 0, MODEL_HEADER);
	return c + MODEL_HEADER;
}

/* ---- one allocator in a child ------------------------------------------ */

enum kind { EP, EP_ADD, MODEL };
static const char *const names[] = { "execpack", "execpack-add", "sljit-model" };

static int run(enum kind k, int n, int fd)
{
	struct ep_pool *pool = NULL;
	unsigned char *code = malloc(3000);
	size_t bytes = 0;

	if (!code)
		return 1;
	if (k != MODEL) {
		struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
		int rc = ep_pool_create(&cfg, &pool);

		if (rc) {
			fprintf(stderr, "bench-pss: ep_pool_create: %s\n", ep_strerror(rc));
			return 1;
		}
	}
	long before = pss_kib();

	for (int i = 0; i < n; i++) {
		size_t len = next_size();
		void *exec = NULL;

		bytes += len;
		emit(code, len, (uint32_t)i);
		if (k == EP) {
			struct ep_image img;

			if (ep_alloc(pool, len, &img) == 0) {
				memcpy(img.rw, code, len);
				if (ep_finalize(pool, img.exec) == 0)
					exec = img.exec;
			}
		} else if (k == EP_ADD) {
			if (ep_add(pool, code, len, &exec))
				exec = NULL;
		} else {
			exec = model_alloc(len);
			if (exec)
				memcpy(exec, code, len);
		}
		if (!exec) {
			fprintf(stderr, "bench-pss: %s: program %d failed\n", names[k], i);
			return 1;
		}
	}
	long after = pss_kib(), trimmed = -1;
	struct ep_stats st = { 0 };

	if (pool) {
		ep_pool_stats(pool, &st);
		ep_pool_trim(pool, NULL);
		trimmed = pss_kib();
	}
	dprintf(fd, "  %-14s %10ld %10ld %10zu %10zu\n", names[k], after - before,
		trimmed < 0 ? -1 : trimmed - before, bytes >> 10,
		pool ? st.pack_bytes >> 10 : model_mapped >> 10);
	ep_pool_destroy(pool);
	free(code);
	return 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;

	if (n < 1 || n > 1000000 || argc > 2) {
		fprintf(stderr, "usage: %s [N]\n", argv[0]);
		return 2;
	}
	if (pss_kib() < 0) {
		printf("SKIP: no /proc/self/smaps_rollup here\n");
		return 77;
	}
	printf("%d programs of 300-3000 bytes (uniform), all live; KiB, each in a fresh process\n",
	       n);
	printf("  %-14s %10s %10s %10s %10s\n", "", "+Pss", "trimmed", "code", "mapped");
	fflush(stdout);
	for (int k = EP; k <= MODEL; k++) {
		pid_t pid = fork();
		int st;

		if (pid < 0)
			return 1;
		if (pid == 0)
			_exit(run((enum kind)k, n, 1));
		if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			return 1;
	}
	printf("  (+Pss: after the programs less before; trimmed: the same after "
	       "ep_pool_trim();\n   mapped: execpack's committed pack_bytes, the model's "
	       "chunks)\n");
	return 0;
}
