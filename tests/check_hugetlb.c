/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_hugetlb.c - the hugetlb backend: packs really sit on 2 MiB pages,
 * running out of huge pages is a clear error (never a silent 4 KiB fallback
 * for an explicit pool, never a SIGBUS), and an AUTO pool keeps working.
 *
 * Needs free 2 MiB huge pages (CI reserves some via vm.nr_hugepages).  With
 * none, only the "no huge pages" behaviour is checked and the program
 * exits 77 (SKIP) saying so.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execpack.h"
#include "testutil.h"

static struct ep_pool *hugetlb_pool(int *rc)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_HUGETLB };
	struct ep_pool *p = NULL;

	*rc = ep_pool_create(&cfg, &p);
	return p;
}

START_TEST(test_packs_on_huge_pages)
{
	int rc;
	struct ep_pool *p = hugetlb_pool(&rc);

	ck_assert_msg(rc == 0, "%s", ep_strerror(rc));
	ck_assert_str_eq(ep_pool_backend(p), "hugetlb");
	void *f = tu_jit_ret(p, 6, 77, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 77);
	ck_assert_int_eq(tu_kernel_page_kb(f), (long)(tu_huge_page_size() >> 10));
	char perms[8];

	tu_mapping_perms(f, perms, NULL, 0);
	ck_assert_str_eq(perms, "r-xs");
	ck_assert_int_eq(tu_count_wx_mappings(), 0);
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.pack_bytes, tu_huge_page_size());
	/* patch, free, reuse on the huge page */
	ck_assert_int_eq(tu_patch_ret_imm(p, f, 78), 0);
	ck_assert_int_eq(tu_as_fn(f)(), 78);
	ck_assert_int_eq(ep_free(p, f), 0);
	ck_assert(tu_is_trap(f, 1));
	void *g = tu_jit_ret(p, 6, 79, &rc);

	ck_assert_ptr_eq(g, f);
	ck_assert_int_eq(tu_as_fn(g)(), 79);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_exhaustion_is_a_clear_error)
{
	int rc;
	struct ep_pool *p = hugetlb_pool(&rc);

	ck_assert_int_eq(rc, 0);
	/* one pack per 2 MiB allocation until the huge pages run out */
	void *f[4096];
	int n = 0;

	for (;;) {
		struct ep_image img;

		ck_assert_int_lt(n, 4096);
		rc = ep_alloc(p, tu_huge_page_size(), &img);
		if (rc)
			break;
		tu_emit_ret_imm(img.rw, (uint32_t)n);
		ck_assert_int_eq(ep_finalize(p, img.exec), 0);
		ck_assert_int_eq(tu_kernel_page_kb(img.exec), (long)(tu_huge_page_size() >> 10)); /* never base pages */
		f[n++] = img.exec;
	}
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_int_gt(n, 0);
	/*
	 * Other test programs may give a huge page back at any moment: a new
	 * pool (or AUTO's choice) that still finds one takes it, and we look
	 * again, a bounded number of times.
	 */
	char why[256];
	struct ep_pool *q = NULL;
	struct ep_pool *spare[16];
	int nspare = 0, ok = 0;

	for (int tries = 0; tries < 16 && !ok; tries++) {
		rc = ep_pool_create(&(struct ep_config){ .sz = sizeof(struct ep_config),
							 .backend = EP_BACKEND_HUGETLB }, &q);
		if (rc == 0) {
			struct ep_image img;

			if (ep_alloc(q, 64, &img) == 0)
				spare[nspare++] = q; /* holds the page that came back */
			else
				ep_pool_destroy(q);
			continue;
		}
		ck_assert_int_eq(rc, -ENOSPC);
		ck_assert_ptr_null(q);
		rc = ep_backend_probe(EP_BACKEND_HUGETLB, NULL, why, sizeof(why));
		if (rc == 0)
			continue;
		ck_assert_int_eq(rc, -ENOSPC);
		ck_assert_msg(strstr(why, "no free huge pages") != NULL, "why: %s", why);
		/* an AUTO pool passes hugetlb over and says why */
		unsetenv("EXECPACK_BACKEND");
		ck_assert_int_eq(ep_pool_create(NULL, &q), 0);
		if (!strcmp(ep_pool_backend(q), "hugetlb")) {
			spare[nspare++] = q;
			continue;
		}
		ck_assert_msg(strstr(ep_pool_reasons(q), "hugetlb: no free huge pages") != NULL, "%s",
			      ep_pool_reasons(q));
		ep_pool_destroy(q);
		ok = 1;
	}
	ck_assert_msg(ok, "huge pages kept coming back");
	for (int i = 0; i < nspare; i++)
		ep_pool_destroy(spare[i]);
	/* everything already JIT'd still runs; freeing gives the pages back */
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(tu_as_fn(f[i])(), i);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(ep_free(p, f[i]), 0);
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(p, 100, &img), 0);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_auto_falls_back_to_small_pages)
{
	unsetenv("EXECPACK_BACKEND");
	struct ep_pool *p = NULL;

	ck_assert_int_eq(ep_pool_create(NULL, &p), 0);
	ck_assert_str_eq(ep_pool_backend(p), "hugetlb");
	void *f[4096];
	int n = 0, small = 0;

	/* past the last huge page the AUTO pool goes on with 4 KiB pages */
	while (n < 4096) {
		int rc;

		f[n] = tu_jit_ret(p, tu_huge_page_size(), (uint32_t)n, &rc);
		ck_assert_msg(rc == 0, "alloc %d: %s", n, ep_strerror(rc));
		long kb = tu_kernel_page_kb(f[n]);

		/* (the heap's first pack is small-paged: AUTO spends a huge
		 * page only once a pack's worth of code is committed) */
		long small_kb = (long)(tu_page() >> 10), huge_kb = (long)(tu_huge_page_size() >> 10);

		ck_assert(n == 0 ? kb == small_kb : (kb == huge_kb || kb == small_kb));
		if (n++ == 0)
			continue;
		if (kb == small_kb && ++small == 2)
			break;
	}
	ck_assert_int_eq(small, 2);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(ep_free(p, f[i]), 0);
	ep_pool_destroy(p);
}
END_TEST

/* AUTO spends no huge page on a heap until it has committed a pack's worth
 * of code (ep_pool_backend(3)): small pages first, committed as they fill. */
START_TEST(test_auto_small_heap_small_pages)
{
	unsetenv("EXECPACK_BACKEND");
	struct ep_pool *p = NULL;
	struct ep_stats st;
	int rc;

	ck_assert_int_eq(ep_pool_create(NULL, &p), 0);
	if (strcmp(ep_pool_backend(p), "hugetlb")) {
		ep_pool_destroy(p); /* (another test program took the pages) */
		return;
	}
	/* (a pack is a huge page: 2 MiB, or 32 MiB under 16 KiB pages) */
	long small_kb = (long)(tu_page() >> 10), huge_kb = (long)(tu_huge_page_size() >> 10);
	size_t pack = tu_huge_page_size();
	void *f = tu_jit_ret(p, 64, 1, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_kernel_page_kb(f), small_kb);
	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.pack_bytes, tu_page());
	/* a pack's worth of code: the first pack is committed whole ... */
	void *g = tu_jit_ret(p, pack - 64, 2, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_kernel_page_kb(g), small_kb);
	ck_assert_ptr_eq(g, (char *)f + 64);
	/* ... and the next pack is a huge page, when one is free */
	void *h = tu_jit_ret(p, 64, 3, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert(tu_kernel_page_kb(h) == huge_kb || tu_free_huge_pages() == 0);
	ck_assert_int_eq(tu_as_fn(f)(), 1);
	ck_assert_int_eq(tu_as_fn(g)(), 2);
	ck_assert_int_eq(tu_as_fn(h)(), 3);
	ck_assert_int_eq(ep_free(p, f), 0);
	ck_assert_int_eq(ep_free(p, g), 0);
	ck_assert_int_eq(ep_free(p, h), 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_no_huge_pages)
{
	char why[256];
	int rc;
	struct ep_pool *p = hugetlb_pool(&rc);

	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_ptr_null(p);
	ck_assert_int_eq(ep_backend_probe(EP_BACKEND_HUGETLB, NULL, why, sizeof(why)), -ENOSPC);
	ck_assert_msg(strstr(why, "hugetlb: no free huge pages") != NULL, "why: %s", why);
}
END_TEST

START_TEST(test_path_must_be_hugetlbfs)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_HUGETLB, .path = "/tmp" };
	struct ep_pool *p = NULL;
	char why[256];

	ck_assert_int_eq(ep_pool_create(&cfg, &p), -EINVAL);
	ck_assert_int_eq(ep_backend_probe(EP_BACKEND_HUGETLB, &cfg, why, sizeof(why)), -EINVAL);
	ck_assert_msg(strstr(why, "not a hugetlbfs mount") != NULL, "why: %s", why);
	cfg.path = "/nonexistent/dir";
	ck_assert_int_eq(ep_pool_create(&cfg, &p), -ENOENT);
}
END_TEST

int main(void)
{
	long avail = tu_free_huge_pages();
	Suite *s = suite_create("hugetlb");
	TCase *tc = tcase_create("pages");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_path_must_be_hugetlbfs);
	if (avail > 0) {
		tcase_add_test(tc, test_packs_on_huge_pages);
		tcase_add_test(tc, test_exhaustion_is_a_clear_error);
		tcase_add_test(tc, test_auto_falls_back_to_small_pages);
		tcase_add_test(tc, test_auto_small_heap_small_pages);
	} else {
		tcase_add_test(tc, test_no_huge_pages);
	}
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	if (failed)
		return 1;
	if (avail <= 0) {
		printf("SKIP: no free 2 MiB huge pages (vm.nr_hugepages=0): only the no-page error "
		       "path was checked; reserve some to test packs on huge pages\n");
		return 77;
	}
	return 0;
}
