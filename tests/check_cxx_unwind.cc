// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_cxx_unwind.cc - C++ exceptions and glibc's backtrace() through JIT
 * frames.  They unwind with libgcc's unwinder, which knows only the frames
 * it has CFI for: JIT code described with ep_set_unwind()'s DWARF kinds is
 * registered with it (__register_frame), and deregistered before its
 * chunks are reused.
 *
 * The JIT code calls a C++ function that throws; the exception is caught
 * in the C++ function that called the JIT code.  Without the registration
 * the unwinder stops at the JIT frame and the process dies in
 * std::terminate (SIGABRT).
 */
#include "config.h"

#include <check.h>
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <stdexcept>

#include "execpack.h"

#if defined(__x86_64__) || defined(__aarch64__)
#define JIT_FRAMES 1
#endif

#ifdef JIT_FRAMES
static struct ep_pool *pool;

static void setup(void)
{
	struct ep_config cfg = {};

	cfg.sz = sizeof(cfg);
	cfg.backend = EP_BACKEND_MEMFD;
	int rc = ep_pool_create(&cfg, &pool);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
}

static void teardown(void)
{
	ep_pool_destroy(pool);
	pool = NULL;
}

/* The two prologues of ep_set_unwind(3), calling target (a C function
 * pointer); SP_PROLOGUE and SP_FRAME describe the second one.
 * x86-64:
 *   push rbp; mov rbp, rsp; mov rax, target; call rax; pop rbp; ret
 *   sub rsp, 8; mov rax, target; call rax; add rsp, 8; ret
 * arm64:
 *   stp x29, x30, [sp, #-16]!; mov x29, sp; ldr x16, =target; blr x16;
 *   ldp x29, x30, [sp], #16; ret
 *   stp x29, x30, [sp, #-16]!; ldr x16, =target; blr x16;
 *   ldp x29, x30, [sp], #16; ret
 */
#if defined(__x86_64__)
#define SP_PROLOGUE 4
#define SP_FRAME 8

static size_t emit_call(unsigned char *p, void (*target)(void), bool fp)
{
	size_t n = 0;
	uint64_t t;

	memcpy(&t, &target, sizeof(t));
	if (fp) {
		p[n++] = 0x55;
		p[n++] = 0x48, p[n++] = 0x89, p[n++] = 0xe5;
	} else {
		p[n++] = 0x48, p[n++] = 0x83, p[n++] = 0xec, p[n++] = 0x08;
	}
	p[n++] = 0x48, p[n++] = 0xb8;
	memcpy(p + n, &t, 8), n += 8;
	p[n++] = 0xff, p[n++] = 0xd0;
	if (fp)
		p[n++] = 0x5d;
	else
		p[n++] = 0x48, p[n++] = 0x83, p[n++] = 0xc4, p[n++] = 0x08;
	p[n++] = 0xc3;
	return n;
}
#else
#define SP_PROLOGUE 4
#define SP_FRAME 16

static void put32(unsigned char *p, uint32_t insn)
{
	memcpy(p, &insn, 4);
}

static size_t emit_call(unsigned char *p, void (*target)(void), bool fp)
{
	size_t n = 0, lit = 24;
	uint64_t t;

	memcpy(&t, &target, sizeof(t));
	put32(p + n, 0xa9bf7bfdu), n += 4; /* stp x29, x30, [sp, #-16]! */
	if (fp)
		put32(p + n, 0x910003fdu), n += 4; /* mov x29, sp */
	put32(p + n, 0x58000000u | (uint32_t)((lit - n) / 4) << 5 | 16u), n += 4; /* ldr x16 */
	put32(p + n, 0xd63f0200u), n += 4; /* blr x16 */
	put32(p + n, 0xa8c17bfdu), n += 4; /* ldp x29, x30, [sp], #16 */
	put32(p + n, 0xd65f03c0u), n += 4; /* ret */
	while (n < lit)
		put32(p + n, 0xd503201fu), n += 4; /* nop */
	memcpy(p + n, &t, 8), n += 8;
	return n;
}
#endif

/* JIT code that calls target, described by the given ep_set_unwind kind. */
static void (*jit_call(void (*target)(void), int kind, const char *name))(void)
{
	struct ep_image img;
	bool fp = kind != EP_UNWIND_DWARF_SP;

	ck_assert_int_eq(ep_alloc(pool, 64, &img), 0);
	size_t n = emit_call(static_cast<unsigned char *>(img.rw), target, fp);
	int rc = ep_set_unwind(pool, img.exec, kind, fp ? 0 : SP_PROLOGUE, fp ? 0 : SP_FRAME);

	ck_assert_msg(rc == 0, "ep_set_unwind: %s", ep_strerror(rc));
	ck_assert_int_eq(ep_set_name(pool, img.exec, name), 0);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	ck_assert_int_eq(ep_shrink(pool, img.exec, n), 0);
	void (*fn)(void);

	memcpy(&fn, &img.exec, sizeof(fn));
	return fn;
}

static int g_thrown;

extern "C" __attribute__((noinline)) void cxx_thrower(void);
extern "C" __attribute__((noinline)) void cxx_thrower(void)
{
	g_thrown++;
	throw std::runtime_error("thrown under JIT code");
}

/* Calls fn (JIT code that calls cxx_thrower) and catches what it throws:
 * the message, or NULL if nothing was thrown. */
static __attribute__((noinline)) const char *call_and_catch(void (*fn)(void))
{
	static char what[64];

	try {
		fn();
	} catch (const std::runtime_error &e) {
		snprintf(what, sizeof(what), "%s", e.what());
		return what;
	}
	return NULL;
}

static void check_caught(void (*fn)(void), const char *how)
{
	int before = g_thrown;
	const char *what = call_and_catch(fn);

	ck_assert_int_eq(g_thrown, before + 1);
	ck_assert_msg(what && !strcmp(what, "thrown under JIT code"),
		      "%s: the exception was not caught in the JIT code's caller", how);
}

START_TEST(test_throw_through_fp)
{
	check_caught(jit_call(cxx_thrower, EP_UNWIND_DWARF_FP, "cxx_fp"), "EP_UNWIND_DWARF_FP");
}
END_TEST

START_TEST(test_throw_through_sp)
{
	check_caught(jit_call(cxx_thrower, EP_UNWIND_DWARF_SP, "cxx_sp"), "EP_UNWIND_DWARF_SP");
}
END_TEST

/*
 * The registration goes with the chunks: code freed and replaced at the
 * same address by code with the other prologue is unwound by its own CFI
 * (a stale registration would restore the wrong registers, or win the
 * lookup and step the new frame by the old rules), and a shrink
 * re-registers the narrower range.
 */
START_TEST(test_reused_chunks)
{
	void (*a)(void) = jit_call(cxx_thrower, EP_UNWIND_DWARF_FP, "cxx_first");

	check_caught(a, "first");
	void *at;

	memcpy(&at, &a, sizeof(at));
	ck_assert_int_eq(ep_free(pool, at), 0);
	void (*b)(void) = jit_call(cxx_thrower, EP_UNWIND_DWARF_SP, "cxx_second");

	ck_assert_msg(memcmp(&a, &b, sizeof(a)) == 0, "the freed chunks were not reused");
	check_caught(b, "after reuse");
	/* described by name only from now on: no CFI, nothing registered; then
	 * DWARF again */
	memcpy(&at, &b, sizeof(at));
	ck_assert_int_eq(ep_set_unwind(pool, at, EP_UNWIND_NAME, 0, 0), 0);
	ck_assert_int_eq(ep_set_unwind(pool, at, EP_UNWIND_DWARF_SP, SP_PROLOGUE, SP_FRAME), 0);
	check_caught(b, "after ep_set_unwind again");
	ck_assert_int_eq(ep_free(pool, at), 0);
}
END_TEST

/* glibc's backtrace() (libgcc's _Unwind_Backtrace) from under JIT code:
 * the JIT frame, then its caller's. */
static void *g_ips[64];
static int g_nips;

extern "C" __attribute__((noinline)) void cxx_backtrace(void);
extern "C" __attribute__((noinline)) void cxx_backtrace(void)
{
	g_nips = backtrace(g_ips, 64);
}

static __attribute__((noinline)) void backtrace_caller(void (*fn)(void))
{
	fn();
	__asm__ volatile("" ::: "memory"); /* not a tail call: this frame stays */
}

START_TEST(test_glibc_backtrace)
{
	void (*fn)(void) = jit_call(cxx_backtrace, EP_UNWIND_DWARF_FP, "cxx_bt");
	uintptr_t lo, caller = (uintptr_t)(void *)backtrace_caller;

	memcpy(&lo, &fn, sizeof(lo));
	backtrace_caller(fn);
	int jit = -1, after = -1;

	for (int i = 0; i < g_nips; i++) {
		uintptr_t ip = (uintptr_t)g_ips[i];

		if (jit < 0 && ip > lo && ip <= lo + 64)
			jit = i;
		else if (jit >= 0 && after < 0 && ip > caller && ip < caller + 256)
			after = i;
	}
	ck_assert_msg(jit >= 0, "backtrace() (%d frames) has no JIT frame", g_nips);
	ck_assert_msg(after > jit, "backtrace() stopped at the JIT frame (%d frames, JIT at %d)",
		      g_nips, jit);
}
END_TEST
#endif /* JIT_FRAMES */

int main(void)
{
	struct ep_pool *probe;

	if (ep_pool_create(NULL, &probe) != 0) {
		printf("SKIP: no executable memory here\n");
		return 77;
	}
	ep_pool_destroy(probe);
#ifndef JIT_FRAMES
	printf("SKIP: the test's JIT code is for x86-64 and arm64\n");
	return 77;
#else
	Suite *s = suite_create("cxx_unwind");
	TCase *tc = tcase_create("libgcc");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_throw_through_fp);
	tcase_add_test(tc, test_throw_through_sp);
	tcase_add_test(tc, test_reused_chunks);
	tcase_add_test(tc, test_glibc_backtrace);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
#endif
}
