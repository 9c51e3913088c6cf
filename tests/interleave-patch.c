/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * interleave-patch.c - check_interleave's scenarios 14 and 15: patch
 * windows racing frees, writes, shrinks, names and a second window.
 */
#include "config.h"

#include "interleave-sched.h"

/* 14. Patch windows racing frees, by the owner and by another thread
 * (which takes a plain allocation without the lock, but not one with a
 * window), and lookups; the emitter's writes to an open window do not race
 * its free (il_patch_fill()), its commit does: a commit never writes chunks
 * that were given back
 * (the free chunks hold traps at every step), a window never outlives its
 * allocation (no record of a freed one), and a commit that succeeded on
 * code that stays is there. */
static void s14_owner(int id)
{
	il_pub[0] = il_jit(200, 1);
	il_pub[1] = il_jit(64, 1);
	il_pub[2] = il_jit(128, 1);
	il_rc[id][0] = il_do_free(il_pub[1]);
}

static void s14_patcher(int id)
{
	for (int i = 0; i < 3; i++)
		il_rc[id][i] = il_patch_fill(il_await(i), 8, 48, 0x22, 1);
}

static void s14_freer(int id)
{
	struct ep_info in;
	unsigned char *x = il_await(0);
	int rc = ep_lookup(x + 70, &in);

	if (rc == 0 && (in.exec != x || in.size != 256))
		il_fail("lookup of a live program: exec %p size %zu", in.exec, in.size);
	else if (rc && rc != -ENOENT)
		il_fail("lookup: %d", rc);
	il_rc[id][0] = il_do_free(x);
}

static void s14(unsigned long seed)
{
	void (*fns[])(int) = { s14_owner, s14_patcher, s14_freer };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(NULL);
	il_run(seed, fns, 3);
	if (il_rc[0][0] || il_rc[2][0])
		il_fail("frees: %d %d", il_rc[0][0], il_rc[2][0]);
	for (int i = 0; i < 2; i++)
		if (il_rc[1][i] && il_rc[1][i] != -EINVAL)
			il_fail("patch %d of a program being freed: %d", i, il_rc[1][i]);
	if (il_rc[1][2])
		il_fail("patch of a program that stays: %d", il_rc[1][2]);
	for (int b = 8; b < 56; b++)
		if (il_pub[2][b] != 0x22)
			il_fail("byte %d of the patched program is %#x", b, il_pub[2][b]);
	il_pool_end();
}

START_TEST(test_patch_vs_free)
{
	il_each_seed("s14", s14, 90, 1);
}
END_TEST

/* 15. A window racing a write, a shrink, a name and a second begin on one
 * program: each acts before or after the window; a second window on it is
 * refused (-EBUSY) while one is open; the write's bytes, which the window
 * does not change, survive its commit; a shrink into an open window is
 * refused (-EBUSY), and a window past a shrunk end (-EINVAL). */
static void s15_owner(int id)
{
	il_pub[0] = il_jit(300, 1);
	il_rc[id][0] = il_patch_fill(il_pub[0], 64, 16, 0x33, 0);
}

static void s15_writer(int id)
{
	unsigned char *x = il_await(0);

	il_rc[id][0] = ep_write(il_pool, x + 100, "\x44\x44\x44\x44", 4);
	il_rc[id][1] = ep_shrink(il_pool, x, 200);
	if (il_rc[id][1] == 0 && il_model_find(x) >= 0)
		il_model[il_model_find(x)].size = 256;
}

static void s15_other(int id)
{
	unsigned char *x = il_await(0);
	void *rw;

	il_rc[id][0] = ep_patch_begin(il_pool, x + 200, 80, &rw);
	if (il_rc[id][0] == 0) {
		memset(rw, 0x55, 80);
		il_rc[id][1] = ep_patch_commit(il_pool, x + 200);
	}
	il_rc[id][2] = ep_set_name(il_pool, x, "s15");
}

static void s15(unsigned long seed)
{
	void (*fns[])(int) = { s15_owner, s15_writer, s15_other };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(NULL);
	il_run(seed, fns, 3);
	unsigned char *x = il_pub[0];

	if (il_rc[0][0] && il_rc[0][0] != -EBUSY)
		il_fail("the owner's window: %d", il_rc[0][0]);
	/* (-EINVAL: the shrink came first and cut its range off) */
	if (il_rc[2][0] && il_rc[2][0] != -EBUSY && !(il_rc[2][0] == -EINVAL && !il_rc[1][1]))
		il_fail("the other window: %d (shrink %d)", il_rc[2][0], il_rc[1][1]);
	if (il_rc[0][0] && il_rc[2][0] == -EBUSY)
		il_fail("both windows refused as busy");
	if (il_rc[1][0] || il_rc[2][1] || il_rc[2][2])
		il_fail("write %d, commit %d, name %d", il_rc[1][0], il_rc[2][1], il_rc[2][2]);
	if (il_rc[1][1] && il_rc[1][1] != -EBUSY)
		il_fail("shrink: %d", il_rc[1][1]);
	for (int b = 100; b < 104; b++)
		if (x[b] != 0x44)
			il_fail("byte %d that ep_write() wrote is %#x after the commit", b, x[b]);
	for (int b = 64; !il_rc[0][0] && b < 80; b++)
		if (x[b] != 0x33)
			il_fail("byte %d of the committed window is %#x", b, x[b]);
	for (int b = 200; !il_rc[2][0] && b < (il_rc[1][1] ? 280 : 256); b++)
		if (x[b] != 0x55)
			il_fail("byte %d of the other committed window is %#x", b, x[b]);
	char name[8];
	size_t off;

	if (ep_symbolize(x + 10, name, sizeof(name), &off) || strcmp(name, "s15"))
		il_fail("the name is lost");
	il_pool_end();
}

START_TEST(test_patch_vs_write_shrink_name)
{
	il_each_seed("s15", s15, 90, 1);
}
END_TEST

/* (in the order main() runs them) */
void il_add_patch_tests(TCase *tc)
{
	tcase_add_test(tc, test_patch_vs_free);
	tcase_add_test(tc, test_patch_vs_write_shrink_name);
}
