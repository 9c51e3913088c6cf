/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_kmod.c - the kmod backend against the real execpack module.
 *
 * Runs where /dev/execpack exists (make check-kmod boots a kernel under
 * qemu with the module loaded); anywhere else it exits 77 (SKIP) with the
 * reason.  EXECPACK_DEVICE names another device node.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#include "execpack.h"
#include "kmod/execpack_uapi.h"
#include "testutil.h"

static const char *dev_path;
static size_t page;

/* ---- raw device helpers --------------------------------------------------- */

static int dev_open(void)
{
	int fd = open(dev_path, O_RDWR | O_CLOEXEC);

	ck_assert_msg(fd >= 0, "open %s: %s", dev_path, strerror(errno));
	return fd;
}

/* 0 or -errno */
static int xioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
}

static int create(int fd, uint64_t len, const void *pat, uint32_t plen,
		  struct execpack_create *out)
{
	struct execpack_create c = {
		.size = sizeof(c), .len = len, .pattern = (uintptr_t)pat, .pattern_len = plen,
	};
	int rc = xioctl(fd, EXECPACK_IOC_CREATE, &c);

	if (out)
		*out = c;
	return rc;
}

static int copy_in(int fd, uint32_t id, uint64_t off, const void *src, uint64_t len)
{
	struct execpack_copy c = {
		.size = sizeof(c), .id = id, .off = off, .src = (uintptr_t)src, .len = len,
	};

	return xioctl(fd, EXECPACK_IOC_COPY, &c);
}

static int fill_range(int fd, uint32_t id, uint64_t off, uint64_t len)
{
	struct execpack_fill f = { .size = sizeof(f), .id = id, .off = off, .len = len };

	return xioctl(fd, EXECPACK_IOC_FILL, &f);
}

static int destroy(int fd, uint32_t id)
{
	struct execpack_destroy d = { .size = sizeof(d), .id = id };

	return xioctl(fd, EXECPACK_IOC_DESTROY, &d);
}

static struct execpack_info info(int fd)
{
	struct execpack_info i = { .size = sizeof(i) };

	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_INFO, &i), 0);
	return i;
}

static struct ep_pool *kmod_pool(size_t pack_size)
{
	struct ep_config cfg = {
		.sz = sizeof(cfg), .backend = EP_BACKEND_KMOD, .pack_size = pack_size,
		.path = dev_path,
	};
	struct ep_pool *pool = NULL;
	int rc = ep_pool_create(&cfg, &pool);

	ck_assert_msg(rc == 0, "ep_pool_create(kmod): %s", ep_strerror(rc));
	ck_assert_str_eq(ep_pool_backend(pool), "kmod");
	return pool;
}

/* Mappings of the device in /proc/self/maps: total, and how many writable. */
static void dev_mappings(int *total, int *writable)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[1024];

	ck_assert_ptr_nonnull(f);
	*total = *writable = 0;
	while (fgets(line, sizeof(line), f)) {
		char perms[8] = "";

		if (!strstr(line, "execpack") || sscanf(line, "%*x-%*x %7s", perms) != 1)
			continue;
		(*total)++;
		if (perms[1] == 'w')
			(*writable)++;
	}
	fclose(f);
}

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

/* ---- the device itself ------------------------------------------------------ */

START_TEST(test_dev_mmap_write_refused)
{
	int fd = dev_open();
	unsigned char pat = 0xcc;
	struct execpack_create c;

	ck_assert_int_eq(create(fd, 4 * page, &pat, 1, &c), 0);
	errno = 0;
	ck_assert_ptr_eq(mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)c.cookie),
			 MAP_FAILED);
	ck_assert_int_eq(errno, EPERM);
	/* not even a private copy-on-write view */
	ck_assert_ptr_eq(mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, (off_t)c.cookie),
			 MAP_FAILED);
	ck_assert_ptr_eq(mmap(NULL, page, PROT_WRITE | PROT_EXEC, MAP_SHARED, fd, (off_t)c.cookie),
			 MAP_FAILED);

	unsigned char *x = mmap(NULL, 4 * page, PROT_READ | PROT_EXEC, MAP_SHARED, fd,
				(off_t)c.cookie);

	ck_assert_ptr_ne(x, MAP_FAILED);
	/* filled with the pattern before anyone could map it */
	for (size_t i = 0; i < 4 * page; i++)
		ck_assert_uint_eq(x[i], 0xcc);
	/* zapped page tables come back from the pack through the fault path */
	ck_assert_int_eq(madvise(x, 4 * page, MADV_DONTNEED), 0);
	ck_assert_int_eq(copy_in(fd, c.id, page + 1, "\x90", 1), 0);
	ck_assert_uint_eq(x[page + 1], 0x90);
	ck_assert_uint_eq(x[3 * page], 0xcc);
	errno = 0;
	ck_assert_int_eq(mprotect(x, page, PROT_READ | PROT_WRITE), -1);
	ck_assert_int_eq(errno, EACCES);

	unsigned char *y = mmap(NULL, page, PROT_READ, MAP_PRIVATE, fd, (off_t)c.cookie);

	ck_assert_ptr_ne(y, MAP_FAILED);
	ck_assert_int_eq(mprotect(y, page, PROT_READ | PROT_WRITE), -1);
	ck_assert_int_eq(errno, EACCES);

	/* a view past the pack's end or of no pack at all */
	ck_assert_ptr_eq(mmap(NULL, 5 * page, PROT_READ, MAP_SHARED, fd, (off_t)c.cookie),
			 MAP_FAILED);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_eq(mmap(NULL, page, PROT_READ, MAP_SHARED, fd,
			      (off_t)(c.cookie + (1u << 30))), MAP_FAILED);
	/* mremap cannot grow it (VM_DONTEXPAND) */
	ck_assert_ptr_eq(mremap(y, page, 2 * page, MREMAP_MAYMOVE), MAP_FAILED);

	int total, writable;

	dev_mappings(&total, &writable);
	ck_assert_int_ge(total, 2);
	ck_assert_int_eq(writable, 0);
	munmap(x, 4 * page);
	munmap(y, page);
	ck_assert_int_eq(destroy(fd, c.id), 0);
	close(fd);
}
END_TEST

START_TEST(test_dev_copy_and_fill)
{
	int fd = dev_open();
	const unsigned char pat[3] = { 0xd4, 0xcc, 0x0b };
	struct execpack_create c;

	ck_assert_int_eq(create(fd, 2 * page, pat, 3, &c), 0);
	unsigned char *x = mmap(NULL, 2 * page, PROT_READ, MAP_SHARED, fd, (off_t)c.cookie);

	ck_assert_ptr_ne(x, MAP_FAILED);
	for (size_t i = 0; i < 2 * page; i++)
		ck_assert_uint_eq(x[i], pat[i % 3]);

	/* a copy across the page boundary lands exactly */
	unsigned char buf[300];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 1);
	ck_assert_int_eq(copy_in(fd, c.id, page - 100, buf, sizeof(buf)), 0);
	ck_assert_int_eq(memcmp(x + page - 100, buf, sizeof(buf)), 0);
	ck_assert_uint_eq(x[page - 101], pat[(page - 101) % 3]);
	ck_assert_uint_eq(x[page + 200], pat[(page + 200) % 3]);

	/* small stores, aligned and not */
	ck_assert_int_eq(copy_in(fd, c.id, 13, "\x01\x02\x03", 3), 0);
	ck_assert_int_eq(memcmp(x + 13, "\x01\x02\x03", 3), 0);
	ck_assert_uint_eq(x[12], pat[12 % 3]);
	ck_assert_uint_eq(x[16], pat[16 % 3]);
	ck_assert_int_eq(copy_in(fd, c.id, 24, "ABCDEFGH", 8), 0);
	ck_assert_int_eq(memcmp(x + 24, "ABCDEFGH", 8), 0);

	/* fill: the pattern restarts at the start of the range */
	ck_assert_int_eq(fill_range(fd, c.id, page - 100 + 5, 200), 0);
	ck_assert_uint_eq(x[page - 100 + 4], buf[4]);
	for (size_t i = 0; i < 200; i++)
		ck_assert_uint_eq(x[page - 95 + i], pat[i % 3]);
	ck_assert_uint_eq(x[page - 95 + 200], buf[205]);
	ck_assert_int_eq(copy_in(fd, c.id, 0, buf, 0), 0); /* empty is fine */

	munmap(x, 2 * page);
	destroy(fd, c.id);

	/* a whole page as the pattern */
	unsigned char *big = malloc(page);

	for (size_t i = 0; i < page; i++)
		big[i] = (unsigned char)(i ^ (i >> 8));
	ck_assert_int_eq(create(fd, 3 * page, big, (uint32_t)page, &c), 0);
	x = mmap(NULL, 3 * page, PROT_READ, MAP_SHARED, fd, (off_t)c.cookie);
	ck_assert_ptr_ne(x, MAP_FAILED);
	for (size_t i = 0; i < 3 * page; i++)
		ck_assert_uint_eq(x[i], big[i % page]);
	munmap(x, 3 * page);
	free(big);
	close(fd); /* release frees the pack we did not destroy */
}
END_TEST

START_TEST(test_dev_bad_input)
{
	int fd = dev_open();
	unsigned char pat[EXECPACK_PATTERN_MAX + 1] = { 0xcc };
	struct execpack_create c;

	/* create */
	ck_assert_int_eq(create(fd, 0, pat, 1, NULL), -EINVAL);
	ck_assert_int_eq(create(fd, page + 1, pat, 1, NULL), -EINVAL);
	ck_assert_int_eq(create(fd, UINT64_MAX & ~(uint64_t)(page - 1), pat, 1, NULL), -EINVAL);
	ck_assert_int_eq(create(fd, page, pat, 0, NULL), -EINVAL);
	ck_assert_int_eq(create(fd, page, pat, EXECPACK_PATTERN_MAX + 1, NULL), -EINVAL);
	ck_assert_int_eq(create(fd, page, (void *)16, 4, NULL), -EFAULT);

	struct execpack_create cf = {
		.size = sizeof(cf), .flags = 1, .len = page, .pattern = (uintptr_t)pat,
		.pattern_len = 1,
	};

	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_CREATE, &cf), -EINVAL);
	cf.flags = 0;
	cf.size = 8; /* shorter than any version */
	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_CREATE, &cf), -EINVAL);

	/* a newer, longer struct: accepted when the tail is zero */
	struct {
		struct execpack_create c;
		uint64_t future;
	} grown = { { .size = sizeof(grown), .len = page, .pattern = (uintptr_t)pat,
		      .pattern_len = 1 }, 0 };

	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_CREATE, &grown), 0);
	ck_assert_uint_ne(grown.c.id, 0);
	ck_assert_int_eq(destroy(fd, grown.c.id), 0);
	grown.future = 1;
	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_CREATE, &grown), -E2BIG);
	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_CREATE, (void *)8), -EFAULT);

	/* copy / fill ranges, with overflow */
	ck_assert_int_eq(create(fd, 2 * page, pat, 1, &c), 0);
	unsigned char buf[64] = { 0 };

	ck_assert_int_eq(copy_in(fd, c.id + 1000, 0, buf, 1), -ENOENT);
	ck_assert_int_eq(copy_in(fd, c.id, 2 * page, buf, 1), -ERANGE);
	ck_assert_int_eq(copy_in(fd, c.id, 2 * page - 1, buf, 2), -ERANGE);
	ck_assert_int_eq(copy_in(fd, c.id, UINT64_MAX - 7, buf, 16), -ERANGE);
	ck_assert_int_eq(copy_in(fd, c.id, 16, buf, UINT64_MAX - 7), -ERANGE);
	ck_assert_int_eq(copy_in(fd, c.id, 0, (void *)16, 32), -EFAULT);
	ck_assert_int_eq(copy_in(fd, c.id, 0, (void *)16, 4), -EFAULT);
	ck_assert_int_eq(copy_in(fd, c.id, 2 * page, buf, 0), 0);
	ck_assert_int_eq(fill_range(fd, c.id, UINT64_MAX, 2), -ERANGE);
	ck_assert_int_eq(fill_range(fd, c.id, 0, 2 * page + 1), -ERANGE);
	ck_assert_int_eq(fill_range(fd, c.id + 1000, 0, 1), -ENOENT);
	ck_assert_int_eq(fill_range(fd, c.id, 0, 2 * page), 0);

	/* destroy, twice */
	ck_assert_int_eq(destroy(fd, c.id), 0);
	ck_assert_int_eq(destroy(fd, c.id), -ENOENT);
	ck_assert_int_eq(destroy(fd, 0xffffffffu), -ENOENT);
	ck_assert_int_eq(copy_in(fd, c.id, 0, buf, 1), -ENOENT);

	/* unknown commands */
	ck_assert_int_eq(xioctl(fd, _IOW(EXECPACK_IOC_MAGIC, 99, struct execpack_fill), buf),
			 -ENOTTY);
	ck_assert_int_eq(xioctl(fd, _IO('T', 1), buf), -ENOTTY);
	close(fd);
}
END_TEST

/*
 * Threads sharing one open file create, map, copy, destroy and unmap at
 * once.  Copies read from another pack's mapping whose page tables were
 * just zapped, so pinning the source faults it in (mmap_lock, and the
 * fault handler of that pack), while the other threads' mmap() calls hold
 * mmap_lock and take the context's lock: a lock-order mistake in the module
 * hangs here.
 */
struct stress {
	int fd;
	unsigned seed;
	int bad;
};

static void *stress_thread(void *arg)
{
	struct stress *st = arg;
	unsigned char pat = 0xcc, buf[256];

	for (unsigned it = 0; it < 150 && !st->bad; it++) {
		struct execpack_create a, b;

		if (create(st->fd, 2 * page, &pat, 1, &a) || create(st->fd, page, &pat, 1, &b)) {
			st->bad = 1;
			break;
		}
		unsigned char *x = mmap(NULL, 2 * page, PROT_READ | PROT_EXEC, MAP_SHARED, st->fd,
					(off_t)a.cookie);
		unsigned char *y = mmap(NULL, page, PROT_READ, MAP_SHARED, st->fd, (off_t)b.cookie);

		if (x == MAP_FAILED || y == MAP_FAILED) {
			st->bad = 2;
			break;
		}
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (unsigned char)(st->seed + it + i);
		size_t off = (st->seed * 131 + it * 977) % (page - sizeof(buf));

		if (copy_in(st->fd, b.id, off, buf, sizeof(buf)))
			st->bad = 3;
		madvise(y, page, MADV_DONTNEED);
		/* source: the other pack's mapping, faulted in during the copy */
		if (copy_in(st->fd, a.id, page - 100, y + off, sizeof(buf)))
			st->bad = 4;
		if (memcmp(x + page - 100, buf, sizeof(buf)))
			st->bad = 5;
		if (destroy(st->fd, b.id) || (it & 1 ? destroy(st->fd, a.id) : 0))
			st->bad = 6;
		munmap(y, page);
		munmap(x, 2 * page);
		if (!(it & 1) && destroy(st->fd, a.id))
			st->bad = 7;
	}
	return NULL;
}

START_TEST(test_dev_threads)
{
	int fd = dev_open();
	struct stress st[4];
	pthread_t t[4];
	uint64_t base = info(fd).user_used;

	for (unsigned i = 0; i < 4; i++) {
		st[i] = (struct stress){ .fd = fd, .seed = i * 7919 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, stress_thread, &st[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(st[i].bad == 0, "thread %u failed at step %d", i, st[i].bad);
	}
	ck_assert_uint_eq(info(fd).user_used, base); /* all destroyed and unmapped */
	close(fd);
}
END_TEST

/*
 * A create whose result cannot be copied out (the argument struct sits in a
 * read-only page: -EFAULT) must never have made its pack findable: ids are
 * the lowest free ones, so another thread destroying "the next id" hit the
 * pack in that window and the module put it twice (refcount underflow, use
 * after free).  The destroyer must only ever see -ENOENT.
 */
struct efault_race {
	int fd;
	volatile int stop;
	unsigned long destroyed, other;
};

static void *destroy_next_id(void *arg)
{
	struct efault_race *r = arg;

	while (!r->stop) {
		int rc = destroy(r->fd, 1);

		if (rc == 0)
			r->destroyed++;
		else if (rc != -ENOENT)
			r->other++;
	}
	return NULL;
}

START_TEST(test_dev_create_efault_race)
{
	int fd = dev_open();
	uint64_t base = info(fd).user_used;
	unsigned char pat = 0xcc;
	struct execpack_create *ro = mmap(NULL, page, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(ro, MAP_FAILED);
	*ro = (struct execpack_create){
		.size = sizeof(*ro), .len = page, .pattern = (uintptr_t)&pat, .pattern_len = 1,
	};
	ck_assert_int_eq(mprotect(ro, page, PROT_READ), 0);

	struct efault_race r = { .fd = fd };
	pthread_t t;
	struct timespec t0, now;
	unsigned long rounds = 0, efault = 0;

	ck_assert_int_eq(pthread_create(&t, NULL, destroy_next_id, &r), 0);
	/* Bounded in time too: a few seconds even on an emulated CPU. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 100; i++, rounds++)
			efault += xioctl(fd, EXECPACK_IOC_CREATE, ro) == -EFAULT;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (rounds < 20000 &&
		 (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 < 1500);
	r.stop = 1;
	pthread_join(t, NULL);

	ck_assert_uint_eq(efault, rounds);
	ck_assert_msg(r.destroyed == 0,
		      "destroy found %lu of %lu packs whose create failed with EFAULT", r.destroyed,
		      rounds);
	ck_assert_uint_eq(r.other, 0);
	ck_assert_uint_eq(info(fd).user_used, base);
	/* no id stayed reserved: the next create gets the lowest one again */
	struct execpack_create c;

	ck_assert_int_eq(create(fd, page, &pat, 1, &c), 0);
	ck_assert_uint_eq(c.id, 1);
	ck_assert_int_eq(destroy(fd, c.id), 0);
	ck_assert_uint_eq(info(fd).user_used, base);
	munmap(ro, page);
	close(fd);
}
END_TEST

/*
 * A copy whose source cannot be read fails with EFAULT and leaves the pack
 * exactly as it was: no zeros where the source could not be read (what
 * copy_from_user() straight into the pack left), and no part of the source
 * before the fault either.  The bytes are read back through the pack's
 * executable mapping.
 */
static void pack_is(const unsigned char *x, const unsigned char *want, size_t len,
		    const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (x[i] != want[i])
			ck_abort_msg("%s: pack byte %zu is %#x, was %#x", what, i, x[i], want[i]);
}

START_TEST(test_dev_copy_efault_unchanged)
{
	int fd = dev_open();
	const unsigned char pat[3] = { 0xd4, 0xcc, 0x0b };
	size_t size = 4 * page;
	struct execpack_create c;

	ck_assert_int_eq(create(fd, size, pat, 3, &c), 0);
	const unsigned char *x = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_SHARED, fd,
				      (off_t)c.cookie);

	ck_assert_ptr_ne(x, MAP_FAILED);
	unsigned char *want = malloc(size);

	ck_assert_ptr_nonnull(want);
	for (size_t i = 0; i < size; i++)
		want[i] = pat[i % 3];
	pack_is(x, want, size, "created");

	/* a source whose second page is gone: readable up to src + page */
	unsigned char *src = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(src, MAP_FAILED);
	for (size_t i = 0; i < page; i++)
		src[i] = (unsigned char)(0x40 + i % 61); /* never 0, never the pattern's bytes */
	ck_assert_int_eq(munmap(src + page, page), 0);

	/* the kernel's half of the address space on every 64-bit Linux */
	const void *kaddr = (const void *)(uintptr_t)(UINTPTR_MAX > 0xffffffffu ?
							UINT64_C(0xffffffff81000000) : 0xc0000000u);
	const struct {
		const char *what;
		const void *src;
		uint64_t off, len;
	} bad[] = {
		{ "NULL, 1 byte", NULL, 5, 1 },
		{ "NULL, one word", NULL, 8, 8 },
		{ "NULL, 300 bytes over a page boundary", NULL, page - 100, 300 },
		{ "NULL, the whole pack", NULL, 0, size },
		{ "kernel address, 4 bytes", kaddr, 4, 4 },
		{ "kernel address, 300 bytes", kaddr, page - 100, 300 },
		{ "kernel address, 2 pages", kaddr, 1, 2 * page },
		{ "into an unmapped page, one word", src + page - 4, 16, 8 },
		{ "into an unmapped page, 300 bytes", src + page - 100, 2 * page - 50, 300 },
		{ "into an unmapped page, 2 pages", src, 0, 2 * page },
		{ "into an unmapped page, 3 pages unaligned", src + 8, 3, 3 * page },
		{ "the unmapped page itself", src + page, 10, 100 },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = copy_in(fd, c.id, bad[i].off, bad[i].src, bad[i].len);

		ck_assert_msg(rc == -EFAULT, "copy from %s: %d (%s), not EFAULT", bad[i].what, rc,
			      strerror(-rc));
		pack_is(x, want, size, bad[i].what);
	}

	/* what can be read still lands exactly, up to the last readable byte */
	ck_assert_int_eq(copy_in(fd, c.id, 2 * page - 50, src + page - 100, 100), 0);
	memcpy(want + 2 * page - 50, src + page - 100, 100);
	pack_is(x, want, size, "a copy ending at the unmapped page");

	/* a copy over several source and pack pages, neither aligned */
	unsigned char *big = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(big, MAP_FAILED);
	for (size_t i = 0; i < 3 * page; i++)
		big[i] = (unsigned char)(i * 13 + 7);
	ck_assert_int_eq(copy_in(fd, c.id, page + 5, big + 77, 2 * page + 123), 0);
	memcpy(want + page + 5, big + 77, 2 * page + 123);
	pack_is(x, want, size, "a copy of 2 pages + 123 bytes");

	munmap(big, 3 * page);
	munmap(src, page);
	munmap((void *)x, size);
	free(want);
	ck_assert_int_eq(destroy(fd, c.id), 0);
	close(fd);
}
END_TEST

/*
 * The same while another thread maps and unmaps the source's second page
 * (a memfd page, so that whenever it is mapped it holds its bytes): each
 * copy either lands whole or fails with EFAULT leaving the pack as it was,
 * never part of the source and never zeros.
 */
struct unmap_race {
	void *at;
	int memfd;
	volatile int stop;
	int bad;
};

static void *toggle_source_page(void *arg)
{
	struct unmap_race *r = arg;

	while (!r->stop) {
		if (mmap(r->at, page, PROT_READ, MAP_SHARED | MAP_FIXED_NOREPLACE, r->memfd, 0) !=
		    r->at) {
			r->bad = errno;
			break;
		}
		munmap(r->at, page);
	}
	return NULL;
}

START_TEST(test_dev_copy_efault_race)
{
	int fd = dev_open();
	const unsigned char pat[3] = { 0xd4, 0xcc, 0x0b };
	size_t size = 3 * page, off = 3, len = 2 * page - 10;
	struct execpack_create c;

	ck_assert_int_eq(create(fd, size, pat, 3, &c), 0);
	const unsigned char *x = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_SHARED, fd,
				      (off_t)c.cookie);

	ck_assert_ptr_ne(x, MAP_FAILED);
	unsigned char *filled = malloc(size), *copied = malloc(size);

	ck_assert_ptr_nonnull(filled);
	ck_assert_ptr_nonnull(copied);
	for (size_t i = 0; i < size; i++)
		filled[i] = pat[i % 3];

	unsigned char *src = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int memfd = memfd_create("execpack-source", MFD_CLOEXEC);

	ck_assert_ptr_ne(src, MAP_FAILED);
	ck_assert_int_ge(memfd, 0);
	ck_assert_int_eq(ftruncate(memfd, (off_t)page), 0);
	for (size_t i = 0; i < 2 * page; i++)
		src[i] = (unsigned char)(0x40 + i % 61);
	ck_assert_int_eq(pwrite(memfd, src + page, page, 0), (ssize_t)page);
	memcpy(copied, filled, size);
	memcpy(copied + off, src + 5, len);
	ck_assert_int_eq(munmap(src + page, page), 0);

	struct unmap_race r = { .at = src + page, .memfd = memfd };
	pthread_t t;
	struct timespec t0, now;
	unsigned long rounds = 0, landed = 0, efault = 0, other = 0;
	const char *torn = NULL;

	ck_assert_int_eq(pthread_create(&t, NULL, toggle_source_page, &r), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 20 && !torn; i++, rounds++) {
			int rc = copy_in(fd, c.id, off, src + 5, len);

			if (rc == 0) {
				landed++;
				if (memcmp(x, copied, size))
					torn = "returned 0";
				ck_assert_int_eq(fill_range(fd, c.id, 0, size), 0);
			} else if (rc == -EFAULT) {
				efault++;
				if (memcmp(x, filled, size))
					torn = "failed with EFAULT";
			} else {
				other++;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (!torn && rounds < 5000 &&
		 (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 < 1500);
	r.stop = 1;
	pthread_join(t, NULL);

	fprintf(stderr, "unmap race: %lu copies: %lu landed, %lu EFAULT\n", rounds, landed, efault);
	ck_assert_msg(r.bad == 0, "mapping the source page: %s", strerror(r.bad));
	ck_assert_msg(!torn, "a copy that %s left the pack neither as it was nor as copied",
		      torn);
	ck_assert_uint_eq(other, 0);
	munmap(src, page);
	munmap(src + page, page);
	munmap((void *)x, size);
	close(memfd);
	free(filled);
	free(copied);
	close(fd);
}
END_TEST

/*
 * The argument's size is read once: a thread flipping the size field
 * between a valid size and 0 while CREATE runs made CREATE validate the
 * first value and copy back as many bytes as the second said (none), so it
 * returned 0 without the id, leaving a charged pack no one could name.
 * Every CREATE that returns 0 must have written its id and cookie back.
 */
struct size_race {
	struct execpack_create *arg;
	volatile int stop;
};

static void *flip_size(void *arg)
{
	struct size_race *r = arg;
	volatile uint32_t *size = &r->arg->size;

	while (!r->stop) {
		*size = 0;
		*size = sizeof(struct execpack_create);
	}
	return NULL;
}

START_TEST(test_dev_create_size_race)
{
	int fd = dev_open();
	uint64_t base = info(fd).user_used;
	unsigned char pat = 0xcc;
	struct execpack_create *a = calloc(1, sizeof(*a));

	ck_assert_ptr_nonnull(a);
	a->size = sizeof(*a);

	struct size_race r = { .arg = a };
	pthread_t t;
	struct timespec t0, now;
	unsigned long rounds = 0, made = 0, lost = 0, refused = 0, other = 0, undestroyed = 0;

	ck_assert_int_eq(pthread_create(&t, NULL, flip_size, &r), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 50; i++, rounds++) {
			a->flags = 0;
			a->len = page;
			a->pattern = (uintptr_t)&pat;
			a->pattern_len = 1;
			a->id = 0;
			a->cookie = UINT64_MAX;
			int rc = xioctl(fd, EXECPACK_IOC_CREATE, a);

			if (rc == 0) {
				made++;
				if (a->id == 0 || a->cookie == UINT64_MAX)
					lost++; /* ids start at 1, cookies are page offsets */
				else if (destroy(fd, a->id))
					undestroyed++;
			} else if (rc == -EINVAL) {
				refused++; /* saw size 0 */
			} else {
				other++;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (rounds < 20000 &&
		 (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 < 2000);
	r.stop = 1;
	pthread_join(t, NULL);
	free(a);

	fprintf(stderr, "size race: %lu creates: %lu made, %lu refused (size 0)\n", rounds, made,
		refused);
	ck_assert_msg(lost == 0, "%lu of %lu creates returned 0 without writing their id back",
		      lost, made);
	ck_assert_uint_gt(made, 0);
	ck_assert_uint_eq(other, 0);
	ck_assert_uint_eq(undestroyed, 0);
	/* every pack made was destroyed: none is charged without an id */
	ck_assert_uint_eq(info(fd).user_used, base);
	close(fd);
	fd = dev_open();
	ck_assert_uint_eq(info(fd).user_used, base);
	close(fd);
}
END_TEST

/*
 * An argument may be at most a page (as openat2 and clone3 take theirs):
 * larger sizes are E2BIG at once, not a scan of up to 4 GiB of user memory
 * for a non-zero byte.  The argument sits at the start of 16 MiB of zero
 * pages followed by an unmapped page, so a module that scans gets there and
 * says EFAULT (slowly) instead, and a page-sized argument is readable.
 */
START_TEST(test_dev_arg_size_limit)
{
	int fd = dev_open();
	size_t zlen = 16u << 20;
	unsigned char pat = 0xcc;
	unsigned char *z = mmap(NULL, zlen + page, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	ck_assert_ptr_ne(z, MAP_FAILED);
	ck_assert_int_eq(munmap(z + zlen, page), 0);

	static const struct {
		const char *name;
		unsigned long cmd;
	} cmds[] = {
		{ "INFO", EXECPACK_IOC_INFO },	   { "CREATE", EXECPACK_IOC_CREATE },
		{ "COPY", EXECPACK_IOC_COPY },	   { "FILL", EXECPACK_IOC_FILL },
		{ "DESTROY", EXECPACK_IOC_DESTROY },
	};
	const uint32_t sizes[] = { 0xfffffff8u, (uint32_t)page + 8, (uint32_t)page + 1,
				   2 * (uint32_t)page, 0xffffffffu };

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
			struct timespec t0, t1;

			memset(z, 0, page);
			if (cmds[i].cmd == EXECPACK_IOC_CREATE) /* else valid but for the size */
				*(struct execpack_create *)z = (struct execpack_create){
					.len = page, .pattern = (uintptr_t)&pat, .pattern_len = 1,
				};
			*(uint32_t *)z = sizes[j];
			clock_gettime(CLOCK_MONOTONIC, &t0);
			int rc = xioctl(fd, cmds[i].cmd, z);

			clock_gettime(CLOCK_MONOTONIC, &t1);
			long ms = (t1.tv_sec - t0.tv_sec) * 1000 +
				  (t1.tv_nsec - t0.tv_nsec) / 1000000;

			ck_assert_msg(rc == -E2BIG, "%s with size %#x: %d (%s), not E2BIG",
				      cmds[i].name, sizes[j], rc, strerror(-rc));
			ck_assert_msg(ms < 2000, "%s with size %#x took %ld ms", cmds[i].name,
				      sizes[j], ms);
		}
	}

	/* exactly a page is still a (newer) struct with a zero tail */
	memset(z, 0, page);
	struct execpack_info *in = (struct execpack_info *)z;

	in->size = (uint32_t)page;
	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_INFO, in), 0);
	ck_assert_uint_eq(in->abi_version, EXECPACK_ABI_VERSION);
	ck_assert_uint_eq(in->page_size, page);
	z[page - 1] = 1;
	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_INFO, in), -E2BIG);

	memset(z, 0, page);
	struct execpack_create *cr = (struct execpack_create *)z;

	*cr = (struct execpack_create){
		.size = (uint32_t)page, .len = page, .pattern = (uintptr_t)&pat, .pattern_len = 1,
	};
	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_CREATE, cr), 0);
	ck_assert_uint_ne(cr->id, 0);
	ck_assert_int_eq(destroy(fd, cr->id), 0);

	munmap(z, zlen);
	close(fd);
}
END_TEST

/* Each open is a context: its packs and their charge go with its file. */
START_TEST(test_dev_context_release)
{
	int a = dev_open(), b = dev_open();
	unsigned char pat = 0xcc;
	struct execpack_create c;
	uint64_t base = info(b).user_used;

	ck_assert_int_eq(create(a, 8 * page, &pat, 1, &c), 0);
	ck_assert_uint_eq(info(b).user_used, base + 8 * page);
	/* ids are per context */
	ck_assert_int_eq(destroy(b, c.id), -ENOENT);

	/* destroyed while mapped: the mapping keeps the pages and the charge */
	unsigned char *x = mmap(NULL, 8 * page, PROT_READ, MAP_SHARED, a, (off_t)c.cookie);

	ck_assert_ptr_ne(x, MAP_FAILED);
	ck_assert_int_eq(destroy(a, c.id), 0);
	ck_assert_uint_eq(x[5 * page], 0xcc);
	ck_assert_uint_eq(info(b).user_used, base + 8 * page);
	munmap(x, 8 * page);
	ck_assert_uint_eq(info(b).user_used, base);

	ck_assert_int_eq(create(a, 4 * page, &pat, 1, &c), 0);
	ck_assert_uint_eq(info(b).user_used, base + 4 * page);
	close(a);
	ck_assert_uint_eq(info(b).user_used, base);
	close(b);
}
END_TEST

/* The per-user limit (module parameter user_limit) gives EPERM. */
START_TEST(test_dev_user_limit)
{
	int fd = dev_open();
	struct execpack_info in = info(fd);
	unsigned char pat = 0xcc;
	struct execpack_create c;

	ck_assert_uint_eq(in.abi_version, EXECPACK_ABI_VERSION);
	ck_assert_uint_eq(in.page_size, page);
	ck_assert_msg(in.user_limit > 0, "module loaded without a user_limit");
	ck_assert_uint_le(in.user_used, in.user_limit);

	uint64_t room = (in.user_limit - in.user_used) & ~(uint64_t)(page - 1);

	ck_assert_uint_gt(room, 0);
	ck_assert_int_eq(create(fd, in.user_limit + page, &pat, 1, NULL), -EPERM);
	if (room <= in.max_pack) {
		ck_assert_int_eq(create(fd, room, &pat, 1, &c), 0);
		ck_assert_int_eq(create(fd, page, &pat, 1, NULL), -EPERM);
		ck_assert_int_eq(destroy(fd, c.id), 0);
	}
	ck_assert_int_eq(create(fd, page, &pat, 1, &c), 0);
	ck_assert_int_eq(destroy(fd, c.id), 0);

	/* the same through the library */
	struct ep_pool *pool = kmod_pool(0);
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(pool, in.user_limit + page, &img), -EPERM);
	ck_assert_int_eq(ep_alloc(pool, 64, &img), 0);
	ep_pool_destroy(pool);
	close(fd);
}
END_TEST

/*
 * Every test ran in its own process (or closed what it opened), so nothing
 * may stay charged.  Only meaningful where no one else uses the device:
 * EXECPACK_KMOD_ALONE=1 (set in the check-kmod guest).
 */
START_TEST(test_nothing_left_charged)
{
	const char *alone = getenv("EXECPACK_KMOD_ALONE");

	if (!alone || strcmp(alone, "1")) {
		fprintf(stderr, "EXECPACK_KMOD_ALONE not set: charge not checked\n");
		return;
	}
	int fd = dev_open();

	ck_assert_uint_eq(info(fd).user_used, 0);
	close(fd);
}
END_TEST

/* Last: nothing above made the kernel complain. */
START_TEST(test_kernel_log_clean)
{
	int n = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);

	if (n < 0 && (errno == EPERM || errno == ENOSYS)) {
		fprintf(stderr, "kernel log not readable here: %s\n", strerror(errno));
		return;
	}
	ck_assert_int_gt(n, 0);

	char *buf = malloc((size_t)n + 1);

	ck_assert_ptr_nonnull(buf);
	n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, n);
	ck_assert_int_ge(n, 0);
	buf[n] = 0;

	static const char *const bad[] = {
		"WARNING:", "BUG:", "Oops", "general protection", "Call Trace", "refcount_t",
		"list_add corruption", "list_del corruption", "bad page",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *hit = strstr(buf, bad[i]);

		if (hit) {
			char *eol = strchr(hit, '\n');

			if (eol)
				*eol = 0;
			ck_abort_msg("kernel log: %s", hit);
		}
	}
	free(buf);
}
END_TEST

static Suite *kmod_suite(void)
{
	Suite *s = suite_create("kmod");
	TCase *api = tcase_create("api");
	TCase *dev = tcase_create("device");
	TCase *klog = tcase_create("klog");

	/* generous: under qemu without KVM everything is slow */
	tcase_set_timeout(api, 120);
	tcase_set_timeout(dev, 120);
	tcase_add_test(api, test_api_jit_and_patch);
	tcase_add_test(api, test_api_large_alloc);
	tcase_add_test(api, test_api_add);
	tcase_add_test(api, test_api_no_writable_device_mapping);
	tcase_add_test(api, test_api_open_errors);
	tcase_add_test(api, test_api_fork_private);
	tcase_add_test(api, test_api_patch_not_torn);
	tcase_add_test(api, test_api_code_range);
	tcase_add_test(api, test_api_small_chunks_fill_phase);
	tcase_add_test(dev, test_dev_mmap_write_refused);
	tcase_add_test(dev, test_dev_copy_and_fill);
	tcase_add_test(dev, test_dev_bad_input);
	tcase_add_test(dev, test_dev_context_release);
	tcase_add_test(dev, test_dev_threads);
	tcase_add_test(dev, test_dev_create_efault_race);
	tcase_add_test(dev, test_dev_copy_efault_unchanged);
	tcase_add_test(dev, test_dev_copy_efault_race);
	tcase_add_test(dev, test_dev_create_size_race);
	tcase_add_test(dev, test_dev_arg_size_limit);
	tcase_add_test(dev, test_dev_user_limit);
	tcase_add_test(klog, test_nothing_left_charged);
	tcase_add_test(klog, test_kernel_log_clean);
	suite_add_tcase(s, api);
	suite_add_tcase(s, dev);
	suite_add_tcase(s, klog);
	return s;
}

/*
 * EXECPACK_KMOD_DENIED: run as a user outside the device's group (the
 * module makes it 0660 root:root; packaging's udev rule gives it to the
 * execpack group): open() is refused, and so are the kmod backend's probe
 * and pool, with -EACCES and a reason, never a crash or another backend.
 */
static int check_denied(void)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_KMOD, .path = dev_path };
	struct ep_pool *pool = NULL;
	char why[256] = "";
	int fd = open(dev_path, O_RDWR | O_CLOEXEC);
	int e = errno;

	if (fd >= 0) {
		close(fd);
		printf("FAIL: denied: uid %u opened %s\n", (unsigned)getuid(), dev_path);
		return EXIT_FAILURE;
	}
	if (e != EACCES) {
		printf("FAIL: denied: open %s: %s, not EACCES\n", dev_path, strerror(e));
		return EXIT_FAILURE;
	}
	int rc = ep_backend_probe(EP_BACKEND_KMOD, &cfg, why, sizeof(why));

	if (rc != -EACCES || !why[0]) {
		printf("FAIL: denied: ep_backend_probe(kmod) = %d (%s), not -EACCES with a reason\n",
		       rc, why);
		return EXIT_FAILURE;
	}
	rc = ep_pool_create(&cfg, &pool);
	if (rc != -EACCES) {
		printf("FAIL: denied: ep_pool_create(kmod) = %d, not -EACCES\n", rc);
		if (rc == 0)
			ep_pool_destroy(pool);
		return EXIT_FAILURE;
	}
	printf("PASS: denied: uid %u: %s\n", (unsigned)getuid(), why);
	return EXIT_SUCCESS;
}

int main(void)
{
	dev_path = getenv("EXECPACK_DEVICE");
	if (!dev_path || !*dev_path)
		dev_path = EXECPACK_DEVICE;
	page = (size_t)sysconf(_SC_PAGESIZE);

	/* EXECPACK_KMOD_UID: run as that (unprivileged) user; the guest does both. */
	const char *uid = getenv("EXECPACK_KMOD_UID");

	if (uid && *uid) {
		unsigned long id = strtoul(uid, NULL, 10);

		if (setgroups(0, NULL) || setresgid((gid_t)id, (gid_t)id, (gid_t)id) ||
		    setresuid((uid_t)id, (uid_t)id, (uid_t)id)) {
			printf("cannot become uid %lu: %s\n", id, strerror(errno));
			return EXIT_FAILURE;
		}
	}

	const char *denied = getenv("EXECPACK_KMOD_DENIED");

	if (denied && *denied == '1')
		return check_denied();

	int fd = open(dev_path, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		int e = errno;

		printf("SKIP: kmod: %s: %s%s\n", dev_path, strerror(e),
		       e == ENOENT || e == ENODEV || e == ENXIO ? " (module not loaded?)" : "");
		return 77;
	}
	close(fd);

	SRunner *sr = srunner_create(kmod_suite());

	srunner_run_all(sr, CK_ENV); /* CK_VERBOSITY=verbose lists every test */
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
