/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_hugetlb_cgroup.c - huge pages under a cgroup v2 hugetlb limit.
 *
 * hugetlb.2MB.max (what container runtimes set) is charged when a page is
 * faulted in, not when mmap() reserves it: mmap() succeeds and the first
 * touch dies of SIGBUS.  The library must commit a pack's pages before it
 * touches them, so the limit is an error (-ENOSPC) for an explicit hugetlb
 * pool and a fallback to 4 KiB pages for an AUTO one, never a signal.
 *
 * Each case forks a child, moves it into a child cgroup with the limit set,
 * and lets it use the library there.  Needs root, the cgroup v2 hugetlb
 * controller and free 2 MiB huge pages; without them it exits 77 (SKIP)
 * saying which is missing.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "execpack.h"
#include "forkutil.h"
#include "testutil.h"

#define HUGE_SIZE ((size_t)2 << 20)

static char cg_dir[4096]; /* the child cgroup the tests run in */

/* snprintf that may truncate (paths and messages here are short) */
__attribute__((format(printf, 3, 4))) static void fmt(char *buf, size_t len, const char *f,
							...)
{
	va_list ap;

	va_start(ap, f);
	vsnprintf(buf, len, f, ap);
	va_end(ap);
}

/* ---- cgroup plumbing (main, before the suite) --------------------------------- */

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int e = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		e = -errno;
	close(fd);
	return e;
}

static int read_str(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");

	buf[0] = 0;
	if (!f)
		return -errno;
	size_t n = fread(buf, 1, len - 1, f);

	buf[n] = 0;
	fclose(f);
	return 0;
}

/* Whether the space-separated list in file holds word. */
static int file_has_word(const char *file, const char *word)
{
	char buf[1024];

	if (read_str(file, buf, sizeof(buf)))
		return 0;
	for (char *save = NULL, *t = strtok_r(buf, " \n", &save); t;
	     t = strtok_r(NULL, " \n", &save))
		if (!strcmp(t, word))
			return 1;
	return 0;
}

/* The cgroup2 mount point and the root it shows; 0 or -1. */
static int cgroup2_mount(char *mnt, size_t mlen, char *root, size_t rlen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	int found = -1;

	if (!f)
		return -1;
	while (found && fgets(line, sizeof(line), f)) {
		char r[2048], m[2048];
		const char *sep = strstr(line, " - ");

		if (!sep || strncmp(sep, " - cgroup2 ", 11) ||
		    sscanf(line, "%*s %*s %*s %2047s %2047s", r, m) != 2)
			continue;
		fmt(mnt, mlen, "%s", m);
		fmt(root, rlen, "%s", r);
		found = 0;
	}
	fclose(f);
	return found;
}

/* This process's cgroup v2 path ("0::/..."), or -1. */
static int own_cgroup(char *path, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[4096];
	int found = -1;

	if (!f)
		return -1;
	while (found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3))
			continue;
		line[strcspn(line, "\n")] = 0;
		fmt(path, len, "%s", line + 3);
		found = 0;
	}
	fclose(f);
	return found;
}

/*
 * Makes a child cgroup with hugetlb.2MB.max under parent, enabling the
 * controller in parent's subtree if it is not yet.  It stays enabled: a
 * second run of this test may be using it.  0, or -1 with why.
 */
static int make_child_cgroup(const char *parent, char *why, size_t whylen)
{
	char path[4096 + 64];

	fmt(path, sizeof(path), "%s/cgroup.controllers", parent);
	if (!file_has_word(path, "hugetlb")) {
		fmt(why, whylen, "%s: no hugetlb controller", parent);
		return -1;
	}
	fmt(path, sizeof(path), "%s/cgroup.subtree_control", parent);
	if (!file_has_word(path, "hugetlb")) {
		int e = write_str(path, "+hugetlb");

		if (e) {
			/* EBUSY: a non-root cgroup with processes of its own */
			fmt(why, whylen, "%s: cannot enable +hugetlb: %s", path,
				 strerror(-e));
			return -1;
		}
	}
	fmt(cg_dir, sizeof(cg_dir), "%s/execpack-test-%ld", parent, (long)getpid());
	if (mkdir(cg_dir, 0755) && errno != EEXIST) {
		fmt(why, whylen, "mkdir %s: %s", cg_dir, strerror(errno));
		cg_dir[0] = 0;
		return -1;
	}
	fmt(path, sizeof(path), "%s/hugetlb.2MB.max", cg_dir);
	if (access(path, W_OK)) {
		fmt(why, whylen, "%s: %s", path, strerror(errno));
		rmdir(cg_dir);
		cg_dir[0] = 0;
		return -1;
	}
	return 0;
}

/* Finds a place for the child cgroup: under our own cgroup, else the root. */
static int setup_cgroup(char *why, size_t whylen)
{
	char mnt[2048], root[2048], own[2048], parent[4096 + 2048];
	char why1[512] = "";

	if (cgroup2_mount(mnt, sizeof(mnt), root, sizeof(root))) {
		fmt(why, whylen, "no cgroup2 file system mounted");
		return -1;
	}
	if (own_cgroup(own, sizeof(own)) == 0) {
		const char *rel = own;
		size_t rl = strlen(root);

		if (strcmp(root, "/") && !strncmp(own, root, rl))
			rel = own + rl;
		fmt(parent, sizeof(parent), "%s%s", mnt, rel);
		if (make_child_cgroup(parent, why1, sizeof(why1)) == 0)
			return 0;
	}
	/* the mount's root has no processes rule to break */
	if (make_child_cgroup(mnt, why, whylen) == 0)
		return 0;
	if (why1[0]) {
		size_t n = strlen(why);

		fmt(why + n, whylen - n, "; %s", why1);
	}
	return -1;
}

static void set_limit(size_t bytes)
{
	char path[4096 + 32], v[32];

	fmt(path, sizeof(path), "%s/hugetlb.2MB.max", cg_dir);
	fmt(v, sizeof(v), "%zu", bytes);
	ck_assert_int_eq(write_str(path, v), 0);
}

/* ---- the child ------------------------------------------------------------------ */

static char child_msg[512];

__attribute__((format(printf, 1, 2))) static int child_fail(const char *f, ...)
{
	va_list ap;

	va_start(ap, f);
	vsnprintf(child_msg, sizeof(child_msg), f, ap);
	va_end(ap);
	return 1;
}

/*
 * An explicit hugetlb pool: 2 MiB packs until the limit (at most `pages`
 * of them, fewer when other programs hold the system's huge pages), then
 * -ENOSPC; all JIT'd code still runs.
 */
static int explicit_pool(unsigned pages)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_HUGETLB };
	struct ep_pool *p = NULL;
	void *f[8];
	unsigned n = 0;
	int rc = ep_pool_create(&cfg, &p);

	if (pages == 0) {
		if (rc != -ENOSPC)
			return child_fail("pool_create with a limit of 0: %d, not -ENOSPC", rc);
		char why[256];

		rc = ep_backend_probe(EP_BACKEND_HUGETLB, NULL, why, sizeof(why));
		if (rc != -ENOSPC || !strstr(why, "hugetlb"))
			return child_fail("probe: %d (%s)", rc, why);
		return 0;
	}
	if (rc == -ENOSPC)
		return 0; /* every huge page is taken by other programs */
	if (rc)
		return child_fail("pool_create: %s", ep_strerror(rc));
	for (;;) {
		if (n == 8)
			return child_fail("8 huge packs under a limit of %u", pages);
		f[n] = tu_jit_ret(p, HUGE_SIZE, n, &rc);
		if (rc)
			break;
		if (tu_kernel_page_kb(f[n]) != 2048)
			return child_fail("pack %u is not on a huge page", n);
		n++;
	}
	if (rc != -ENOSPC)
		return child_fail("alloc past the limit: %d, not -ENOSPC", rc);
	if (n > pages)
		return child_fail("%u packs under a limit of %u", n, pages);
	for (unsigned i = 0; i < n; i++)
		if (tu_as_fn(f[i])() != (int)i)
			return child_fail("pack %u does not run", i);
	ep_pool_destroy(p);
	return 0;
}

/* An AUTO pool goes on past the limit on 4 KiB pages. */
static int auto_pool(unsigned pages)
{
	struct ep_pool *p = NULL;
	void *f[8];
	unsigned huge = 0;
	int rc;

	unsetenv("EXECPACK_BACKEND");
	rc = ep_pool_create(NULL, &p);
	if (rc)
		return child_fail("AUTO pool_create: %s", ep_strerror(rc));
	for (unsigned i = 0; i < pages + 3; i++) {
		f[i] = tu_jit_ret(p, HUGE_SIZE, i, &rc);
		if (rc)
			return child_fail("AUTO alloc %u (backend %s): %s", i, ep_pool_backend(p),
					  ep_strerror(rc));
		huge += tu_kernel_page_kb(f[i]) == 2048;
	}
	if (huge > pages)
		return child_fail("%u huge packs under a limit of %u", huge, pages);
	for (unsigned i = 0; i < pages + 3; i++)
		if (tu_as_fn(f[i])() != (int)i)
			return child_fail("AUTO pack %u does not run", i);
	ep_pool_destroy(p);
	return 0;
}

/* Runs fn(pages) in a child inside the limited cgroup; asserts it passed. */
static void in_cgroup(int (*fn)(unsigned), unsigned pages)
{
	struct fu_child ch;

	set_limit(pages * HUGE_SIZE);
	pid_t pid = fu_fork(&ch, FU_FORK);

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char procs[4096 + 32];
		int rc;

		fmt(procs, sizeof(procs), "%s/cgroup.procs", cg_dir);
		rc = write_str(procs, "0");
		if (rc)
			child_fail("cannot join %s: %s", cg_dir, strerror(-rc));
		else
			rc = fn(pages);
		if (fu_send_buf(&ch, child_msg, strlen(child_msg)) < 0)
			rc = 2;
		_exit(rc);
	}
	char msg[512];

	fu_recv_text(&ch, msg, sizeof(msg));
	int st = fu_finish(&ch, -1);

	ck_assert_msg(st <= 128, "child died of signal %d (%s) under hugetlb.2MB.max=%u pages",
		      st > 128 ? st - 128 : 0, st > 128 ? strsignal(st - 128) : "", pages);
	ck_assert_msg(st == 0, "child: status %d: %s", st, msg);
}

START_TEST(test_explicit_limit_zero)
{
	in_cgroup(explicit_pool, 0);
}
END_TEST

START_TEST(test_explicit_limit_one)
{
	in_cgroup(explicit_pool, 1);
}
END_TEST

START_TEST(test_auto_limit_zero)
{
	in_cgroup(auto_pool, 0);
}
END_TEST

START_TEST(test_auto_limit_one)
{
	in_cgroup(auto_pool, 1);
}
END_TEST

int main(void)
{
	char why[1024] = "";

	if (geteuid() != 0) {
		printf("SKIP: hugetlb_cgroup: needs root to make a cgroup\n");
		return 77;
	}
	if (tu_free_huge_pages() <= 0) {
		printf("SKIP: hugetlb_cgroup: no free 2 MiB huge pages (vm.nr_hugepages)\n");
		return 77;
	}
	if (setup_cgroup(why, sizeof(why))) {
		printf("SKIP: hugetlb_cgroup: no cgroup v2 hugetlb controller to use: %s\n", why);
		return 77;
	}

	Suite *s = suite_create("hugetlb_cgroup");
	TCase *tc = tcase_create("limit");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_explicit_limit_zero);
	tcase_add_test(tc, test_explicit_limit_one);
	tcase_add_test(tc, test_auto_limit_zero);
	tcase_add_test(tc, test_auto_limit_one);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	if (rmdir(cg_dir))
		fprintf(stderr, "rmdir %s: %s\n", cg_dir, strerror(errno));
	return failed ? 1 : 0;
}
