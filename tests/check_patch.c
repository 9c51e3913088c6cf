/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_patch.c - the patch window (ep_patch_begin/commit/abort) and
 * EP_F_KEEP_STAGING: what commit writes (the changed words only), abort,
 * a thread running the code while its instruction words flip, the window
 * against free (own thread and another; the free releases its buffers), write,
 * shrink and a second begin, every backend that runs here, and every bad
 * input.
 */
#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "execpack.h"
#include "testutil.h"

/* Two values whose "return imm" differ in one instruction word on every
 * architecture (x86-64: the imm32; arm64: the movz; riscv64: the addiw). */
#define VAL_A 0x111u
#define VAL_B 0x222u

static struct ep_pool *make_pool_on(enum ep_backend be, unsigned flags)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = be, .flags = flags };
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(&cfg, &p);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	return p;
}

static struct ep_pool *make_pool(unsigned flags)
{
	return make_pool_on(EP_BACKEND_MEMFD, flags);
}

/* A finalized "return v" of size bytes (nops before it); *exec its start. */
static void *publish(struct ep_pool *p, size_t size, uint32_t v)
{
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(p, size, &img), 0);
	tu_emit_ret_imm(img.rw, v);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	return img.exec;
}

START_TEST(test_commit_changes_code)
{
	struct ep_pool *p = make_pool(0);
	void *x = publish(p, 64, VAL_A), *rw = NULL;

	ck_assert_int_eq(tu_as_fn(x)(), (int)VAL_A);
	ck_assert_int_eq(ep_patch_begin(p, x, TU_RET_LEN, &rw), 0);
	ck_assert_ptr_nonnull(rw);
	ck_assert_uint_eq((uintptr_t)rw % 64, (uintptr_t)x % 64);
	ck_assert_int_eq(memcmp(rw, x, TU_RET_LEN), 0); /* the live bytes */
	tu_emit_ret_imm(rw, VAL_B);
	ck_assert_int_eq(tu_as_fn(x)(), (int)VAL_A); /* not before commit */
	ck_assert_int_eq(ep_patch_commit(p, x), 0);
	ck_assert_int_eq(tu_as_fn(x)(), (int)VAL_B);
	/* closed: a second commit or abort finds no window */
	ck_assert_int_eq(ep_patch_commit(p, x), -EINVAL);
	ck_assert_int_eq(ep_patch_abort(p, x), -EINVAL);
	/* and a new one may open */
	ck_assert_int_eq(ep_patch_begin(p, x, TU_RET_LEN, &rw), 0);
	ck_assert_int_eq(ep_patch_abort(p, x), 0);
	ck_assert_int_eq(ep_free(p, x), 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_abort_writes_nothing)
{
	struct ep_pool *p = make_pool(0);
	void *x = publish(p, 200, VAL_A), *rw;
	unsigned char before[200];

	memcpy(before, x, sizeof(before));
	ck_assert_int_eq(ep_patch_begin(p, x, 200, &rw), 0);
	memset(rw, 0, 200);
	ck_assert_int_eq(ep_patch_abort(p, x), 0);
	ck_assert_int_eq(memcmp(before, x, sizeof(before)), 0);
	ck_assert_int_eq(tu_as_fn(x)(), (int)VAL_A);
	ep_pool_destroy(p);
}
END_TEST

/* Only the bytes the window changed are written: a byte ep_write() changed
 * meanwhile, which the window left alone, keeps its new value, even in the
 * same word as a changed one. */
START_TEST(test_commit_only_changes)
{
	struct ep_pool *p = make_pool(0);
	void *x = publish(p, 128, VAL_A), *rw;
	unsigned char *c = x;
	unsigned char nb = tu_nop_byte(c + 65), tb = tu_trap_byte(c + 66);

	ck_assert_int_eq(ep_patch_begin(p, c + 64, 32, &rw), 0);
	ck_assert_uint_eq((uintptr_t)rw % 64, 0);
	ck_assert_int_eq(ep_write(p, c + 65, &nb, 1), 0); /* outside the window's changes */
	((unsigned char *)rw)[2] = tb;                    /* c + 66 */
	ck_assert_int_eq(ep_patch_commit(p, c + 64), 0);
	ck_assert_uint_eq(c[65], nb);
	ck_assert_uint_eq(c[66], tb);
	ck_assert_int_eq(tu_as_fn(x)(), (int)VAL_A);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_errors)
{
	struct ep_pool *p = make_pool(0), *q = make_pool(0);
	struct ep_image img;
	void *rw = (void *)1;
	void *x = publish(p, 100, VAL_A);
	unsigned char *c = x;

	/* bad arguments, len 0 */
	ck_assert_int_eq(ep_patch_begin(NULL, x, 4, &rw), -EINVAL);
	ck_assert_int_eq(ep_patch_begin(p, NULL, 4, &rw), -EINVAL);
	ck_assert_int_eq(ep_patch_begin(p, x, 4, NULL), -EINVAL);
	ck_assert_int_eq(ep_patch_begin(p, x, 0, &rw), -EINVAL);
	/* another pool's code, an address of no pool */
	ck_assert_int_eq(ep_patch_begin(q, x, 4, &rw), -EINVAL);
	ck_assert_int_eq(ep_patch_begin(p, &img, 4, &rw), -EINVAL);
	/* a range that crosses the allocation's end (128 bytes) */
	ck_assert_int_eq(ep_patch_begin(p, c + 100, 29, &rw), -EINVAL);
	ck_assert_int_eq(ep_patch_begin(p, c + 100, 28, &rw), 0);
	/* a second window on the same allocation, anywhere in it */
	ck_assert_int_eq(ep_patch_begin(p, x, 4, &rw), -EBUSY);
	ck_assert_int_eq(ep_patch_begin(p, c + 100, 4, &rw), -EBUSY);
	/* commit and abort at an exec that is not the window's */
	ck_assert_int_eq(ep_patch_commit(p, x), -EINVAL);
	ck_assert_int_eq(ep_patch_abort(p, c + 101), -EINVAL);
	ck_assert_int_eq(ep_patch_commit(q, c + 100), -EINVAL);
	ck_assert_int_eq(ep_patch_commit(NULL, c + 100), -EINVAL);
	ck_assert_int_eq(ep_patch_abort(p, NULL), -EINVAL);
	ck_assert_int_eq(ep_patch_abort(p, c + 100), 0);
	/* before ep_finalize(): the staging buffer is the place to write */
	ck_assert_int_eq(ep_alloc(p, 64, &img), 0);
	ck_assert_int_eq(ep_patch_begin(p, img.exec, 4, &rw), -EINVAL);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(ep_patch_begin(p, img.exec, 4, &rw), 0);
	ck_assert_int_eq(ep_patch_commit(p, img.exec), 0);
	/* a range that is not live any more */
	ck_assert_int_eq(ep_free(p, x), 0);
	ck_assert_int_eq(ep_patch_begin(p, x, 4, &rw), -EINVAL);
	ck_assert_int_eq(ep_patch_begin(p, c + 100, 4, &rw), -EINVAL);
	ep_pool_destroy(q);
	ep_pool_destroy(p);
}
END_TEST

/* The window against shrink and free on the caller's thread. */
START_TEST(test_window_and_life)
{
	struct ep_pool *p = make_pool(0);
	void *x = publish(p, 256, VAL_A), *rw;
	unsigned char *c = x;
	struct ep_info info;
	struct ep_stats st;

	ck_assert_int_eq(ep_patch_begin(p, c + 128, 64, &rw), 0);
	/* a shrink that would cut the window off: refused; one that keeps it: done */
	ck_assert_int_eq(ep_shrink(p, x, 100), -EBUSY);
	ck_assert_int_eq(ep_shrink(p, x, 192), 0);
	ck_assert_int_eq(ep_lookup_rw(rw, &info), 0);
	ck_assert_ptr_eq(info.exec, x);
	ck_assert_uint_eq(info.size, 192);
	ck_assert_ptr_eq(info.patch_exec, c + 128);
	ck_assert_ptr_eq(info.patch_rw, rw);
	ck_assert_uint_eq(info.patch_len, 64);
	/* a free closes the window: nothing of it is found afterwards */
	ck_assert_int_eq(ep_free(p, x), 0);
	ck_assert_int_eq(ep_lookup(c + 130, &info), -ENOENT);
	ck_assert_int_eq(ep_patch_commit(p, c + 128), -EINVAL);
	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ep_pool_destroy(p);
}
END_TEST

struct remote_free {
	struct ep_pool *p;
	void *x;
	int rc;
};

static void *free_there(void *arg)
{
	struct remote_free *r = arg;

	r->rc = ep_free(r->p, r->x);
	return NULL;
}

/* A free from another thread (which would take a plain allocation without
 * the heap's lock) of code with a window: the window is dropped, the chunks
 * come back, the trap fill is there. */
START_TEST(test_remote_free_with_window)
{
	struct ep_pool *p = make_pool(0);
	void *x = publish(p, 64, VAL_A), *rw;
	struct remote_free r = { p, x, 1 };
	pthread_t t;
	struct ep_stats st;

	ck_assert_int_eq(ep_patch_begin(p, x, 16, &rw), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, free_there, &r), 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(r.rc, 0);
	ck_assert(tu_is_trap(x, 64));
	ck_assert_int_eq(ep_patch_commit(p, x), -EINVAL);
	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ep_pool_destroy(p);
}
END_TEST

/* The bytes malloc() has handed out and not had back (0: it cannot say). */
static size_t malloc_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
#else
	return 0;
#endif
}

/* Whether malloc_in_use() sees blocks come and go: glibc's malloc, not one
 * that Valgrind or a sanitizer put in its place. */
static int malloc_counted(void)
{
	enum { N = 16, SZ = 16 * 1024 };
	void *b[N];
	size_t before = malloc_in_use(), during;

	for (int i = 0; i < N; i++)
		b[i] = malloc(SZ);
	during = malloc_in_use();
	for (int i = 0; i < N; i++)
		free(b[i]);
	return before && during >= before + (size_t)N * SZ;
}

/* Rounds of alloc, finalize, a window on the whole 4 KiB and the free with
 * the window open: every buffer of the window (and the kept staging
 * buffer) goes with the free, so the memory the process has from malloc()
 * stays flat.  Each round kept 8 KiB until ep_pool_destroy() (the window's
 * copy and its snapshot; with EP_F_KEEP_STAGING the whole staging buffer):
 * 166 MB over these 20,000. */
static void windows_freed_with_code(unsigned flags, int counted)
{
	enum { SIZE = 4096, WARM = 200, ROUNDS = 20000 };
	struct ep_pool *p = make_pool(flags);
	size_t base = 0;

	for (int i = 0; i < WARM + ROUNDS; i++) {
		struct ep_image img;
		void *rw;

		if (i == WARM)
			base = malloc_in_use(); /* (stash, spare records, tables made) */
		ck_assert_int_eq(ep_alloc(p, SIZE, &img), 0);
		tu_emit_ret_imm(img.rw, VAL_A);
		ck_assert_int_eq(ep_finalize(p, img.exec), 0);
		ck_assert_int_eq(ep_patch_begin(p, img.exec, SIZE, &rw), 0);
		tu_emit_ret_imm(rw, VAL_B);
		ck_assert_int_eq(ep_free(p, img.exec), 0);
		/* closed by the free: nothing to end */
		if (i == WARM) {
			ck_assert_int_eq(ep_patch_abort(p, img.exec), -EINVAL);
			ck_assert_int_eq(ep_patch_commit(p, img.exec), -EINVAL);
		}
	}
	size_t grew = malloc_in_use() - base;

	ck_assert_msg(!counted || grew < 256 * 1024, "%zu bytes more from malloc() after %d windows freed with "
		      "their code (flags %#x)", grew, ROUNDS, flags);
	ep_pool_destroy(p);
}

START_TEST(test_free_releases_window)
{
	int counted = malloc_counted();

	/* (the rounds run anyway: Valgrind's and the sanitizers' checks of
	 * the free with a window open) */
	if (!counted)
		printf("SKIP test_free_releases_window's bound: malloc() does not report its use "
		       "here (not glibc's, or Valgrind's or a sanitizer's in its place)\n");
	windows_freed_with_code(0, counted);
	windows_freed_with_code(EP_F_KEEP_STAGING, counted);
}
END_TEST

/* EP_F_KEEP_STAGING: the window opens in the staging buffer of ep_alloc(),
 * at the offset it had; ep_lookup() maps it; it goes with the free. */
START_TEST(test_keep_staging)
{
	struct ep_pool *p = make_pool(EP_F_KEEP_STAGING);
	struct ep_image img;
	void *rw;
	struct ep_info info;

	ck_assert_int_eq(ep_alloc(p, 300, &img), 0);
	tu_emit_sized(img.rw, 300, VAL_A);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(ep_lookup_rw((char *)img.rw + 10, &info), 0);
	ck_assert_ptr_eq(info.exec, img.exec);
	ck_assert_ptr_eq(info.patch_rw, img.rw);
	ck_assert_ptr_eq(info.patch_exec, img.exec);
	ck_assert_uint_eq(info.patch_len, img.size);
	ck_assert(info.flags & EP_INFO_FINALIZED);
	ck_assert_ptr_null(info.rw);
	void *ret = tu_ret_at(img.exec, 300);
	size_t off = (size_t)((char *)ret - (char *)img.exec);

	for (int i = 0; i < 3; i++) {
		uint32_t v = i & 1 ? VAL_A : VAL_B;

		ck_assert_int_eq(ep_patch_begin(p, ret, TU_RET_LEN, &rw), 0);
		ck_assert_ptr_eq(rw, (char *)img.rw + off); /* the same offset as at alloc */
		tu_emit_ret_imm(rw, v);
		ck_assert_int_eq(ep_patch_commit(p, ret), 0);
		ck_assert_int_eq(tu_as_fn(img.exec)(), (int)v);
	}
	/* the kept copy is refreshed from the live code at begin */
	uint32_t live = (uint32_t)tu_as_fn(img.exec)();
	unsigned char tmp[TU_RET_LEN];

	tu_emit_ret_imm(tmp, 7);
	ck_assert_int_eq(ep_write(p, ret, tmp, TU_INSN_ALIGN == 1 ? 5 : 4), 0);
	ck_assert_int_eq(ep_patch_begin(p, ret, TU_RET_LEN, &rw), 0);
	ck_assert_int_eq(memcmp(rw, ret, TU_RET_LEN), 0);
	ck_assert_int_eq(ep_patch_abort(p, ret), 0);
	(void)live;
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ck_assert_int_eq(ep_lookup_rw(img.rw, &info), -ENOENT);
	ep_pool_destroy(p);
}
END_TEST

struct runner {
	tu_fn fn;
	int stop; /* atomic */
	unsigned long calls, bad;
	int last_bad;
};

static void *run_loop(void *arg)
{
	struct runner *r = arg;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		int v = r->fn();

		r->calls++;
		if (v != (int)VAL_A && v != (int)VAL_B) {
			r->bad++;
			r->last_bad = v;
		}
	}
	return NULL;
}

/* A thread runs the code in a loop while commits flip its instruction word
 * between two values: it only ever sees one or the other; on every backend
 * that runs here, with and without kept staging. */
static void flip_under_runner(enum ep_backend be, unsigned flags)
{
	char why[256];

	if (ep_backend_probe(be, NULL, why, sizeof(why)) != 0)
		return; /* (reported by the caller's loop) */
	struct ep_pool *p = make_pool_on(be, flags);
	void *x = publish(p, 64, VAL_A), *rw;
	struct runner r = { .fn = tu_as_fn(x) };
	pthread_t t;
	int flips = RUNNING_ON_VALGRIND ? 200 : tu_quick() ? 2000 : 20000;

	ck_assert_int_eq(pthread_create(&t, NULL, run_loop, &r), 0);
	for (int i = 0; i < flips; i++) {
		ck_assert_int_eq(ep_patch_begin(p, x, TU_RET_LEN, &rw), 0);
		tu_emit_ret_imm(rw, i & 1 ? VAL_A : VAL_B);
		ck_assert_int_eq(ep_patch_commit(p, x), 0);
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	ck_assert_msg(r.bad == 0, "%s: %lu of %lu calls returned neither value (last %#x)",
		      ep_pool_backend(p), r.bad, r.calls, r.last_bad);
	ck_assert_int_eq(tu_as_fn(x)(), (int)((flips - 1) & 1 ? VAL_A : VAL_B));
	ep_pool_destroy(p);
}

START_TEST(test_flip_under_runner)
{
	static const enum ep_backend bes[] = { EP_BACKEND_MEMFD, EP_BACKEND_HUGETLB,
					       EP_BACKEND_KMOD };

	for (size_t i = 0; i < sizeof(bes) / sizeof(bes[0]); i++) {
		char why[256];

		if (ep_backend_probe(bes[i], NULL, why, sizeof(why)) != 0) {
			printf("SKIP backend: %s\n", why);
			continue;
		}
		flip_under_runner(bes[i], 0);
		flip_under_runner(bes[i], EP_F_KEEP_STAGING);
		flip_under_runner(bes[i], EP_F_NO_PKEY);
	}
}
END_TEST

/* Under the protection key the live code is written only inside the
 * library's own copies: a window's commit is one of them. */
START_TEST(test_under_pkey)
{
	struct ep_pool *p = make_pool(0);
	char why[256];

	if (!(ep_pool_guards(p, why, sizeof(why)) & EP_GUARD_PKEY)) {
		printf("SKIP pkey: %s\n", why);
		ep_pool_destroy(p);
		return;
	}
	void *x = publish(p, 64, VAL_A), *rw;

	ck_assert_int_eq(ep_patch_begin(p, x, TU_RET_LEN, &rw), 0);
	tu_emit_ret_imm(rw, VAL_B);
	ck_assert_int_eq(ep_patch_commit(p, x), 0);
	ck_assert_int_eq(tu_as_fn(x)(), (int)VAL_B);
	ep_pool_destroy(p);
}
END_TEST

/* Resident pages of [p, p+len), whole pages inside only. */
static size_t resident(const void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = 0;
	uintptr_t lo = ((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1);
	uintptr_t hi = ((uintptr_t)p + len) & ~(uintptr_t)(pg - 1);
	unsigned char vec[256];

	ck_assert_uint_le((hi - lo) / pg, sizeof(vec));
	if (hi <= lo)
		return 0;
	ck_assert_int_eq(mincore((void *)lo, hi - lo, vec), 0);
	for (size_t i = 0; i < (hi - lo) / pg; i++)
		n += vec[i] & 1;
	return n;
}

/* A kept copy is as long as the finalized code, not the request: an
 * emitter's upper bound of 256 KiB, 4 KiB used (ep_finalize_size()): the
 * kept buffer's pages past those go back; windows still work there, and
 * the buffer, stashed and handed out again, is filled. */
START_TEST(test_keep_staging_trimmed)
{
	struct ep_pool *p = make_pool(EP_F_KEEP_STAGING);
	struct ep_image img;
	struct ep_info in;
	const size_t want = 256 * 1024, used = 4096;
	void *rw;

	ck_assert_int_eq(ep_alloc(p, want, &img), 0);
	tu_fill_nops(img.rw, used);
	tu_emit_ret_imm(img.rw, VAL_A);
	memset((char *)img.rw + used, 0xcc, want - used); /* (all of it resident) */
	ck_assert_uint_gt(resident((char *)img.rw + used, want - used), 0);
	ck_assert_int_eq(ep_finalize_size(p, img.exec, used), 0);
	ck_assert_int_eq(ep_lookup(img.exec, &in), 0);
	ck_assert_ptr_eq(in.patch_rw, img.rw);
	ck_assert_uint_eq(in.patch_len, used);
	ck_assert_uint_eq(resident((char *)img.rw + used, want - used), 0);
	/* its first bytes are still a working copy */
	ck_assert_int_eq(ep_patch_begin(p, img.exec, TU_RET_LEN, &rw), 0);
	ck_assert_ptr_eq(rw, img.rw);
	tu_emit_ret_imm(rw, VAL_B);
	ck_assert_int_eq(ep_patch_commit(p, img.exec), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), (int)VAL_B);
	ck_assert_int_eq(ep_patch_begin(p, (char *)img.exec + used - 8, 8, &rw), 0);
	ck_assert_int_eq(ep_patch_abort(p, (char *)img.exec + used - 8), 0);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	/* the same size again: perhaps the same buffer, filled whole */
	struct ep_image again;

	ck_assert_int_eq(ep_alloc(p, want, &again), 0);
	ck_assert(tu_is_trap(again.rw, want));
	ck_assert_int_eq(ep_free(p, again.exec), 0);
	ep_pool_destroy(p);
}
END_TEST

/* A large allocation (its own mapping) and a randomized one. */
START_TEST(test_large_and_randomized)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .pack_size = 64 * 1024, .flags = EP_F_RANDOMIZE };
	struct ep_pool *p = NULL;

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	void *big = publish(p, 200 * 1024, VAL_A), *small = publish(p, 40, VAL_A), *rw;
	unsigned char *b = big;

	ck_assert_int_eq(ep_patch_begin(p, b, TU_RET_LEN, &rw), 0);
	ck_assert_uint_eq((uintptr_t)rw % 64, (uintptr_t)b % 64);
	tu_emit_ret_imm(rw, VAL_B);
	ck_assert_int_eq(ep_patch_commit(p, b), 0);
	ck_assert_int_eq(tu_as_fn(big)(), (int)VAL_B);
	ck_assert_int_eq(ep_patch_begin(p, b + 150 * 1024, 100, &rw), 0);
	ck_assert_int_eq(ep_patch_begin(p, b, 4, &rw), -EBUSY);
	ck_assert_int_eq(ep_patch_abort(p, b + 150 * 1024), 0);
	ck_assert_int_eq(ep_patch_begin(p, small, TU_RET_LEN, &rw), 0);
	tu_emit_ret_imm(rw, VAL_B);
	ck_assert_int_eq(ep_patch_commit(p, small), 0);
	ck_assert_int_eq(tu_as_fn(small)(), (int)VAL_B);
	ck_assert_int_eq(ep_free(p, big), 0);
	ck_assert_int_eq(ep_free(p, small), 0);
	ep_pool_destroy(p);
}
END_TEST

/* A window open across fork(): the child's commit changes the child's
 * code only (its own copy), the parent's window is still there; both look
 * their code up. */
START_TEST(test_fork)
{
	struct ep_pool *p = make_pool(0);
	void *x = publish(p, 64, VAL_A), *rw;
	struct ep_info in;

	ck_assert_int_eq(ep_set_name(p, x, "forked"), 0);
	ck_assert_int_eq(ep_patch_begin(p, x, TU_RET_LEN, &rw), 0);
	tu_emit_ret_imm(rw, VAL_B);
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int ok = ep_patch_commit(p, x) == 0 && tu_as_fn(x)() == (int)VAL_B &&
			 ep_lookup(x, &in) == 0 && !strcmp(in.name, "forked") &&
			 ep_patch_begin(p, x, 4, &rw) == 0 && ep_patch_abort(p, x) == 0;

		_exit(ok ? 0 : 1);
	}
	int status = 0;

	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %#x", status);
	ck_assert_int_eq(tu_as_fn(x)(), (int)VAL_A);
	ck_assert_int_eq(ep_lookup_rw(rw, &in), 0);
	ck_assert_ptr_eq(in.patch_rw, rw);
	ck_assert_int_eq(ep_patch_abort(p, x), 0);
	ep_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("patch");
	TCase *tc = tcase_create("patch");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_commit_changes_code);
	tcase_add_test(tc, test_abort_writes_nothing);
	tcase_add_test(tc, test_commit_only_changes);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_window_and_life);
	tcase_add_test(tc, test_remote_free_with_window);
	tcase_add_test(tc, test_free_releases_window);
	tcase_add_test(tc, test_keep_staging);
	tcase_add_test(tc, test_keep_staging_trimmed);
	tcase_add_test(tc, test_flip_under_runner);
	tcase_add_test(tc, test_under_pkey);
	tcase_add_test(tc, test_large_and_randomized);
	tcase_add_test(tc, test_fork);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
