/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_diag.c - names for JIT code: ep_set_name() and its errors,
 * ep_symbolize() (offsets, truncation, all pools, freed code), the perf
 * map (and files another user plants in its place), ep_backtrace(), code reuse through ep_free()/ep_write(), and real
 * libunwind backtraces through JIT frames in every ep_set_unwind() kind.
 *
 * Run twice by make check: as is, and with EXECPACK_UNWIND=dwarf
 * (tests/check_diag-dwarf.sh), which changes the default unwind kind.
 *
 * The files: diag-fixture.c and diag-suite.h, the pool each test gets;
 * diag-names.c, names, ep_symbolize() and the perf map; diag-gdb.c, a
 * symbol's extent and GDB's JIT list; diag-planted.c, a perf map planted by
 * another user; diag-backtrace.c, libunwind and ep_backtrace().
 */
#include "config.h"

#include "diag-suite.h"

static Suite *diag_suite(void)
{
	Suite *s = suite_create("diag");
	TCase *tc = tcase_create("names");

	tcase_add_checked_fixture(tc, diag_setup, diag_teardown);
	tcase_set_timeout(tc, 60);
	diag_add_name_tests(tc);
	diag_add_gdb_tests(tc);
	diag_add_planted_tests(tc);
	diag_add_backtrace_tests(tc);
	suite_add_tcase(s, tc);
	diag_add_unwind_tcase(s);
	return s;
}

int main(void)
{
	struct ep_pool *probe;

	if (ep_pool_create(NULL, &probe) != 0) {
		printf("SKIP: no executable memory here\n");
		return 77;
	}
	ep_pool_destroy(probe);
	SRunner *sr = srunner_create(diag_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
