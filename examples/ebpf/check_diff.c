/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_diff.c - differential test: random valid programs (gen.c) must give
 * the same r0 and the same context bytes under the JIT and the interpreter.
 *
 * EBPF_DIFF_SEED=<n> reproduces a run, EBPF_DIFF_N=<n> sets the count.  A
 * mismatch prints the program as hex, ready for `ebpf-run --interp`.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf.h"
#include "execpack.h"
#include "gen.h"
#include "helpers.h"

static void dump(const struct ebpf_insn *p, size_t n)
{
	const uint8_t *b = (const uint8_t *)p;

	for (size_t i = 0; i < n * 8; i++)
		fprintf(stderr, "%02x%c", b[i], i % 8 == 7 ? '\n' : ' ');
}

START_TEST(test_differential)
{
	const char *e = getenv("EBPF_DIFF_SEED");
	uint64_t seed = e ? strtoull(e, NULL, 0) : 0x5eed2024ull;
	size_t count = getenv("EBPF_DIFF_N") ? strtoul(getenv("EBPF_DIFF_N"), NULL, 0) : 4000;
	struct ep_config cfg = { .sz = sizeof(cfg) };
	struct ep_pool *pool;
	struct ebpf_vm *vm;
	static struct ebpf_insn prog[4096];
	size_t total_insns = 0;

	printf("check_diff: seed 0x%" PRIx64 ", %zu programs (EBPF_DIFF_SEED to reproduce)\n", seed, count);
	ck_assert_int_eq(ep_pool_create(&cfg, &pool), 0);
	ck_assert_int_eq(ebpf_vm_create(pool, &vm), 0);
	ebpf_std_helpers(vm);
	for (size_t k = 0; k < count; k++) {
		uint64_t st = seed * 0x9e3779b97f4a7c15ull + k + 1;
		size_t target = 20 + (size_t)(ebpf_gen_rand(&st) % (k % 10 == 0 ? 1500 : 200));
		size_t n = ebpf_gen_prog(&st, prog, 4096, target, 0);
		struct ebpf_prog *p;
		struct ebpf_err err;
		uint8_t ctx0[EBPF_GEN_CTX], ca[EBPF_GEN_CTX], cb[EBPF_GEN_CTX];
		uint64_t ra, rb;

		ck_assert_msg(n > 0, "generator overflow at program %zu", k);
		total_insns += n;
		for (size_t i = 0; i < sizeof(ctx0); i++)
			ctx0[i] = (uint8_t)ebpf_gen_rand(&st);
		memcpy(ca, ctx0, sizeof(ca));
		memcpy(cb, ctx0, sizeof(cb));
		if (ebpf_load(vm, prog, n, NULL, &p, &err)) {
			dump(prog, n);
			ck_abort_msg("program %zu (seed 0x%" PRIx64 ") rejected: %s", k, seed, err.msg);
		}
		ck_assert_msg(ebpf_jit(p, &err) == 0, "program %zu: jit: %s", k, err.msg);
		ck_assert_int_eq(ebpf_run_interp(p, ca, sizeof(ca), &ra), 0);
		ck_assert_int_eq(ebpf_run_jit(p, cb, sizeof(cb), &rb), 0);
		if (ra != rb || memcmp(ca, cb, sizeof(ca))) {
			dump(prog, n);
			ck_abort_msg("program %zu (seed 0x%" PRIx64 ", %zu insns): interp r0=0x%" PRIx64
				     " jit r0=0x%" PRIx64 "%s", k, seed, n, ra, rb,
				     memcmp(ca, cb, sizeof(ca)) ? ", context differs" : "");
		}
		ebpf_unload(p);
	}
	printf("check_diff: %zu programs, %zu instructions, all equal\n", count, total_insns);
	ebpf_vm_destroy(vm);
	ep_pool_destroy(pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ebpf-diff");
	TCase *tc = tcase_create("diff");
	int nf;

#if !defined(__x86_64__)
	printf("SKIP: the eBPF example's JIT emits x86-64 code\n");
	return 77;
#endif
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_differential);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}
