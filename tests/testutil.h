/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * testutil.h - small helpers shared by the test suites: real code to JIT
 * for the architecture they run on (x86-64, arm64, riscv64), its trap fill,
 * and a W^X scanner for /proc/self/maps.
 */
#ifndef EP_TESTUTIL_H
#define EP_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "execpack.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

typedef int (*tu_fn)(void);

/*
 * Code for the architecture the tests run on: "return imm" (TU_RET_LEN
 * bytes), the no-op, and the pool's default trap fill (TU_FILL).  Nops and
 * traps are chosen by address, as the library's fills are, so a buffer
 * whose address has the same phase as its exec address (every staging
 * buffer) holds the same bytes as the code will.
 */
/* One 32-bit instruction word (arm64 and riscv64: little endian). */
static inline void tu_put32(unsigned char *p, uint32_t insn)
{
	memcpy(p, &insn, 4);
}

#if defined(__x86_64__)
#define TU_RET_LEN 6
#define TU_INSN_ALIGN 1
#define TU_FILL ep_fill_x86_int3
/* mov eax, imm32; ret */
static inline size_t tu_emit_ret_imm(unsigned char *p, uint32_t imm)
{
	p[0] = 0xb8;
	memcpy(p + 1, &imm, 4);
	p[5] = 0xc3;
	return TU_RET_LEN;
}

static inline unsigned char tu_nop_byte(const void *at)
{
	(void)at;
	return 0x90;
}
#elif defined(__aarch64__)
#define TU_RET_LEN 12
#define TU_INSN_ALIGN 4
#define TU_FILL ep_fill_arm64_brk
/* movz w0, #lo; movk w0, #hi, lsl #16; ret */
static inline size_t tu_emit_ret_imm(unsigned char *p, uint32_t imm)
{
	tu_put32(p, 0x52800000u | (imm & 0xffff) << 5);
	tu_put32(p + 4, 0x72a00000u | (imm >> 16) << 5);
	tu_put32(p + 8, 0xd65f03c0u);
	return TU_RET_LEN;
}

static inline unsigned char tu_nop_byte(const void *at)
{
	static const unsigned char nop[4] = { 0x1f, 0x20, 0x03, 0xd5 }; /* 0xd503201f */

	return nop[(uintptr_t)at & 3];
}
#elif defined(__riscv) && __riscv_xlen == 64
#define TU_RET_LEN 12
#define TU_INSN_ALIGN 2
#define TU_FILL ep_fill_riscv_ebreak
/* lui a0, hi; addiw a0, a0, lo; ret */
static inline size_t tu_emit_ret_imm(unsigned char *p, uint32_t imm)
{
	uint32_t hi = (imm + 0x800) >> 12;
	uint32_t lo = imm - (hi << 12);

	tu_put32(p, hi << 12 | 10u << 7 | 0x37);
	tu_put32(p + 4, (lo & 0xfff) << 20 | 10u << 15 | 10u << 7 | 0x1b);
	tu_put32(p + 8, 0x00008067u);
	return TU_RET_LEN;
}

static inline unsigned char tu_nop_byte(const void *at)
{
	static const unsigned char nop[2] = { 0x01, 0x00 }; /* c.nop */

	return nop[(uintptr_t)at & 1];
}
#else
#error "tests: no code emitter for this architecture"
#endif

/* The imm of a "return imm" that tu_emit_ret_imm() wrote at p. */
static inline uint32_t tu_ret_imm_of(const void *p)
{
	const unsigned char *b = p;
#if defined(__x86_64__)
	uint32_t v;

	memcpy(&v, b + 1, 4);
	return v;
#else
	uint32_t w0, w1;

	memcpy(&w0, b, 4);
	memcpy(&w1, b + 4, 4);
#if defined(__aarch64__)
	return (w0 >> 5 & 0xffffu) | (w1 >> 5 & 0xffffu) << 16;
#else
	uint32_t lo = w1 >> 20;

	return (w0 & 0xfffff000u) + (lo ^ 0x800u) - 0x800u; /* addiw's lo is signed */
#endif
#endif
}

/* The trap fill's byte at address at. */
static inline unsigned char tu_trap_byte(const void *at)
{
	unsigned char b[8] __attribute__((aligned(8)));

	TU_FILL(b, sizeof(b), NULL);
	return b[(uintptr_t)at & 7];
}

/* Whether [p, p+len) holds the trap fill. */
static inline int tu_is_trap(const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++)
		if (b[i] != tu_trap_byte(b + i))
			return 0;
	return 1;
}

/* No-ops over [p, p+len): code that runs on to what follows. */
static inline void tu_fill_nops(unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = tu_nop_byte(p + i);
}

/* Whether [p, p+len) holds no-ops as tu_fill_nops() writes them. */
static inline int tu_is_nops(const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++)
		if (b[i] != tu_nop_byte(b + i))
			return 0;
	return 1;
}

/* Where tu_emit_sized() puts "return imm" in a function of len bytes. */
static inline size_t tu_ret_offset(const unsigned char *p, size_t len)
{
	size_t off = len < TU_RET_LEN ? 0 : len - TU_RET_LEN;

	return off - (((uintptr_t)p + off) & (TU_INSN_ALIGN - 1));
}

/* No-ops then "return imm": a function of exactly len bytes, or of
 * TU_RET_LEN if len is less (the buffer must hold that many; on arm64 and
 * riscv64 the bytes past the last whole instruction are no-op pieces,
 * never run). */
static inline void tu_emit_sized(unsigned char *p, size_t len, uint32_t imm)
{
	if (len < TU_RET_LEN)
		len = TU_RET_LEN;
	tu_fill_nops(p, len);
	tu_emit_ret_imm(p + tu_ret_offset(p, len), imm);
}

static inline tu_fn tu_as_fn(void *exec)
{
	tu_fn f;

	memcpy(&f, &exec, sizeof(f)); /* object to function pointer, portably */
	return f;
}

/* Where tu_jit_ret(pool, len, ...) put its "return imm". */
static inline void *tu_ret_at(void *exec, size_t len)
{
	if (len < TU_RET_LEN)
		len = TU_RET_LEN;
	return (unsigned char *)exec + tu_ret_offset(exec, len);
}

/*
 * Make the live "return imm" at ret (an exec address) return imm instead,
 * with ep_write() of only the bytes that change: the imm32 of x86's mov
 * (one 4-byte store); on arm64 and riscv64 the instruction words that
 * differ, so that a change of the low 16 (arm64) or 12 (riscv64) bits
 * alone is one aligned 32-bit instruction word, which a thread running
 * the code sees whole.
 */
static inline int tu_patch_ret_imm(struct ep_pool *pool, void *ret, uint32_t imm)
{
#if defined(__x86_64__)
	return ep_write(pool, (unsigned char *)ret + 1, &imm, 4);
#else
	unsigned char now[TU_RET_LEN], want[TU_RET_LEN];
	size_t lo = TU_RET_LEN, hi = 0;

	memcpy(now, ret, sizeof(now));
	tu_emit_ret_imm(want, imm);
	for (size_t w = 0; w < TU_RET_LEN; w += 4)
		if (memcmp(now + w, want + w, 4)) {
			lo = lo < w ? lo : w;
			hi = w + 4;
		}
	if (hi == 0)
		return ep_write(pool, ret, want, 0);
	return ep_write(pool, (unsigned char *)ret + lo, want + lo, hi - lo);
#endif
}

/* Two immediates whose "return imm" differ in one aligned instruction word
 * only (x86: the imm32, one store), for patches raced against callers. */
#define TU_PATCH_A 0x11111111u
#if defined(__x86_64__)
#define TU_PATCH_B 0x22222222u
#else
#define TU_PATCH_B 0x11111222u /* the low 12 bits only: movz, or addiw */
#endif

/* JIT a function returning imm; returns its exec address or NULL. */
static inline void *tu_jit_ret(struct ep_pool *pool, size_t size, uint32_t imm, int *rc_out)
{
	struct ep_image img;
	int rc = ep_alloc(pool, size, &img);

	if (rc == 0) {
		tu_emit_sized(img.rw, size < TU_RET_LEN ? TU_RET_LEN : size, imm);
		rc = ep_finalize(pool, img.exec);
	}
	if (rc_out)
		*rc_out = rc;
	return rc == 0 ? img.exec : NULL;
}

/* The base page size of the running kernel (4, 16 or 64 KiB). */
/* A pool with the default configuration can be made here, or the test
 * SKIPs (exit 77) saying why.  The backend it got (a static name). */
static inline const char *tu_need_pool(void)
{
	struct ep_pool *probe = NULL;
	int rc = ep_pool_create(NULL, &probe);

	if (rc) {
		printf("SKIP: no executable memory for a pool here: %s\n", ep_strerror(rc));
		exit(77);
	}
	const char *name = ep_pool_backend(probe);

	ep_pool_destroy(probe);
	return name;
}

static inline size_t tu_page(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/* The number a /proc or /sys file holds, or -1 if it cannot be read. */
static inline long tu_read_long(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* A shorter run: EP_TEST_QUICK=1 (the arm64 stage's emulated machine). */
static inline int tu_quick(void)
{
	const char *q = getenv("EP_TEST_QUICK");

	return q && *q && strcmp(q, "0") != 0;
}

/* The default huge page size (what vm.nr_hugepages reserves and the
 * hugetlb backend uses), in bytes; 0 if unknown. */
static inline size_t tu_huge_page_size(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[128];
	unsigned long kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Hugepagesize: %lu kB", &kb) == 1)
			break;
	fclose(f);
	return (size_t)kb << 10;
}

/* Free default-size huge pages in the system, or -1 if that cannot be read. */
/* A size that is a large allocation in any pool of the running system:
 * more than a pack, whose default is the huge page size (2 MiB, 32 MiB
 * under a 16 KiB-page arm64 kernel, 512 MiB under 64 KiB pages). */
static inline size_t tu_large_size(void)
{
	size_t h = 2 * tu_huge_page_size();

	return h > ((size_t)4 << 20) ? h : (size_t)4 << 20;
}

static inline long tu_free_huge_pages(void)
{
	char path[96];

	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%zukB/free_hugepages",
		 tu_huge_page_size() >> 10);
	return tu_read_long(path);
}

/* KernelPageSize of the mapping holding addr, in kB; -1 if not found. */
static inline long tu_kernel_page_kb(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	int in = 0;
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ' ') - line <= 34) {
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (in && sscanf(line, "KernelPageSize: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

/*
 * Whether a /proc/self/maps line is a view of one of the library's
 * regions: anonymous shared memory, "/dev/zero (deleted)" (base pages), or
 * a memfd, "/memfd:execpack (deleted)" (huge pages, and base pages where
 * anonymous memory cannot be made executable).
 */
static inline int tu_pack_line(const char *line)
{
	return strstr(line, "/memfd:execpack") != NULL || strstr(line, "/dev/zero (deleted)") != NULL;
}

/* Whether the memfd backend's regions are anonymous shared memory here:
 * this process may make such memory executable, and it does not run under
 * Valgrind (whose mremap() does not map it twice). */
static inline int tu_anon_exec_ok(void)
{
	if (RUNNING_ON_VALGRIND)
		return 0;
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int ok = p != MAP_FAILED && mprotect(p, 4096, PROT_READ | PROT_EXEC) == 0;

	if (p != MAP_FAILED)
		munmap(p, 4096);
	return ok;
}

/* Number of mappings in /proc/self/maps that are both writable and
 * executable (must always be 0), or -1 if maps cannot be read.  Under
 * Valgrind only the library's own mappings count: Valgrind's translation
 * cache is itself writable and executable. */
static inline int tu_count_wx_mappings(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char perms[8] = "";

		if (sscanf(line, "%*x-%*x %7s", perms) == 1 && perms[1] == 'w' && perms[2] == 'x' &&
		    (!RUNNING_ON_VALGRIND || tu_pack_line(line)))
			n++;
	}
	fclose(f);
	return n;
}

/* The permission string ("r-xs") of the mapping holding addr, and its
 * name when asked: 0, or -1 with perms "" when no mapping holds addr. */
static inline int tu_mapping_perms(const void *addr, char perms[8], char *name, size_t namelen)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[1024];

	perms[0] = 0;
	if (name && namelen)
		name[0] = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char p[8];
		int off = 0;

		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, p, &off) >= 3 &&
		    (uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
			memcpy(perms, p, 8);
			if (name && namelen && off > 0) {
				snprintf(name, namelen, "%s", line + off);
				name[strcspn(name, "\n")] = 0;
			}
			break;
		}
	}
	fclose(f);
	return perms[0] ? 0 : -1;
}

#ifdef ck_assert_msg
/* A pool made as cfg says (its sz filled in here); the test fails with
 * ep_pool_create()'s reason when it cannot be made.  For the Check suites:
 * check.h comes before this header. */
static inline struct ep_pool *tu_pool(struct ep_config cfg)
{
	struct ep_pool *p = NULL;
	int rc;

	cfg.sz = sizeof(cfg);
	rc = ep_pool_create(&cfg, &p);
	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	return p;
}
#endif

#endif /* EP_TESTUTIL_H */
