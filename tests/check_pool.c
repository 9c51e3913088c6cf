/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_pool.c - the public calls of pool.c: real code JIT'd and called,
 * first fit, packing density, fills, limits, large allocations, stats and
 * every documented error, each followed by a check that other code is intact.
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "execpack.h"
#include "testutil.h"

static struct ep_pool *pool;

static struct ep_pool *make_pool(size_t pack_size, size_t limit, unsigned flags)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .pack_size = pack_size, .limit = limit, .flags = flags };
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(&cfg, &p);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	ck_assert_ptr_nonnull(p);
	return p;
}

static void setup(void)
{
	pool = make_pool(0, 0, 0);
}

static void teardown(void)
{
	ep_pool_destroy(pool);
	pool = NULL;
}

static struct ep_stats stats(struct ep_pool *p)
{
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	return st;
}

START_TEST(test_alloc_write_finalize_call)
{
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(pool, 40, &img), 0);
	ck_assert_ptr_nonnull(img.exec);
	ck_assert_ptr_nonnull(img.rw);
	ck_assert_ptr_ne(img.exec, img.rw);
	ck_assert_uint_ge(img.size, 40);
	ck_assert_uint_eq((uintptr_t)img.exec % 16, 0);
	/* staging is pre-filled with the trap fill */
	ck_assert(tu_is_trap(img.rw, img.size));
	tu_emit_ret_imm(img.rw, 42);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 42);
	ck_assert_int_eq(ep_free(pool, img.exec), 0);
	ck_assert_str_eq(ep_pool_backend(pool), "memfd");
}
END_TEST

START_TEST(test_default_pool)
{
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(NULL, &p);

	ck_assert_msg(rc == 0, "%s", ep_strerror(rc));
	const char *b = ep_pool_backend(p);

	ck_assert(!strcmp(b, "memfd") || !strcmp(b, "hugetlb") || !strcmp(b, "kmod"));
	int ok;
	void *f = tu_jit_ret(p, 6, 7, &ok);

	ck_assert_int_eq(ok, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 7);
	ck_assert_int_eq(ep_free(p, f), 0);
	ep_pool_destroy(p);
	ep_pool_destroy(NULL); /* harmless */
}
END_TEST

START_TEST(test_chunk_accounting)
{
	struct ep_image a, b, c;

	ck_assert_int_eq(ep_alloc(pool, 1, &a), 0);
	ck_assert_uint_eq(a.size, 64);
	ck_assert_uint_eq(stats(pool).used_bytes, 64);
	ck_assert_int_eq(ep_alloc(pool, 64, &b), 0);
	ck_assert_uint_eq(b.size, 64);
	ck_assert_int_eq(ep_alloc(pool, 65, &c), 0);
	ck_assert_uint_eq(c.size, 128);
	/* no header in executable memory: back to back */
	ck_assert_ptr_eq((char *)a.exec + 64, b.exec);
	ck_assert_ptr_eq((char *)b.exec + 64, c.exec);
	struct ep_stats st = stats(pool);

	ck_assert_uint_eq(st.used_bytes, 256);
	ck_assert_uint_eq(st.live_allocs, 3);
	ck_assert_uint_eq(st.packs, 1);
	/* committed bytes: a new pack's first page (ep_pool_stats(3)) */
	ck_assert_uint_eq(st.pack_bytes, tu_page());
	ck_assert_int_eq(ep_free(pool, a.exec), 0);
	ck_assert_int_eq(ep_free(pool, b.exec), 0);
	ck_assert_int_eq(ep_free(pool, c.exec), 0);
	st = stats(pool);
	ck_assert_uint_eq(st.used_bytes, 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.packs, 1); /* one empty pack stays cached */
}
END_TEST

START_TEST(test_first_fit_in_pack)
{
	struct ep_image im[6];

	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(ep_alloc(pool, 64, &im[i]), 0);
	ck_assert_int_eq(ep_free(pool, im[1].exec), 0);
	ck_assert_int_eq(ep_free(pool, im[3].exec), 0);
	ck_assert_int_eq(ep_free(pool, im[4].exec), 0);
	struct ep_image x, y, z;

	/* two chunks: the first hole (1) is too small, 3..4 fits */
	ck_assert_int_eq(ep_alloc(pool, 100, &x), 0);
	ck_assert_ptr_eq(x.exec, im[3].exec);
	/* one chunk: lowest hole */
	ck_assert_int_eq(ep_alloc(pool, 10, &y), 0);
	ck_assert_ptr_eq(y.exec, im[1].exec);
	/* next: after the last one */
	ck_assert_int_eq(ep_alloc(pool, 10, &z), 0);
	ck_assert_ptr_eq(z.exec, (char *)im[5].exec + 64);
}
END_TEST

START_TEST(test_first_fit_across_packs)
{
	/* packs of one page: 64 chunks each with 4 KiB pages */
	struct ep_pool *p = make_pool(tu_page(), 0, 0);
	static struct ep_image im[3][1024];
	size_t per = tu_page() / 64;

	for (int k = 0; k < 3; k++)
		for (size_t i = 0; i < per; i++)
			ck_assert_int_eq(ep_alloc(p, 64, &im[k][i]), 0);
	ck_assert_uint_eq(stats(p).packs, 3);
	/* packs are separate mappings; free one chunk in pack 2 and one in pack 1 */
	ck_assert_int_eq(ep_free(p, im[2][10].exec), 0);
	ck_assert_int_eq(ep_free(p, im[1][20].exec), 0);
	struct ep_image a, b, c;

	ck_assert_int_eq(ep_alloc(p, 64, &a), 0);
	ck_assert_ptr_eq(a.exec, im[1][20].exec); /* earlier-created pack first */
	ck_assert_int_eq(ep_alloc(p, 64, &b), 0);
	ck_assert_ptr_eq(b.exec, im[2][10].exec);
	/* nothing free now: a new pack */
	ck_assert_int_eq(ep_alloc(p, 128, &c), 0);
	ck_assert_uint_eq(stats(p).packs, 4);
	/* a two-chunk hole in pack 0 is used before the new pack's free space */
	ck_assert_int_eq(ep_free(p, im[0][5].exec), 0);
	ck_assert_int_eq(ep_free(p, im[0][6].exec), 0);
	struct ep_image d;

	ck_assert_int_eq(ep_alloc(p, 128, &d), 0);
	ck_assert_ptr_eq(d.exec, im[0][5].exec);
	ep_pool_destroy(p);
}
END_TEST

/*
 * First fit over hundreds of packs against a model: each pack a shadow
 * bitmap, searched by a plain walk in creation order, and the library's
 * rule for empty packs (the first kept, others released).  Every
 * allocation must land exactly where the walk says, through growth, churn,
 * a shrink that releases most packs and regrowth into the freed places.
 */
#define MF_PACK 16384 /* 256 chunks: four bitmap words per pack (a 16 KiB page) */
#define MF_CH (MF_PACK / 64)
#define MF_MAXP 1024
#define MF_MAXLIVE 6000

struct mf_pack {
	uintptr_t base;
	unsigned char used[MF_CH];
	size_t nfree;
	int cached;
};

struct mf_live {
	uintptr_t exec;
	size_t n;
};

static struct mf_pack mf_packs[MF_MAXP];
static size_t mf_np;
static int mf_ncached;
static struct mf_live mf_live[MF_MAXLIVE];
static size_t mf_nlive;
static uint64_t mf_rng = 0x2545f4914f6cdd1dull;

static uint64_t mf_next(void)
{
	mf_rng ^= mf_rng << 13;
	mf_rng ^= mf_rng >> 7;
	mf_rng ^= mf_rng << 17;
	return mf_rng;
}

/* The lowest run of n free chunks in the first pack that has one. */
static bool mf_find(size_t n, size_t *pk, size_t *pos)
{
	for (size_t k = 0; k < mf_np; k++) {
		if (mf_packs[k].nfree < n)
			continue;
		size_t run = 0;

		for (size_t i = 0; i < MF_CH; i++) {
			run = mf_packs[k].used[i] ? 0 : run + 1;
			if (run == n) {
				*pk = k;
				*pos = i + 1 - n;
				return true;
			}
		}
	}
	return false;
}

static size_t mf_pack_of(uintptr_t x)
{
	for (size_t k = 0; k < mf_np; k++)
		if (x >= mf_packs[k].base && x < mf_packs[k].base + MF_PACK)
			return k;
	return SIZE_MAX;
}

static void mf_alloc(struct ep_pool *p)
{
	/* mostly small, sometimes up to 48 chunks */
	size_t n = mf_next() % 8 ? 1 + mf_next() % 6 : 1 + mf_next() % 48;
	size_t size = n * 64 - mf_next() % 64, k, pos;
	struct ep_image im;

	ck_assert_int_eq(ep_alloc(p, size, &im), 0);
	uintptr_t x = (uintptr_t)im.exec;

	if (mf_find(n, &k, &pos)) {
		ck_assert_msg(x == mf_packs[k].base + pos * 64,
			      "%zu chunks: expected pack %zu chunk %zu, got pack %zu", n, k, pos,
			      mf_pack_of(x));
	} else {
		/* none fits: a new pack, at its start */
		ck_assert_uint_eq(mf_pack_of(x), SIZE_MAX);
		ck_assert_uint_lt(mf_np, MF_MAXP);
		k = mf_np++;
		pos = 0;
		memset(&mf_packs[k], 0, sizeof(mf_packs[k]));
		mf_packs[k].base = x;
		mf_packs[k].nfree = MF_CH;
	}
	struct mf_pack *m = &mf_packs[k];

	if (m->cached) {
		m->cached = 0;
		mf_ncached--;
	}
	memset(m->used + pos, 1, n);
	m->nfree -= n;
	if (mf_next() % 4 == 0) {
		memset(im.rw, 0xc3, size);
		ck_assert_int_eq(ep_finalize(p, im.exec), 0);
	}
	mf_live[mf_nlive++] = (struct mf_live){ x, n };
}

static void mf_free(struct ep_pool *p)
{
	size_t i = mf_next() % mf_nlive, k = mf_pack_of(mf_live[i].exec);
	struct mf_pack *m = &mf_packs[k];

	ck_assert_int_eq(ep_free(p, (void *)mf_live[i].exec), 0);
	memset(m->used + (mf_live[i].exec - m->base) / 64, 0, mf_live[i].n);
	m->nfree += mf_live[i].n;
	mf_live[i] = mf_live[--mf_nlive];
	if (m->nfree == MF_CH) {
		if (mf_ncached == 0) {
			m->cached = 1;
			mf_ncached++;
		} else {
			memmove(m, m + 1, (mf_np - k - 1) * sizeof(*m)); /* released */
			mf_np--;
		}
	}
}

START_TEST(test_first_fit_many_packs)
{
	struct ep_pool *p = make_pool(MF_PACK, 0, 0);
	/* live-set targets: grow, churn, shrink (most packs released), regrow */
	static const size_t goal[] = { 4500, 4500, 300, 5500, 1000 };
	size_t most = 0;

	mf_np = 0;
	mf_ncached = 0;
	mf_nlive = 0;
	for (size_t g = 0; g < sizeof(goal) / sizeof(goal[0]); g++) {
		for (int op = 0; op < 4000; op++) {
			/* drift toward the goal, with frees and allocations mixed */
			bool grow = mf_nlive < goal[g] ? mf_next() % 4 != 0 : mf_next() % 4 == 0;

			if (mf_nlive == 0 || (grow && mf_nlive < MF_MAXLIVE))
				mf_alloc(p);
			else
				mf_free(p);
			ck_assert_uint_eq(stats(p).packs, mf_np);
			if (mf_np > most)
				most = mf_np;
		}
	}
	ck_assert_uint_ge(most, 100); /* it did span a hundred packs and more */
	while (mf_nlive)
		mf_free(p);
	ck_assert_uint_eq(stats(p).packs, 1);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_pack_release_and_cache)
{
	struct ep_pool *p = make_pool(tu_page(), 0, 0);
	static struct ep_image im[3][1024];
	size_t per = tu_page() / 64;

	for (int k = 0; k < 3; k++)
		for (size_t i = 0; i < per; i++)
			ck_assert_int_eq(ep_alloc(p, 64, &im[k][i]), 0);
	ck_assert_uint_eq(stats(p).packs, 3);
	for (size_t i = 0; i < per; i++)
		ck_assert_int_eq(ep_free(p, im[0][i].exec), 0);
	ck_assert_uint_eq(stats(p).packs, 3); /* first empty pack: cached */
	for (size_t i = 0; i < per; i++)
		ck_assert_int_eq(ep_free(p, im[1][i].exec), 0);
	ck_assert_uint_eq(stats(p).packs, 2); /* second empty pack: released */
	ck_assert_uint_eq(stats(p).pack_bytes, 2 * tu_page());
	/* the code in the remaining pack is intact */
	for (size_t i = 0; i < per; i++)
		ck_assert_int_eq(ep_free(p, im[2][i].exec), 0);
	ck_assert_uint_eq(stats(p).packs, 1);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_ten_thousand_programs)
{
	enum { N = 10000 };
	void **fn = calloc(N, sizeof(*fn));
	unsigned seed = 7;
	size_t bytes = 0;

	ck_assert_ptr_nonnull(fn);
	for (int i = 0; i < N; i++) {
		seed = seed * 1103515245u + 12345u;
		size_t sz = 6 + (seed >> 16) % 200;
		int rc;

		bytes += (sz + 63) / 64 * 64;
		fn[i] = tu_jit_ret(pool, sz, (uint32_t)i * 3u + 1u, &rc);
		ck_assert_msg(rc == 0, "program %d: %s", i, ep_strerror(rc));
	}
	struct ep_stats st = stats(pool);

	ck_assert_uint_eq(st.live_allocs, N);
	ck_assert_uint_eq(st.used_bytes, bytes);
	/* tightly packed: exactly as many packs as the bytes need */
	ck_assert_uint_eq(st.packs, (bytes + (2u << 20) - 1) / (2u << 20));
	ck_assert_uint_le(st.packs, 2);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(tu_as_fn(fn[i])(), i * 3 + 1);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(ep_free(pool, fn[i]), 0);
	st = stats(pool);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ck_assert_uint_eq(st.packs, 1);
	free(fn);
}
END_TEST

START_TEST(test_fill_visible_through_exec)
{
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(pool, 40, &img), 0);
	tu_emit_ret_imm(img.rw, 5);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	const unsigned char *x = img.exec;

	unsigned char code[TU_RET_LEN];

	tu_emit_ret_imm(code, 5);
	ck_assert_int_eq(memcmp(x, code, TU_RET_LEN), 0);
	ck_assert(tu_is_trap(x + TU_RET_LEN, 64 - TU_RET_LEN)); /* tail of the chunk */
	ck_assert(tu_is_trap(x + 64, 4096 - 64));               /* never-used space */
	ck_assert_int_eq(ep_free(pool, img.exec), 0);
	/* the pack is cached (still mapped): the freed range was refilled */
	ck_assert(tu_is_trap(x, 64));
}
END_TEST

static void fill_hlt(void *dst, size_t len, void *ctx)
{
	memset(dst, 0xf4, len);
	(*(int *)ctx)++;
}

START_TEST(test_custom_fill)
{
	int calls = 0;
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .fill = fill_hlt, .fill_ctx = &calls };
	struct ep_pool *p;

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(p, 10, &img), 0);
	ck_assert_int_ge(calls, 2); /* new pack + staging */
	ck_assert_uint_eq(((unsigned char *)img.rw)[9], 0xf4);
	ck_assert_uint_eq(((unsigned char *)img.exec)[100], 0xf4);
	tu_emit_ret_imm(img.rw, 9);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 9);
	int before = calls;

	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ck_assert_int_gt(calls, before);
	ck_assert_uint_eq(((unsigned char *)img.exec)[0], 0xf4);
	ep_pool_destroy(p);

	unsigned char buf[5] = { 0 };

	ep_fill_x86_int3(buf, sizeof(buf), NULL);
	for (int i = 0; i < 5; i++)
		ck_assert_uint_eq(buf[i], 0xcc);
}
END_TEST

/* Every architecture's fill, on every architecture, by address. */
START_TEST(test_arch_fills)
{
	uint32_t words[4];
	unsigned char *b = (unsigned char *)words;

	ep_fill_arm64_brk(words, sizeof(words), NULL);
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(words[i], 0xd4207d00u); /* BRK #0x3e8 */
	/* a fill that starts inside a word lines up with the words */
	memset(words, 0xff, sizeof(words));
	ep_fill_arm64_brk(b + 3, 6, NULL);
	ck_assert_uint_eq(b[2], 0xff);
	ck_assert_uint_eq(b[3], 0xd4);
	ck_assert_uint_eq(words[1], 0xd4207d00u);
	ck_assert_uint_eq(b[8], 0x00);
	ck_assert_uint_eq(b[9], 0xff);

	uint16_t half[8];

	ep_fill_riscv_ebreak(half, sizeof(half), NULL);
	for (int i = 0; i < 8; i++)
		ck_assert_uint_eq(half[i], 0x9002); /* c.ebreak */
	memset(half, 0xff, sizeof(half));
	ep_fill_riscv_ebreak((unsigned char *)half + 1, 4, NULL);
	ck_assert_uint_eq(((unsigned char *)half)[0], 0xff);
	ck_assert_uint_eq(((unsigned char *)half)[1], 0x90);
	ck_assert_uint_eq(half[1], 0x9002);
	ck_assert_uint_eq(((unsigned char *)half)[4], 0x02);
	ck_assert_uint_eq(((unsigned char *)half)[5], 0xff);
	ep_fill_arm64_brk(NULL, 8, NULL);   /* NULL dst: nothing */
	ep_fill_riscv_ebreak(NULL, 8, NULL);

	/* a pool without a fill uses the running architecture's */
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *p;
	struct ep_image img;
	unsigned char want[64] __attribute__((aligned(64)));

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	ck_assert_int_eq(ep_alloc(p, 64, &img), 0);
	TU_FILL(want, sizeof(want), NULL);
	ck_assert_int_eq(memcmp(img.exec, want, 64), 0);
	ep_pool_destroy(p);
}
END_TEST

/* A fill that calls back into the library gets -EDEADLK, not a hang (it
 * runs with a heap locked): for a new pack and for a refill at free. */
struct reentry {
	struct ep_pool *pool;
	void *victim;
	int calls, alloc_rc, free_rc;
};

static void fill_reenter(void *dst, size_t len, void *ctx)
{
	struct reentry *r = ctx;
	struct ep_image im;

	memset(dst, 0xcc, len);
	if (!r->pool)
		return;
	r->calls++;
	r->alloc_rc = ep_alloc(r->pool, 64, &im);
	r->free_rc = r->victim ? ep_free(r->pool, r->victim) : 0;
}

START_TEST(test_fill_reentry_refused)
{
	struct reentry r = { 0 };
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .fill = fill_reenter, .fill_ctx = &r };
	struct ep_pool *p;
	int rc;

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	void *keep = tu_jit_ret(p, 6, 1, &rc);

	ck_assert_int_eq(rc, 0);
	void *f = tu_jit_ret(p, 6, 2, &rc);

	ck_assert_int_eq(rc, 0);
	r.pool = p;
	r.victim = keep;
	ck_assert_int_eq(ep_free(p, f), 0); /* refill: the fill calls in */
	ck_assert_int_ge(r.calls, 1);
	ck_assert_int_eq(r.alloc_rc, -EDEADLK);
	ck_assert_int_eq(r.free_rc, -EDEADLK);
	ck_assert_int_eq(tu_as_fn(keep)(), 1); /* not freed from inside */
	r.pool = NULL;
	ck_assert_int_eq(ep_free(p, keep), 0);
	ck_assert_str_ne(ep_strerror(-EDEADLK), "Unknown error");
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_write_before_and_after_finalize)
{
	struct ep_image img;
	unsigned char code[TU_RET_LEN];

	ck_assert_int_eq(ep_alloc(pool, 64, &img), 0);
	/* before finalize, ep_write stages through the exec address */
	tu_emit_ret_imm(code, 11);
	ck_assert_int_eq(ep_write(pool, img.exec, code, sizeof(code)), 0);
	ck_assert_int_eq(memcmp(img.rw, code, TU_RET_LEN), 0);
	ck_assert(tu_is_trap(img.exec, TU_RET_LEN)); /* not yet live */
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 11);
	/* after finalize, patch the immediate in place */
	ck_assert_int_eq(tu_patch_ret_imm(pool, img.exec, 12345), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 12345);
	/* a whole new body, unaligned length */
	unsigned char body[20];

	tu_emit_sized(body, sizeof(body), 777);
	ck_assert_int_eq(ep_write(pool, img.exec, body, sizeof(body)), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 777);
	/* a write that touches the last byte of the allocation is fine */
	unsigned char cc = tu_trap_byte((char *)img.exec + img.size - 1);

	ck_assert_int_eq(ep_write(pool, (char *)img.exec + img.size - 1, &cc, 1), 0);
	ck_assert_int_eq(ep_write(pool, img.exec, code, 0), 0);
	ck_assert_int_eq(ep_free(pool, img.exec), 0);
}
END_TEST

START_TEST(test_bad_inputs)
{
	struct ep_image img, other;
	struct ep_pool *p = NULL;
	unsigned char code[TU_RET_LEN];

	tu_emit_ret_imm(code, 1);
	/* a live function that every bad call below must leave intact */
	int rc;
	void *keep = tu_jit_ret(pool, 6, 4242, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(ep_alloc(pool, 64, &other), 0);

	ck_assert_int_eq(ep_pool_create(NULL, NULL), -EINVAL);
	ck_assert_int_eq(ep_alloc(NULL, 64, &img), -EINVAL);
	ck_assert_int_eq(ep_alloc(pool, 64, NULL), -EINVAL);
	ck_assert_int_eq(ep_alloc(pool, 0, &img), -EINVAL);
	ck_assert_int_lt(ep_alloc(pool, SIZE_MAX, &img), 0);
	ck_assert_int_lt(ep_alloc(pool, SIZE_MAX - 100, &img), 0);
	ck_assert_int_eq(ep_write(NULL, keep, code, 6), -EINVAL);
	ck_assert_int_eq(ep_write(pool, NULL, code, 6), -EINVAL);
	ck_assert_int_eq(ep_write(pool, keep, NULL, 6), -EINVAL);
	ck_assert_int_eq(ep_write(pool, code, code, 6), -EINVAL);          /* foreign */
	ck_assert_int_eq(ep_write(pool, (char *)keep + 60, code, 6), -EINVAL); /* crosses end */
	ck_assert_int_eq(ep_write(pool, (char *)keep + 63, code, 2), -EINVAL); /* into the next one */
	ck_assert_int_eq(ep_write(pool, (char *)keep + 4096, code, 1), -EINVAL); /* free space */
	ck_assert_int_eq(ep_write(pool, keep, code, SIZE_MAX), -EINVAL);
	ck_assert_int_eq(ep_finalize(NULL, keep), -EINVAL);
	ck_assert_int_eq(ep_finalize(pool, NULL), -EINVAL);
	ck_assert_int_eq(ep_finalize(pool, keep), -EINVAL);               /* twice */
	ck_assert_int_eq(ep_finalize(pool, (char *)keep + 16), -EINVAL);  /* interior */
	ck_assert_int_eq(ep_finalize(pool, code), -EINVAL);               /* foreign */
	ck_assert_int_eq(ep_free(NULL, keep), -EINVAL);
	int r = ep_free(pool, NULL);

	ck_assert(r == 0 || r == -EINVAL);
	ck_assert_int_eq(ep_free(pool, (char *)keep + 1), -EINVAL);       /* interior */
	ck_assert_int_eq(ep_free(pool, (char *)keep + 16), -EINVAL);
	ck_assert_int_eq(ep_free(pool, code), -EINVAL);                   /* foreign */
	ck_assert_int_eq(ep_free(pool, (void *)(uintptr_t)0x1000), -EINVAL);
	ck_assert_int_eq(ep_free(pool, other.exec), 0);
	ck_assert_int_eq(ep_free(pool, other.exec), -EINVAL);             /* double free */
	ck_assert_int_eq(ep_write(pool, other.exec, code, 1), -EINVAL);   /* freed */
	ck_assert_int_eq(ep_finalize(pool, other.exec), -EINVAL);
	ck_assert_int_eq(ep_pool_stats(NULL, NULL), -EINVAL);
	ck_assert_int_eq(ep_pool_stats(pool, NULL), -EINVAL);
	ck_assert_ptr_null(ep_pool_backend(NULL));

	/* a pointer of another pool is foreign here */
	struct ep_pool *p2 = make_pool(0, 0, 0);
	void *f2 = tu_jit_ret(p2, 6, 99, &rc);

	ck_assert_int_eq(ep_free(pool, f2), -EINVAL);
	ck_assert_int_eq(tu_as_fn(f2)(), 99);
	ck_assert_int_eq(ep_free(p2, f2), 0);
	ep_pool_destroy(p2);

	/* configs */
	struct ep_config cfg = { .sz = sizeof(cfg) };

	cfg.flags = 1u << 30;
	ck_assert_int_eq(ep_pool_create(&cfg, &p), -EINVAL);
	ck_assert_ptr_null(p);
	cfg.flags = 0;
	cfg.backend = (enum ep_backend)42;
	ck_assert_int_eq(ep_pool_create(&cfg, &p), -EINVAL);
	cfg.backend = EP_BACKEND_MEMFD;
	cfg.pack_size = 1000; /* not a multiple of the page size */
	ck_assert_int_eq(ep_pool_create(&cfg, &p), -EINVAL);
	cfg.pack_size = (size_t)1 << 40;
	ck_assert_int_eq(ep_pool_create(&cfg, &p), -EINVAL);
	cfg.pack_size = 0;
	cfg.sz = 0;
	ck_assert_int_eq(ep_pool_create(&cfg, &p), -EINVAL);

	ck_assert_int_eq(tu_as_fn(keep)(), 4242);
	struct ep_stats st = stats(pool);

	ck_assert_uint_eq(st.live_allocs, 1);
	ck_assert_uint_eq(st.used_bytes, 64);
	ck_assert_int_eq(ep_free(pool, keep), 0);
}
END_TEST

START_TEST(test_config_sizes)
{
	/* a newer caller's larger struct: accepted when the tail is zero */
	struct {
		struct ep_config c;
		unsigned char extra[16];
	} big;
	struct ep_pool *p = NULL;

	memset(&big, 0, sizeof(big));
	big.c.sz = sizeof(big);
	big.c.backend = EP_BACKEND_MEMFD;
	ck_assert_int_eq(ep_pool_create(&big.c, &p), 0);
	ep_pool_destroy(p);
	big.extra[3] = 1;
	ck_assert_int_eq(ep_pool_create(&big.c, &p), -E2BIG);
	/* an older caller's shorter struct: missing fields are defaults */
	struct ep_config small;

	memset(&small, 0xff, sizeof(small));
	small.sz = offsetof(struct ep_config, pack_size);
	small.backend = EP_BACKEND_MEMFD;
	ck_assert_int_eq(ep_pool_create(&small, &p), 0);
	int rc;
	void *f = tu_jit_ret(p, 6, 3, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 3);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_large_allocations)
{
	struct ep_pool *p = make_pool(64 * 1024, 0, 0);
	struct ep_image img;
	size_t sz = 64 * 1024 + 100;

	ck_assert_int_eq(ep_alloc(p, sz, &img), 0);
	ck_assert_uint_ge(img.size, sz);
	struct ep_stats st = stats(p);

	ck_assert_uint_eq(st.large_allocs, 1);
	ck_assert_uint_eq(st.large_bytes, (sz + tu_page() - 1) / tu_page() * tu_page());
	ck_assert_uint_eq(st.packs, 0);
	ck_assert_uint_eq(st.live_allocs, 1);
	/* code at the far end of the mapping */
	tu_emit_sized(img.rw, sz, 555);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 555);
	ck_assert_int_eq(tu_patch_ret_imm(p, tu_ret_at(img.exec, sz), 556), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 556);
	ck_assert_int_eq(ep_free(p, (char *)img.exec + 64), -EINVAL);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	st = stats(p);
	ck_assert_uint_eq(st.large_allocs, 0);
	ck_assert_uint_eq(st.large_bytes, 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	ck_assert_int_eq(ep_free(p, img.exec), -EINVAL);
	/* exactly a pack is still packed */
	ck_assert_int_eq(ep_alloc(p, 64 * 1024, &img), 0);
	st = stats(p);
	ck_assert_uint_eq(st.large_allocs, 0);
	ck_assert_uint_eq(st.packs, 1);
	ck_assert_uint_eq(st.used_bytes, 64 * 1024);
	ck_assert_int_eq(ep_free(p, img.exec), 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_limit)
{
	struct ep_pool *p = make_pool(0, 256, 0);
	struct ep_image a, b, c;

	ck_assert_int_eq(ep_alloc(p, 100, &a), 0); /* charges 128 */
	ck_assert_int_eq(ep_alloc(p, 65, &b), 0);  /* 256: exactly the limit */
	ck_assert_int_eq(ep_alloc(p, 1, &c), -EPERM);
	ck_assert_int_eq(ep_alloc(p, 1000, &c), -EPERM);
	ck_assert_uint_eq(stats(p).live_allocs, 2);
	ck_assert_int_eq(ep_free(p, a.exec), 0);
	ck_assert_int_eq(ep_alloc(p, 129, &c), -EPERM); /* 192 > 128 left */
	ck_assert_int_eq(ep_alloc(p, 128, &c), 0);
	ck_assert_int_eq(ep_free(p, b.exec), 0);
	ck_assert_int_eq(ep_free(p, c.exec), 0);
	ep_pool_destroy(p);

	/* large allocations are charged their page-rounded size */
	p = make_pool(tu_page(), 2 * tu_page(), 0);
	ck_assert_int_eq(ep_alloc(p, tu_page() + 1, &a), 0);
	ck_assert_int_eq(ep_alloc(p, 1, &b), -EPERM);
	ck_assert_int_eq(ep_free(p, a.exec), 0);
	ck_assert_int_eq(ep_alloc(p, 2 * tu_page() + 1, &a), -EPERM);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_randomize)
{
	struct ep_pool *p = make_pool(0, 0, EP_F_RANDOMIZE);
	unsigned seen = 0;

	for (int i = 0; i < 200; i++) {
		struct ep_image img;

		ck_assert_int_eq(ep_alloc(p, 100, &img), 0);
		uintptr_t off = (uintptr_t)img.exec % 64;

		ck_assert_uint_eq(off % 16, 0);
		seen |= 1u << (off / 16);
		ck_assert_uint_ge(img.size, 100);
		tu_emit_sized(img.rw, 100, (uint32_t)i);
		ck_assert_int_eq(ep_finalize(p, img.exec), 0);
		ck_assert_int_eq(tu_as_fn(img.exec)(), i);
		ck_assert_int_eq(ep_write(p, (char *)img.exec + img.size - 1, "\xcc", 1), 0);
		ck_assert_int_eq(ep_write(p, (char *)img.exec + img.size, "\xcc", 1), -EINVAL);
		if (off)
			ck_assert_int_eq(ep_free(p, (char *)img.exec - 16), -EINVAL);
		if (i % 2)
			ck_assert_int_eq(ep_free(p, img.exec), 0);
	}
	ck_assert_msg(__builtin_popcount(seen) >= 3, "offsets seen: %#x", seen);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_stats_add_up)
{
	size_t pack = 2 * tu_page(), pg = tu_page();
	struct ep_pool *p = make_pool(pack, 0, 0);
	struct ep_image im[50];
	size_t used = 0, large = 0, nlarge = 0;

	for (int i = 0; i < 50; i++) {
		size_t sz = (i % 10 == 9) ? pack + 808 + (size_t)i : 1 + (size_t)i * 37;

		ck_assert_int_eq(ep_alloc(p, sz, &im[i]), 0);
		if (sz > pack) {
			large += (sz + pg - 1) / pg * pg;
			nlarge++;
		} else {
			used += (sz + 63) / 64 * 64;
		}
	}
	struct ep_stats st = stats(p);

	ck_assert_uint_eq(st.used_bytes, used);
	ck_assert_uint_eq(st.large_bytes, large);
	ck_assert_uint_eq(st.large_allocs, nlarge);
	ck_assert_uint_eq(st.live_allocs, 50);
	ck_assert_uint_le(st.pack_bytes, st.packs * pack); /* (committed as they fill) */
	ck_assert_uint_ge(st.pack_bytes, st.used_bytes);
	for (int i = 0; i < 50; i++)
		ck_assert_int_eq(ep_free(p, im[i].exec), 0);
	st = stats(p);
	ck_assert_uint_eq(st.used_bytes + st.large_bytes + st.live_allocs + st.large_allocs, 0);
	ck_assert_uint_le(st.packs, 1);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_no_wx_mappings)
{
	void *f[100];
	int rc;

	ck_assert_int_eq(tu_count_wx_mappings(), 0);
	for (int i = 0; i < 100; i++) {
		f[i] = tu_jit_ret(pool, 6 + (size_t)i * 10, (uint32_t)i, &rc);
		ck_assert_int_eq(rc, 0);
		ck_assert_int_eq(tu_count_wx_mappings(), 0);
	}
	char perms[8];

	tu_mapping_perms(f[0], perms, NULL, 0);
	ck_assert_msg(perms[0] == 'r' && perms[1] == '-' && perms[2] == 'x', "perms %s", perms);
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(ep_free(pool, f[i]), 0);
	ck_assert_int_eq(tu_count_wx_mappings(), 0);
}
END_TEST

START_TEST(test_strerror_and_version)
{
	const int errs[] = { 0, -EINVAL, -ENOMEM, -EPERM, -EACCES, -E2BIG, -12345, 12345 };

	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		const char *m = ep_strerror(errs[i]);

		ck_assert_ptr_nonnull(m);
		ck_assert_uint_gt(strlen(m), 3);
	}
	ck_assert_str_ne(ep_strerror(-EINVAL), ep_strerror(-ENOMEM));
	ck_assert_str_eq(ep_strerror(EPERM), ep_strerror(-EPERM));
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", EP_VERSION_MAJOR, EP_VERSION_MINOR, EP_VERSION_PATCH);
	ck_assert_str_eq(ep_version(), want);
}
END_TEST

START_TEST(test_env_override)
{
	struct ep_pool *p = NULL;

	setenv("EXECPACK_BACKEND", "memfd", 1);
	ck_assert_int_eq(ep_pool_create(NULL, &p), 0);
	ck_assert_str_eq(ep_pool_backend(p), "memfd");
	ep_pool_destroy(p);
	setenv("EXECPACK_BACKEND", "bogus", 1);
	ck_assert_int_eq(ep_pool_create(NULL, &p), -EINVAL);
	unsetenv("EXECPACK_BACKEND");
}
END_TEST

static Suite *pool_suite(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("api");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_alloc_write_finalize_call);
	tcase_add_test(tc, test_default_pool);
	tcase_add_test(tc, test_chunk_accounting);
	tcase_add_test(tc, test_first_fit_in_pack);
	tcase_add_test(tc, test_first_fit_across_packs);
	tcase_add_test(tc, test_first_fit_many_packs);
	tcase_add_test(tc, test_pack_release_and_cache);
	tcase_add_test(tc, test_ten_thousand_programs);
	tcase_add_test(tc, test_fill_visible_through_exec);
	tcase_add_test(tc, test_custom_fill);
	tcase_add_test(tc, test_arch_fills);
	tcase_add_test(tc, test_fill_reentry_refused);
	tcase_add_test(tc, test_write_before_and_after_finalize);
	tcase_add_test(tc, test_bad_inputs);
	tcase_add_test(tc, test_config_sizes);
	tcase_add_test(tc, test_large_allocations);
	tcase_add_test(tc, test_limit);
	tcase_add_test(tc, test_randomize);
	tcase_add_test(tc, test_stats_add_up);
	tcase_add_test(tc, test_no_wx_mappings);
	tcase_add_test(tc, test_strerror_and_version);
	tcase_add_test(tc, test_env_override);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pool_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
