/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * testutil.h - small helpers shared by the test suites: real x86-64 code to
 * JIT and a W^X scanner for /proc/self/maps.
 */
#ifndef EP_TESTUTIL_H
#define EP_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

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

/* mov eax, imm32; ret  (6 bytes) */
static inline size_t tu_emit_ret_imm(unsigned char *p, uint32_t imm)
{
	p[0] = 0xb8;
	memcpy(p + 1, &imm, 4);
	p[5] = 0xc3;
	return 6;
}

/* nop padding then mov eax, imm32; ret: a function of exactly len >= 6 bytes */
static inline void tu_emit_sized(unsigned char *p, size_t len, uint32_t imm)
{
	memset(p, 0x90, len - 6);
	tu_emit_ret_imm(p + len - 6, imm);
}

static inline tu_fn tu_as_fn(void *exec)
{
	tu_fn f;

	memcpy(&f, &exec, sizeof(f)); /* object to function pointer, portably */
	return f;
}

/* JIT a function returning imm; returns its exec address or NULL. */
static inline void *tu_jit_ret(struct ep_pool *pool, size_t size, uint32_t imm, int *rc_out)
{
	struct ep_image img;
	int rc = ep_alloc(pool, size, &img);

	if (rc == 0) {
		tu_emit_sized(img.rw, size < 6 ? 6 : size, imm);
		rc = ep_finalize(pool, img.exec);
	}
	if (rc_out)
		*rc_out = rc;
	return rc == 0 ? img.exec : NULL;
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

/* Free 2 MiB huge pages in the system, or -1 if that cannot be read. */
static inline long tu_free_huge_pages(void)
{
	return tu_read_long("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
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

/* Number of mappings in /proc/self/maps that are both writable and
 * executable (must always be 0), or -1 if maps cannot be read.  Under
 * Valgrind only the library's own (execpack) mappings count: Valgrind's
 * translation cache is itself writable and executable. */
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
		    (!RUNNING_ON_VALGRIND || strstr(line, "execpack")))
			n++;
	}
	fclose(f);
	return n;
}

/* The permission string ("r-xs") of the mapping holding addr, or "" */
static inline void tu_mapping_perms(const void *addr, char perms[8], char *name, size_t namelen)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[1024];

	perms[0] = 0;
	if (name && namelen)
		name[0] = 0;
	if (!f)
		return;
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
}

#endif /* EP_TESTUTIL_H */
