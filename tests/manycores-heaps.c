/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * manycores-heaps.c - check_manycores' heap tests: an exited thread's heap
 * goes to the next thread that allocates, and heaps give their packs back.
 */
#include "config.h"

#include "manycores.h"

/* ---- heaps follow the threads ------------------------------------------- */

/*
 * A thread that has exited leaves its heap to the next thread that
 * allocates: sixteen threads one after another, each leaving one program
 * alive, share one heap, hence one pack (a heap each would map a pack each).
 */
struct one_prog {
	struct ep_pool *pool;
	void *f;
	uint32_t v;
};

static void *alloc_and_exit(void *arg)
{
	struct one_prog *o = arg;
	int rc = rel_jit(o->pool, 64, o->v, &o->f);

	return rc ? NULL : o;
}

START_TEST(test_heap_adopted_after_exit)
{
	struct ep_pool *pool = mc_new_pool(EP_BACKEND_MEMFD, 0);
	struct one_prog o[16];
	struct ep_stats st;

	for (int i = 0; i < 16; i++) {
		pthread_t t;
		void *ret = NULL;

		o[i] = (struct one_prog){ .pool = pool, .v = 100u + (uint32_t)i };
		ck_assert_int_eq(pthread_create(&t, NULL, alloc_and_exit, &o[i]), 0);
		ck_assert_int_eq(pthread_join(t, &ret), 0);
		ck_assert_ptr_eq(ret, &o[i]);
	}
	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 16);
	ck_assert_uint_eq(st.packs, 1);
	for (int i = 0; i < 16; i++) {
		ck_assert(mc_runs_as(o[i].f, o[i].v));
		ck_assert_int_eq(ep_free(pool, o[i].f), 0); /* from a thread with no heap */
	}
	ep_pool_destroy(pool);
}
END_TEST

/* Eight threads at once, a thousand programs each, all freed, threads
 * gone: at most the one cached empty pack is left. */
static void *fill_free_exit(void *arg)
{
	struct ep_pool *pool = arg;
	void *f[1000];

	for (int i = 0; i < 1000; i++)
		if (rel_jit(pool, 64 + (size_t)(i % 7) * 96, (uint32_t)i, &f[i]))
			return NULL;
	for (int i = 0; i < 1000; i++)
		if (ep_free(pool, f[i]))
			return NULL;
	return pool;
}

START_TEST(test_heaps_give_packs_back)
{
	struct ep_pool *pool = mc_new_pool(EP_BACKEND_MEMFD, 0);
	pthread_t t[8];
	struct ep_stats st;

	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, fill_free_exit, pool), 0);
	for (int i = 0; i < 8; i++) {
		void *ret = NULL;

		ck_assert_int_eq(pthread_join(t[i], &ret), 0);
		ck_assert_ptr_eq(ret, pool);
	}
	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ck_assert_uint_le(st.packs, 1);
	ep_pool_destroy(pool);
}
END_TEST

/* (in the order main() runs them) */
void mc_add_heap_tests(TCase *tc)
{
	tcase_add_test(tc, test_heap_adopted_after_exit);
	tcase_add_test(tc, test_heaps_give_packs_back);
}
