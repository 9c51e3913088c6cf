/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ebpf-demo - JIT 10,000 small eBPF programs of varied sizes into one
 * libexecpack pool, run each and check it against the interpreter, and
 * show what packing saves against one 4 KiB page per program.
 * Exits non-zero on any mismatch.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ebpf.h"
#include "execpack.h"
#include "gen.h"
#include "helpers.h"

#define NPROGS 10000
#define REPS 20

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char usage[] =
"usage: ebpf-demo [SEED]\n"
"\n"
"JIT-compiles 10,000 generated eBPF programs into one libexecpack pool, runs\n"
"each under the JIT and the interpreter, and prints what packing saves.\n"
"SEED (non-zero, default 2024) picks the programs.  Exit status 0, 1 on a\n"
"mismatch or error, 2 on a bad argument.\n";

int main(int argc, char **argv)
{
	struct ep_config cfg = { .sz = sizeof(cfg) };
	struct ep_pool *pool;
	struct ebpf_vm *vm;
	struct ep_stats st;
	static struct ebpf_prog *progs[NPROGS];
	static struct ebpf_insn buf[1024];
	uint64_t rs = 2024;
	size_t insns = 0, code = 0, mismatches = 0;
	int rc;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(usage, stdout);
		return 0;
	}
	if (argc > 1) {
		char *end;

		/* The generator is xorshift: a zero seed stays zero. */
		errno = 0;
		rs = argv[1][0] >= '0' && argv[1][0] <= '9' ? strtoull(argv[1], &end, 0) : 0;
		if (rs == 0 || errno || *end || argc > 2) {
			fprintf(stderr, "ebpf-demo: bad argument '%s' (SEED: a non-zero number)\n%s",
				argv[argc > 2 ? 2 : 1], usage);
			return 2;
		}
	}

	if ((rc = ep_pool_create(&cfg, &pool))) {
		fprintf(stderr, "ebpf-demo: ep_pool_create: %s\n", ep_strerror(rc));
		return 1;
	}
	ebpf_vm_create(pool, &vm);
	ebpf_std_helpers(vm);

	double t0 = now();

	for (int i = 0; i < NPROGS; i++) {
		/* Mostly small filters, some larger: 10 to ~400 instructions. */
		size_t target = 10 + (size_t)(ebpf_gen_rand(&rs) % (i % 8 ? 60 : 400));
		size_t n = ebpf_gen_prog(&rs, buf, 1024, target, 0);
		struct ebpf_err err;
		size_t sz;

		if (!n || ebpf_load(vm, buf, n, NULL, &progs[i], &err) || ebpf_jit(progs[i], &err)) {
			fprintf(stderr, "ebpf-demo: program %d: %s\n", i, n ? err.msg : "generator");
			return 1;
		}
		insns += n;
		ebpf_prog_code(progs[i], &sz);
		code += sz;
	}
	double t1 = now();

	/* Same input for both engines; each gets its own copy of the context. */
	uint8_t ctx0[EBPF_GEN_CTX], ca[EBPF_GEN_CTX], cb[EBPF_GEN_CTX];
	double tj = 0, ti = 0;

	for (size_t i = 0; i < sizeof(ctx0); i++)
		ctx0[i] = (uint8_t)ebpf_gen_rand(&rs);
	for (int i = 0; i < NPROGS; i++) {
		uint64_t rj = 0, ri = 0;

		memcpy(ca, ctx0, sizeof(ca));
		memcpy(cb, ctx0, sizeof(cb));
		double a = now();

		for (int r = 0; r < REPS; r++)
			ebpf_run_jit(progs[i], ca, sizeof(ca), &rj);
		double b = now();

		for (int r = 0; r < REPS; r++)
			ebpf_run_interp(progs[i], cb, sizeof(cb), &ri);
		double c = now();

		tj += b - a;
		ti += c - b;
		if (rj != ri || memcmp(ca, cb, sizeof(ca))) {
			if (mismatches++ < 5)
				fprintf(stderr, "ebpf-demo: %s: jit 0x%llx != interp 0x%llx\n",
					ebpf_prog_name(progs[i]), (unsigned long long)rj,
					(unsigned long long)ri);
		}
	}
	ep_pool_stats(pool, &st);
	size_t page_each = (size_t)NPROGS * 4096;

	printf("ebpf-demo: %d programs, %zu eBPF instructions, %zu bytes of x86-64 (%.0f per program)\n",
	       NPROGS, insns, code, (double)code / NPROGS);
	printf("  compiled in %.1f ms (%.1f us per program)\n", (t1 - t0) * 1e3, (t1 - t0) / NPROGS * 1e6);
	printf("  pool (%s): %zu pack(s), %zu bytes mapped, %zu bytes in use, %zu live allocations\n",
	       ep_pool_backend(pool), st.packs, st.pack_bytes, st.used_bytes, st.live_allocs);
	printf("  one 4 KiB page per program would map %zu bytes: %.1fx more (%zu pages vs %zu)\n",
	       page_each, (double)page_each / (double)st.pack_bytes, (size_t)NPROGS, st.pack_bytes / 4096);
	printf("  run x%d each: jit %.1f ms, interpreter %.1f ms, speed-up %.1fx\n", REPS, tj * 1e3,
	       ti * 1e3, ti / tj);
	printf("  results: %zu mismatches\n", mismatches);
	for (int i = 0; i < NPROGS; i++)
		ebpf_unload(progs[i]);
	ep_pool_stats(pool, &st);
	if (st.live_allocs) {
		fprintf(stderr, "ebpf-demo: %zu allocations left after unloading\n", st.live_allocs);
		return 1;
	}
	ebpf_vm_destroy(vm);
	ep_pool_destroy(pool);
	return mismatches ? 1 : 0;
}
