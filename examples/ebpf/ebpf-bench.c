/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ebpf-bench - JIT compile throughput, and run time JIT vs interpreter on an
 * ALU-heavy loop and a division-heavy loop.  Medians of several runs.
 * Not a test: build with `make check`, run by hand.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ebpf_asm.h"
#include "execpack.h"
#include "gen.h"
#include "helpers.h"

#define RUNS 7

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return v[n / 2];
}

/* xorshift rounds and a multiply-accumulate: 15 instructions per iteration. */
static const struct ebpf_insn alu_loop[] = {
	MOV64_IMM(0, 1), LDDW(2, 0x123456789abcdefull), MOV64_REG(3, 1),
	MOV64_REG(4, 2), ALU64_IMM(EBPF_LSH, 4, 13), ALU64_REG(EBPF_XOR, 2, 4),
	MOV64_REG(4, 2), ALU64_IMM(EBPF_RSH, 4, 7), ALU64_REG(EBPF_XOR, 2, 4),
	MOV64_REG(4, 2), ALU64_IMM(EBPF_LSH, 4, 17), ALU64_REG(EBPF_XOR, 2, 4),
	ALU64_REG(EBPF_ADD, 0, 2), ALU64_IMM(EBPF_MUL, 0, 3), ALU32_IMM(EBPF_ADD, 5, 1),
	ALU64_REG(EBPF_AND, 5, 0),
	ALU64_IMM(EBPF_SUB, 3, 1), JMP_IMM(EBPF_JNE, 3, 0, -14),
	EXIT(),
};

/* Unsigned/signed 64-bit and 32-bit division and modulo: 12 per iteration. */
static const struct ebpf_insn div_loop[] = {
	MOV64_IMM(0, 0), LDDW(2, 0x7654321012345678ull), MOV64_REG(3, 1), MOV64_IMM(5, 7),
	MOV64_REG(4, 2), ALU64_REG(EBPF_DIV, 4, 5), ALU64_REG(EBPF_ADD, 0, 4),
	MOV64_REG(4, 2), ALU64_REG(EBPF_MOD, 4, 3), ALU64_REG(EBPF_XOR, 0, 4),
	ALU64_IMM(EBPF_ADD, 2, 12345),
	MOV32_REG(6, 2), ALU32_IMM(EBPF_DIV, 6, 13), ALU64_REG(EBPF_ADD, 0, 6),
	ALU64_IMM(EBPF_SUB, 3, 1), JMP_IMM(EBPF_JNE, 3, 0, -11),
	EXIT(),
};

static int time_loop(struct ebpf_vm *vm, const char *name, const struct ebpf_insn *p, size_t n,
		     uint64_t iters, int per_iter)
{
	struct ebpf_prog *prog;
	struct ebpf_err err;
	double tj[RUNS], ti[RUNS];
	uint64_t rj = 0, ri = 0;

	if (ebpf_load(vm, p, n, name, &prog, &err) || ebpf_jit(prog, &err)) {
		fprintf(stderr, "%s: %s\n", name, err.msg);
		return 1;
	}
	for (int r = 0; r < RUNS; r++) {
		double t0 = now();

		ebpf_run_jit(prog, (void *)(uintptr_t)iters, 0, &rj);
		double t1 = now();

		ebpf_run_interp(prog, (void *)(uintptr_t)iters, 0, &ri);
		double t2 = now();

		tj[r] = t1 - t0;
		ti[r] = t2 - t1;
	}
	double mj = median(tj, RUNS), mi = median(ti, RUNS);
	double insns = (double)iters * per_iter;

	printf("%-9s %9.2f ms interp (%6.0f Minsn/s)  %8.2f ms jit (%6.0f Minsn/s)  speed-up %5.1fx%s\n",
	       name, mi * 1e3, insns / mi / 1e6, mj * 1e3, insns / mj / 1e6, mi / mj,
	       rj == ri ? "" : "  RESULT MISMATCH");
	ebpf_unload(prog);
	return rj != ri;
}

static const char usage[] =
"usage: ebpf-bench [ITERATIONS]\n"
"\n"
"Times an ALU loop and a division loop of ITERATIONS rounds each (default\n"
"2000000, at most 10^10) in the JIT and in the interpreter, and JIT compile\n"
"throughput on generated programs.  Exit status 0, 1 on a mismatch between\n"
"the engines, 2 on a bad argument.\n";

/*
 * The loops count down from ITERATIONS to 0: 0 would run 2^64 rounds, so
 * only a positive decimal or 0x number is taken (strtoull() read "--help"
 * as 0).
 */
static int parse_iters(const char *a, uint64_t *out)
{
	char *end;

	if (*a < '0' || *a > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoull(a, &end, 0);
	if (errno || *end || *out == 0 || *out > 10000000000ull)
		return -EINVAL;
	return 0;
}

int main(int argc, char **argv)
{
	struct ep_config cfg = { .sz = sizeof(cfg) };
	struct ep_pool *pool;
	struct ebpf_vm *vm;
	uint64_t iters = 2000000;
	int rc = 0;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(usage, stdout);
		return 0;
	}
	if (argc > 2 || (argc > 1 && parse_iters(argv[1], &iters))) {
		fprintf(stderr, "ebpf-bench: bad argument '%s' (ITERATIONS: 1 to 10^10)\n%s",
			argv[argc > 2 ? 2 : 1], usage);
		return 2;
	}

	if (ep_pool_create(&cfg, &pool)) {
		fprintf(stderr, "ebpf-bench: no executable memory pool\n");
		return 1;
	}
	ebpf_vm_create(pool, &vm);
	ebpf_std_helpers(vm);
	printf("ebpf-bench: %llu loop iterations, median of %d runs, backend %s\n",
	       (unsigned long long)iters, RUNS, ep_pool_backend(pool));
	rc |= time_loop(vm, "alu-loop", alu_loop, sizeof(alu_loop) / sizeof(alu_loop[0]), iters, 15);
	rc |= time_loop(vm, "div-loop", div_loop, sizeof(div_loop) / sizeof(div_loop[0]), iters, 12);

	/* Compile throughput: generated programs of ~1000 instructions. */
	enum { NPROG = 200 };
	static struct ebpf_insn buf[2048];
	struct ebpf_prog *progs[NPROG];
	double tc[RUNS];
	size_t total = 0;

	for (int r = 0; r < RUNS; r++) {
		uint64_t st = 0x1234 + (uint64_t)r;
		double t = 0;

		total = 0;
		for (int k = 0; k < NPROG; k++) {
			size_t n = ebpf_gen_prog(&st, buf, 2048, 1000, 0);
			struct ebpf_err err;

			if (ebpf_load(vm, buf, n, NULL, &progs[k], &err)) {
				fprintf(stderr, "gen: %s\n", err.msg);
				return 1;
			}
			total += n;
			double t0 = now();

			ebpf_jit(progs[k], &err);
			t += now() - t0;
		}
		for (int k = 0; k < NPROG; k++)
			ebpf_unload(progs[k]);
		tc[r] = t;
	}
	double m = median(tc, RUNS);

	printf("jit-compile %zu insns in %d programs: %.2f ms, %.1f M insns/s (%.1f us/program, alloc+finalize included)\n",
	       total, NPROG, m * 1e3, (double)total / m / 1e6, m / NPROG * 1e6);
	ebpf_vm_destroy(vm);
	ep_pool_destroy(pool);
	return rc;
}
