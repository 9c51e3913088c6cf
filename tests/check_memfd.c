/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_memfd.c - what the memfd backend promises about its mappings: an
 * RX shared view of anonymous memory, a RW alias elsewhere that is kept out
 * of core dumps, never a W+X mapping, packs found by range, not by
 * alignment, and with EXECPACK_DEBUG=1 private views a debugger can write.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
	/* the exec view: its committed first page, then the rest of the
	 * pack inaccessible until it is committed (ep_pool_stats(3)) */
	ck_assert_int_eq(none, 1);
	ck_assert_uint_eq(rx_hi - rx_lo, tu_page());
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

/*
 * The probe at ep_pool_create() maps the first pack (issue 42: a fresh
 * process's first program costs no second mapping): the first program
 * lies in a view that was there before the first ep_alloc(), and no view
 * is added.
 */
START_TEST(test_probe_is_first_pack)
{
	if (!tu_anon_exec_ok()) {
		printf("SKIP test_probe_is_first_pack: the probe keeps no pack without anonymous "
		       "executable shared memory (or under Valgrind)\n");
		return;
	}
	struct mapping before[64], after[64];
	int n0 = execpack_mappings(before, 64), rc;

	ck_assert_int_ge(n0, 2); /* the probe's exec view and alias */
	void *f = tu_jit_ret(pool, 64, 5, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 5);
	ck_assert_int_eq(execpack_mappings(after, 64), n0);
	int in = 0;

	for (int i = 0; i < n0; i++)
		in |= (uintptr_t)f >= before[i].lo && (uintptr_t)f < before[i].hi;
	ck_assert_msg(in, "the first program is not in the probe's mapping");
	ck_assert_int_eq(ep_free(pool, f), 0);
}
END_TEST

/*
 * A fork() between ep_pool_create() and the first ep_alloc(): parent and
 * child share the probe's pages, so at most one of them may use them.  The
 * parent's program must still return its own value after the child wrote
 * and ran its own.
 */
START_TEST(test_probe_not_shared_after_fork)
{
	int go[2], rc;

	ck_assert_int_eq(pipe(go), 0);
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char c;

		if (read(go[0], &c, 1) != 1)
			_exit(3);
		void *g = tu_jit_ret(pool, 64, 7, &rc);

		_exit(rc || tu_as_fn(g)() != 7 ? 2 : 0);
	}
	void *f = tu_jit_ret(pool, 64, 3, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(write(go[1], "g", 1), 1);
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	ck_assert_int_eq(tu_as_fn(f)(), 3);
	close(go[0]);
	close(go[1]);
	ck_assert_int_eq(ep_free(pool, f), 0);
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

/* ---- EXECPACK_DEBUG=1: views a debugger can write ----------------------------
 * The exec view is a private mapping: /proc/self/mem (how gdb writes its
 * breakpoints, standing in for it here) can write into it, which copies
 * the page.  Code the pool writes into such a page afterwards (a
 * neighbour finalized, a patch, a free's trap fill) must reach the copy,
 * and the debugger's own bytes elsewhere in the page stay.  No mapping is
 * writable and executable, and a fork child's changes stay its own.
 */
static int mem_write(void *at, const void *src, size_t len)
{
	int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	ssize_t n = fd >= 0 ? pwrite(fd, src, len, (off_t)(uintptr_t)at) : -1;

	if (fd >= 0)
		close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

START_TEST(test_debug_views)
{
	struct ep_config cfg = { .sz = sizeof(cfg) }; /* AUTO: memfd, for EXECPACK_DEBUG */
	struct ep_pool *p;
	int rc;

	setenv("EXECPACK_DEBUG", "1", 1);
	rc = ep_pool_create(&cfg, &p);
	unsetenv("EXECPACK_DEBUG");
	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	ck_assert_str_eq(ep_pool_backend(p), "memfd");
	void *f = tu_jit_ret(p, 64, 1, &rc);

	ck_assert_int_eq(rc, 0);
	char perms[8];

	tu_mapping_perms(f, perms, NULL, 0);
	ck_assert_str_eq(perms, "r-xp");
	ck_assert_int_eq(tu_count_wx_mappings(), 0);

	/* a "breakpoint" at f's first byte (never run: f is not called while
	 * it is there) */
	unsigned char orig, bp = 0xa5, got;

	memcpy(&orig, f, 1);
	if (mem_write(f, &bp, 1) != 0) {
		printf("SKIP: test_debug_views: /proc/self/mem cannot be written here "
		       "(proc_mem.force_override)\n");
		ep_pool_destroy(p);
		return;
	}
	memcpy(&got, f, 1);
	ck_assert_uint_eq(got, bp);
	/* code written into the copied page afterwards reaches it */
	void *g = tu_jit_ret(p, 64, 2, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_msg(((uintptr_t)f ^ (uintptr_t)g) < tu_page(), "not in the same page");
	ck_assert_int_eq(tu_as_fn(g)(), 2);
	ck_assert_int_eq(tu_patch_ret_imm(p, tu_ret_at(g, 64), 3), 0);
	ck_assert_int_eq(tu_as_fn(g)(), 3);
	/* and the debugger's byte is still there */
	memcpy(&got, f, 1);
	ck_assert_uint_eq(got, bp);
	ck_assert_int_eq(mem_write(f, &orig, 1), 0); /* taken out again */
	ck_assert_int_eq(tu_as_fn(f)(), 1);
	/* a free's trap fill reaches the copy too */
	ck_assert_int_eq(ep_free(p, g), 0);
	ck_assert(tu_is_trap(g, 64));

	/* fork: the child's changes are its own */
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int ok = tu_patch_ret_imm(p, tu_ret_at(f, 64), 9) == 0 && tu_as_fn(f)() == 9;

		_exit(ok ? 0 : 1);
	}
	int st = 0;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	ck_assert_int_eq(tu_as_fn(f)(), 1);
	ck_assert_int_eq(tu_count_wx_mappings(), 0);
	ck_assert_int_eq(ep_free(p, f), 0);
	ep_pool_destroy(p);
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
	tcase_add_test(tc, test_debug_views);
	tcase_add_test(tc, test_probe_is_first_pack);
	tcase_add_test(tc, test_probe_not_shared_after_fork);
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
