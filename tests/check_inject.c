/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_inject.c - failures inside the library (a backend's mmap, memfd,
 * ioctl, copy) injected at random points of random API sequences: a failed
 * call must leave no trace, and no allocation or code may be lost.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "execpack.h"
#include "inject-backend.h"
#include "testutil.h"

#define MAXLIVE 64

struct live {
	void *exec;
	size_t size;
	int finalized;
	uint32_t value; /* what it returns once finalized */
};

static struct live model[MAXLIVE];
static int nlive;

static unsigned rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static struct ep_stats stats_of(struct ep_pool *p)
{
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	return st;
}

static void check_model(struct ep_pool *p)
{
	struct ep_stats st = stats_of(p);

	ck_assert_uint_eq(st.live_allocs, (size_t)nlive);
	for (int i = 0; i < nlive; i++)
		if (model[i].finalized)
			ck_assert_uint_eq((uint32_t)tu_as_fn(model[i].exec)(), model[i].value);
	ck_assert_int_eq(tu_count_wx_mappings(), 0);
}

/* body: nops, then "return value" at the end of size bytes */
static void emit(unsigned char *rw, size_t size, uint32_t value)
{
	tu_emit_sized(rw, size, value);
}

START_TEST(test_random_failures)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD, .pack_size = 16384 };
	struct ep_pool *p;
	unsigned seed = 4242u + (unsigned)_i;
	unsigned char staging[MAXLIVE][20000];
	int failures = 0;

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	nlive = 0;
	/* (a quarter with EP_TEST_QUICK=1: Valgrind, the arm64 stage) */
	const char *q = getenv("EP_TEST_QUICK");
	const int steps = q && *q && strcmp(q, "0") != 0 ? 750 : 3000;

	for (int step = 0; step < steps; step++) {
		struct ep_stats before = stats_of(p);
		int armed = rnd(&seed) % 3 == 0;

		ep_inject_countdown = armed ? (int)(rnd(&seed) % 2) : -1;
		ep_inject_errno = (rnd(&seed) % 2) ? ENOMEM : EIO;
		unsigned fired0 = ep_inject_fired;
		unsigned op = rnd(&seed) % 10;
		int rc = 0;

		if (op < 4 && nlive < MAXLIVE) {
			/* alloc: small, or larger than a pack */
			size_t size = rnd(&seed) % 8 ? 6 + rnd(&seed) % 3000 : 16385 + rnd(&seed) % 3000;
			struct ep_image img;

			rc = ep_alloc(p, size, &img);
			if (rc == 0) {
				model[nlive] = (struct live){ img.exec, size, 0, (uint32_t)step };
				emit(img.rw, size, (uint32_t)step);
				memcpy(staging[nlive], img.rw, size);
				nlive++;
			}
		} else if (op < 6 && nlive) {
			int k = (int)(rnd(&seed) % (unsigned)nlive);

			if (!model[k].finalized) {
				rc = ep_finalize(p, model[k].exec);
				if (rc == 0)
					model[k].finalized = 1;
				/* on failure the staging buffer is kept: a retry works later */
			}
		} else if (op < 8 && nlive) {
			int k = (int)(rnd(&seed) % (unsigned)nlive);
			uint32_t v = (uint32_t)step * 7u;

			rc = tu_patch_ret_imm(p, tu_ret_at(model[k].exec, model[k].size), v);
			if (rc == 0)
				model[k].value = v;
		} else if (nlive) {
			int k = (int)(rnd(&seed) % (unsigned)nlive);

			rc = ep_free(p, model[k].exec);
			if (rc == 0) {
				model[k] = model[--nlive];
				memcpy(staging[k], staging[nlive], sizeof(staging[k]));
			}
		}
		int fired = ep_inject_fired != fired0;

		ep_inject_countdown = -1;
		if (fired) {
			failures++;
			ck_assert_msg(rc < 0, "step %d op %u: injected failure not reported", step, op);
			ck_assert_msg(rc == -ENOMEM || rc == -EIO, "step %d: rc %d", step, rc);
			struct ep_stats after = stats_of(p);

			/* a failed call leaves no trace */
			ck_assert_uint_eq(after.live_allocs, before.live_allocs);
			ck_assert_uint_eq(after.used_bytes, before.used_bytes);
			ck_assert_uint_eq(after.large_allocs, before.large_allocs);
			ck_assert_uint_eq(after.large_bytes, before.large_bytes);
		} else {
			ck_assert_msg(rc == 0, "step %d op %u: %s", step, op, ep_strerror(rc));
		}
		check_model(p);
	}
	ck_assert_int_gt(failures, steps / 30); /* the injections did bite */
	/* everything left can still be finalized and freed */
	for (int i = 0; i < nlive; i++) {
		if (!model[i].finalized)
			ck_assert_int_eq(ep_finalize(p, model[i].exec), 0);
		ck_assert_int_eq(ep_free(p, model[i].exec), 0);
	}
	struct ep_stats st = stats_of(p);

	ck_assert_uint_eq(st.live_allocs + st.used_bytes + st.large_allocs, 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_failed_finalize_then_retry)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *p;
	struct ep_image img;

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	ck_assert_int_eq(ep_alloc(p, 6, &img), 0);
	tu_emit_ret_imm(img.rw, 8);
	ep_inject_errno = ENOMEM; /* (not what a test before left) */
	ep_inject_countdown = 0;
	ck_assert_int_eq(ep_finalize(p, img.exec), -ENOMEM);
	ck_assert(tu_is_trap(img.exec, TU_RET_LEN)); /* nothing half-copied */
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);        /* staging was kept */
	ck_assert_int_eq(tu_as_fn(img.exec)(), 8);
	ep_inject_countdown = 0;
	ck_assert_int_eq(ep_free(p, img.exec), -ENOMEM);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 8); /* still live and intact */
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	/* a failing new pack: nothing mapped, nothing counted */
	struct ep_image a, b;

	ck_assert_int_eq(ep_alloc(p, 2u << 20, &a), 0); /* fills the cached pack */
	ep_inject_countdown = 0;
	ck_assert_int_eq(ep_alloc(p, 64, &b), -ENOMEM);
	struct ep_stats st = stats_of(p);

	ck_assert_uint_eq(st.packs, 1);
	ck_assert_uint_eq(st.live_allocs, 1);
	ck_assert_int_eq(ep_alloc(p, 64, &b), 0);
	ck_assert_uint_eq(stats_of(p).packs, 2);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_failed_shrink_then_retry)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD, .limit = 4096 };
	struct ep_pool *p;
	struct ep_image img, other;

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	ck_assert_int_eq(ep_alloc(p, 4096, &img), 0);
	tu_fill_nops(img.rw, img.size);
	emit(img.rw, 100, 5);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	/* the refill of the tail fails: nothing given back, nothing changed */
	ep_inject_errno = ENOMEM;
	ep_inject_countdown = 0;
	ck_assert_int_eq(ep_shrink(p, img.exec, 100), -ENOMEM);
	ck_assert_uint_eq(stats_of(p).used_bytes, 4096);
	ck_assert_int_eq(ep_alloc(p, 64, &other), -EPERM); /* still charged */
	ck_assert(tu_is_nops((char *)img.exec + 4095, 1));
	ck_assert_int_eq(tu_as_fn(img.exec)(), 5);
	ck_assert_int_eq(ep_shrink(p, img.exec, 100), 0);
	ck_assert_uint_eq(stats_of(p).used_bytes, 128);
	ck_assert(tu_is_trap((char *)img.exec + 128, 1));
	ck_assert_int_eq(tu_as_fn(img.exec)(), 5);
	ck_assert_int_eq(ep_alloc(p, 64, &other), 0);
	ep_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("inject");
	TCase *tc = tcase_create("failures");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_random_failures, 0, 3);
	tcase_add_test(tc, test_failed_finalize_then_retry);
	tcase_add_test(tc, test_failed_shrink_then_retry);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
