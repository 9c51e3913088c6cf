/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_route.c - the address-to-heap table (libexecpack/index/route.c) on its
 * own: ranges set, read back and cleared page by page, the edges of a
 * range, addresses past what the table covers, and two threads making
 * nodes in the same 16 MiB at once while a third reads.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "route.h"

#define PAGE ((uintptr_t)1 << EP__ROUTE_PAGE_SHIFT)

static int owner_a, owner_b;

START_TEST(test_set_get_clear)
{
	uintptr_t lo = (uintptr_t)0x7f1234000000ull;
	size_t len = 2 << 20;

	ck_assert_ptr_null(ep__route_get(lo));
	ck_assert_int_eq(ep__route_set(lo, len, &owner_a), 0);
	ck_assert_ptr_eq(ep__route_get(lo), &owner_a);
	ck_assert_ptr_eq(ep__route_get(lo + 12345), &owner_a);
	ck_assert_ptr_eq(ep__route_get(lo + len - 1), &owner_a);
	ck_assert_ptr_null(ep__route_get(lo - 1));
	ck_assert_ptr_null(ep__route_get(lo + len));
	/* a neighbour right after it, owned by another heap */
	ck_assert_int_eq(ep__route_set(lo + len, PAGE, &owner_b), 0);
	ck_assert_ptr_eq(ep__route_get(lo + len), &owner_b);
	ck_assert_ptr_eq(ep__route_get(lo + len - 1), &owner_a);
	ep__route_clear(lo, len);
	ck_assert_ptr_null(ep__route_get(lo));
	ck_assert_ptr_null(ep__route_get(lo + len - 1));
	ck_assert_ptr_eq(ep__route_get(lo + len), &owner_b);
	ep__route_clear(lo + len, PAGE);
	ck_assert_ptr_null(ep__route_get(lo + len));
	/* a length that is not a page multiple covers its last page */
	ck_assert_int_eq(ep__route_set(lo, PAGE + 1, &owner_a), 0);
	ck_assert_ptr_eq(ep__route_get(lo + PAGE), &owner_a);
	ck_assert_ptr_null(ep__route_get(lo + 2 * PAGE));
	ep__route_clear(lo, PAGE + 1);
	ck_assert_ptr_null(ep__route_get(lo + PAGE));
	/* a range across a leaf's end (16 MiB) and a middle node's end */
	uintptr_t edge = ((uintptr_t)1 << 36) - PAGE;

	ck_assert_int_eq(ep__route_set(edge, 2 * PAGE, &owner_b), 0);
	ck_assert_ptr_eq(ep__route_get(edge), &owner_b);
	ck_assert_ptr_eq(ep__route_get(edge + PAGE), &owner_b);
	ep__route_clear(edge, 2 * PAGE);
	ck_assert_ptr_null(ep__route_get(edge + PAGE));
}
END_TEST

START_TEST(test_beyond_the_table)
{
	uintptr_t top = (uintptr_t)1 << (EP__ROUTE_PAGE_SHIFT + 3 * EP__ROUTE_BITS);

	ck_assert_int_eq(ep__route_set(top, PAGE, &owner_a), -ENOMEM);
	ck_assert_ptr_null(ep__route_get(top));
	ck_assert_ptr_null(ep__route_get(UINTPTR_MAX));
	/* nothing half set when the range runs past the end */
	ck_assert_int_eq(ep__route_set(top - PAGE, 2 * PAGE, &owner_a), -ENOMEM);
	ck_assert_ptr_null(ep__route_get(top - PAGE));
	ep__route_clear(top, PAGE); /* harmless */
}
END_TEST

/* Two writers make nodes in one fresh 16 MiB area at once, a reader checks
 * that every page reads as nothing or its own owner. */
#define AREA ((uintptr_t)0x5a0000000000ull)
#define ROUNDS 2000

static int g_bad, g_stop;

static void *writer(void *arg)
{
	int *owner = arg;
	uintptr_t base = AREA + (owner == &owner_a ? 0 : 8u << 20);

	for (int r = 0; r < ROUNDS; r++) {
		uintptr_t lo = base + (uintptr_t)(r % 64) * 16 * PAGE;

		if (ep__route_set(lo, 16 * PAGE, owner))
			__atomic_store_n(&g_bad, 1, __ATOMIC_RELAXED);
		ep__route_clear(lo, 16 * PAGE);
	}
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
		for (uintptr_t a = AREA; a < AREA + (16u << 20); a += 7 * PAGE) {
			void *o = ep__route_get(a);
			void *want = a < AREA + (8u << 20) ? (void *)&owner_a : (void *)&owner_b;

			if (o && o != want)
				__atomic_store_n(&g_bad, 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

START_TEST(test_concurrent_writers_and_reader)
{
	pthread_t a, b, r;

	ck_assert_int_eq(pthread_create(&r, NULL, reader, NULL), 0);
	ck_assert_int_eq(pthread_create(&a, NULL, writer, &owner_a), 0);
	ck_assert_int_eq(pthread_create(&b, NULL, writer, &owner_b), 0);
	ck_assert_int_eq(pthread_join(a, NULL), 0);
	ck_assert_int_eq(pthread_join(b, NULL), 0);
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_join(r, NULL), 0);
	ck_assert_int_eq(g_bad, 0);
	for (uintptr_t p = AREA; p < AREA + (16u << 20); p += PAGE)
		ck_assert_ptr_null(ep__route_get(p));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("route");
	TCase *tc = tcase_create("table");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_set_get_clear);
	tcase_add_test(tc, test_beyond_the_table);
	tcase_add_test(tc, test_concurrent_writers_and_reader);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
