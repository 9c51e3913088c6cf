/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_seal.c - EP_F_SEAL: sealed exec views can never be made writable,
 * unmapped or remapped; sealed packs are kept (refilled) until exit; after
 * fork() the child cannot change the sealed packs it inherited (-EPERM: it
 * cannot give them a private copy) and JITs into new packs of its own.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "execpack.h"
#include "testutil.h"

static struct ep_pool *sealed_pool(size_t pack_size)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .pack_size = pack_size, .flags = EP_F_SEAL };
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(&cfg, &p);

	ck_assert_msg(rc == 0, "ep_pool_create(EP_F_SEAL): %s", ep_strerror(rc));
	return p;
}

START_TEST(test_sealed_view_cannot_change)
{
	struct ep_pool *p = sealed_pool(0);
	int rc;
	void *f = tu_jit_ret(p, 6, 31, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 31);
	size_t pg = tu_page();
	void *page = (void *)((uintptr_t)f & ~(uintptr_t)(pg - 1));

	ck_assert_int_eq(mprotect(page, pg, PROT_READ | PROT_WRITE), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(mprotect(page, pg, PROT_READ | PROT_WRITE | PROT_EXEC), -1);
	ck_assert_int_eq(munmap(page, pg), -1);
	ck_assert_int_eq(errno, EPERM);
	void *m = mmap(page, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

	ck_assert_ptr_eq(m, MAP_FAILED);
	/* the library itself still patches through its alias */
	ck_assert_int_eq(tu_patch_ret_imm(p, f, 32), 0);
	ck_assert_int_eq(tu_as_fn(f)(), 32);
	ck_assert_int_eq(ep_free(p, f), 0);
	ck_assert(tu_is_trap(f, 1));
	ep_pool_destroy(p);
	/* kept until exit, full of traps */
	ck_assert(tu_is_trap(f, 64));
}
END_TEST

START_TEST(test_sealed_packs_are_kept)
{
	/* packs of one page, two of them full */
	struct ep_pool *p = sealed_pool(tu_page());
	static struct ep_image im[2][1024];
	size_t per = tu_page() / 64;

	ck_assert_uint_le(per, 1024);
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < per; i++)
			ck_assert_int_eq(ep_alloc(p, 64, &im[k][i]), 0);
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < per; i++)
			ck_assert_int_eq(ep_free(p, im[k][i].exec), 0);
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.packs, 2); /* not released */
	/* and reused */
	struct ep_image a;

	ck_assert_int_eq(ep_alloc(p, 64, &a), 0);
	ck_assert_ptr_eq(a.exec, im[0][0].exec);
	/* a sealed large allocation: refilled, view kept */
	struct ep_image big;

	ck_assert_int_eq(ep_alloc(p, 10000, &big), 0);
	tu_emit_sized(big.rw, 10000, 5);
	ck_assert_int_eq(ep_finalize(p, big.exec), 0);
	ck_assert_int_eq(tu_as_fn(big.exec)(), 5);
	ck_assert_int_eq(ep_free(p, big.exec), 0);
	ck_assert(tu_is_trap((char *)big.exec + 9999, 1));
	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.large_allocs, 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_sealed_after_fork_is_frozen)
{
	struct ep_pool *p = sealed_pool(0);
	int rc;
	void *f = tu_jit_ret(p, 6, 41, &rc);

	ck_assert_int_eq(rc, 0);
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int ok = 1;

		/* cannot change code the parent runs */
		ok &= tu_patch_ret_imm(p, f, 99) == -EPERM;
		ok &= ep_free(p, f) == -EPERM;
		ok &= tu_as_fn(f)() == 41;
		/* but goes on JIT'ing, into a pack of its own */
		void *g = tu_jit_ret(p, 6, 42, &rc);

		ok &= rc == 0 && g && tu_as_fn(g)() == 42;
		struct ep_stats st;

		ok &= ep_pool_stats(p, &st) == 0 && st.packs == 2;
		_exit(ok ? 0 : 1);
	}
	int status;

	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(tu_as_fn(f)(), 41);
	ep_pool_destroy(p);
}
END_TEST

int main(void)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD, .flags = EP_F_SEAL };
	struct ep_pool *probe = NULL;
	int rc = ep_pool_create(&cfg, &probe);

	if (rc == -EOPNOTSUPP) {
		printf("SKIP: mseal() not supported by this kernel (Linux 6.10+ needed)\n");
		return 77;
	}
	ep_pool_destroy(probe);

	Suite *s = suite_create("seal");
	TCase *tc = tcase_create("mseal");

	tcase_add_test(tc, test_sealed_view_cannot_change);
	tcase_add_test(tc, test_sealed_packs_are_kept);
	tcase_add_test(tc, test_sealed_after_fork_is_frozen);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
