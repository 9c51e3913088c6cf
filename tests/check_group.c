/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_group.c - ep_finalize_group(): all members finalized, or (a copy
 * failing, injected, at each member in turn) none, each still staged with
 * its bytes and its chunks holding traps; members of two threads' heaps;
 * more members than fit on the stack.  ep_keep_staging() and
 * ep_release_staging(): the kept buffer still holds the bytes written
 * after ep_finalize(), a group and ep_finalize_size(), ep_lookup() maps it
 * and a patch window opens in it; it goes back at release and at free (the
 * next allocation of its size gets the very buffer) and with the pool;
 * ep_shrink() narrows its map.  A group in a fork() child.  Bad input.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "execpack.h"
#include "inject-backend.h"
#include "testutil.h"

#define PACK (64u << 10)
#define LARGE (PACK + 4096u) /* its own mapping */

static struct ep_pool *g_pool; /* (test_two_heaps' other thread) */

static struct ep_pool *make_pool(unsigned flags)
{
	return tu_pool((struct ep_config){ .backend = EP_BACKEND_MEMFD, .pack_size = PACK,
					   .flags = flags });
}

/* A staged "return imm" of size bytes (not finalized). */
static struct ep_image stage(struct ep_pool *p, size_t size, uint32_t imm)
{
	struct ep_image img;
	int rc = ep_alloc(p, size, &img);

	ck_assert_msg(rc == 0, "ep_alloc(%zu): %s", size, ep_strerror(rc));
	tu_emit_sized(img.rw, size, imm);
	return img;
}

static unsigned info_flags(const void *exec)
{
	struct ep_info info;

	ck_assert_int_eq(ep_lookup(exec, &info), 0);
	ck_assert_ptr_eq(info.exec, exec);
	return info.flags;
}

static int is_staged(const void *exec)
{
	return !(info_flags(exec) & EP_INFO_FINALIZED);
}

/* Whether rw holds "return imm" of size bytes as stage() wrote it. */
static int holds(const unsigned char *rw, size_t size, uint32_t imm)
{
	unsigned char want[LARGE];

	tu_emit_sized(want, size, imm);
	return memcmp(rw, want, size) == 0;
}

START_TEST(test_group_runs)
{
	struct ep_pool *p = make_pool(0);
	struct ep_image m[3] = { stage(p, 100, 11), stage(p, 700, 22), stage(p, LARGE, 33) };
	void *execs[3] = { m[0].exec, m[1].exec, m[2].exec };

	for (int i = 0; i < 3; i++)
		ck_assert(is_staged(execs[i]));
	ck_assert_int_eq(ep_finalize_group(p, execs, 3), 0);
	ck_assert_uint_eq(tu_as_fn(m[0].exec)(), 11);
	ck_assert_uint_eq(tu_as_fn(m[1].exec)(), 22);
	ck_assert_uint_eq(tu_as_fn(m[2].exec)(), 33);
	for (int i = 0; i < 3; i++) {
		ck_assert(!is_staged(execs[i]));
		ck_assert_int_eq(ep_finalize(p, execs[i]), -EINVAL); /* once only */
	}
	ck_assert_int_eq(ep_finalize_group(p, execs, 3), -EINVAL);
	ck_assert_int_eq(tu_count_wx_mappings(), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(ep_free(p, execs[i]), 0);
	ep_pool_destroy(p);
}
END_TEST

/* _i: the copy that fails (members in address order: the group copies
 * them so), with the pool's kept staging (bit 2) or the members' own. */
START_TEST(test_all_or_nothing)
{
	unsigned flags = (_i & 4) ? EP_F_KEEP_STAGING : 0;
	struct ep_pool *p = make_pool(flags);
	const size_t sizes[3] = { 200, 3000, LARGE };
	const uint32_t imms[3] = { 0x101, 0x202, 0x303 };
	struct ep_image m[3];
	void *execs[3];

	for (int i = 0; i < 3; i++) {
		m[i] = stage(p, sizes[i], imms[i]);
		execs[i] = m[i].exec;
		if (!flags)
			ck_assert_int_eq(ep_keep_staging(p, execs[i]), 0);
	}
	ep_inject_errno = EIO;
	ep_inject_countdown = _i & 3; /* (only the copies call the backend) */
	unsigned fired = ep_inject_fired;

	ck_assert_int_eq(ep_finalize_group(p, execs, 3), -EIO);
	ck_assert_uint_eq(ep_inject_fired, fired + 1);
	ep_inject_countdown = -1;
	for (int i = 0; i < 3; i++) {
		struct ep_info info;

		ck_assert_msg(is_staged(execs[i]), "member %d finalized", i);
		ck_assert(holds(m[i].rw, sizes[i], imms[i]));
		/* a copy made before the failure was undone: traps again */
		ck_assert_msg(tu_is_trap(execs[i], sizes[i]), "member %d: code left", i);
		ck_assert_int_eq(ep_lookup_rw(m[i].rw, &info), 0);
		ck_assert_ptr_eq(info.exec, execs[i]);
		ck_assert_ptr_eq(info.rw, m[i].rw);
	}
	/* nothing lost: the same group goes through now */
	ck_assert_int_eq(ep_finalize_group(p, execs, 3), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(tu_as_fn(execs[i])(), imms[i]);
		ck_assert(holds(m[i].rw, sizes[i], imms[i])); /* kept */
	}
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(ep_free(p, execs[i]), 0);
	ep_pool_destroy(p);
}
END_TEST

/* A failure before any copy (validation): nothing changes either. */
START_TEST(test_bad_member_changes_nothing)
{
	struct ep_pool *p = make_pool(0), *q = make_pool(0);
	struct ep_image a = stage(p, 100, 1), b = stage(p, 100, 2), c = stage(p, 100, 3);
	struct ep_image other = stage(q, 100, 4);
	void *done[1] = { c.exec };

	ck_assert_int_eq(ep_finalize_group(p, done, 1), 0);
	void *dup[3] = { a.exec, b.exec, a.exec };
	void *fin[3] = { a.exec, c.exec, b.exec };
	void *foreign[2] = { a.exec, other.exec };
	void *inside[2] = { a.exec, (char *)b.exec + 16 };
	void *null[2] = { a.exec, NULL };

	ck_assert_int_eq(ep_finalize_group(p, dup, 3), -EINVAL);
	ck_assert_int_eq(ep_finalize_group(p, fin, 3), -EINVAL);
	ck_assert_int_eq(ep_finalize_group(p, foreign, 2), -EINVAL);
	ck_assert_int_eq(ep_finalize_group(p, inside, 2), -EINVAL);
	ck_assert_int_eq(ep_finalize_group(p, null, 2), -EINVAL);
	ck_assert_int_eq(ep_finalize_group(p, dup, 0), -EINVAL);
	ck_assert_int_eq(ep_finalize_group(p, NULL, 1), -EINVAL);
	ck_assert_int_eq(ep_finalize_group(NULL, dup, 1), -EINVAL);
	ck_assert(is_staged(a.exec) && is_staged(b.exec) && is_staged(other.exec));
	ck_assert(tu_is_trap(a.exec, 100) && tu_is_trap(b.exec, 100));
	void *ok[2] = { b.exec, a.exec };

	ck_assert_int_eq(ep_finalize_group(p, ok, 2), 0);
	ck_assert_uint_eq(tu_as_fn(a.exec)(), 1);
	ck_assert_uint_eq(tu_as_fn(b.exec)(), 2);
	ep_pool_destroy(q);
	ep_pool_destroy(p);
}
END_TEST

/* More members than the call keeps on its stack. */
START_TEST(test_many_members)
{
	struct ep_pool *p = make_pool(0);
	enum { N = 40 };
	void *execs[N];

	for (unsigned i = 0; i < N; i++)
		execs[i] = stage(p, 64 + 32 * i, 1000 + i).exec;
	ck_assert_int_eq(ep_finalize_group(p, execs, N), 0);
	for (unsigned i = 0; i < N; i++)
		ck_assert_uint_eq(tu_as_fn(execs[i])(), 1000 + i);
	ep_pool_destroy(p);
}
END_TEST

static void *stage_in_thread(void *arg)
{
	struct ep_image *img = arg;

	*img = stage(g_pool, 300, 77);
	return NULL;
}

/* Members of two heaps (one allocated by another thread). */
START_TEST(test_two_heaps)
{
	struct ep_pool *p = make_pool(0);
	struct ep_image mine = stage(p, 300, 66), theirs;
	pthread_t t;

	g_pool = p;
	ck_assert_int_eq(pthread_create(&t, NULL, stage_in_thread, &theirs), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	void *execs[2] = { theirs.exec, mine.exec };

	ck_assert_int_eq(ep_finalize_group(p, execs, 2), 0);
	ck_assert_uint_eq(tu_as_fn(mine.exec)(), 66);
	ck_assert_uint_eq(tu_as_fn(theirs.exec)(), 77);
	ck_assert_int_eq(ep_free(p, theirs.exec), 0);
	ep_pool_destroy(p);
}
END_TEST

/* The kept buffer after each way of finalizing: _i 0 ep_finalize(), 1 a
 * group, 2 ep_finalize_size(); bit 2: a large allocation. */
START_TEST(test_keep_staging)
{
	struct ep_pool *p = make_pool(0);
	size_t size = (_i & 4) ? LARGE : 1000;
	struct ep_image img = stage(p, size, 0x4242);
	struct ep_info info;
	void *w;

	ck_assert_int_eq(ep_keep_staging(p, img.exec), 0);
	ck_assert_int_eq(ep_keep_staging(p, img.exec), 0); /* (asked twice: kept once) */
	switch (_i & 3) {
	case 0:
		ck_assert_int_eq(ep_finalize(p, img.exec), 0);
		break;
	case 1:
		ck_assert_int_eq(ep_finalize_group(p, &img.exec, 1), 0);
		break;
	default:
		ck_assert_int_eq(ep_finalize_size(p, img.exec, size), 0);
		break;
	}
	ck_assert_uint_eq(tu_as_fn(img.exec)(), 0x4242);
	ck_assert(holds(img.rw, size, 0x4242));
	ck_assert_int_eq(ep_keep_staging(p, img.exec), -EINVAL); /* too late */
	ck_assert_int_eq(ep_lookup(img.exec, &info), 0);
	ck_assert(info.flags & EP_INFO_FINALIZED);
	ck_assert_ptr_eq(info.patch_exec, img.exec);
	ck_assert_ptr_eq(info.patch_rw, img.rw);
	ck_assert_int_eq(ep_lookup_rw((char *)img.rw + 8, &info), 0);
	ck_assert_ptr_eq(info.exec, img.exec);
	/* a window opens in the kept copy, and holds it while open */
	ck_assert_int_eq(ep_patch_begin(p, img.exec, 16, &w), 0);
	ck_assert_ptr_eq(w, img.rw);
	ck_assert_int_eq(ep_release_staging(p, img.exec), -EBUSY);
	ck_assert_int_eq(ep_patch_abort(p, img.exec), 0);
	ck_assert_int_eq(ep_release_staging(p, img.exec), 0);
	ck_assert_int_eq(ep_release_staging(p, img.exec), -EINVAL); /* none kept now */
	ck_assert_int_eq(ep_lookup(img.exec, &info), 0);
	ck_assert_ptr_null(info.patch_exec);
	ck_assert_int_eq(ep_lookup_rw((char *)img.rw + 8, &info), -ENOENT);
	/* a window has a buffer of its own now */
	ck_assert_int_eq(ep_patch_begin(p, img.exec, 16, &w), 0);
	ck_assert_ptr_ne(w, img.rw);
	ck_assert_int_eq(ep_patch_abort(p, img.exec), 0);
	ck_assert_uint_eq(tu_as_fn(img.exec)(), 0x4242);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ep_pool_destroy(p);
}
END_TEST

/* Released (_i 0) or freed (_i 1), the buffer goes back: the next
 * allocation of its size is staged in it. */
START_TEST(test_kept_goes_back)
{
	struct ep_pool *p = make_pool(0);
	struct ep_image img = stage(p, 1000, 5), next;
	struct ep_info info;

	ck_assert_int_eq(ep_keep_staging(p, img.exec), 0);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	/* (not given back at ep_finalize(): this one gets a buffer of its own) */
	next = stage(p, 1000, 6);
	ck_assert_ptr_ne(next.rw, img.rw);
	ck_assert_int_eq(ep_free(p, next.exec), 0);
	ck_assert_int_eq(ep_lookup_rw(img.rw, &info), 0);
	ck_assert_int_eq(_i ? ep_free(p, img.exec) : ep_release_staging(p, img.exec), 0);
	next = stage(p, 1000, 7);
	ck_assert_uint_eq((uintptr_t)next.rw / EP_STAGE_ALIGN, (uintptr_t)img.rw / EP_STAGE_ALIGN);
	ck_assert_int_eq(ep_finalize(p, next.exec), 0);
	ck_assert_uint_eq(tu_as_fn(next.exec)(), 7);
	ep_pool_destroy(p);
}
END_TEST

/* Withdrawn before ep_finalize(): nothing is kept; the pool's flag keeps
 * its copy whatever the allocation asked, and that copy can be released. */
START_TEST(test_release_before_finalize)
{
	struct ep_pool *p = make_pool(0), *k = make_pool(EP_F_KEEP_STAGING);
	struct ep_image img = stage(p, 500, 8), kimg = stage(k, 500, 9);
	struct ep_info info;

	ck_assert_int_eq(ep_release_staging(p, img.exec), -EINVAL); /* none asked */
	ck_assert_int_eq(ep_keep_staging(p, img.exec), 0);
	ck_assert_int_eq(ep_release_staging(p, img.exec), 0);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(ep_lookup(img.exec, &info), 0);
	ck_assert_ptr_null(info.patch_exec);
	ck_assert_int_eq(ep_release_staging(p, img.exec), -EINVAL);

	ck_assert_int_eq(ep_keep_staging(k, kimg.exec), 0);
	ck_assert_int_eq(ep_release_staging(k, kimg.exec), 0);
	ck_assert_int_eq(ep_finalize(k, kimg.exec), 0);
	ck_assert(holds(kimg.rw, 500, 9)); /* the pool's flag */
	ck_assert_int_eq(ep_release_staging(k, kimg.exec), 0);
	ck_assert_int_eq(ep_lookup(kimg.exec, &info), 0);
	ck_assert_ptr_null(info.patch_exec);
	ep_pool_destroy(k);
	ep_pool_destroy(p);
}
END_TEST

/* ep_shrink() after finalizing: the kept copy maps only what is left. */
START_TEST(test_kept_after_shrink)
{
	struct ep_pool *p = make_pool(0);
	struct ep_image img = stage(p, 1000, 12);
	struct ep_info info;

	ck_assert_int_eq(ep_keep_staging(p, img.exec), 0);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(ep_lookup(img.exec, &info), 0);
	ck_assert_uint_eq(info.patch_len, info.size);
	ck_assert_int_eq(ep_shrink(p, img.exec, 64), 0);
	ck_assert_int_eq(ep_lookup(img.exec, &info), 0);
	ck_assert_uint_eq(info.size, 64);
	ck_assert_uint_eq(info.patch_len, 64);
	ck_assert_ptr_eq(info.patch_rw, img.rw);
	ck_assert(memcmp(img.rw, img.exec, 64) == 0); /* (the code left, as it was) */
	ep_pool_destroy(p); /* (a kept buffer of a live allocation goes with it) */
}
END_TEST

/* In a fork() child: the group makes the child's own copies of the
 * regions first; the parent's members stay staged, its chunks traps. */
START_TEST(test_group_in_child)
{
	struct ep_pool *p = make_pool(0);
	struct ep_image a = stage(p, 300, 41), b = stage(p, LARGE, 42);
	void *execs[2] = { a.exec, b.exec };
	int status;

	ck_assert_int_eq(ep_keep_staging(p, a.exec), 0);
	pid_t pid = fork();

	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		int ok = ep_finalize_group(p, execs, 2) == 0 && tu_as_fn(a.exec)() == 41 &&
			 tu_as_fn(b.exec)() == 42 && holds(a.rw, 300, 41) &&
			 ep_release_staging(p, a.exec) == 0;

		_exit(ok ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %#x", status);
	ck_assert(is_staged(a.exec) && is_staged(b.exec));
	ck_assert(tu_is_trap(a.exec, 300) && tu_is_trap(b.exec, LARGE));
	ck_assert_int_eq(ep_finalize_group(p, execs, 2), 0);
	ck_assert_uint_eq(tu_as_fn(b.exec)(), 42);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_bad_input)
{
	struct ep_pool *p = make_pool(0);
	struct ep_image img = stage(p, 200, 3);
	int x;

	ck_assert_int_eq(ep_keep_staging(NULL, img.exec), -EINVAL);
	ck_assert_int_eq(ep_keep_staging(p, NULL), -EINVAL);
	ck_assert_int_eq(ep_keep_staging(p, (char *)img.exec + 64), -EINVAL);
	ck_assert_int_eq(ep_keep_staging(p, &x), -EINVAL);
	ck_assert_int_eq(ep_release_staging(NULL, img.exec), -EINVAL);
	ck_assert_int_eq(ep_release_staging(p, NULL), -EINVAL);
	ck_assert_int_eq(ep_release_staging(p, &x), -EINVAL);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ck_assert_int_eq(ep_keep_staging(p, img.exec), -EINVAL); /* freed */
	ck_assert_int_eq(ep_release_staging(p, img.exec), -EINVAL);
	ep_pool_destroy(p);
}
END_TEST

int main(void)
{
	tu_need_pool();
	Suite *s = suite_create("group");
	TCase *tc = tcase_create("group");

	tcase_add_test(tc, test_group_runs);
	tcase_add_loop_test(tc, test_all_or_nothing, 0, 3);
	tcase_add_loop_test(tc, test_all_or_nothing, 4, 7);
	tcase_add_test(tc, test_bad_member_changes_nothing);
	tcase_add_test(tc, test_many_members);
	tcase_add_test(tc, test_two_heaps);
	tcase_add_loop_test(tc, test_keep_staging, 0, 3);
	tcase_add_loop_test(tc, test_keep_staging, 4, 7);
	tcase_add_loop_test(tc, test_kept_goes_back, 0, 2);
	tcase_add_test(tc, test_release_before_finalize);
	tcase_add_test(tc, test_kept_after_shrink);
	tcase_add_test(tc, test_group_in_child);
	tcase_add_test(tc, test_bad_input);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
