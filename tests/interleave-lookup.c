/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * interleave-lookup.c - check_interleave's scenarios 21-25: ep_lookup()
 * racing writes, windows, frees, a destroy and a group's finalize, and in
 * a signal handler.
 */
#include "config.h"

#include "interleave-sched.h"

/* 21-24. ep_lookup() against the calls that change what it reads: it never
 * takes a lock, never says -ENOENT for live code, and never reads a pool
 * that a destroy freed. */

/* What a lookup of x + off must say of the live program x of size bytes. */
static void expect_live(const unsigned char *x, size_t size, size_t off, const char *what)
{
	struct ep_info in;
	int rc = ep_lookup(x + off, &in);

	if (rc || in.exec != x || in.size != size || !(in.flags & EP_INFO_FINALIZED))
		il_fail("%s: lookup of %p + %zu: rc %d exec %p size %zu flags %#x", what,
			(const void *)x, off, rc, in.exec, in.size, in.flags);
}

static unsigned char *g_lone; /* a neighbour born and freed beside them */

static void s21_owner(int id)
{
	il_pub[0] = il_jit(64 * 40, 1); /* its length in the maps */
	il_pub[1] = il_jit(192, 1);     /* in its state byte */
	g_lone = il_jit(100, 1);
	il_rc[id][0] = il_do_free(g_lone);
	uint32_t v = 7;

	il_rc[id][1] = ep_write(il_pool, il_pub[0] + 64, &v, sizeof(v));
	il_rc[id][2] = ep_write(il_pool, il_pub[1] + 8, &v, sizeof(v));
}

static void s21_patcher(int id)
{
	il_rc[id][0] = il_patch_fill(il_await(0), 128, 16, 0x22, 0);
	il_rc[id][1] = il_patch_fill(il_await(1), 0, 8, 0x22, 0);
}

static void s21_looker(int id)
{
	(void)id;
	for (int k = 0; k < 4; k++) {
		expect_live(il_await(0), 64 * 40, (size_t)k * 631 % (64 * 40), "long");
		expect_live(il_await(1), 192, (size_t)k * 37 % 192, "short");
	}
}

static void s21(unsigned long seed)
{
	void (*fns[])(int) = { s21_owner, s21_patcher, s21_looker };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(NULL);
	il_run(seed, fns, 3);
	for (int t = 0; t < 2; t++)
		for (int i = 0; i < 3; i++)
			if (il_rc[t][i])
				il_fail("thread %d call %d: %d", t, i, il_rc[t][i]);
	il_pool_end();
}

START_TEST(test_lookup_vs_write_window)
{
	il_each_seed("s21", s21, 110, 1);
}
END_TEST

/* 22. A signal handler's lookups on a thread that holds the heap's lock
 * (in a write, a window, a free, the pack's maps or an entry half
 * written): each answers at once, hit or miss; it never waits for the
 * thread it interrupted. */
static unsigned char *g_stage_rw;

static void s22_signal(const char *where)
{
	int holds = 0;

	(void)where;
	if (il_me != 0 || !il_pub[1])
		return;
	for (int i = 0; i < 64; i++)
		holds |= il_held[i].lock && il_held[i].holder == 0;
	if (!holds || il_rnd() % 3)
		return;
	struct ep_info in;
	int rc = ep_lookup((void *)&write, &in);

	if (rc != -ENOENT)
		il_fail("lookup of libc in a handler: %d", rc);
	if ((rc = ep_lookup(g_stage_rw, &in)) != -ENOENT)
		il_fail("lookup of a staging buffer in a handler: %d", rc);
	/* the short one: live for the whole scenario */
	expect_live(il_pub[1], 192, 100, "in a handler");
}

static void s22_owner(int id)
{
	struct ep_image img;

	il_pub[0] = il_jit(64 * 40, 1);
	if (ep_alloc(il_pool, 300, &img) == 0)
		g_stage_rw = img.rw;
	il_model_add(img.exec, img.size);
	il_pub[1] = il_jit(192, 1);
	uint32_t v = 9;

	il_rc[id][0] = ep_write(il_pool, il_pub[1] + 8, &v, sizeof(v));
	il_rc[id][1] = il_patch_fill(il_pub[1], 0, 8, 0x22, 0);
	il_rc[id][2] = il_do_free(il_pub[0]);
	il_rc[id][3] = il_do_free(img.exec);
}

static void s22_other(int id)
{
	il_rc[id][0] = ep_set_name(il_pool, il_await(1), "s22");
}

static void s22(unsigned long seed)
{
	void (*fns[])(int) = { s22_owner, s22_other };

	memset(il_pub, 0, sizeof(il_pub));
	g_stage_rw = NULL;
	il_pool_begin(NULL);
	il_signal = s22_signal;
	il_run(seed, fns, 2);
	il_signal = NULL;
	for (int i = 0; i < 4; i++)
		if (il_rc[0][i])
			il_fail("owner call %d: %d", i, il_rc[0][i]);
	il_pool_end();
}

START_TEST(test_lookup_in_signal_with_lock)
{
	il_each_seed("s22", s22, 120, 1);
}
END_TEST

/* 23. A lookup racing a free from another thread: the program as it was
 * (exact exec and size), or -ENOENT; never another answer. */
static void s23_owner(int id)
{
	(void)id;
	il_pub[0] = il_jit(64 * 36, 1);
	il_pub[1] = il_jit(100, 1);
	il_pub[2] = il_jit(64, 1);
}

static void s23_freer(int id)
{
	for (int i = 0; i < 3; i++)
		il_rc[id][i] = il_do_free(il_await(i));
}

static void s23_looker(int id)
{
	static const size_t size[3] = { 64 * 36, 128, 64 };

	(void)id;
	for (int k = 0; k < 6; k++) {
		int i = k % 3;
		unsigned char *x = il_await(i);
		struct ep_info in;
		int rc = ep_lookup(x + size[i] - 1, &in);

		if (rc == 0 && (in.exec != x || in.size != size[i]))
			il_fail("lookup during a free: exec %p size %zu for %p", in.exec, in.size,
				(void *)x);
		else if (rc && rc != -ENOENT)
			il_fail("lookup during a free: %d", rc);
	}
}

static void s23(unsigned long seed)
{
	void (*fns[])(int) = { s23_owner, s23_freer, s23_looker };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(NULL);
	il_run(seed, fns, 3);
	for (int i = 0; i < 3; i++)
		if (il_rc[1][i])
			il_fail("free %d: %d", i, il_rc[1][i]);
	il_pool_end();
}

START_TEST(test_lookup_vs_free)
{
	il_each_seed("s23", s23, 100, 1);
}
END_TEST

/* 24. A lookup racing the destroy of its pool: hit (that pool, that
 * program) or miss; the heap and packs it holds are freed only after it
 * left (grace.h: under AddressSanitizer a read of them would be seen). */
static struct ep_pool *g_doomed;

static void s24_owner(int id)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *p;
	struct ep_image img;

	if ((il_rc[id][0] = ep_pool_create(&cfg, &p)))
		return;
	g_doomed = p;
	if ((il_rc[id][1] = ep_alloc(p, 64 * 34, &img)))
		return;
	memset(img.rw, 0x11, img.size);
	if ((il_rc[id][2] = ep_finalize(p, img.exec)))
		return;
	il_pub[0] = img.exec;
	ep_pool_destroy(p);
}

static void s24_looker(int id)
{
	unsigned char *x = il_await(0);

	(void)id;
	for (int k = 0; k < 4; k++) {
		struct ep_info in;
		int rc = ep_lookup(x + 64 * 33 + 5, &in);

		if (rc == 0 && (in.pool != g_doomed || in.exec != x || in.size != 64 * 34))
			il_fail("lookup during a destroy: pool %p exec %p size %zu", (void *)in.pool,
				in.exec, in.size);
		else if (rc && rc != -ENOENT)
			il_fail("lookup during a destroy: %d", rc);
	}
}

static void s24(unsigned long seed)
{
	void (*fns[])(int) = { s24_owner, s24_looker };

	memset(il_pub, 0, sizeof(il_pub));
	il_pool_begin(NULL);
	il_run(seed, fns, 2);
	for (int i = 0; i < 3; i++)
		if (il_rc[0][i])
			il_fail("owner call %d: %d", i, il_rc[0][i]);
	il_pool_end();
}

START_TEST(test_lookup_vs_destroy)
{
	il_each_seed("s24", s24, 90, 1);
}
END_TEST

/* 25. A group finalized (ep_finalize_group()), one member staged by
 * another thread (in its heap: two heaps' locks), while that thread
 * finalizes another member alone and frees a neighbour, and a third looks
 * the members up: the group and the lone finalize each either wins or
 * fails with -EINVAL, changing nothing (a lost group leaves the other
 * members staged); a lookup never sees a member go back to staged, and
 * sees its code in place once it is finalized; the kept staging buffer of
 * a member still holds its bytes after the group. */
static unsigned char *g_kept_rw, *g_theirs;

static void s25_owner(int id)
{
	struct ep_image img;

	il_pub[3] = il_jit(100, 1); /* the neighbour */
	il_pub[0] = il_jit(64 * 3, 0);
	il_pub[1] = il_jit(64 * 20, 0);
	if ((il_rc[id][0] = ep_alloc(il_pool, 300, &img)))
		return;
	il_model_add(img.exec, img.size);
	memset(img.rw, 0x11, 300);
	g_kept_rw = img.rw;
	if ((il_rc[id][0] = ep_keep_staging(il_pool, img.exec)))
		return;
	il_pub[2] = img.exec;

	while (!g_theirs)
		ep__il_blocked("script wait");

	void *execs[4] = { il_pub[0], il_pub[1], il_pub[2], g_theirs };

	il_rc[id][1] = ep_finalize_group(il_pool, execs, 4);
	for (int i = 0; i < 300; i++)
		if (g_kept_rw[i] != 0x11)
			il_fail("kept staging byte %d: %#x", i, g_kept_rw[i]);
	il_rc[id][2] = ep_release_staging(il_pool, img.exec);
}

static void s25_other(int id)
{
	g_theirs = il_jit(64 * 2, 0);
	il_rc[id][0] = ep_finalize(il_pool, il_await(1));
	il_rc[id][1] = il_do_free(il_await(3));
}

static void s25_looker(int id)
{
	int seen[3] = { 0, 0, 0 };

	(void)id;
	for (int k = 0; k < 6; k++) {
		int i = k % 3;
		unsigned char *x = il_await(i);
		struct ep_info in;
		int rc = ep_lookup(x + 5, &in);

		if (rc || in.exec != x) {
			il_fail("lookup of member %d: rc %d exec %p", i, rc, in.exec);
			continue;
		}
		if (in.flags & EP_INFO_FINALIZED) {
			seen[i] = 1;
			if (x[5] != 0x11)
				il_fail("member %d finalized without its code: %#x", i, x[5]);
		} else if (seen[i]) {
			il_fail("member %d staged again after it was finalized", i);
		}
	}
}

static void s25(unsigned long seed)
{
	void (*fns[])(int) = { s25_owner, s25_other, s25_looker };

	memset(il_pub, 0, sizeof(il_pub));
	g_kept_rw = g_theirs = NULL;
	il_pool_begin(NULL);
	il_run(seed, fns, 3);
	int group = il_rc[0][1], lone = il_rc[1][0];

	if (il_rc[0][0] || il_rc[1][1])
		il_fail("keep %d, neighbour's free %d", il_rc[0][0], il_rc[1][1]);
	else if (!(group == 0 && lone == -EINVAL) && !(group == -EINVAL && lone == 0))
		il_fail("group %d and lone finalize %d: not one winner", group, lone);
	else if (il_rc[0][2]) /* (a lost group: the request withdrawn) */
		il_fail("release after group %d: %d", group, il_rc[0][2]);
	for (int i = 0; i < 4 && !il_failed; i++) {
		struct ep_info in;
		void *x = i < 3 ? il_pub[i] : g_theirs;
		int fin = ep_lookup(x, &in) == 0 && (in.flags & EP_INFO_FINALIZED);

		/* (lost: the lone one finalized member 1 only) */
		if (fin != (group == 0 || i == 1))
			il_fail("member %d after group %d: finalized %d", i, group, fin);
	}
	il_pool_end();
}

START_TEST(test_group_vs_lookup_free)
{
	il_each_seed("s25", s25, 110, 1);
}
END_TEST

/* (in the order main() runs them) */
void il_add_lookup_tests(TCase *tc)
{
	tcase_add_test(tc, test_lookup_vs_write_window);
	tcase_add_test(tc, test_lookup_in_signal_with_lock);
	tcase_add_test(tc, test_lookup_vs_free);
	tcase_add_test(tc, test_lookup_vs_destroy);
	tcase_add_test(tc, test_group_vs_lookup_free);
}
