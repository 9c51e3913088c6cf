/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fork-child.c - check_fork's tests of one parent and its children: a
 * child re-JITs a freed slot and patches it, the parent changes its code
 * meanwhile, a grandchild, a child that exits without touching the pool.
 */
#include "config.h"

#include "fork-suite.h"

/*
 * The child frees a function and JITs a new one into the same slot, then
 * patches it live, while the parent keeps calling its own copy.
 */
START_TEST(test_child_rejits_slot)
{
	size_t size = size_at(_i);
	struct ep_pool *pool = new_pool();
	void *f = jit(pool, size, 0x1111);
	void *g = jit(pool, 64, 0x1212); /* a neighbour in the same pack */
	struct fu_child c;

	if (!fork_talk(&c, FU_FORK)) {
		CHILD_EXPECT_CALL(f, 0x1111);
		CHILD_OK(ep_free(pool, f));
		void *f2 = child_jit(pool, size, 0x2222);

		if (size <= 64 * 1024)
			CHILD_CHECK(f2 == f, "first fit should reuse the slot %p, got %p", f, f2);
		CHILD_EXPECT_CALL(g, 0x1212);
		CHILD_OK(rel_patch(pool, f2, 0x2323));
		CHILD_EXPECT_CALL(f2, 0x2323);
		churn(pool, 0x2400, true);
		CHILD_CHECK(fu_send(&c, 'm') == 0, "send");
		FU_CHILD_EXPECT(&c, 'p');
		/* the parent patched and freed its own copies meanwhile */
		CHILD_EXPECT_CALL(f2, 0x2323);
		CHILD_EXPECT_CALL(g, 0x1212);
		CHILD_OK(ep_free(pool, f2));
		CHILD_OK(ep_free(pool, g));
		struct ep_stats st;

		CHILD_OK(ep_pool_stats(pool, &st));
		CHILD_CHECK(st.live_allocs == 0 && st.used_bytes == 0 && st.large_allocs == 0,
			    "stats after freeing all: live %zu used %zu large %zu",
			    st.live_allocs, st.used_bytes, st.large_allocs);
		ep_pool_destroy(pool);
		_exit(0);
	}
	/* keep running the old code while the child rewrites "the same" slot */
	struct pollfd pfd = { .fd = c.rx, .events = POLLIN };
	unsigned long calls = 0;

	for (;;) {
		for (int i = 0; i < 1000; i++, calls++) {
			ck_assert_uint_eq((uint32_t)rel_call(f), 0x1111);
			ck_assert_uint_eq((uint32_t)rel_call(g), 0x1212);
		}
		int n = poll(&pfd, 1, 0);

		ck_assert_int_ge(n, 0);
		if (n > 0)
			break;
	}
	FU_EXPECT(&c, 'm', 0);
	ck_assert_uint_gt(calls, 0);
	expect_call(f, 0x1111);
	expect_call(g, 0x1212);
	/* and now the parent changes its side; the child checks its own */
	ck_assert_int_eq(rel_patch(pool, f, 0x3333), 0);
	expect_call(f, 0x3333);
	ck_assert_int_eq(ep_free(pool, g), 0);
	void *h = jit(pool, 64, 0x3434);

	churn(pool, 0x3500, false);
	ck_assert_int_eq(fu_send(&c, 'p'), 0);
	finish_child_ok(&c);
	expect_call(f, 0x3333);
	expect_call(h, 0x3434);
	ck_assert_int_eq(ep_free(pool, f), 0);
	ck_assert_int_eq(ep_free(pool, h), 0);
	ep_pool_destroy(pool);
}
END_TEST

/*
 * The parent changes code after fork (live patch, free + re-JIT, finalize of
 * a staged image) while the child checks that it still has the old code,
 * then the child changes its own and the parent checks.
 */
START_TEST(test_parent_modifies)
{
	size_t size = size_at(_i);
	struct ep_pool *pool = new_pool();
	void *f = jit(pool, size, 0xa1);
	void *n = jit(pool, 64, 0xa2);
	struct ep_image staged;
	unsigned char code[RET_IMM_LEN];

	ck_assert_int_eq(ep_alloc(pool, size, &staged), 0);
	rel_emit_ret_imm(code, 0xa3);
	ck_assert_int_eq(ep_write(pool, staged.exec, code, sizeof(code)), 0);

	struct fu_child c;

	if (!fork_talk(&c, FU_FORK)) {
		FU_CHILD_EXPECT(&c, 'p');
		CHILD_EXPECT_CALL(f, 0xa1);
		CHILD_EXPECT_CALL(n, 0xa2);
		/* the staging buffer is private memory: the child finalizes what
		 * was staged before the fork, not what the parent wrote since */
		CHILD_OK(ep_finalize(pool, staged.exec));
		CHILD_EXPECT_CALL(staged.exec, 0xa3);
		CHILD_OK(rel_patch(pool, f, 0xc1));
		CHILD_EXPECT_CALL(f, 0xc1);
		CHILD_OK(ep_free(pool, n));
		void *m = child_jit(pool, 64, 0xc2);

		churn(pool, 0xc100, true);
		CHILD_EXPECT_CALL(m, 0xc2);
		CHILD_CHECK(fu_send(&c, 'c') == 0, "send");
		FU_CHILD_EXPECT(&c, 'q');
		CHILD_EXPECT_CALL(f, 0xc1);
		CHILD_EXPECT_CALL(m, 0xc2);
		CHILD_EXPECT_CALL(staged.exec, 0xa3);
		/* (what the child made is its own to free; left live, memcheck
		 * would count it lost once m goes out of scope) */
		CHILD_OK(ep_free(pool, m));
		_exit(0);
	}
	ck_assert_int_eq(rel_patch(pool, f, 0xb1), 0);
	expect_call(f, 0xb1);
	ck_assert_int_eq(ep_free(pool, n), 0);
	void *n2 = jit(pool, 64, 0xb2);

	rel_emit_ret_imm(code, 0xb3);
	ck_assert_int_eq(ep_write(pool, staged.exec, code, sizeof(code)), 0);
	ck_assert_int_eq(ep_finalize(pool, staged.exec), 0);
	expect_call(staged.exec, 0xb3);
	churn(pool, 0xb100, false);
	ck_assert_int_eq(fu_send(&c, 'p'), 0);
	FU_EXPECT(&c, 'c', CHILD_SECS);
	/* the child's changes did not reach us */
	expect_call(f, 0xb1);
	expect_call(n2, 0xb2);
	expect_call(staged.exec, 0xb3);
	ck_assert_int_eq(rel_patch(pool, f, 0xb4), 0);
	expect_call(f, 0xb4);
	ck_assert_int_eq(fu_send(&c, 'q'), 0);
	finish_child_ok(&c);
	expect_call(f, 0xb4);
	ck_assert_int_eq(ep_free(pool, f), 0);
	ck_assert_int_eq(ep_free(pool, n2), 0);
	ck_assert_int_eq(ep_free(pool, staged.exec), 0);
	ep_pool_destroy(pool);
}
END_TEST

/*
 * Three generations share the mapping; the grandchild changes it first
 * (the child has not touched it since the fork), then the child changes
 * its own, and the parent last.  Each must keep its own code.
 */
START_TEST(test_grandchild)
{
	size_t size = size_at(_i);
	struct ep_pool *pool = new_pool();
	void *f = jit(pool, size, 0x01);
	struct fu_child c;

	if (!fork_talk(&c, FU_FORK)) {
		struct fu_child g;
		pid_t gpid = fu_fork(&g, FU_FORK);

		CHILD_CHECK(gpid >= 0, "fork");
		if (gpid == 0) {
			fu_close(&c.tx); /* (the parent's pipes are the child's) */
			fu_close(&c.rx);
			CHILD_EXPECT_CALL(f, 0x01);
			CHILD_OK(rel_patch(pool, f, 0x03));
			CHILD_EXPECT_CALL(f, 0x03);
			void *x = child_jit(pool, size, 0x33);

			churn(pool, 0x3300, true);
			CHILD_CHECK(fu_send(&g, 'g') == 0, "send");
			FU_CHILD_EXPECT(&g, 'c');
			CHILD_EXPECT_CALL(f, 0x03);
			CHILD_EXPECT_CALL(x, 0x33);
			CHILD_OK(ep_free(pool, x));
			CHILD_OK(ep_free(pool, f));
			_exit(0);
		}
		FU_CHILD_EXPECT(&g, 'g');
		CHILD_EXPECT_CALL(f, 0x01); /* the grandchild's write stayed its own */
		CHILD_OK(rel_patch(pool, f, 0x02));
		CHILD_EXPECT_CALL(f, 0x02);
		void *y = child_jit(pool, size, 0x22);

		CHILD_CHECK(fu_send(&g, 'c') == 0, "send");
		int st = fu_finish(&g, CHILD_SECS);

		CHILD_CHECK(st == 0, "grandchild ended with status %d%s", st, fu_status_text(st));
		CHILD_EXPECT_CALL(f, 0x02);
		CHILD_CHECK(fu_send(&c, 'c') == 0, "send");
		FU_CHILD_EXPECT(&c, 'p');
		CHILD_EXPECT_CALL(f, 0x02);
		CHILD_EXPECT_CALL(y, 0x22);
		CHILD_OK(ep_free(pool, y));
		_exit(0);
	}
	FU_EXPECT(&c, 'c', CHILD_SECS);
	expect_call(f, 0x01);
	ck_assert_int_eq(rel_patch(pool, f, 0x04), 0);
	expect_call(f, 0x04);
	ck_assert_int_eq(fu_send(&c, 'p'), 0);
	finish_child_ok(&c);
	expect_call(f, 0x04);
	ck_assert_int_eq(ep_free(pool, f), 0);
	ep_pool_destroy(pool);
}
END_TEST


/* A child that exits (or execs) without touching the pool leaves the
 * parent's code intact, and the parent can change it right away. */
START_TEST(test_child_exits_untouched)
{
	struct ep_pool *pool = new_pool_on(backends[_i]);
	void *f = jit(pool, 64, 0x51);
	void *l = jit(pool, LARGE_SIZE, 0x52);

	for (int k = 0; k < 3; k++) {
		pid_t pid = fork();

		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			if (k == 2) {
				ep_pool_destroy(pool); /* unmaps its view only */
				_exit(0);
			}
			_exit((uint32_t)rel_call(f) == 0x51 && (uint32_t)rel_call(l) == 0x52 ? 0 : 1);
		}
		expect_child_ok(pid);
		expect_call(f, 0x51);
		expect_call(l, 0x52);
	}
	ck_assert_int_eq(rel_patch(pool, f, 0x61), 0);
	ck_assert_int_eq(rel_patch(pool, l, 0x62), 0);
	expect_call(f, 0x61);
	expect_call(l, 0x62);
	ep_pool_destroy(pool);
}
END_TEST

/* (in the order the suite runs them) */
void fork_add_child_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_child_rejits_slot, 0, NSIZES * NBACKENDS);
	tcase_add_loop_test(tc, test_parent_modifies, 0, NSIZES * NBACKENDS);
	tcase_add_loop_test(tc, test_grandchild, 0, NSIZES * NBACKENDS);
	tcase_add_loop_test(tc, test_child_exits_untouched, 0, NBACKENDS);
}
