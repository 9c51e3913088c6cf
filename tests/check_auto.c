/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_auto.c - backend selection: AUTO's order and the reasons it gives
 * for what it passed over, EXECPACK_BACKEND, ep_backend_probe(), and a
 * hugetlbfs mount named by ep_config.path (which keeps working where
 * vm.memfd_noexec=2 refuses every executable memfd and PR_SET_MDWE keeps
 * anonymous memory from becoming executable).
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#endif
#ifndef PR_MDWE_REFUSE_EXEC_GAIN
#define PR_MDWE_REFUSE_EXEC_GAIN (1UL << 0)
#endif

#include "execpack.h"
#include "testutil.h"

START_TEST(test_auto_order_and_reasons)
{
	struct ep_pool *p;
	char why[256];

	unsetenv("EXECPACK_BACKEND");
	ck_assert_int_eq(ep_pool_create(NULL, &p), 0);
	const char *name = ep_pool_backend(p);
	const char *reasons = ep_pool_reasons(p);

	ck_assert_ptr_nonnull(reasons);
	ck_assert_int_eq(ep_backend_probe(EP_BACKEND_AUTO, NULL, why, sizeof(why)), 0);
	ck_assert_str_eq(why, name);
	int hp = ep_backend_probe(EP_BACKEND_HUGETLB, NULL, why, sizeof(why));

	if (!strcmp(name, "hugetlb")) {
		ck_assert_str_eq(reasons, ""); /* first choice: nothing passed over */
	} else {
		/* memfd (or kmod) chosen: hugetlb was tried first and says why */
		ck_assert_int_ne(hp, 0);
		ck_assert_msg(strncmp(reasons, "hugetlb: ", 9) == 0, "reasons: %s", reasons);
	}
	/* each chosen backend really works */
	int rc;
	void *f = tu_jit_ret(p, 6, 5, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 5);
	ep_pool_destroy(p);
}
END_TEST

/* A pack size that only some backends' pages divide: AUTO passes over
 * the others (hugetlb's 2 MiB pages for a 1 MiB pack) and says why; a
 * backend named explicitly still refuses it. */
START_TEST(test_auto_pack_size_fits_pages)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .pack_size = 1u << 20 };
	struct ep_pool *p;
	char why[256];

	unsetenv("EXECPACK_BACKEND");
	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	ck_assert_str_ne(ep_pool_backend(p), "hugetlb");
	ck_assert_int_eq(ep_backend_probe(EP_BACKEND_AUTO, &cfg, why, sizeof(why)), 0);
	ck_assert_str_eq(why, ep_pool_backend(p));
	int rc;
	void *f = tu_jit_ret(p, 6, 9, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 9);
	if (tu_free_huge_pages() > 0) {
		/* hugetlb was there and was passed over for its pages */
		ck_assert_msg(strstr(ep_pool_reasons(p), "hugetlb: pack_size 1048576 is not a multiple"),
			      "reasons: %s", ep_pool_reasons(p));
		cfg.backend = EP_BACKEND_HUGETLB;
		struct ep_pool *q = NULL;

		ck_assert_int_eq(ep_pool_create(&cfg, &q), -EINVAL);
		ck_assert_ptr_null(q);
	}
	ep_pool_destroy(p);
	/* no page divides it: a bad config on every backend, whichever of
	 * them could open now (hugetlb with no free page fails -ENOSPC) */
	for (int b = EP_BACKEND_AUTO; b <= EP_BACKEND_KMOD; b++) {
		struct ep_config bad = { .sz = sizeof(bad), .backend = (enum ep_backend)b,
					 .pack_size = (size_t)sysconf(_SC_PAGESIZE) + 64 };

		p = NULL;
		ck_assert_int_eq(ep_pool_create(&bad, &p), -EINVAL);
		ck_assert_ptr_null(p);
		ck_assert_int_eq(ep_backend_probe((enum ep_backend)b, &bad, why, sizeof(why)), -EINVAL);
		ck_assert_msg(strstr(why, "pack_size"), "backend %d: %s", b, why);
	}
}
END_TEST

/* EXECPACK_BACKEND naming no backend fails every AUTO pool: the reason
 * says which variable and which value, without its control characters. */
START_TEST(test_env_bogus_named)
{
	struct ep_pool *p = NULL;
	char why[256];

	setenv("EXECPACK_BACKEND", "bogus", 1);
	ck_assert_int_eq(ep_pool_create(NULL, &p), -EINVAL);
	ck_assert_ptr_null(p);
	ck_assert_int_eq(ep_backend_probe(EP_BACKEND_AUTO, NULL, why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why,
			 "EXECPACK_BACKEND=bogus: not a backend (memfd, hugetlb, kmod or auto)");
	setenv("EXECPACK_BACKEND", "two\nlines", 1);
	ck_assert_int_eq(ep_backend_probe(EP_BACKEND_AUTO, NULL, why, sizeof(why)), -EINVAL);
	ck_assert_msg(strstr(why, "EXECPACK_BACKEND=two?lines: ") == why, "why: %s", why);
	/* an explicit backend still ignores the variable */
	ck_assert_int_eq(ep_backend_probe(EP_BACKEND_MEMFD, NULL, why, sizeof(why)), 0);
	unsetenv("EXECPACK_BACKEND");
}
END_TEST

START_TEST(test_env_selects)
{
	struct ep_pool *p = NULL;

	setenv("EXECPACK_BACKEND", "memfd", 1);
	ck_assert_int_eq(ep_pool_create(NULL, &p), 0);
	ck_assert_str_eq(ep_pool_backend(p), "memfd");
	ep_pool_destroy(p);
	/* an explicit backend in the config wins over the environment */
	setenv("EXECPACK_BACKEND", "kmod", 1);
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	ck_assert_str_eq(ep_pool_backend(p), "memfd");
	ep_pool_destroy(p);
	/* kmod through the environment, with a device that does not exist */
	struct ep_config dev = { .sz = sizeof(dev), .path = "/nonexistent/execpack" };

	p = NULL;
	ck_assert_int_eq(ep_pool_create(&dev, &p), -ENOENT);
	ck_assert_ptr_null(p);
	char why[256];

	ck_assert_int_eq(ep_backend_probe(EP_BACKEND_KMOD, &dev, why, sizeof(why)), -ENOENT);
	ck_assert_msg(strstr(why, "kmod: /nonexistent/execpack") != NULL, "why: %s", why);
	unsetenv("EXECPACK_BACKEND");
	ck_assert_int_eq(ep_backend_probe((enum ep_backend)9, NULL, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(ep_backend_probe(EP_BACKEND_MEMFD, NULL, NULL, 0), 0);
}
END_TEST

/* In a new mount + PID namespace (as root): vm.memfd_noexec=2, and a
 * private hugetlbfs mount.  Returns a child exit status. */
static int noexec_hugetlbfs_child(void)
{
	/* source and type are ignored for a propagation change, but must be valid strings */
	if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0)
		return 10;
	char dir[] = "/tmp/execpack-hugetlbfs-XXXXXX";

	if (!mkdtemp(dir))
		return 11;
	if (mount("execpack", dir, "hugetlbfs", 0, "pagesize=2M") < 0) {
		rmdir(dir);
		return 12;
	}
	int fd = open("/proc/sys/vm/memfd_noexec", O_WRONLY);
	int status = 0;

	if (fd < 0 || write(fd, "2", 1) != 1)
		status = 13;
	if (fd >= 0)
		close(fd);
	char why[256];
	struct ep_pool *p = NULL;
	struct ep_config memfd = { .sz = sizeof(memfd), .backend = EP_BACKEND_MEMFD };

	/* the memfd backend's base-page regions are anonymous shared memory,
	 * which the sysctl does not govern */
	if (!status && tu_anon_exec_ok()) {
		if (ep_pool_create(&memfd, &p) != 0)
			status = 21;
		else
			ep_pool_destroy(p);
	}
	/* with PR_SET_MDWE too (anonymous memory may not gain exec), the
	 * backend needs an executable memfd, and every one is refused, with
	 * the reason (under Valgrind, whose own JIT cannot run under MDWE, the
	 * backend uses memfds anyway) */
	if (!status && !RUNNING_ON_VALGRIND &&
	    prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0L, 0L, 0L) != 0)
		status = 22;
	if (!status && ep_pool_create(&memfd, &p) >= 0)
		status = 14;
	if (!status && (ep_backend_probe(EP_BACKEND_MEMFD, NULL, why, sizeof(why)) >= 0 ||
			!strstr(why, "memfd_noexec=2")))
		status = 15;
	/* a hugetlbfs file is no memfd: it still works, on 2 MiB pages */
	struct ep_config huge = { .sz = sizeof(huge), .backend = EP_BACKEND_HUGETLB, .path = dir };

	if (!status && ep_pool_create(&huge, &p) != 0)
		status = 16;
	if (!status) {
		int rc;
		void *f = tu_jit_ret(p, 6, 123, &rc);

		if (rc || tu_as_fn(f)() != 123)
			status = 17;
		char perms[8], name[256];

		tu_mapping_perms(f, perms, name, sizeof(name));
		if (!status && (strcmp(perms, "r-xs") || !strstr(name, dir)))
			status = 18;
		ep_pool_destroy(p);
	}
	/* and AUTO, given the mount, takes it first */
	struct ep_config autocfg = { .sz = sizeof(autocfg), .path = dir };

	unsetenv("EXECPACK_BACKEND");
	if (!status && (ep_pool_create(&autocfg, &p) != 0 || strcmp(ep_pool_backend(p), "hugetlb")))
		status = 19;
	else if (!status)
		ep_pool_destroy(p);
	umount(dir);
	rmdir(dir);
	return status;
}

START_TEST(test_hugetlbfs_under_memfd_noexec)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (unshare(CLONE_NEWNS | CLONE_NEWPID) < 0)
			_exit(20);
		pid_t inner = fork(); /* pid 1 of the new namespace */

		if (inner == 0)
			_exit(noexec_hugetlbfs_child());
		int st;

		if (inner < 0 || waitpid(inner, &st, 0) != inner || !WIFEXITED(st))
			_exit(21);
		_exit(WEXITSTATUS(st));
	}
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed at step %d",
		      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}
END_TEST

/* ep_backend_probe() checks a config exactly as ep_pool_create() does. */
START_TEST(test_probe_agrees_with_create)
{
	static const struct {
		unsigned flags;
		size_t pack_size;
	} cases[] = {
		{ 0x80, 0 }, { 0x80000000u, 0 }, { 0, 1000 }, { 0, 4096 + 64 }, { 0, 0 },
		{ 0, (size_t)4 << 20 }, { 0, (size_t)2 << 30 },
	};

	unsetenv("EXECPACK_BACKEND");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
					 .flags = cases[i].flags, .pack_size = cases[i].pack_size };
		struct ep_pool *p = NULL;
		int created = ep_pool_create(&cfg, &p);
		int probed = ep_backend_probe(EP_BACKEND_MEMFD, &cfg, NULL, 0);

		ck_assert_msg(created == probed, "flags %#x pack_size %zu: create %d, probe %d",
			      cases[i].flags, cases[i].pack_size, created, probed);
		if (p)
			ep_pool_destroy(p);
	}
}
END_TEST

/* EXECPACK_BACKEND=hugetlb means an explicit hugetlb pool: it stops with
 * -ENOSPC when the huge pages run out, never goes on with 4 KiB pages. */
START_TEST(test_env_hugetlb_is_explicit)
{
	long free_pages = tu_free_huge_pages();
	struct ep_pool *p = NULL;
	struct ep_stats st;
	void *got[64];
	int n = 0, rc = 0;

	setenv("EXECPACK_BACKEND", "hugetlb", 1);
	rc = ep_pool_create(NULL, &p);
	unsetenv("EXECPACK_BACKEND");
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(ep_pool_backend(p), "hugetlb");
	/* a pack (2 MiB) a program: every program takes a huge page */
	for (n = 0; n < 64; n++) {
		struct ep_image im;

		rc = ep_alloc(p, tu_huge_page_size(), &im);
		if (rc)
			break;
		got[n] = im.exec;
	}
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_int_le(n, free_pages);
	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(ep_free(p, got[i]), 0);
	ep_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("auto");
	TCase *tc = tcase_create("select");

	tcase_add_test(tc, test_auto_order_and_reasons);
	tcase_add_test(tc, test_auto_pack_size_fits_pages);
	tcase_add_test(tc, test_env_selects);
	tcase_add_test(tc, test_env_bogus_named);
	tcase_add_test(tc, test_probe_agrees_with_create);
	if (tu_free_huge_pages() <= 0 || tu_free_huge_pages() > 64)
		printf("SKIP: test_env_hugetlb_is_explicit: needs 1 to 64 free 2 MiB huge pages\n");
	else
		tcase_add_test(tc, test_env_hugetlb_is_explicit);
	if (geteuid() != 0)
		printf("SKIP: test_hugetlbfs_under_memfd_noexec: needs root (namespaces, mount)\n");
	else if (tu_free_huge_pages() <= 0)
		printf("SKIP: test_hugetlbfs_under_memfd_noexec: no free 2 MiB huge pages\n");
	else if (access("/proc/sys/vm/memfd_noexec", F_OK) != 0)
		printf("SKIP: test_hugetlbfs_under_memfd_noexec: kernel has no vm.memfd_noexec\n");
	else
		tcase_add_test(tc, test_hugetlbfs_under_memfd_noexec);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
