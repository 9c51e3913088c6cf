/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_memfd.c - what the memfd backend promises about its mappings: an
 * RX shared view of a memfd, a RW alias elsewhere that is kept out of core
 * dumps, never a W+X mapping, and packs found by range, not by alignment.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execpack.h"
#include "testutil.h"

static struct ep_pool *pool;

static void setup(void)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };

	ck_assert_int_eq(ep_pool_create(&cfg, &pool), 0);
}

static void teardown(void)
{
	ep_pool_destroy(pool);
}

struct mapping {
	uintptr_t lo, hi;
	char perms[8];
	char name[256];
};

/* All views of the library's regions (tu_pack_line()). */
static int execpack_mappings(struct mapping *out, int max)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[1024];
	int n = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f) && n < max) {
		struct mapping m = { 0 };
		int off = 0;

		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &m.lo, &m.hi, m.perms, &off) < 3)
			continue;
		if (!tu_pack_line(line))
			continue;
		snprintf(m.name, sizeof(m.name), "%s", line + off);
		m.name[strcspn(m.name, "\n")] = 0;
		out[n++] = m;
	}
	fclose(f);
	return n;
}

START_TEST(test_dual_mapping)
{
	int rc;
	void *f = tu_jit_ret(pool, 6, 1, &rc);

	ck_assert_int_eq(rc, 0);
	struct mapping m[16];
	int n = execpack_mappings(m, 16);
	int rx = 0, rw = 0, none = 0;
	uintptr_t rx_lo = 0, rx_hi = 0, rw_lo = 0, none_lo = 0, none_hi = 0;

	/* anonymous shared memory, which perf takes for anonymous (so that it
	 * reads the perf map for it), wherever it can be made executable */
	const char *want = tu_anon_exec_ok() ? "/dev/zero (deleted)" : "/memfd:execpack";

	for (int i = 0; i < n; i++) {
		ck_assert_msg(!(m[i].perms[1] == 'w' && m[i].perms[2] == 'x'), "W+X: %s", m[i].perms);
		ck_assert_msg(strstr(m[i].name, want) != NULL, "name '%s', not '%s'", m[i].name, want);
		if (!strcmp(m[i].perms, "r-xs")) {
			rx++;
			rx_lo = m[i].lo;
			rx_hi = m[i].hi;
		} else if (!strcmp(m[i].perms, "rw-s")) {
			rw++;
			rw_lo = m[i].lo;
		} else if (!strcmp(m[i].perms, "---s")) {
			none++;
			none_lo = m[i].lo;
			none_hi = m[i].hi;
		}
	}
	ck_assert_int_eq(rx, 1);
	ck_assert_int_eq(rw, 1);
	ck_assert_uint_eq(rx_lo, (uintptr_t)f);
	ck_assert_uint_ne(rw_lo, rx_lo);
	/* the exec view: its committed first 64 KiB, then the rest of the
	 * pack inaccessible until it is committed (ep_pool_stats(3)) */
	ck_assert_int_eq(none, 1);
	ck_assert_uint_eq(rx_hi - rx_lo, 64u << 10);
	ck_assert_uint_eq(none_lo, rx_hi);
	ck_assert_uint_eq(none_hi - rx_lo, 2u << 20);
	ck_assert_int_eq(ep_free(pool, f), 0);
}
END_TEST

START_TEST(test_alias_not_dumped)
{
	int rc;
	void *f = tu_jit_ret(pool, 6, 1, &rc);

	ck_assert_int_eq(rc, 0);
	FILE *sm = fopen("/proc/self/smaps", "re");
	char line[1024];
	int in_rw = 0, checked = 0;

	ck_assert_ptr_nonnull(sm);
	while (fgets(line, sizeof(line), sm)) {
		unsigned long lo, hi;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3) {
			in_rw = tu_pack_line(line) && !strcmp(perms, "rw-s");
			continue;
		}
		if (in_rw && !strncmp(line, "VmFlags:", 8)) {
			ck_assert_msg(strstr(line, " dd") != NULL, "alias lacks MADV_DONTDUMP: %s", line);
			checked++;
		}
	}
	fclose(sm);
	ck_assert_int_eq(checked, 1);
	ck_assert_int_eq(ep_free(pool, f), 0);
}
END_TEST

START_TEST(test_packs_found_by_range)
{
	/* many small packs: their addresses are not aligned to their size, and
	 * every address inside each must still resolve to its allocation */
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .pack_size = 3 * tu_page() };
	struct ep_pool *p;
	static void *f[3 * 3 * 1024];
	int n = (int)(3 * cfg.pack_size / 64); /* three packs full */
	int rc;

	ck_assert_int_le(n, 3 * 3 * 1024);
	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	for (int i = 0; i < n; i++) {
		f[i] = tu_jit_ret(p, 64, (uint32_t)i, &rc);
		ck_assert_int_eq(rc, 0);
	}
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.packs, 3);
	for (int i = 0; i < n; i++) {
		/* interior address of each allocation: patch its immediate */
		ck_assert_int_eq(tu_patch_ret_imm(p, tu_ret_at(f[i], 64), (uint32_t)i + 1000), 0);
		ck_assert_int_eq(tu_as_fn(f[i])(), i + 1000);
	}
	for (int i = n - 1; i >= 0; i--)
		ck_assert_int_eq(ep_free(p, f[i]), 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_exec_view_is_not_writable_by_mprotect_of_alias)
{
	/* the alias never leaves the library: the only pointers a caller holds
	 * are exec addresses, which are mapped without PROT_WRITE */
	int rc;
	void *f = tu_jit_ret(pool, 6, 1, &rc);
	char perms[8];

	tu_mapping_perms(f, perms, NULL, 0);
	ck_assert_str_eq(perms, "r-xs");
	ck_assert_int_eq(ep_free(pool, f), 0);
}
END_TEST

static Suite *memfd_suite(void)
{
	Suite *s = suite_create("memfd");
	TCase *tc = tcase_create("mappings");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_dual_mapping);
	tcase_add_test(tc, test_alias_not_dumped);
	tcase_add_test(tc, test_packs_found_by_range);
	tcase_add_test(tc, test_exec_view_is_not_writable_by_mprotect_of_alias);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(memfd_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
