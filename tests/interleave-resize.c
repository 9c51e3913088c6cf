/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * interleave-resize.c - check_interleave's scenarios 10, 11, 16 and 17:
 * shrink, finalize, ep_add(), ep_finalize_size() and trim racing frees, and a
 * stale free racing the reuse of its pack.
 */
#include "config.h"

#include "interleave-sched.h"

/* Shrink and finalize racing frees from other threads.  With a limit, and
 * one program that stays: a free that took the shrunk program for longer
 * than it is (its state byte's length) gives back more than it was
 * charged and counted, which the checks after the run see. */
static void s10_owner(int id)
{
	il_jit(64, 1);
	il_pub[0] = il_jit(300, 1);
	il_pub[1] = il_jit(300, 0);
	il_rc[id][0] = ep_shrink(il_pool, il_pub[0], 70);
	if (il_rc[id][0] == 0 && il_model_find(il_pub[0]) >= 0)
		il_model[il_model_find(il_pub[0])].size = 128;
	il_rc[id][1] = ep_finalize(il_pool, il_pub[1]);
}

static void s10_freer(int id)
{
	il_rc[id][id - 1] = il_do_free(il_await(id - 1));
}

static void s10(unsigned long seed)
{
	void (*fns[])(int) = { s10_owner, s10_freer, s10_freer };
	struct ep_config cfg = { .sz = sizeof(cfg), .limit = 1 << 20 };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(&cfg);
	il_run(seed, fns, 3);
	for (int i = 0; i < 2; i++) {
		if (il_rc[0][i] && il_rc[0][i] != -EINVAL)
			il_fail("owner's call %d: %d", i, il_rc[0][i]);
		if (il_rc[i + 1][i])
			il_fail("free %d: %d", i, il_rc[i + 1][i]);
	}
	il_pool_end();
}

START_TEST(test_shrink_finalize_vs_free)
{
	il_each_seed("s10", s10, 65, 1);
}
END_TEST

/* 11. A double free whose pack is released and its struct reused for a
 * new region while the free is under way: the owner's allocation in the
 * new region (at the chunk the stale address had in the old one) is never
 * disturbed: its write and free succeed in every schedule, and the double
 * free fails.  The old region's range is kept taken meanwhile, so that the
 * new one lies elsewhere (one at the same address would be the new
 * allocation's, rightly freed).  A third of the seeds direct it: the stale
 * free is held at its k-th point until the new allocation exists, then
 * runs j more points, then the owner runs. */
static int g_s11_stale, g_s11_seen, g_s11_k, g_s11_j, g_s11_phase;
static void *g_s11_plug;

static int s11_schedule(const char *where)
{
	(void)where;
	switch (g_s11_phase) {
	case 0:
		if (il_me != 1 || !g_s11_stale || ++g_s11_seen < g_s11_k)
			return -1;
		g_s11_phase = 1;
		/* fall through */
	case 1:
		if (!il_pub[2])
			return 0; /* held until the new allocation exists */
		g_s11_phase = 2;
		return 1;
	case 2:
		if (il_me == 1 && --g_s11_j <= 0)
			g_s11_phase = 3;
		return g_s11_phase == 2 ? 1 : 0;
	default:
		return 0;
	}
}

static void s11_owner(int id)
{
	unsigned char *a = il_jit(64, 1); /* chunk 0 of the first pack */

	/* a second pack, emptied: the heap keeps it, so the first is released
	 * when it empties */
	il_rc[id][3] = il_do_free(il_jit(il_pack_size, 0));
	il_pub[0] = a;
	while (!il_pub[1])
		ep__il_blocked("script wait"); /* the first free is done */
	il_jit(il_pack_size, 0); /* drains: the first pack goes, this takes the second */
	g_s11_plug = mmap(il_pub[0], il_pack_size, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (g_s11_plug == MAP_FAILED)
		g_s11_plug = NULL;
	else if (g_s11_plug != il_pub[0])
		il_fail("MAP_FIXED_NOREPLACE placed %p at %p", (void *)il_pub[0], g_s11_plug);
	/* a new pack: the released struct, unless a free still pins it */
	unsigned char *x = il_jit(64, 1);

	il_pub[2] = x;
	il_rc[id][0] = ep_write(il_pool, x + 8, "\x11\x11", 2);
	il_rc[id][1] = x ? il_do_free(x) : -1;
}

static void s11_freer(int id)
{
	unsigned char *x = il_await(0);

	il_rc[id][0] = il_do_free(x);
	il_pub[1] = x;
	g_s11_stale = 1;
	il_rc[id][1] = ep_free(il_pool, x); /* the caller's bug */
	g_s11_stale = 0;
}

static void s11(unsigned long seed)
{
	void (*fns[])(int) = { s11_owner, s11_freer };
	struct ep_config cfg = { .sz = sizeof(cfg), .pack_size = 64 << 10 };

	memset(il_pub, 0, sizeof(il_pub));
	g_s11_stale = g_s11_seen = g_s11_phase = 0;
	g_s11_k = (int)(seed / 3 % 4) + 1;
	g_s11_j = (int)(seed / 12 % 4) + 1;
	g_s11_plug = NULL;
	il_directed = seed % 3 == 0 ? s11_schedule : NULL;
	il_pool_begin(&cfg);
	il_run(seed, fns, 2);
	il_directed = NULL;
	if (il_rc[1][0] || il_rc[0][3])
		il_fail("the first frees failed: %d %d", il_rc[1][0], il_rc[0][3]);
	int same = il_pub[2] == il_pub[0];

	if (same && il_rc[1][1] == 0 && il_model_find(il_pub[2]) >= 0)
		il_model[il_model_find(il_pub[2])].live = 0; /* what the double free freed */
	if (!same && il_rc[1][1] != -EINVAL)
		il_fail("the double free of %p (its pack reused at %p) returned %d",
			(void *)il_pub[0], (void *)il_pub[2], il_rc[1][1]);
	for (int i = 0; i < 2 && !(same && il_rc[1][1] == 0); i++)
		if (il_rc[0][i])
			il_fail("the owner's call %d on its allocation in the reused pack failed "
				"with %d (a stale free claimed it)",
				i, il_rc[0][i]);
	if (g_s11_plug)
		munmap(g_s11_plug, il_pack_size);
	il_pool_end();
}

START_TEST(test_stale_free_vs_pack_reuse)
{
	il_each_seed("s11", s11, 120, 1);
}
END_TEST


/* 16. ep_add(), ep_finalize_size() and ep_pool_trim() racing frees from
 * other threads: the added program is plain at once (a lock-free free may
 * take it), the one finalized short is charged and counted for what it
 * keeps, and a trim from another thread gives back an emptied pack and the
 * tails of the others while they free.  The free chunks hold the fill at
 * every step (ep_add() copies only the program into them). */
static void s16_owner(int id)
{
	static const unsigned char code[300] = { 0x11 };
	void *x = NULL;

	il_jit(64, 1);
	il_rc[id][0] = ep_add(il_pool, code, sizeof(code), &x);
	if (il_rc[id][0] == 0)
		il_model_add(x, 320);
	il_pub[0] = x;
	il_pub[1] = il_jit(1000, 0);
	il_rc[id][1] = ep_finalize_size(il_pool, il_pub[1], 70);
	if (il_rc[id][1] == 0 && il_model_find(il_pub[1]) >= 0)
		il_model[il_model_find(il_pub[1])].size = 128;
	il_pub[2] = il_jit(3000, 1);
}

static void s16_freer(int id)
{
	il_rc[id][0] = il_do_free(il_await(0));
	il_rc[id][1] = il_do_free(il_await(2));
}

static void s16_trimmer(int id)
{
	size_t released;

	il_rc[id][0] = ep_pool_trim(il_pool, &released);
	il_rc[id][1] = il_do_free(il_await(1));
	il_rc[id][2] = ep_pool_trim(il_pool, &released);
}

static void s16(unsigned long seed)
{
	void (*fns[])(int) = { s16_owner, s16_freer, s16_trimmer };
	struct ep_config cfg = { .sz = sizeof(cfg), .limit = 1 << 20 };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(&cfg);
	il_run(seed, fns, 3);
	/* (the owner's finalize may come after the trimmer's free: -EINVAL) */
	for (int i = 0; i < 3; i++)
		if ((il_rc[0][i] && !(i == 1 && il_rc[0][i] == -EINVAL)) || il_rc[1][i] || il_rc[2][i])
			il_fail("call %d: owner %d, freer %d, trimmer %d", i, il_rc[0][i], il_rc[1][i],
				il_rc[2][i]);
	il_pool_end();
}

START_TEST(test_add_trim_vs_free)
{
	il_each_seed("s16", s16, 80, 1);
}
END_TEST

/* 17. s10 on 16-byte chunks, at the state byte's bound: a program of 31
 * chunks (its length in the byte) shrunk to 5, one of 32 (the maps say)
 * finalized, each raced by a free from another thread. */
static void s17_owner(int id)
{
	il_jit(16, 1);
	il_pub[0] = il_jit(31 * 16, 1);
	il_pub[1] = il_jit(32 * 16, 0);
	il_rc[id][0] = ep_shrink(il_pool, il_pub[0], 70);
	if (il_rc[id][0] == 0 && il_model_find(il_pub[0]) >= 0)
		il_model[il_model_find(il_pub[0])].size = 80;
	il_rc[id][1] = ep_finalize(il_pool, il_pub[1]);
}

static void s17(unsigned long seed)
{
	void (*fns[])(int) = { s17_owner, s10_freer, s10_freer };
	struct ep_config cfg = { .sz = sizeof(cfg), .limit = 1 << 20, .chunk_size = 16 };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(&cfg);
	il_run(seed, fns, 3);
	for (int i = 0; i < 2; i++) {
		if (il_rc[0][i] && il_rc[0][i] != -EINVAL)
			il_fail("owner's call %d: %d", i, il_rc[0][i]);
		if (il_rc[i + 1][i])
			il_fail("free %d: %d", i, il_rc[i + 1][i]);
	}
	il_pool_end();
}

START_TEST(test_small_chunks_shrink_finalize_vs_free)
{
	il_each_seed("s17", s17, 65, 1);
}
END_TEST

/* (in the order main() runs them) */
void il_add_resize_tests(TCase *tc)
{
	tcase_add_test(tc, test_shrink_finalize_vs_free);
	tcase_add_test(tc, test_stale_free_vs_pack_reuse);
	tcase_add_test(tc, test_add_trim_vs_free);
	tcase_add_test(tc, test_small_chunks_shrink_finalize_vs_free);
}
