/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_bti.c - EP_F_BTI: the code of a pool mapped PROT_BTI (arm64;
 * libexecpack(7), "Hardware guards"):
 *
 *   landing   a BLR to JIT code that starts with BTI c runs; a BLR to code
 *             that does not (BTI j, a NOP, the code itself) raises SIGILL
 *             (a branch target exception); a BR through x9 from JIT code
 *             in the pool runs on BTI j and raises SIGILL on BTI c; a BR
 *             from this program's code, unguarded unless it was built with
 *             -mbranch-protection=bti, runs on either and on no pad faults;
 *   without   a pool without the flag runs both;
 *   views     the exec views of a BTI pool are guarded pages ("bt" in
 *             /proc/self/smaps), those of a pool without it are not, and
 *             the two pools never share a mapping;
 *   grown     code past a pack's first committed prefix (commit's
 *             mprotect), in a large allocation and in a fork child after
 *             its private copy is guarded too;
 *   fill      an indirect branch into the trap fill raises SIGTRAP, as
 *             without BTI (BRK is a valid target);
 *   env       EXECPACK_BTI=1 gives a pool BTI without the flag;
 *   refused   where the CPU or kernel has no BTI (every architecture but
 *             arm64), EP_F_BTI and EXECPACK_BTI=1 make ep_pool_create()
 *             fail with -EOPNOTSUPP and a reason, for every backend.
 *
 * The program itself need not be built with -mbranch-protection: BTI is
 * checked at the branch's target, on the target page's guard bit.  Only
 * the kind of a BR depends on where it comes from: from a page that is not
 * guarded it counts as a call (BTYPE 01, which BTI c accepts too).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "testutil.h"

#ifndef HWCAP2_BTI
#define HWCAP2_BTI (1UL << 17)
#endif

static bool have_bti(void)
{
#if defined(__aarch64__)
	return (getauxval(AT_HWCAP2) & HWCAP2_BTI) != 0;
#else
	return false;
#endif
}

static struct ep_pool *pool_new(enum ep_backend b, size_t pack_size, unsigned flags)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = b, .pack_size = pack_size,
				 .flags = flags };
	struct ep_pool *pool = NULL;

	ck_assert_int_eq(ep_pool_create(&cfg, &pool), 0);
	return pool;
}

START_TEST(test_refused_without_bti)
{
	static const enum ep_backend all[] = { EP_BACKEND_AUTO, EP_BACKEND_MEMFD,
					       EP_BACKEND_HUGETLB, EP_BACKEND_KMOD };
	char why[512];

	if (have_bti())
		return; /* (the other tests) */
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		struct ep_config cfg = { .sz = sizeof(cfg), .backend = all[i], .flags = EP_F_BTI };
		struct ep_pool *pool = NULL;
		int rc = ep_pool_create(&cfg, &pool);

		ck_assert_ptr_null(pool);
		ck_assert_int_ne(rc, 0);
		rc = ep_backend_probe(all[i], &cfg, why, sizeof(why));
		ck_assert_int_ne(rc, 0);
		if (all[i] == EP_BACKEND_MEMFD) {
			ck_assert_int_eq(rc, -EOPNOTSUPP);
			ck_assert_msg(strstr(why, "memfd: BTI asked for (EP_F_BTI)"), "%s", why);
		}
	}
	/* the environment asks the same */
	ck_assert_int_eq(setenv("EXECPACK_BTI", "1", 1), 0);
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *pool = NULL;

	ck_assert_int_eq(ep_pool_create(&cfg, &pool), -EOPNOTSUPP);
	ck_assert_int_eq(ep_backend_probe(EP_BACKEND_MEMFD, &cfg, why, sizeof(why)), -EOPNOTSUPP);
	ck_assert_msg(strstr(why, "EXECPACK_BTI"), "%s", why);
	ck_assert_int_eq(unsetenv("EXECPACK_BTI"), 0);
	/* and a pool without it says why it has no BTI */
	pool = pool_new(EP_BACKEND_MEMFD, 0, 0);
	ck_assert_uint_eq(ep_pool_guards(pool, why, sizeof(why)) & EP_GUARD_BTI, 0);
	ck_assert_msg(strstr(why, "bti: "), "%s", why);
	ep_pool_destroy(pool);
}
END_TEST

#if defined(__aarch64__)

#define BTI_C 0xd503245fu
#define BTI_J 0xd503249fu
#define NOP 0xd503201fu
#define RET 0xd65f03c0u
#define BR_X9 0xd61f0120u

static uint32_t movz_w0(uint32_t imm16)
{
	return 0x52800000u | (imm16 & 0xffff) << 5;
}

/* JIT "[pad;] mov w0, #imm; ret" at the start of len bytes (nops past). */
static void *jit_fn(struct ep_pool *pool, size_t len, uint32_t pad, uint32_t imm)
{
	struct ep_image img;
	unsigned char *p;

	ck_assert_int_eq(ep_alloc(pool, len, &img), 0);
	p = img.rw;
	tu_fill_nops(p, len);
	if (pad) {
		tu_put32(p, pad);
		p += 4;
	}
	tu_put32(p, movz_w0(imm));
	tu_put32(p + 4, RET);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	return img.exec;
}

/* A trampoline in pool: "bti c; br x9", called by BLR with the target in
 * x9: a BR from a guarded page, BTYPE 11. */
static void *jit_tramp(struct ep_pool *pool)
{
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(pool, 64, &img), 0);
	tu_fill_nops(img.rw, 64);
	tu_put32(img.rw, BTI_C);
	tu_put32((unsigned char *)img.rw + 4, BR_X9);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	return img.exec;
}

static void *g_tramp;

/* BLR to g_tramp, which jumps on to fn through x9 and returns to here. */
static int call_tramp(void *fn)
{
	register uint64_t x9 __asm__("x9") = (uint64_t)(uintptr_t)fn;
	register uint64_t x16 __asm__("x16") = (uint64_t)(uintptr_t)g_tramp;
	register uint64_t x0 __asm__("x0");

	__asm__ volatile("blr x16"
			 : "=r"(x0), "+r"(x9), "+r"(x16)
			 :
			 : "x30", "memory");
	return (int)x0;
}

/* A call through a register: BLR (BTYPE 10).  (Spelled out: a C call
 * through a pointer in tail position is a BR.) */
static int call_blr(void *fn)
{
	register uint64_t x9 __asm__("x9") = (uint64_t)(uintptr_t)fn;
	register uint64_t x0 __asm__("x0");

	__asm__ volatile("blr x9" : "=r"(x0), "+r"(x9) : : "x30", "memory");
	return (int)x0;
}

/* A jump through x9 that comes back: BR (BTYPE 11 for registers other than
 * x16 and x17). */
static int call_br_x9(void *fn)
{
	register uint64_t x9 __asm__("x9") = (uint64_t)(uintptr_t)fn;
	register uint64_t x0 __asm__("x0");

	__asm__ volatile("adr x30, 1f\n\tbr x9\n1:"
			 : "=r"(x0), "+r"(x9)
			 :
			 : "x30", "memory");
	return (int)x0;
}

/* Run f(fn) in a child: its exit status (0..255) or 1000 + the signal that
 * killed it. */
static int in_child(int (*f)(void *), void *fn, int want)
{
	fflush(stdout);
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		signal(SIGILL, SIG_DFL);
		signal(SIGTRAP, SIG_DFL);
		_exit(f(fn) == want ? 0 : 1);
	}
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) ? 1000 + WTERMSIG(st) : WEXITSTATUS(st);
}

static int blr(void *fn, int want)
{
	return in_child(call_blr, fn, want);
}

static int br(void *fn, int want)
{
	return in_child(call_br_x9, fn, want);
}

static int tramp(void *fn, int want)
{
	return in_child(call_tramp, fn, want);
}

/* The "VmFlags:" line of the smaps entry holding addr has "bt". */
static bool guarded_page(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	bool in = false, bt = false, seen = false;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (in && !strncmp(line, "VmFlags:", 8)) {
			bt = strstr(line, " bt") != NULL;
			seen = true;
			in = false;
		}
	}
	fclose(f);
	ck_assert_msg(seen, "%p not in /proc/self/smaps", addr);
	return bt;
}

START_TEST(test_landing_pads)
{
	char why[256];
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, EP_F_BTI);

	ck_assert_uint_eq(ep_pool_guards(pool, why, sizeof(why)) & EP_GUARD_BTI, EP_GUARD_BTI);
	void *pad_c = jit_fn(pool, 64, BTI_C, 42);
	void *pad_j = jit_fn(pool, 64, BTI_J, 43);
	void *none = jit_fn(pool, 64, 0, 44);
	void *nop = jit_fn(pool, 64, NOP, 45);

	ck_assert(guarded_page(pad_c));
	ck_assert_int_eq(blr(pad_c, 42), 0);
	ck_assert_int_eq(blr(none, 44), 1000 + SIGILL);
	ck_assert_int_eq(blr(nop, 45), 1000 + SIGILL);
	ck_assert_int_eq(blr(pad_j, 43), 1000 + SIGILL);
	/* BR from JIT code (a guarded page): BTI j, not BTI c */
	g_tramp = jit_tramp(pool);
	ck_assert_int_eq(tramp(pad_j, 43), 0);
	ck_assert_int_eq(tramp(pad_c, 42), 1000 + SIGILL);
	ck_assert_int_eq(tramp(none, 44), 1000 + SIGILL);
	/* BR from this program: a call, unless its own code is guarded */
	bool here = guarded_page((const void *)(uintptr_t)call_br_x9);

	printf("check_bti: this program's code is %sguarded\n", here ? "" : "not ");
	ck_assert_int_eq(br(pad_j, 43), 0);
	ck_assert_int_eq(br(pad_c, 42), here ? 1000 + SIGILL : 0);
	ck_assert_int_eq(br(none, 44), 1000 + SIGILL);
	/* in this process too: a landing pad is a call like any other */
	ck_assert_int_eq(call_blr(pad_c), 42);
	ep_pool_destroy(pool);
}
END_TEST

START_TEST(test_without_flag)
{
	char why[256];
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, 0);
	struct ep_pool *bti = pool_new(EP_BACKEND_MEMFD, 0, EP_F_BTI);

	ck_assert_uint_eq(ep_pool_guards(pool, why, sizeof(why)) & EP_GUARD_BTI, 0);
	ck_assert_msg(strstr(why, "bti: not asked for"), "%s", why);
	void *pad_c = jit_fn(pool, 64, BTI_C, 42);
	void *none = jit_fn(pool, 64, 0, 44);
	void *b = jit_fn(bti, 64, 0, 46);

	ck_assert(!guarded_page(none));
	ck_assert(guarded_page(b));
	ck_assert_int_eq(blr(pad_c, 42), 0);
	ck_assert_int_eq(blr(none, 44), 0);
	ck_assert_int_eq(br(none, 44), 0);
	g_tramp = jit_tramp(pool);
	ck_assert_int_eq(tramp(none, 44), 0);
	ck_assert_int_eq(tramp(pad_c, 42), 0);
	ck_assert_int_eq(blr(b, 46), 1000 + SIGILL);
	ck_assert_int_eq(call_blr(none), 44);
	ep_pool_destroy(bti);
	ep_pool_destroy(pool);
}
END_TEST

START_TEST(test_grown_large_fork)
{
	/* 64 KiB is committed first: 80 functions of 1 KiB grow the pack */
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, EP_F_BTI);
	void *fn[80];

	for (int i = 0; i < 80; i++)
		fn[i] = jit_fn(pool, 1024, i & 1 ? BTI_C : 0, 100 + (uint32_t)i);
	ck_assert(guarded_page(fn[79]));
	ck_assert_int_eq(blr(fn[79], 179), 0);
	ck_assert_int_eq(blr(fn[78], 178), 1000 + SIGILL);
	/* a large allocation */
	void *big = jit_fn(pool, (size_t)3 << 20, 0, 7);

	ck_assert(guarded_page(big));
	ck_assert_int_eq(blr(big, 7), 1000 + SIGILL);
	/* a fork child's private copy */
	fflush(stdout);
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		uint32_t insn = movz_w0(55);

		/* a change makes the region the child's own (privatize) */
		if (ep_write(pool, (unsigned char *)fn[79] + 4, &insn, 4))
			_exit(2);
		if (call_blr(fn[79]) != 55)
			_exit(3);
		if (!guarded_page(fn[78]))
			_exit(4);
		signal(SIGILL, SIG_DFL);
		call_blr(fn[78]);
		_exit(5);
	}
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGILL, "child status %#x", st);
	ck_assert_int_eq(call_blr(fn[79]), 179);
	ep_pool_destroy(pool);
}
END_TEST

/* BRK is a valid branch target: the breakpoint exception comes before the
 * branch target check, so the trap fill stops a stray jump as it does
 * without BTI. */
START_TEST(test_into_fill)
{
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, EP_F_BTI);
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(pool, 64, &img), 0);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0); /* the trap fill only */
	ck_assert_int_eq(blr(img.exec, 0), 1000 + SIGTRAP);
	g_tramp = jit_tramp(pool);
	ck_assert_int_eq(tramp((unsigned char *)img.exec + 16, 0), 1000 + SIGTRAP);
	ep_pool_destroy(pool);
}
END_TEST

START_TEST(test_env)
{
	char why[256];

	ck_assert_int_eq(setenv("EXECPACK_BTI", "1", 1), 0);
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, 0);

	ck_assert_int_eq(unsetenv("EXECPACK_BTI"), 0);
	ck_assert_uint_eq(ep_pool_guards(pool, why, sizeof(why)) & EP_GUARD_BTI, EP_GUARD_BTI);
	void *none = jit_fn(pool, 64, 0, 44);

	ck_assert_int_eq(blr(none, 44), 1000 + SIGILL);
	ep_pool_destroy(pool);
	/* kmod refuses it (whether or not the module is there) */
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_KMOD, .flags = EP_F_BTI };

	ck_assert_int_eq(ep_backend_probe(EP_BACKEND_KMOD, &cfg, why, sizeof(why)), -EOPNOTSUPP);
	ck_assert_msg(strstr(why, "kmod: BTI"), "%s", why);
}
END_TEST
#endif /* __aarch64__ */

static Suite *bti_suite(void)
{
	Suite *s = suite_create("bti");
	TCase *tc = tcase_create("bti");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_refused_without_bti);
#if defined(__aarch64__)
	if (have_bti()) {
		tcase_add_test(tc, test_landing_pads);
		tcase_add_test(tc, test_without_flag);
		tcase_add_test(tc, test_grown_large_fork);
		tcase_add_test(tc, test_into_fill);
		tcase_add_test(tc, test_env);
	}
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	tu_need_pool();
	if (!have_bti())
		printf("check_bti: no BTI here (%s): only the refusal is tested\n",
#if defined(__aarch64__)
		       "no HWCAP2_BTI"
#else
		       "not arm64"
#endif
		);
	SRunner *sr = srunner_create(bti_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
