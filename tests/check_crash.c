/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_crash.c - what must kill the program: a store through the exec
 * view (SIGSEGV), running into the trap fill or freed code (SIGTRAP).
 * Each test runs in a forked child (CK_FORK), so this suite stays apart
 * from the ones Valgrind runs with CK_FORK=no.
 */
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "execpack.h"
#include "testutil.h"

static struct ep_pool *make(void)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *p;

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	return p;
}

START_TEST(test_store_through_exec_segfaults)
{
	struct ep_pool *p = make();
	int rc;
	void *f = tu_jit_ret(p, 6, 1, &rc);

	ck_assert_int_eq(rc, 0);
	*(volatile unsigned char *)f = 0x90; /* must fault */
	ck_abort_msg("store through the exec view did not fault");
}
END_TEST

START_TEST(test_store_into_unused_pack_space_segfaults)
{
	struct ep_pool *p = make();
	int rc;
	void *f = tu_jit_ret(p, 6, 1, &rc);

	ck_assert_int_eq(rc, 0);
	((volatile unsigned char *)f)[100000] = 0x90;
	ck_abort_msg("store into the pack did not fault");
}
END_TEST

START_TEST(test_jump_into_fill_traps)
{
	struct ep_pool *p = make();
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(p, 64, &img), 0);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0); /* nothing written: all INT3 */
	tu_as_fn(img.exec)();
	ck_abort_msg("running the fill did not trap");
}
END_TEST

START_TEST(test_call_freed_code_traps)
{
	struct ep_pool *p = make();
	int rc;
	void *keep = tu_jit_ret(p, 6, 1, &rc); /* keeps the pack mapped */
	void *f = tu_jit_ret(p, 6, 2, &rc);

	ck_assert_ptr_nonnull(keep);
	ck_assert_int_eq(tu_as_fn(f)(), 2);
	ck_assert_int_eq(ep_free(p, f), 0);
	tu_as_fn(f)(); /* stale pointer: runs into the refill */
	ck_abort_msg("freed code still ran");
}
END_TEST

static Suite *crash_suite(void)
{
	Suite *s = suite_create("crash");
	TCase *tc = tcase_create("signals");

	tcase_add_test_raise_signal(tc, test_store_through_exec_segfaults, SIGSEGV);
	tcase_add_test_raise_signal(tc, test_store_into_unused_pack_space_segfaults, SIGSEGV);
	tcase_add_test_raise_signal(tc, test_jump_into_fill_traps, SIGTRAP);
	tcase_add_test_raise_signal(tc, test_call_freed_code_traps, SIGTRAP);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(crash_suite());

	/* these tests need a process each, whatever CK_FORK says */
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
