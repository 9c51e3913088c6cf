/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kmod-api.c - check_kmod's tests through the public API: JIT, patch,
 * add, large allocations, no writable mapping of the device, open errors,
 * a fork child's private copy, a code range, small chunks' fill, patches
 * never torn.
 */
#include "config.h"

#include "kmod-suite.h"

/* ---- through the public API ---------------------------------------------- */

START_TEST(test_api_jit_and_patch)
{
	struct ep_pool *pool = kmod_pool(0);
	void *code[8];
	int rc;

	for (unsigned i = 0; i < 8; i++) {
		code[i] = tu_jit_ret(pool, 16 + 40 * i, 1000 + i, &rc);
		ck_assert_msg(code[i], "jit %u: %s", i, ep_strerror(rc));
	}
	for (unsigned i = 0; i < 8; i++)
		ck_assert_int_eq(tu_as_fn(code[i])(), 1000 + i);

	/* patch live code: the immediate of the "return imm" of a 16-byte fn */
	uint32_t imm = 0x5a5a1234;

	ck_assert_int_eq(tu_patch_ret_imm(pool, tu_ret_at(code[0], 16), imm), 0);
	ck_assert_int_eq(tu_as_fn(code[0])(), (int)imm);

	/* freed code is refilled with traps, readable through the RX view */
	unsigned char *p = code[1];

	ck_assert_int_eq(ep_free(pool, code[1]), 0);
	ck_assert(tu_is_trap(p, 64));
	ck_assert_int_eq(tu_as_fn(code[2])(), 1002);

	/* no writable alias anywhere in the process */
	char perms[8];

	tu_mapping_perms(code[0], perms, NULL, 0);
	ck_assert_msg(perms[0] == 'r' && perms[1] == '-' && perms[2] == 'x', "perms %s", perms);
	ck_assert_int_eq(tu_count_wx_mappings(), 0);
	ep_pool_destroy(pool);
}
END_TEST

/* ep_add() and ep_finalize_size() through the module's write: no
 * writable mapping, the code in place, the slack traps; a name after. */
START_TEST(test_api_add)
{
	struct ep_pool *pool = kmod_pool(0);
	static unsigned char code[3 << 20] __attribute__((aligned(64)));
	const size_t sizes[] = { 13, 64, 300, 512, (3u << 20) - 100 };
	void *x[5];

	/* (every size is TU_RET_LEN or more: the program is exactly that long) */
	for (unsigned i = 0; i < 5; i++) {
		tu_emit_sized(code, sizes[i], 70 + i);
		ck_assert_int_eq(ep_add(pool, code, sizes[i], &x[i]), 0);
		ck_assert_uint_eq((uintptr_t)x[i] % EP_STAGE_ALIGN, 0);
		ck_assert_int_eq(tu_ret_imm_of(tu_ret_at(x[i], sizes[i])), 70 + i);
	}
	for (unsigned i = 0; i < 4; i++) {
		ck_assert_int_eq(tu_as_fn(x[i])(), 70 + i);
		ck_assert(tu_is_trap((char *)x[i] + sizes[i], (64 - sizes[i] % 64) % 64));
	}
	ck_assert_int_eq(ep_set_name(pool, x[2], "kmod_added"), 0);
	ck_assert_int_eq(tu_count_wx_mappings(), 0);
	for (unsigned i = 0; i < 5; i++)
		ck_assert_int_eq(ep_free(pool, x[i]), 0);

	struct ep_image img;

	ck_assert_int_eq(ep_alloc(pool, 1000, &img), 0);
	ck_assert_uint_eq(((uintptr_t)img.rw - (uintptr_t)img.exec) % EP_STAGE_ALIGN, 0);
	tu_fill_nops(img.rw, img.size);
	tu_emit_sized(img.rw, 100, 77);
	ck_assert_int_eq(ep_finalize_size(pool, img.exec, 100), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 77);
	ck_assert(tu_is_trap((char *)img.exec + 100, 28));
	ck_assert_int_eq(ep_free(pool, img.exec), 0);
	ep_pool_destroy(pool);
}
END_TEST

START_TEST(test_api_large_alloc)
{
	struct ep_pool *pool = kmod_pool(0);
	struct ep_image img;
	size_t size = (3u << 20) + 100;

	ck_assert_int_eq(ep_alloc(pool, size, &img), 0);
	ck_assert_ptr_nonnull(img.rw);
	tu_emit_sized(img.rw, size, 4242);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 4242);

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.large_allocs, 1);
	ck_assert_int_eq(ep_free(pool, img.exec), 0);
	ep_pool_destroy(pool);
}
END_TEST

START_TEST(test_api_no_writable_device_mapping)
{
	struct ep_pool *pool = kmod_pool(0);
	int rc, total, writable;
	void *fn = tu_jit_ret(pool, 64, 7, &rc);

	ck_assert_ptr_nonnull(fn);
	dev_mappings(&total, &writable);
	ck_assert_int_ge(total, 1); /* else this test would prove nothing */
	ck_assert_int_eq(writable, 0);

	/* the exec view refuses to become writable */
	void *pg = (void *)((uintptr_t)fn & ~(uintptr_t)(page - 1));

	errno = 0;
	ck_assert_int_eq(mprotect(pg, page, PROT_READ | PROT_WRITE), -1);
	ck_assert_int_eq(errno, EACCES);
	ck_assert_int_eq(mprotect(pg, page, PROT_READ | PROT_WRITE | PROT_EXEC), -1);
	ck_assert_int_eq(tu_as_fn(fn)(), 7);

	/* nor can the process write it through /proc/self/mem (FOLL_FORCE) */
	int mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);

	if (mem >= 0) {
		unsigned char b = tu_nop_byte(fn);

		ck_assert_int_eq(pwrite(mem, &b, 1, (off_t)(uintptr_t)fn), -1);
		close(mem);
	}
	ck_assert_int_eq(tu_as_fn(fn)(), 7);
	ep_pool_destroy(pool);
}
END_TEST

START_TEST(test_api_open_errors)
{
	struct ep_config cfg = {
		.sz = sizeof(cfg), .backend = EP_BACKEND_KMOD, .path = "/nonexistent/execpack",
	};
	struct ep_pool *pool = NULL;

	ck_assert_int_eq(ep_pool_create(&cfg, &pool), -ENOENT);
	ck_assert_ptr_null(pool);
	cfg.path = "/dev/null"; /* a device, but not ours */
	ck_assert_int_eq(ep_pool_create(&cfg, &pool), -ENOTTY);
	ck_assert_ptr_null(pool);
}
END_TEST

/* After fork() each process changes only its own copy of shared code. */
START_TEST(test_api_fork_private)
{
	struct ep_pool *pool = kmod_pool(0);
	int rc;
	void *fn = tu_jit_ret(pool, 16, 1, &rc);

	ck_assert_ptr_nonnull(fn);
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int ok = tu_patch_ret_imm(pool, tu_ret_at(fn, 16), 2) == 0 &&
			 tu_as_fn(fn)() == 2;
		void *more = tu_jit_ret(pool, 64, 3, NULL);

		ok = ok && more && tu_as_fn(more)() == 3;
		ep_pool_destroy(pool);
		_exit(ok ? 0 : 1);
	}
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed");
	ck_assert_int_eq(tu_as_fn(fn)(), 1);

	ck_assert_int_eq(tu_patch_ret_imm(pool, tu_ret_at(fn, 16), 5), 0);
	ck_assert_int_eq(tu_as_fn(fn)(), 5);
	ep_pool_destroy(pool);
}
END_TEST

/* ep_config.code_range: the module's packs mapped into the pool's range,
 * -ENOMEM when it is full, the space of a destroyed pack reused, a fork
 * child's copies and new packs inside it. */
START_TEST(test_api_code_range)
{
	size_t pack = (size_t)64 << 10, range = 4 * pack;
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_KMOD, .pack_size = pack,
				 .path = dev_path, .code_range = range };
	struct ep_pool *pool = NULL;
	void *fn[8];
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	int n = 0, rc;

	ck_assert_int_eq(ep_pool_create(&cfg, &pool), 0);
	while (n < 8 && (fn[n] = tu_jit_ret(pool, pack / 2, (uint32_t)n, &rc))) {
		lo = (uintptr_t)fn[n] < lo ? (uintptr_t)fn[n] : lo;
		hi = (uintptr_t)fn[n] + pack / 2 > hi ? (uintptr_t)fn[n] + pack / 2 : hi;
		n++;
	}
	ck_assert_int_eq(n, 8);
	ck_assert_uint_le(hi - lo, range);
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(pool, 64, &img), -ENOMEM);
	ck_assert_int_eq(ep_alloc(pool, 2 * pack, &img), -ENOMEM);
	/* two packs emptied, one kept and one released: the released one's
	 * space holds a new pack */
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(ep_free(pool, fn[i]), 0);
	for (int i = 0; i < 4; i++) {
		fn[i] = tu_jit_ret(pool, pack / 2, (uint32_t)i, &rc);
		ck_assert_msg(fn[i], "again %d: %s", i, ep_strerror(rc));
		ck_assert_uint_ge((uintptr_t)fn[i], lo);
		ck_assert_uint_le((uintptr_t)fn[i] + pack / 2, hi);
	}
	ck_assert_int_eq(ep_alloc(pool, 64, &img), -ENOMEM);
	ck_assert_int_eq(ep_free(pool, fn[7]), 0); /* room for the child's */
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		void *more = tu_jit_ret(pool, 64, 77, NULL);
		int ok = more && tu_as_fn(more)() == 77 && (uintptr_t)more >= lo &&
			 (uintptr_t)more < hi && tu_as_fn(fn[5])() == 5;

		ep_pool_destroy(pool);
		_exit(ok ? 0 : 1);
	}
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed");
	for (int i = 0; i < 7; i++)
		ck_assert_int_eq(tu_as_fn(fn[i])(), i);
	ep_pool_destroy(pool);
}
END_TEST

/* A fill whose period is 64 bytes, by address (as the arm64 and riscv64
 * fills are, with shorter periods). */
static void fill_addr64(void *dst, size_t len, void *ctx)
{
	unsigned char *b = dst;

	(void)ctx;
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)(0xc0 | ((uintptr_t)(b + i) & 63));
}

static int holds_addr64(const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++)
		if (b[i] != (unsigned char)(0xc0 | ((uintptr_t)(b + i) & 63)))
			return 0;
	return 1;
}

/* 16-byte chunks on the module's packs: a refill at an offset that is no
 * whole number of the fill's periods gets the fill's bytes for there. */
START_TEST(test_api_small_chunks_fill_phase)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_KMOD, .path = dev_path,
				 .chunk_size = 16, .fill = fill_addr64 };
	struct ep_pool *pool = NULL;
	struct ep_image img[4];

	ck_assert_int_eq(ep_pool_create(&cfg, &pool), 0);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(ep_alloc(pool, 16, &img[i]), 0);
		ck_assert_uint_eq((uintptr_t)img[i].exec % 16, 0);
		tu_emit_ret_imm(img[i].rw, (uint32_t)i);
		ck_assert_int_eq(ep_finalize(pool, img[i].exec), 0);
	}
	ck_assert_ptr_eq(img[1].exec, (char *)img[0].exec + 16);
	/* the pack's fresh bytes, then refills at 16, 32 and 48 bytes into a
	 * period */
	ck_assert(holds_addr64((char *)img[3].exec + 16, 4096 - 64));
	for (int i = 1; i < 4; i++) {
		ck_assert_int_eq(ep_free(pool, img[i].exec), 0);
		ck_assert_msg(holds_addr64(img[i].exec, 16), "refill of chunk %d out of phase", i);
	}
	ck_assert_int_eq(tu_as_fn(img[0].exec)(), 0);
	ck_assert_int_eq(ep_free(pool, img[0].exec), 0);
	ck_assert(holds_addr64(img[0].exec, 64));
	ep_pool_destroy(pool);
}
END_TEST

/* A one-store patch (the imm32 inside one 8-byte word on x86, one aligned
 * instruction word elsewhere) is never seen half done. */
static volatile int race_stop;

struct race {
	struct ep_pool *pool;
	void *fn;
	int bad;
};

static void *race_patch(void *arg)
{
	struct race *r = arg;
	static const uint32_t v[2] = { TU_PATCH_A, TU_PATCH_B };

	for (unsigned i = 0; i < 3000 && !r->bad; i++)
		if (tu_patch_ret_imm(r->pool, r->fn, v[i & 1]))
			r->bad = -1;
	race_stop = 1;
	return NULL;
}

START_TEST(test_api_patch_not_torn)
{
	struct race r = { .pool = kmod_pool(0) };
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(r.pool, 64, &img), 0);
	/* "return imm" at offset 0: x86's imm32 at 1..4, inside the first 8-byte word */
	tu_emit_ret_imm(img.rw, TU_PATCH_A);
	ck_assert_int_eq(ep_finalize(r.pool, img.exec), 0);
	r.fn = img.exec;
	race_stop = 0;

	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, race_patch, &r), 0);
	unsigned long calls = 0;

	while (!race_stop) {
		int v = tu_as_fn(r.fn)();

		calls++;
		if (v != (int)TU_PATCH_A && v != (int)TU_PATCH_B) {
			r.bad = v;
			break;
		}
	}
	pthread_join(t, NULL);
	ck_assert_msg(r.bad == 0, "torn or failed patch: %#x after %lu calls", r.bad, calls);
	ep_pool_destroy(r.pool);
}
END_TEST

/* (in the order the suite runs them) */
void kmod_add_api_tests(TCase *tc)
{
	tcase_add_test(tc, test_api_jit_and_patch);
	tcase_add_test(tc, test_api_large_alloc);
	tcase_add_test(tc, test_api_add);
	tcase_add_test(tc, test_api_no_writable_device_mapping);
	tcase_add_test(tc, test_api_open_errors);
	tcase_add_test(tc, test_api_fork_private);
	tcase_add_test(tc, test_api_patch_not_torn);
	tcase_add_test(tc, test_api_code_range);
	tcase_add_test(tc, test_api_small_chunks_fill_phase);
}
