/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * interleave-first.c - check_interleave's scenarios 26 and 27: what the
 * first call makes and publishes, raced: a pool's data heaps (the first
 * ep_alloc_data() of each kind) and ep_default_pool()'s pool.
 */
#include "config.h"

#include "interleave-sched.h"

#include "registry.h"
#include "route.h"

/* Whether the allocation at x lies in heap h (the route's owner). */
static int heap_holds(struct ep__heap *h, const void *x)
{
	void *v = ep__route_get((uintptr_t)x);
	struct ep__pack *pack;

	return v && ep__route_heap(v, &pack) == h;
}

/* ep_alloc_data() of kind, its bytes set to v, finalized; the model
 * learns it. */
static unsigned char *data_of(size_t n, unsigned kind, unsigned char v)
{
	struct ep_image img;
	int rc = ep_alloc_data(il_pool, n, 0, kind, &img);

	if (rc) {
		il_fail("ep_alloc_data(%zu, %u): %d", n, kind, rc);
		return NULL;
	}
	il_model_add(img.exec, img.size);
	memset(img.rw, v, n);
	if ((rc = ep_finalize(il_pool, img.exec)))
		il_fail("ep_finalize of data: %d", rc);
	return img.exec;
}

/* What a lookup of x must say of live, finalized data of n bytes that hold v. */
static void expect_data(const unsigned char *x, size_t n, unsigned char v, const char *what)
{
	struct ep_info in;
	int rc = ep_lookup(x + n - 1, &in);

	if (rc || in.exec != x || in.size < n || !(in.flags & EP_INFO_FINALIZED))
		il_fail("%s: lookup of %p + %zu: rc %d exec %p size %zu flags %#x", what,
			(const void *)x, n - 1, rc, in.exec, in.size, in.flags);
	else if (x[0] != v || x[n - 1] != v)
		il_fail("%s: data %p holds %#x %#x, not %#x", what, (const void *)x, x[0], x[n - 1],
			v);
}

/* 26. Two threads' first ep_alloc_data() of one kind (read-only), while a
 * third makes the other kind's heap (the same lock and heap list), then
 * looks up and frees the first thread's data: each kind has exactly one
 * data heap, the one its slot publishes and the only one of that kind in
 * the pool's list; every allocation of a kind lies in it.  The thread that
 * comes second finds the heap either at its unlocked read (published) or
 * under heaps_lock, having missed it there: both occur. */
static int g_s26_missed[IL_MAX]; /* passes of "data heap: none yet" */
static unsigned long g_s26_read, g_s26_locked;

static void s26_signal(const char *where)
{
	if (il_me >= 0 && !strcmp(where, "data heap: none yet"))
		g_s26_missed[il_me]++;
}

static void s26_ro(int id)
{
	size_t n = id ? 200 : 100;

	unsigned char *x = data_of(n, EP_DATA_RO, (unsigned char)(0x21 + id));

	if (x)
		expect_data(x, n, (unsigned char)(0x21 + id), "own data");
	il_pub[id] = x; /* (then the third may free it) */
}

static void s26_other(int id)
{
	il_pub[2] = data_of(64, EP_DATA_RW, 0x23);
	expect_data(il_await(0), 100, 0x21, "the first thread's data");
	il_rc[id][0] = il_do_free(il_pub[0]);
}

static void s26(unsigned long seed)
{
	void (*fns[])(int) = { s26_ro, s26_ro, s26_other };

	memset(il_pub, 0, sizeof(il_pub));
	memset(g_s26_missed, 0, sizeof(g_s26_missed));
	il_pool_begin(NULL);
	il_signal = s26_signal;
	il_run(seed, fns, 3);
	il_signal = NULL;
	if (il_rc[2][0])
		il_fail("the free of the first thread's data: %d", il_rc[2][0]);
	for (unsigned k = 0; k < 2 && !il_failed; k++) {
		unsigned char guard = k ? EP__GUARD_DATA_RW : EP__GUARD_DATA_RO;
		struct ep__heap *slot = ep__load_acquire(&il_pool->data_heaps[k]);
		int n = 0;

		for (struct ep__heap *h = il_pool->heaps; h; h = h->next_heap)
			n += h->data == guard;
		if (n != 1 || !slot || slot->data != guard)
			il_fail("%s data: %d heaps in the pool's list, the slot's %p",
				k ? "read-write" : "read-only", n, (void *)slot);
	}
	if (!il_failed && (!heap_holds(il_pool->data_heaps[0], il_pub[1]) ||
			   !heap_holds(il_pool->data_heaps[1], il_pub[2])))
		il_fail("data outside its kind's heap");
	int missed = (g_s26_missed[0] > 0) + (g_s26_missed[1] > 0);

	if (missed == 0)
		il_fail("neither read-only thread missed the heap: who made it?");
	g_s26_read += missed == 1;
	g_s26_locked += missed == 2;
	il_pool_end();
}

START_TEST(test_first_data_heap)
{
	g_s26_read = g_s26_locked = 0;
	if (!il_each_seed("s26", s26, 80, 1))
		return;
	printf("s26: the second found the heap at its read in %lu schedules, under the lock "
	       "in %lu\n",
	       g_s26_read, g_s26_locked);
	/* (the seeds are fixed: a change that leaves one outcome unreached
	 * must say so, not pass without trying it) */
	ck_assert_msg((g_s26_read > 0 && g_s26_locked > 0) || il_schedules < 50 ||
			      getenv("EP_IL_SEED"),
		      "a first data heap's race: %lu read, %lu under the lock", g_s26_read,
		      g_s26_locked);
}
END_TEST

/* 27. Three threads' first ep_default_pool(), then an ep_alloc() on it:
 * all get the same pool, the losers of the compare-and-swap destroy the
 * pool each made (the process has one pool more than before, no other),
 * and the code of each lies in it.  A thread either finds the pool
 * published or makes one of its own and races to publish it: in some
 * schedules a thread loses that race, in some one finds it published. */
static int g_s27_made[IL_MAX]; /* passes of "default pool" */
static struct ep_pool *g_s27_got[IL_MAX];
static unsigned char *g_s27_code[IL_MAX];
static unsigned long g_s27_lost, g_s27_found;

static void s27_signal(const char *where)
{
	if (il_me >= 0 && !strcmp(where, "default pool"))
		g_s27_made[il_me]++;
}

static void s27_caller(int id)
{
	struct ep_pool *p = ep_default_pool();
	struct ep_image img;
	size_t n = 100 + 64 * (size_t)id;

	g_s27_got[id] = p;
	if (!p)
		return;
	if ((il_rc[id][0] = ep_alloc(p, n, &img)))
		return;
	memset(img.rw, 0x11, n);
	il_rc[id][1] = ep_finalize(p, img.exec);
	g_s27_code[id] = img.exec;
}

static int count_pools(void)
{
	int n = 0;

	for (struct ep_pool *p = ep__roots; p; p = p->next_root)
		n++;
	return n;
}

static void s27(unsigned long seed)
{
	void (*fns[])(int) = { s27_caller, s27_caller, s27_caller };

	memset(g_s27_made, 0, sizeof(g_s27_made));
	memset(g_s27_got, 0, sizeof(g_s27_got));
	memset(g_s27_code, 0, sizeof(g_s27_code));
	ep__default_pool_reset_for_test();
	int pools = count_pools();

	il_signal = s27_signal;
	il_run(seed, fns, 3);
	il_signal = NULL;

	struct ep_pool *p = g_s27_got[0];
	int made = 0;

	for (int i = 0; i < 3; i++) {
		made += g_s27_made[i] > 0;
		if (!g_s27_got[i] || g_s27_got[i] != p)
			il_fail("thread %d got pool %p, thread 0 %p", i, (void *)g_s27_got[i],
				(void *)p);
		else if (il_rc[i][0] || il_rc[i][1])
			il_fail("thread %d: alloc %d, finalize %d", i, il_rc[i][0], il_rc[i][1]);
	}
	if (count_pools() != pools + 1)
		il_fail("%d pools after the race, %d before (the losers' not destroyed?)",
			count_pools(), pools);
	if (made == 0)
		il_fail("no thread made the default pool");
	g_s27_lost += made > 1;
	g_s27_found += made < 3;
	if (!il_failed && p) {
		il_pool_adopt(p);
		for (int i = 0; i < 3; i++)
			il_model_add(g_s27_code[i], 100 + 64 * (size_t)i);
		il_pool_end(); /* (whose destroy leaves the default pool) */
	}
	ep__default_pool_reset_for_test();
}

START_TEST(test_first_default_pool)
{
	g_s27_lost = g_s27_found = 0;
	if (!il_each_seed("s27", s27, 70, 1))
		return;
	printf("s27: a thread lost the publication in %lu schedules, found it published in %lu\n",
	       g_s27_lost, g_s27_found);
	ck_assert_msg((g_s27_lost > 0 && g_s27_found > 0) || il_schedules < 50 ||
			      getenv("EP_IL_SEED"),
		      "the default pool's race: lost in %lu schedules, found in %lu", g_s27_lost,
		      g_s27_found);
}
END_TEST

/* (in the order main() runs them) */
void il_add_first_tests(TCase *tc)
{
	tcase_add_test(tc, test_first_data_heap);
	tcase_add_test(tc, test_first_default_pool);
}
