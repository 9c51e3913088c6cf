/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * interleave-range.c - check_interleave's scenarios 12, 20 and 26: threads
 * mapping regions of one code range, and heaps borrowing each other's packs
 * (in a full code range; threads with little code).
 */
#include "config.h"

#include "interleave-sched.h"

/* Every thread's two calls returned 0. */
static void rcs_all_zero(void)
{
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 2; k++)
			if (il_rc[i][k])
				il_fail("thread %d, call %d: %d", i, k, il_rc[i][k]);
}

/* 12. Threads of their own heaps mapping and unmapping regions of one code
 * range at once (code-range.c): every region inside it, none lost or
 * handed out twice, every call succeeds. */
#define S12_PACK ((size_t)64 << 10)
static uintptr_t g_s12[3][2];

static void s12_span(int id, const unsigned char *x, size_t n)
{
	if (!x)
		return;
	if (!g_s12[id][0] || (uintptr_t)x < g_s12[id][0])
		g_s12[id][0] = (uintptr_t)x;
	if ((uintptr_t)x + n > g_s12[id][1])
		g_s12[id][1] = (uintptr_t)x + n;
}

static void s12_large(int id)
{
	for (int i = 0; i < 2; i++) {
		unsigned char *x = il_jit(2 * S12_PACK, 1);

		s12_span(id, x, 2 * S12_PACK);
		il_rc[id][i] = x ? il_do_free(x) : -1;
	}
}

static void s12_small(int id)
{
	unsigned char *x = il_jit(100, 1);

	s12_span(id, x, 100);
	il_rc[id][0] = x ? il_do_free(x) : -1;
	x = il_jit(S12_PACK + 1, 0);
	s12_span(id, x, S12_PACK + 1);
	il_rc[id][1] = x ? il_do_free(x) : -1;
}

static void s12(unsigned long seed)
{
	void (*fns[])(int) = { s12_large, s12_large, s12_small };
	/* (what they hold at once, 6 packs and a page, and room for the
	 * holes first fit leaves between regions of mixed sizes) */
	size_t range = 10 * S12_PACK;
	struct ep_config cfg = { .sz = sizeof(cfg), .pack_size = S12_PACK, .code_range = range };
	uintptr_t lo = UINTPTR_MAX, hi = 0;

	memset(g_s12, 0, sizeof(g_s12));
	il_pool_begin(&cfg);
	il_run(seed, fns, 3);
	rcs_all_zero();
	for (int i = 0; i < 3; i++) {
		if (g_s12[i][0] && g_s12[i][0] < lo)
			lo = g_s12[i][0];
		if (g_s12[i][1] > hi)
			hi = g_s12[i][1];
	}
	if (hi - lo > range)
		il_fail("regions span %zu bytes of a %zu-byte range", (size_t)(hi - lo), range);
	il_pool_end();
}

START_TEST(test_code_range)
{
	il_each_seed("s12", s12, 120, 1);
}
END_TEST

/* 20. A code range of two packs and three threads allocating at once: a
 * heap with no pack allocates in another heap's (heap.c), racing that
 * heap's own thread and frees from the third; each thread's first program
 * stays live until all three are made, so one of them always borrows.
 * Every call succeeds, and the model holds (check_quiet()). */
static void s20_thread(int id)
{
	unsigned char *x = il_jit(100, 1), *y;

	il_pub[id] = x;
	for (int i = 0; i < 3; i++)
		il_await(i);
	y = il_jit(200, id != 1);
	il_rc[id][0] = y ? il_do_free(y) : -1;
	il_rc[id][1] = il_do_free(il_pub[(id + 1) % 3]);
}

static void s20(unsigned long seed)
{
	void (*fns[])(int) = { s20_thread, s20_thread, s20_thread };
	struct ep_config cfg = { .sz = sizeof(cfg), .pack_size = S12_PACK,
				 .code_range = 2 * S12_PACK };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(&cfg);
	il_run(seed, fns, 3);
	rcs_all_zero();
	il_pool_end();
}

START_TEST(test_code_range_shared)
{
	il_each_seed("s20", s20, 150, 1);
}
END_TEST

/* 28. Threads that share (heap.c): three threads whose heaps have no
 * pack of their own allocate at once, each borrowing a pack of whichever
 * heap has one (or, finding none, from the first heap, which makes it),
 * racing the lender's own allocations; each then frees another thread's
 * program (made in a heap neither owns, perhaps) and allocates again,
 * reusing what was freed.  Every call succeeds, the three make one pack
 * between them, and the model holds (check_quiet()). */
static unsigned long g_s28_borrowed; /* heaps that borrowed, all schedules */

static void s28_thread(int id)
{
	unsigned char *x = il_jit(100, 1), *y;

	il_pub[id] = x;
	for (int i = 0; i < 3; i++)
		il_await(i);
	il_rc[id][0] = il_do_free(il_pub[(id + 1) % 3]);
	y = il_jit(150, id != 2);
	il_rc[id][1] = y ? il_do_free(y) : -1;
}

static void s28(unsigned long seed)
{
	void (*fns[])(int) = { s28_thread, s28_thread, s28_thread };
	struct ep_config cfg = { .sz = sizeof(cfg), .pack_size = S12_PACK };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(&cfg);
	il_run(seed, fns, 3);
	rcs_all_zero();
	struct ep_stats st;

	if (ep_pool_stats(il_pool, &st) || st.packs != 1)
		il_fail("%zu packs for three threads' few programs", st.packs);
	for (struct ep__heap *h = il_pool->heaps; h; h = h->next_heap)
		g_s28_borrowed += h->borrowed != 0;
	il_pool_end();
}

START_TEST(test_threads_share)
{
	g_s28_borrowed = 0;
	il_each_seed("s28", s28, 150, 1);
	ck_assert_msg(g_s28_borrowed > 0, "no schedule borrowed a pack");
}
END_TEST

/* (in the order main() runs them) */
void il_add_range_tests(TCase *tc)
{
	tcase_add_test(tc, test_code_range);
	tcase_add_test(tc, test_code_range_shared);
	tcase_add_test(tc, test_threads_share);
}
