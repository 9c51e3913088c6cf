/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_diag.c - names for JIT code: ep_set_name() and its errors,
 * ep_symbolize() (offsets, truncation, all pools, freed code), the perf
 * map (and files another user plants in its place), ep_backtrace(), code reuse through ep_free()/ep_write(), and real
 * libunwind backtraces through JIT frames in every ep_set_unwind() kind.
 *
 * Run twice by make check: as is, and with EXECPACK_UNWIND=dwarf
 * (tests/check_diag-dwarf.sh), which changes the default unwind kind.
 */
#include "config.h"

#include <check.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_VALGRIND_MEMCHECK_H
#include <valgrind/memcheck.h>
#endif

#ifdef HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#include "execpack.h"
#include "testutil.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EP_TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(EP_TEST_TSAN)
#define EP_TEST_TSAN 1
#endif
#ifndef EP_TEST_TSAN
#define EP_TEST_TSAN 0
#endif

static struct ep_pool *pool;

static struct ep_pool *make_pool(unsigned flags)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD, .flags = flags };
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(&cfg, &p);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	return p;
}

static void setup(void)
{
	pool = make_pool(0);
}

static void teardown(void)
{
	char path[64];

	ep_pool_destroy(pool);
	pool = NULL;
	/* with EXECPACK_PERFMAP=1 every test writes a perf map: leave none */
	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	unlink(path);
}

static void *jit(struct ep_pool *p, size_t size, uint32_t v)
{
	int rc;
	void *exec = tu_jit_ret(p, size, v, &rc);

	ck_assert_msg(exec != NULL, "jit: %s", ep_strerror(rc));
	return exec;
}

/* ---- ep_set_name / ep_symbolize ---------------------------------------- */

START_TEST(test_name_errors)
{
	struct ep_image img;
	char longname[EP_NAME_MAX + 2];

	ck_assert_int_eq(ep_alloc(pool, 100, &img), 0);
	ck_assert_int_eq(ep_set_name(NULL, img.exec, "x"), -EINVAL);
	ck_assert_int_eq(ep_set_name(pool, NULL, "x"), -EINVAL);
	ck_assert_int_eq(ep_set_name(pool, img.exec, NULL), -EINVAL);
	ck_assert_int_eq(ep_set_name(pool, img.exec, ""), -EINVAL);
	ck_assert_int_eq(ep_set_name(pool, img.exec, "two\nlines"), -EINVAL);
	/* interior address, an address in no allocation */
	ck_assert_int_eq(ep_set_name(pool, (char *)img.exec + 1, "x"), -EINVAL);
	ck_assert_int_eq(ep_set_name(pool, (char *)img.exec + 4096, "x"), -EINVAL);
	int on_stack;

	ck_assert_int_eq(ep_set_name(pool, &on_stack, "x"), -EINVAL);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	ck_assert_int_eq(ep_set_name(pool, img.exec, longname), -ENAMETOOLONG);
	longname[EP_NAME_MAX] = 0; /* exactly EP_NAME_MAX is fine */
	ck_assert_int_eq(ep_set_name(pool, img.exec, longname), 0);
	/* freed: no longer live */
	ck_assert_int_eq(ep_free(pool, img.exec), 0);
	ck_assert_int_eq(ep_set_name(pool, img.exec, "x"), -EINVAL);
	ck_assert_int_eq(ep_symbolize(img.exec, NULL, 0, NULL), -ENOENT);
}
END_TEST

START_TEST(test_symbolize)
{
	void *a = jit(pool, 100, 1), *b = jit(pool, 10, 2);
	char buf[64];
	size_t off = 99;
	char tmp[64];

	/* unnamed code and non-JIT addresses: -ENOENT */
	ck_assert_int_eq(ep_symbolize(a, buf, sizeof(buf), &off), -ENOENT);
	ck_assert_int_eq(ep_symbolize(tmp, buf, sizeof(buf), &off), -ENOENT);
	ck_assert_int_eq(ep_symbolize(NULL, buf, sizeof(buf), &off), -ENOENT);

	ck_assert_int_eq(ep_set_name(pool, a, "prog_a"), 0);
	ck_assert_int_eq(ep_set_name(pool, b, "prog_b"), 0);
	ck_assert_int_eq(ep_symbolize(a, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "prog_a");
	ck_assert_uint_eq(off, 0);
	ck_assert_int_eq(ep_symbolize((char *)a + 77, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "prog_a");
	ck_assert_uint_eq(off, 77);
	ck_assert_int_eq(ep_symbolize((char *)b + 5, buf, sizeof(buf), NULL), 0);
	ck_assert_str_eq(buf, "prog_b");
	/* the whole handed-out size counts, the trap fill after the code too */
	ck_assert_int_eq(ep_symbolize((char *)b + 63, buf, sizeof(buf), &off), 0);
	ck_assert_uint_eq(off, 63);

	/* rename */
	ck_assert_int_eq(ep_set_name(pool, a, "prog_a_v2"), 0);
	ck_assert_int_eq(ep_symbolize((char *)a + 1, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "prog_a_v2");

	/* too small: truncated, NUL-terminated, offset still reported */
	char small[5];

	off = 0;
	ck_assert_int_eq(ep_symbolize((char *)a + 3, small, sizeof(small), &off), -ERANGE);
	ck_assert_str_eq(small, "prog");
	ck_assert_uint_eq(off, 3);
	ck_assert_int_eq(ep_symbolize((char *)a + 3, NULL, 0, &off), -ERANGE);
	/* exactly fitting */
	char fit[10];

	ck_assert_int_eq(ep_symbolize(a, fit, sizeof(fit), NULL), 0);
	ck_assert_str_eq(fit, "prog_a_v2");

	/* the code still runs; freed code is gone from the table */
	ck_assert_int_eq(tu_as_fn(a)(), 1);
	ck_assert_int_eq(ep_free(pool, a), 0);
	ck_assert_int_eq(ep_symbolize(a, buf, sizeof(buf), &off), -ENOENT);
	ck_assert_int_eq(ep_symbolize(b, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "prog_b");
}
END_TEST

START_TEST(test_symbolize_many_pools)
{
	enum { NPOOLS = 3, PER = 300 };
	struct ep_pool *pools[NPOOLS];
	void *code[NPOOLS][PER];
	char name[32], buf[32];

	for (int p = 0; p < NPOOLS; p++) {
		pools[p] = make_pool(0);
		for (int i = 0; i < PER; i++) {
			code[p][i] = jit(pools[p], 1 + (size_t)i % 200, (uint32_t)i);
			snprintf(name, sizeof(name), "p%d_f%d", p, i);
			ck_assert_int_eq(ep_set_name(pools[p], code[p][i], name), 0);
		}
	}
	/* free every other one, then look everything up */
	for (int p = 0; p < NPOOLS; p++)
		for (int i = 0; i < PER; i += 2)
			ck_assert_int_eq(ep_free(pools[p], code[p][i]), 0);
	for (int p = 0; p < NPOOLS; p++) {
		for (int i = 0; i < PER; i++) {
			size_t off = 0;
			int rc = ep_symbolize((char *)code[p][i] + 2, buf, sizeof(buf), &off);

			if (i % 2 == 0) {
				ck_assert_int_eq(rc, -ENOENT);
				continue;
			}
			snprintf(name, sizeof(name), "p%d_f%d", p, i);
			ck_assert_int_eq(rc, 0);
			ck_assert_str_eq(buf, name);
			ck_assert_uint_eq(off, 2);
		}
	}
	/* a destroyed pool's names go with it */
	ep_pool_destroy(pools[1]);
	ck_assert_int_eq(ep_symbolize(code[1][1], buf, sizeof(buf), NULL), -ENOENT);
	ck_assert_int_eq(ep_symbolize(code[2][1], buf, sizeof(buf), NULL), 0);
	ep_pool_destroy(pools[0]);
	ep_pool_destroy(pools[2]);
}
END_TEST

START_TEST(test_name_before_finalize)
{
	struct ep_image img;
	char buf[32];

	ck_assert_int_eq(ep_alloc(pool, 20, &img), 0);
	ck_assert_int_eq(ep_set_name(pool, img.exec, "early"), 0);
	ck_assert_int_eq(ep_symbolize(img.exec, buf, sizeof(buf), NULL), 0);
	ck_assert_str_eq(buf, "early");
	tu_emit_ret_imm(img.rw, 7);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 7);
	ck_assert_int_eq(ep_symbolize(img.exec, buf, sizeof(buf), NULL), 0);
	ck_assert_str_eq(buf, "early");
	/* freed before finalize: the name goes too */
	ck_assert_int_eq(ep_alloc(pool, 20, &img), 0);
	ck_assert_int_eq(ep_set_name(pool, img.exec, "never_run"), 0);
	ck_assert_int_eq(ep_free(pool, img.exec), 0);
	ck_assert_int_eq(ep_symbolize(img.exec, buf, sizeof(buf), NULL), -ENOENT);
}
END_TEST

/* Readers never see a torn entry while another thread names, renames and
 * frees code at the same addresses. */
static void *g_race_addr[4];
static int g_race_stop;

static void *symbolize_reader(void *arg)
{
	long bad = 0, hits = 0;

	(void)arg;
	while (!__atomic_load_n(&g_race_stop, __ATOMIC_ACQUIRE)) {
		for (int i = 0; i < 4; i++) {
			void *a = __atomic_load_n(&g_race_addr[i], __ATOMIC_ACQUIRE);
			char buf[EP_NAME_MAX + 1];
			size_t off = 12345;

			if (!a)
				continue;
			int rc = ep_symbolize((char *)a + 3, buf, sizeof(buf), &off);

			if (rc == -ENOENT)
				continue;
			hits++;
			/* names are "race_<n>_" followed by 'x' * (n * 37 % 200) */
			if (rc != 0 || off != 3 || strncmp(buf, "race_", 5) != 0) {
				bad++;
				continue;
			}
			int n = atoi(buf + 5);
			const char *tail = strchr(buf + 5, '_');
			size_t want = (size_t)(n * 37 % 200);

			if (!tail || strspn(tail + 1, "x") != want || tail[1 + want] != 0)
				bad++;
		}
	}
	return (void *)(bad ? -1 : hits);
}

START_TEST(test_symbolize_concurrent)
{
	pthread_t th;
	int rounds = getenv("EP_TEST_QUICK") ? 300 : 3000;
	char name[EP_NAME_MAX + 1];

	__atomic_store_n(&g_race_stop, 0, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_create(&th, NULL, symbolize_reader, NULL), 0);
	for (int r = 0; r < rounds; r++) {
		int i = r % 4;
		void *a = __atomic_load_n(&g_race_addr[i], __ATOMIC_ACQUIRE);

		if (a) {
			__atomic_store_n(&g_race_addr[i], NULL, __ATOMIC_RELEASE);
			ck_assert_int_eq(ep_free(pool, a), 0);
		}
		a = jit(pool, 40, (uint32_t)r);
		int n = snprintf(name, sizeof(name), "race_%d_", r);

		memset(name + n, 'x', (size_t)(r * 37 % 200));
		name[n + r * 37 % 200] = 0;
		ck_assert_int_eq(ep_set_name(pool, a, name), 0);
		__atomic_store_n(&g_race_addr[i], a, __ATOMIC_RELEASE);
		/* rename in place: readers see the old or the new name */
		snprintf(name, sizeof(name), "race_%d_", r + 4000);
		n = (int)strlen(name);
		memset(name + n, 'x', (size_t)((r + 4000) * 37 % 200));
		name[n + (r + 4000) * 37 % 200] = 0;
		ck_assert_int_eq(ep_set_name(pool, a, name), 0);
	}
	__atomic_store_n(&g_race_stop, 1, __ATOMIC_RELEASE);
	void *res;

	ck_assert_int_eq(pthread_join(th, &res), 0);
	ck_assert_msg((long)res >= 0, "a reader saw a torn or wrong name");
	for (int i = 0; i < 4; i++) {
		if (g_race_addr[i])
			ck_assert_int_eq(ep_free(pool, g_race_addr[i]), 0);
		g_race_addr[i] = NULL;
	}
}
END_TEST

/* Valgrind caches translations by address: a reused address and patched
 * code must run the new bytes.  Run under memcheck by make check-valgrind. */
START_TEST(test_reuse_runs_new_code)
{
	void *a = jit(pool, 6, 1);

	ck_assert_int_eq(tu_as_fn(a)(), 1);
	ck_assert_int_eq(ep_free(pool, a), 0);
	void *b = jit(pool, 6, 2);

	ck_assert_ptr_eq(a, b); /* first fit: the same chunk */
	ck_assert_int_eq(tu_as_fn(b)(), 2);

	unsigned char patch[TU_RET_LEN];

	tu_emit_ret_imm(patch, 3);
	ck_assert_int_eq(ep_write(pool, b, patch, sizeof(patch)), 0);
	ck_assert_int_eq(tu_as_fn(b)(), 3);
	ck_assert_int_eq(tu_patch_ret_imm(pool, b, 4), 0);
	ck_assert_int_eq(tu_as_fn(b)(), 4);
}
END_TEST

/* ---- perf map --------------------------------------------------------- */

static int map_has(const char *want)
{
	char path[64], line[512];
	int found = 0;

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strcmp(line, want))
			found = 1;
	fclose(f);
	return found;
}

START_TEST(test_perfmap)
{
	struct ep_pool *p = make_pool(EP_F_PERFMAP);
	char path[64], want[128];
	struct ep_image img;

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	unlink(path);
	/* named after finalize */
	void *a = jit(p, 30, 1);

	ck_assert_int_eq(ep_set_name(p, a, "perf_a"), 0);
	snprintf(want, sizeof(want), "%lx %x perf_a\n", (unsigned long)(uintptr_t)a, 64);
	ck_assert_msg(map_has(want), "no line '%s' in %s", want, path);
	/* named before finalize: listed at finalize, not before */
	ck_assert_int_eq(ep_alloc(p, 200, &img), 0);
	ck_assert_int_eq(ep_set_name(p, img.exec, "perf_b"), 0);
	snprintf(want, sizeof(want), "%lx %zx perf_b\n", (unsigned long)(uintptr_t)img.exec,
		 img.size);
	ck_assert(!map_has(want));
	tu_emit_ret_imm(img.rw, 2);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_msg(map_has(want), "no line '%s' in %s", want, path);
	/* renaming appends; perf takes the last line */
	ck_assert_int_eq(ep_set_name(p, a, "perf_a2"), 0);
	snprintf(want, sizeof(want), "%lx %x perf_a2\n", (unsigned long)(uintptr_t)a, 64);
	ck_assert(map_has(want));
	ep_pool_destroy(p);

	/* a pool without the flag (and no EXECPACK_PERFMAP) writes nothing */
	const char *env = getenv("EXECPACK_PERFMAP");

	unlink(path);
	a = jit(pool, 30, 1);
	ck_assert_int_eq(ep_set_name(pool, a, "quiet"), 0);
	if (!env || !*env || !strcmp(env, "0")) {
		ck_assert_int_eq(access(path, F_OK), -1);
	} else {
		/* EXECPACK_PERFMAP=1 (check_diag-dwarf.sh): every pool writes */
		snprintf(want, sizeof(want), "%lx %x quiet\n", (unsigned long)(uintptr_t)a, 64);
		ck_assert_msg(map_has(want), "EXECPACK_PERFMAP set but no '%s'", want);
	}
	unlink(path);
}
END_TEST

/* ---- how much code a symbol covers ---------------------------------------
 * A name covers the program's bytes: the allocation's by default, up to
 * the size given to ep_shrink() (even where no whole chunk is given back)
 * or to ep_set_name_size(), never the trap fill past them.  The same
 * extent goes to ep_symbolize(), the perf map and the GDB JIT interface
 * (the last read here from the descriptor the library exports).
 */
struct jit_code_entry {
	struct jit_code_entry *next_entry, *prev_entry;
	const char *symfile_addr;
	uint64_t symfile_size;
};
struct jit_descriptor {
	uint32_t version, action_flag;
	struct jit_code_entry *relevant_entry, *first_entry;
};
/* weak: read through the GOT, never copied into the program (a copy
 * relocation would make it the program's own descriptor, which the
 * library leaves alone as another JIT's) */
extern struct jit_descriptor __jit_debug_descriptor __attribute__((weak));

/* The size of the function symbol at exec in GDB's list, or -1. */
static long gdb_symbol_size(const void *exec)
{
	if (!&__jit_debug_descriptor)
		return -2;
	for (const struct jit_code_entry *e = __jit_debug_descriptor.first_entry; e;
	     e = e->next_entry) {
		const Elf64_Ehdr *eh = (const Elf64_Ehdr *)e->symfile_addr;
		const Elf64_Shdr *sh = (const Elf64_Shdr *)(e->symfile_addr + eh->e_shoff);

		for (unsigned i = 0; i < eh->e_shnum; i++) {
			if (sh[i].sh_type != SHT_SYMTAB)
				continue;
			const Elf64_Sym *sym = (const Elf64_Sym *)(e->symfile_addr + sh[i].sh_offset);

			for (size_t j = 0; j < sh[i].sh_size / sizeof(*sym); j++)
				if (ELF64_ST_TYPE(sym[j].st_info) == STT_FUNC &&
				    sym[j].st_value == (uintptr_t)exec)
					return (long)sym[j].st_size;
		}
	}
	return -1;
}

static void check_extent(const void *exec, size_t n, const char *name, int in_map)
{
	char buf[64], want[128];
	size_t off = 0;

	ck_assert_int_eq(ep_symbolize((const char *)exec + n - 1, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, name);
	ck_assert_uint_eq(off, n - 1);
	ck_assert_msg(ep_symbolize((const char *)exec + n, buf, sizeof(buf), &off) == -ENOENT,
		      "%s: the name covers %p, %zu bytes past its start", name,
		      (const void *)((const char *)exec + n), n);
	ck_assert_msg(gdb_symbol_size(exec) == (long)n, "%s: gdb's symbol has %ld bytes, not %zu",
		      name, gdb_symbol_size(exec), n);
	snprintf(want, sizeof(want), "%lx %zx %s\n", (unsigned long)(uintptr_t)exec, n, name);
	if (in_map)
		ck_assert_msg(map_has(want), "no '%s' in the perf map", want);
}

START_TEST(test_symbol_size)
{
	struct ep_pool *p = make_pool(EP_F_PERFMAP);
	struct ep_image a, b;
	char path[64];

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	unlink(path);
	/* named, finalized, then shrunk to 18 of 128 bytes (a chunk given back) */
	ck_assert_int_eq(ep_alloc(p, 100, &a), 0);
	ck_assert_uint_eq(a.size, 128);
	tu_emit_ret_imm(a.rw, 1);
	ck_assert_int_eq(ep_set_name(p, a.exec, "size_a"), 0);
	ck_assert_int_eq(ep_finalize(p, a.exec), 0);
	check_extent(a.exec, 128, "size_a", 1);
	ck_assert_int_eq(ep_shrink(p, a.exec, 18), 0);
	check_extent(a.exec, 18, "size_a", 1);
	ck_assert_int_eq(((tu_fn)a.exec)(), 1);
	/* renaming keeps the extent */
	ck_assert_int_eq(ep_set_name(p, a.exec, "size_a2"), 0);
	check_extent(a.exec, 18, "size_a2", 1);

	/* shrunk within its one chunk: nothing given back, the name narrowed */
	ck_assert_int_eq(ep_alloc(p, 64, &b), 0);
	tu_emit_ret_imm(b.rw, 2);
	ck_assert_int_eq(ep_finalize(p, b.exec), 0);
	ck_assert_int_eq(ep_set_name(p, b.exec, "size_b"), 0);
	ck_assert_int_eq(ep_shrink(p, b.exec, 18), 0);
	check_extent(b.exec, 18, "size_b", 1);
	ck_assert_int_eq(ep_shrink(p, b.exec, 40), 0); /* never widens */
	check_extent(b.exec, 18, "size_b", 1);
	ep_pool_destroy(p);
	unlink(path);
}
END_TEST

/* ---- GDB's list at scale ---------------------------------------------------
 * Names are batched, many to a file, in files whose sections cover runs
 * of functions (diag-gdbjit.c).  The list must hold every live name once,
 * with its extent, and nothing else; no two sections anywhere may overlap
 * (gdb drops one of two that do), nor may one span a page with no named
 * function at either side (another mapping could be there); and there
 * must be few files, since gdb's cost per change grows with their number.
 */
struct gdb_fn {
	uintptr_t start;
	size_t size;
	char name[40];
};

static int gdb_fn_cmp(const void *a, const void *b)
{
	uintptr_t x = ((const struct gdb_fn *)a)->start, y = ((const struct gdb_fn *)b)->start;

	return x < y ? -1 : x > y;
}

struct gdb_sec {
	uintptr_t lo, hi;
};

static int gdb_sec_cmp(const void *a, const void *b)
{
	uintptr_t x = ((const struct gdb_sec *)a)->lo, y = ((const struct gdb_sec *)b)->lo;

	return x < y ? -1 : x > y;
}

/* Checks GDB's list against want[0..n) (sorted here); returns its files. */
static size_t gdb_list_check(struct gdb_fn *want, size_t n)
{
	size_t cap = n + 16, got_n = 0, sec_n = 0, files = 0;
	struct gdb_fn *got = calloc(cap, sizeof(*got));
	struct gdb_sec *secs = calloc(cap, sizeof(*secs));

	ck_assert(got && secs);
	for (const struct jit_code_entry *e = __jit_debug_descriptor.first_entry; e;
	     e = e->next_entry, files++) {
		const char *f = e->symfile_addr;
		const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
		const Elf64_Shdr *sh = (const Elf64_Shdr *)(f + eh->e_shoff);
		const Elf64_Sym *sym = NULL;
		const char *str = NULL;
		size_t nsym = 0;

		ck_assert(e->symfile_size > sizeof(*eh) && !memcmp(f, ELFMAG, SELFMAG));
		ck_assert_uint_le(eh->e_shoff + eh->e_shnum * sizeof(*sh), e->symfile_size);
		for (unsigned i = 0; i < eh->e_shnum; i++) {
			ck_assert_uint_le(sh[i].sh_type == SHT_NOBITS ? 0 : sh[i].sh_offset + sh[i].sh_size,
					  e->symfile_size);
			if (sh[i].sh_type == SHT_SYMTAB) {
				sym = (const Elf64_Sym *)(f + sh[i].sh_offset);
				nsym = sh[i].sh_size / sizeof(*sym);
				str = f + sh[sh[i].sh_link].sh_offset;
			} else if (sh[i].sh_type == SHT_NOBITS) {
				ck_assert(sh[i].sh_flags & SHF_EXECINSTR);
				ck_assert_uint_lt(sec_n, cap);
				secs[sec_n++] = (struct gdb_sec){ sh[i].sh_addr,
								  sh[i].sh_addr + sh[i].sh_size };
			}
		}
		ck_assert_msg(sym != NULL, "a file without a symbol table");
		uintptr_t prev_end = 0;
		unsigned prev_sec = 0;

		for (size_t j = 1; j < nsym; j++) {
			const Elf64_Shdr *in = &sh[sym[j].st_shndx];

			ck_assert_uint_lt(got_n, cap);
			ck_assert_uint_lt(sym[j].st_shndx, eh->e_shnum);
			ck_assert_int_eq(ELF64_ST_TYPE(sym[j].st_info), STT_FUNC);
			/* inside its section; a section's functions in one run */
			ck_assert_uint_ge(sym[j].st_value, in->sh_addr);
			ck_assert_uint_le(sym[j].st_value + sym[j].st_size, in->sh_addr + in->sh_size);
			if (sym[j].st_shndx == prev_sec)
				ck_assert_uint_le(sym[j].st_value / 4096, (prev_end - 1) / 4096 + 1);
			else
				ck_assert_uint_eq(sym[j].st_value, in->sh_addr);
			prev_end = sym[j].st_value + sym[j].st_size;
			prev_sec = sym[j].st_shndx;
			got[got_n].start = sym[j].st_value;
			got[got_n].size = sym[j].st_size;
			snprintf(got[got_n].name, sizeof(got[got_n].name), "%s", str + sym[j].st_name);
			got_n++;
		}
	}
	qsort(want, n, sizeof(*want), gdb_fn_cmp);
	qsort(got, got_n, sizeof(*got), gdb_fn_cmp);
	qsort(secs, sec_n, sizeof(*secs), gdb_sec_cmp);
	ck_assert_uint_eq(got_n, n);
	for (size_t i = 0; i < n; i++) {
		ck_assert_msg(got[i].start == want[i].start && got[i].size == want[i].size &&
				      !strcmp(got[i].name, want[i].name),
			      "gdb has %s at %#lx (%zu bytes), not %s at %#lx (%zu bytes)",
			      got[i].name, (unsigned long)got[i].start, got[i].size, want[i].name,
			      (unsigned long)want[i].start, want[i].size);
	}
	for (size_t i = 1; i < sec_n; i++)
		ck_assert_msg(secs[i - 1].hi <= secs[i].lo, "gdb's sections overlap at %#lx",
			      (unsigned long)secs[i].lo);
	free(got);
	free(secs);
	return files;
}

START_TEST(test_gdb_batches)
{
	enum { N = 2000 };
	static void *exec[N];
	static struct gdb_fn live[N];
	static int named[N];
	struct gdb_fn *want = calloc(N, sizeof(*want));
	unsigned seed = 12345;
	size_t files;

	ck_assert(want != NULL);
	if (!&__jit_debug_descriptor)
		return;
	ck_assert_ptr_null(__jit_debug_descriptor.first_entry);
	for (int i = 0; i < N; i++)
		exec[i] = jit(pool, 64, (uint32_t)i);
	/* named in a random order: names arrive between and inside ranges */
	int order[N];

	for (int i = 0; i < N; i++)
		order[i] = i;
	for (int i = N - 1; i > 0; i--) {
		int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = order[i];

		order[i] = order[j], order[j] = t;
	}
	for (int k = 0; k < N; k++) {
		int i = order[k];

		live[i] = (struct gdb_fn){ (uintptr_t)exec[i], 1 + rand_r(&seed) % 64, "" };
		snprintf(live[i].name, sizeof(live[i].name), "batch_%d", i);
		ck_assert_int_eq(ep_set_name_size(pool, exec[i], live[i].name, live[i].size), 0);
		named[i] = 1;
		if (k % 250 == 249 || k == N - 1) {
			size_t n = 0;

			for (int j = 0; j < N; j++)
				if (named[j])
					want[n++] = live[j];
			files = gdb_list_check(want, n);
			ck_assert_msg(files <= n / 32 + 2, "%zu names in %zu files", n, files);
		}
	}
	/* renames, frees, code taken again and named, in a random mix */
	for (int k = 0; k < 3 * N; k++) {
		int i = (int)(rand_r(&seed) % N), op = (int)(rand_r(&seed) % 3);

		if (!named[i]) {
			struct ep_image img;

			ck_assert_int_eq(ep_alloc(pool, 64, &img), 0);
			tu_emit_ret_imm(img.rw, 1);
			ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
			exec[i] = img.exec;
			live[i] = (struct gdb_fn){ (uintptr_t)img.exec, 64, "" };
			snprintf(live[i].name, sizeof(live[i].name), "again_%d_%d", i, k);
			ck_assert_int_eq(ep_set_name(pool, img.exec, live[i].name), 0);
			named[i] = 1;
		} else if (op == 0) {
			/* long names, to outgrow a file's string table */
			snprintf(live[i].name, sizeof(live[i].name), "renamed_%d_%d_xxxxxxxxxxxxxxxx", i,
				 k);
			ck_assert_int_eq(ep_set_name(pool, exec[i], live[i].name), 0);
		} else {
			ck_assert_int_eq(ep_free(pool, exec[i]), 0);
			named[i] = 0;
		}
		if (k % 500 == 499) {
			size_t n = 0;

			for (int j = 0; j < N; j++)
				if (named[j])
					want[n++] = live[j];
			gdb_list_check(want, n);
		}
	}
	for (int i = 0; i < N; i++)
		if (named[i])
			ck_assert_int_eq(ep_free(pool, exec[i]), 0);
	ck_assert_ptr_null(__jit_debug_descriptor.first_entry);

	/* in order, as a JIT names its code: full files */
	for (int i = 0; i < N; i++) {
		exec[i] = jit(pool, 64, (uint32_t)i);
		live[i] = (struct gdb_fn){ (uintptr_t)exec[i], 64, "" };
		snprintf(live[i].name, sizeof(live[i].name), "seq_%d", i);
		ck_assert_int_eq(ep_set_name(pool, exec[i], live[i].name), 0);
		want[i] = live[i];
	}
	files = gdb_list_check(want, N);
	ck_assert_msg(files <= N / 200 + 2, "%d names named in order in %zu files", N, files);

	/* a pool destroyed with names in it: gdb keeps the other pool's,
	 * which may share its files */
	struct ep_pool *q = make_pool(0);
	size_t n = 0;

	for (int i = 0; i < N; i++) {
		if (i % 2) {
			want[n++] = live[i];
			continue;
		}
		ck_assert_int_eq(ep_free(pool, exec[i]), 0);
		exec[i] = jit(q, 64, (uint32_t)i);
		ck_assert_int_eq(ep_set_name(q, exec[i], "in_q"), 0);
	}
	ep_pool_destroy(q);
	gdb_list_check(want, n);
	free(want);
}
END_TEST

START_TEST(test_set_name_size)
{
	struct ep_pool *p = make_pool(EP_F_PERFMAP);
	struct ep_image c;
	char path[64];

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	unlink(path);
	/* the size given with the name, before finalize: in the map at once */
	ck_assert_int_eq(ep_alloc(p, 64, &c), 0);
	tu_emit_ret_imm(c.rw, 3);
	ck_assert_int_eq(ep_set_name_size(p, c.exec, "size_c", 0), -EINVAL);
	ck_assert_int_eq(ep_set_name_size(p, c.exec, "size_c", 65), -EINVAL);
	ck_assert_int_eq(ep_set_name_size(NULL, c.exec, "size_c", 15), -EINVAL);
	ck_assert_int_eq(ep_set_name_size(p, c.exec, "size_c", 15), 0);
	ck_assert_int_eq(ep_finalize(p, c.exec), 0);
	check_extent(c.exec, 15, "size_c", 1);
	ck_assert_int_eq(ep_set_name_size(p, c.exec, "size_c", 64), 0); /* widened again */
	check_extent(c.exec, 64, "size_c", 1);
	ck_assert_int_eq(ep_shrink(p, c.exec, 10), 0);
	check_extent(c.exec, 10, "size_c", 1);
	ck_assert_int_eq(ep_set_name_size(p, c.exec, "size_c", 11), -EINVAL); /* past ep_shrink */
	check_extent(c.exec, 10, "size_c", 0);
	ck_assert_int_eq(((tu_fn)c.exec)(), 3);
	ep_pool_destroy(p);
	unlink(path);
}
END_TEST

/* ---- the perf map in a /tmp that another user writes to ------------------
 * /tmp/perf-<pid>.map has a name anyone can predict.  Another user plants
 * it before the process names code: a symbolic or a hard link to a file
 * of ours (nothing may be written through it), a FIFO (ep_finalize() must not
 * block on it, and writes nothing into it when someone reads it), a
 * regular file of theirs (not ours to write).  The test runs as root: the
 * victim is a child process (its pid names the file), and a child of the
 * victim that becomes uid 65534 plants the file first.
 */
enum plant { PLANT_LINK, PLANT_HARDLINK, PLANT_FIFO, PLANT_FIFO_READ, PLANT_FILE };

static char g_victim[64]; /* the file a planted link points to */

static void plant_as_nobody(enum plant what, const char *path)
{
	pid_t a = fork();

	if (a == 0) {
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(2);
		int rc = 0;

		if (what == PLANT_LINK)
			rc = symlink(g_victim, path);
		else if (what == PLANT_HARDLINK)
			rc = link(g_victim, path);
		else if (what == PLANT_FILE)
			rc = close(open(path, O_WRONLY | O_CREAT | O_EXCL, 0666));
		else
			rc = mkfifo(path, 0666);
		if (rc == 0 && what == PLANT_FILE)
			rc = chmod(path, 0666); /* past root's umask */
		_exit(rc == 0 ? 0 : 3);
	}
	int st = 0;

	waitpid(a, &st, 0);
	/* fs.protected_hardlinks=1 lets nobody link a file it cannot write:
	 * the link is then made here, as it would be where that is 0 (the
	 * library sees the same file either way) */
	if (what == PLANT_HARDLINK && WIFEXITED(st) && WEXITSTATUS(st) == 3 &&
	    link(g_victim, path) == 0)
		return;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		_exit(10 + (WIFEXITED(st) ? WEXITSTATUS(st) : 9));
}

/* In the victim: plant, then name and finalize code with EP_F_PERFMAP.
 * A blocked open is ended by the alarm (the process dies of SIGALRM). */
static void victim(enum plant what, int ready_fd)
{
	char path[64];
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .flags = EP_F_PERFMAP };
	struct ep_pool *p;
	struct ep_image img;

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	unlink(path);
	plant_as_nobody(what, path);
	if (what == PLANT_FIFO_READ) {
		/* someone reads the FIFO: the parent, once it is there */
		char c = 1;

		if (write(ready_fd, &c, 1) != 1 || read(ready_fd, &c, 1) != 1)
			_exit(4);
	}
	signal(SIGALRM, SIG_DFL); /* (Check's handler would let open() restart) */
	alarm(20);
	if (ep_pool_create(&cfg, &p) != 0 || ep_alloc(p, 16, &img) != 0)
		_exit(5);
	tu_emit_ret_imm(img.rw, 7);
	if (ep_set_name(p, img.exec, "planted_perfmap") != 0 || ep_finalize(p, img.exec) != 0 ||
	    ep_set_name(p, img.exec, "planted_perfmap_again") != 0)
		_exit(6);
	ep_pool_destroy(p);
	_exit(0);
}

static void perfmap_planted(enum plant what, const char *label)
{
	int sv[2];

	if (geteuid() != 0) {
		printf("SKIP: %s: needs root to plant the file as another user\n", label);
		return;
	}
	snprintf(g_victim, sizeof(g_victim), "/tmp/ep-perfmap-victim-XXXXXX");
	int vfd = mkstemp(g_victim);

	ck_assert_int_ge(vfd, 0);
	close(vfd);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);

	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t v = fork();

	ck_assert_int_ge(v, 0);
	if (v == 0) {
		close(sv[0]);
		victim(what, sv[1]);
	}
	close(sv[1]);

	char path[64];
	int rfd = -1;

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)v);
	if (what == PLANT_FIFO_READ) {
		char c;

		ck_assert_int_eq(read(sv[0], &c, 1), 1);
		rfd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		ck_assert_msg(rfd >= 0, "cannot open the planted FIFO: %s", strerror(errno));
		ck_assert_int_eq(write(sv[0], &c, 1), 1);
	}
	int st = 0;

	ck_assert_int_eq(waitpid(v, &st, 0), v);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(sv[0]);

	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	struct stat sb;
	int is_link = lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode);
	char got[256] = "";
	ssize_t n = -1;

	if (rfd >= 0) {
		n = read(rfd, got, sizeof(got) - 1);
		close(rfd);
	} else if (what == PLANT_FILE) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		n = fd >= 0 ? read(fd, got, sizeof(got) - 1) : -1;
		if (fd >= 0)
			close(fd);
	}
	struct stat vs;
	int vsize = stat(g_victim, &vs) == 0 ? (int)vs.st_size : -1;

	unlink(path);
	unlink(g_victim);
	ck_assert_msg(!(WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM),
		      "%s: naming code did not return in 20 s (blocked on the perf map)", label);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the victim failed (status %#x)",
		      label, st);
	ck_assert_msg(secs < 10, "%s: naming code took %.1f s", label, secs);
	ck_assert_msg(vsize == 0, "%s: %d bytes written through the planted link to %s", label,
		      vsize, g_victim);
	if (what == PLANT_LINK)
		ck_assert_msg(is_link, "%s: the planted link was replaced", label);
	ck_assert_msg(n <= 0, "%s: the perf map was written into the planted %s: '%.*s'", label,
		      what == PLANT_FILE ? "file" : "FIFO", (int)(n > 0 ? n : 0), got);
}

START_TEST(test_perfmap_planted_link)
{
	perfmap_planted(PLANT_LINK, "symlink");
}
END_TEST

START_TEST(test_perfmap_planted_hardlink)
{
	perfmap_planted(PLANT_HARDLINK, "hard link");
}
END_TEST

START_TEST(test_perfmap_planted_fifo)
{
	perfmap_planted(PLANT_FIFO, "FIFO");
	perfmap_planted(PLANT_FIFO_READ, "FIFO with a reader");
}
END_TEST

START_TEST(test_perfmap_planted_file)
{
	perfmap_planted(PLANT_FILE, "another user's file");
}
END_TEST

/* ---- JIT frames in backtraces ------------------------------------------ */

/*
 * x86-64:
 * push rbp; mov rbp, rsp; mov rax, cb; call rax; pop rbp; ret   (fp)
 * nop; sub rsp, 8; mov rax, cb; call rax; add rsp, 8; ret       (no fp)
 * arm64:
 * stp x29, x30, [sp, #-16]!; mov x29, sp; ldr x16, =cb; blr x16;
 * ldp x29, x30, [sp], #16; ret                                  (fp)
 * stp x29, x30, [sp, #-16]!; ldr x16, =cb; blr x16;
 * ldp x29, x30, [sp], #16; ret                                  (no fp:
 * x29 is the caller's, the return address at the top of the frame)
 * The return address into the JIT code is at CALL_END.  They differ on
 * purpose: unw_backtrace() keeps a per-thread cache of frame layouts by
 * address that nothing invalidates (libunwind 1.6), so with CK_FORK=no a
 * reused address with a different layout would be stepped by stale data.
 */
#if defined(__x86_64__)
#define JIT_FRAMES 1
#define FP_CALL_END 16
#define SP_CALL_END 17
#define SP_PROLOGUE 5
#define SP_FRAME 8

static size_t emit_caller(unsigned char *p, int (*cb)(void), int fp)
{
	size_t n = 0;
	uint64_t target;

	memcpy(&target, &cb, sizeof(target));
	if (fp) {
		p[n++] = 0x55;
		p[n++] = 0x48, p[n++] = 0x89, p[n++] = 0xe5;
	} else {
		p[n++] = 0x90;
		p[n++] = 0x48, p[n++] = 0x83, p[n++] = 0xec, p[n++] = 0x08;
	}
	p[n++] = 0x48, p[n++] = 0xb8;
	memcpy(p + n, &target, 8), n += 8;
	p[n++] = 0xff, p[n++] = 0xd0;
	if (fp)
		p[n++] = 0x5d;
	else
		p[n++] = 0x48, p[n++] = 0x83, p[n++] = 0xc4, p[n++] = 0x08;
	p[n++] = 0xc3;
	return n;
}
#elif defined(__aarch64__)
#define JIT_FRAMES 1
#define FP_CALL_END 16
#define SP_CALL_END 12
#define SP_PROLOGUE 4
#define SP_FRAME 16

/* ldr x<rt>, <literal at byte lit>, placed at byte at */
static uint32_t a64_ldr_lit(unsigned rt, size_t at, size_t lit)
{
	return 0x58000000u | (uint32_t)((lit - at) / 4) << 5 | rt;
}

static size_t emit_caller(unsigned char *p, int (*cb)(void), int fp)
{
	size_t n = 0;
	uint64_t target;

	memcpy(&target, &cb, sizeof(target));
	tu_put32(p + n, 0xa9bf7bfdu), n += 4;      /* stp x29, x30, [sp, #-16]! */
	if (fp)
		tu_put32(p + n, 0x910003fdu), n += 4; /* mov x29, sp */
	tu_put32(p + n, a64_ldr_lit(16, n, 24)), n += 4;
	tu_put32(p + n, 0xd63f0200u), n += 4;      /* blr x16 */
	tu_put32(p + n, 0xa8c17bfdu), n += 4;      /* ldp x29, x30, [sp], #16 */
	tu_put32(p + n, 0xd65f03c0u), n += 4;      /* ret */
	while (n < 24)
		tu_put32(p + n, 0xd503201fu), n += 4; /* nop */
	memcpy(p + n, &target, 8), n += 8;
	return n;
}
#endif

#ifdef JIT_FRAMES
static void *jit_caller(int (*cb)(void), int fp, const char *name, int kind)
{
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(pool, 32, &img), 0);
	emit_caller(img.rw, cb, fp);
	if (kind >= 0) {
		int rc = ep_set_unwind(pool, img.exec, kind, fp ? 0 : SP_PROLOGUE, fp ? 0 : SP_FRAME);

		ck_assert_msg(rc == 0, "ep_set_unwind: %s", ep_strerror(rc));
	}
	ck_assert_int_eq(ep_set_name(pool, img.exec, name), 0);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	return img.exec;
}

static void *g_jit;        /* the JIT caller being tested */
static char g_bt[8192];    /* ep_backtrace() output */

#ifdef HAVE_LIBUNWIND
struct unw_result {
	int frames;
	int jit_frame;       /* index of the JIT frame, -1 */
	int jit_name_rc;     /* unw_get_proc_name() on it */
	char jit_name[64];
	unw_word_t jit_off;
	int main_reached;
	int bt_frames;       /* unw_backtrace() */
	int bt_has_jit;
};
static struct unw_result g_res;

/* Called from JIT code: walks the stack with libunwind. */
__attribute__((noinline)) static int unwind_cb(void)
{
	unw_context_t ctx;
	unw_cursor_t cur;
	uintptr_t lo = (uintptr_t)g_jit, hi = lo + 64;

	memset(&g_res, 0, sizeof(g_res));
	g_res.jit_frame = -1;
	g_res.jit_name_rc = 1;
	unw_getcontext(&ctx);
	unw_init_local(&cur, &ctx);
	do {
		unw_word_t ip = 0, off = 0;
		char name[64];

		unw_get_reg(&cur, UNW_REG_IP, &ip);
		int rc = unw_get_proc_name(&cur, name, sizeof(name), &off);

		if (ip > lo && ip <= hi && g_res.jit_frame < 0) {
			g_res.jit_frame = g_res.frames;
			g_res.jit_name_rc = rc;
			if (rc == 0)
				snprintf(g_res.jit_name, sizeof(g_res.jit_name), "%s", name);
			g_res.jit_off = off;
		}
		if (rc == 0 && !strcmp(name, "main"))
			g_res.main_reached = 1;
		g_res.frames++;
	} while (g_res.frames < 100 && unw_step(&cur) > 0);

	void *ips[64];

	g_res.bt_frames = unw_backtrace(ips, 64);
	for (int i = 0; i < g_res.bt_frames; i++)
		if ((uintptr_t)ips[i] > lo && (uintptr_t)ips[i] <= hi)
			g_res.bt_has_jit = 1;
	return 42;
}

static void check_unwind(int fp, int kind, const char *name)
{
	g_jit = jit_caller(unwind_cb, fp, name, kind);
	ck_assert_int_eq(tu_as_fn(g_jit)(), 42);
	ck_assert_msg(g_res.jit_frame == 1, "JIT frame at %d of %d", g_res.jit_frame,
		      g_res.frames);
#if !defined(__x86_64__)
	/* libunwind steps through a frame it has no call frame information
	 * for by the frame pointer on x86-64 only: elsewhere only the DWARF
	 * kinds get past the JIT frame (ep_set_unwind(3)) */
	if (kind != EP_UNWIND_DWARF_FP && kind != EP_UNWIND_DWARF_SP &&
	    !(kind < 0 && getenv("EXECPACK_UNWIND") && !strcmp(getenv("EXECPACK_UNWIND"), "dwarf"))) {
		ck_assert_msg(!g_res.main_reached || g_res.frames > 2, "%d frames", g_res.frames);
		return;
	}
#endif
	ck_assert_msg(g_res.main_reached, "main not reached (%d frames)", g_res.frames);
	ck_assert_msg(g_res.bt_has_jit, "unw_backtrace: no JIT frame in %d", g_res.bt_frames);
	ck_assert_int_ge(g_res.bt_frames, 4);
}

START_TEST(test_unwind_name)
{
	check_unwind(1, EP_UNWIND_NAME, "jit_named");
	ck_assert_int_eq(g_res.jit_name_rc, 0);
	ck_assert_str_eq(g_res.jit_name, "jit_named");
	ck_assert_uint_eq(g_res.jit_off, FP_CALL_END);
}
END_TEST

START_TEST(test_unwind_dwarf_fp)
{
	/* DWARF CFI drives the step; libunwind has no name for it, ours does */
	check_unwind(1, EP_UNWIND_DWARF_FP, "jit_dwarf_fp");
	char buf[32];
	size_t off;

	ck_assert_int_eq(ep_symbolize((char *)g_jit + FP_CALL_END - 1, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "jit_dwarf_fp");
}
END_TEST

START_TEST(test_unwind_dwarf_sp)
{
	/* no frame pointer at all: only the CFI can step through this frame */
	check_unwind(0, EP_UNWIND_DWARF_SP, "jit_dwarf_sp");
	char buf[32];
	size_t off;

	ck_assert_int_eq(ep_symbolize((char *)g_jit + SP_CALL_END - 1, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "jit_dwarf_sp");
}
END_TEST

START_TEST(test_unwind_default)
{
	/* the default kind: EXECPACK_UNWIND=dwarf selects EP_UNWIND_DWARF_FP */
	const char *e = getenv("EXECPACK_UNWIND");
	int dwarf = e && !strcmp(e, "dwarf");

	check_unwind(1, -1, "jit_default");
	if (dwarf) {
		ck_assert_int_ne(g_res.jit_name_rc, 0);
	} else {
		ck_assert_int_eq(g_res.jit_name_rc, 0);
		ck_assert_str_eq(g_res.jit_name, "jit_default");
	}
}
END_TEST

START_TEST(test_unwind_cancelled)
{
	/* after ep_free the range is no longer registered: a new allocation at
	 * the same address gets its own name */
	g_jit = jit_caller(unwind_cb, 1, "first_owner", EP_UNWIND_NAME);
	void *old = g_jit;

	ck_assert_int_eq(ep_free(pool, g_jit), 0);
	g_jit = jit_caller(unwind_cb, 1, "second_owner", EP_UNWIND_NAME);
	ck_assert_ptr_eq(old, g_jit);
	ck_assert_int_eq(tu_as_fn(g_jit)(), 42);
	ck_assert_int_eq(g_res.jit_name_rc, 0);
	ck_assert_str_eq(g_res.jit_name, "second_owner");
}
END_TEST
#endif /* HAVE_LIBUNWIND */
#endif /* JIT_FRAMES */

START_TEST(test_set_unwind_errors)
{
	void *a = jit(pool, 20, 1);

	ck_assert_int_eq(ep_set_unwind(NULL, a, EP_UNWIND_NAME, 0, 0), -EINVAL);
	ck_assert_int_eq(ep_set_unwind(pool, (char *)a + 1, EP_UNWIND_NAME, 0, 0), -EINVAL);
	ck_assert_int_eq(ep_set_unwind(pool, a, 99, 0, 0), -EINVAL);
	ck_assert_int_eq(ep_set_unwind(pool, a, EP_UNWIND_NAME, 1, 0), -EINVAL);
	ck_assert_int_eq(ep_set_unwind(pool, a, EP_UNWIND_DWARF_SP, 1000, 8), -EINVAL);
	ck_assert_int_eq(ep_set_unwind(pool, a, EP_UNWIND_DWARF_SP, 4, 7), -EINVAL);
	ck_assert_int_eq(ep_set_unwind(pool, a, EP_UNWIND_NAME, 0, 0), 0);
#if defined(HAVE_LIBUNWIND) || (defined(HAVE___REGISTER_FRAME) && defined(HAVE___DEREGISTER_FRAME))
	ck_assert_int_eq(ep_set_unwind(pool, a, EP_UNWIND_DWARF_FP, 0, 0), 0);
#else
	ck_assert_int_eq(ep_set_unwind(pool, a, EP_UNWIND_DWARF_FP, 0, 0), -EOPNOTSUPP);
#endif
}
END_TEST

#ifdef JIT_FRAMES
__attribute__((noinline)) static int backtrace_cb(void)
{
	/* a frame record of its own, for the frame-pointer walk to find the
	 * return address into the JIT code */
	volatile uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	int fd[2];

	(void)frame;

	if (pipe(fd) != 0)
		return -1;
	int n = ep_backtrace(fd[1]);

	close(fd[1]);
	ssize_t got = read(fd[0], g_bt, sizeof(g_bt) - 1);

	close(fd[0]);
	g_bt[got > 0 ? got : 0] = 0;
	return n;
}

START_TEST(test_backtrace)
{
	g_jit = jit_caller(backtrace_cb, 1, "bt_prog", -1);
	int n = tu_as_fn(g_jit)();
	char want[64];

	ck_assert_msg(n >= 3, "ep_backtrace: %d\n%s", n, g_bt);
	snprintf(want, sizeof(want), " in bt_prog+0x%x [jit]\n", FP_CALL_END);
	ck_assert_msg(strstr(g_bt, want), "no '%s' in:\n%s", want, g_bt);
	ck_assert_msg(strstr(g_bt, "#0 0x"), "no frame 0 in:\n%s", g_bt);
#if defined(HAVE_LIBUNWIND) && defined(__x86_64__)
	ck_assert_msg(strstr(g_bt, " in main+0x"), "main not reached:\n%s", g_bt);
#else
	/* past the JIT frame the walk follows the frame records (libunwind
	 * has no rule for it off x86-64): frames without C names, but the
	 * JIT frame once and the walk going on past it, to main and its
	 * callers */
	const char *j = strstr(g_bt, want) + strlen(want);

	ck_assert_msg(!strstr(j, " [jit]"), "the JIT frame twice:\n%s", g_bt);
	int after = 0;

	for (const char *q = j; (q = strchr(q, '#')) != NULL; q++)
		after++;
	ck_assert_msg(after >= 3, "the walk stopped at the JIT frame:\n%s", g_bt);
#endif
	ck_assert_int_eq(ep_backtrace(-1), -EBADF);
}
END_TEST

#endif /* JIT_FRAMES */

#if defined(__x86_64__)
/* ---- ep_backtrace's frame-pointer walk: bad frame pointers ------------------
 * EXECPACK_BACKTRACE=fp selects the walk where libunwind is built in.  The
 * tests run on a thread whose stack is a mapping of known bounds with
 * PROT_NONE guard pages on both sides, so that a frame pointer that leaves
 * the stack points at memory that faults.
 */
#define BAD_STACK (256 * 1024)
#define BAD_FP_CALL_END 0x1c

struct guarded_stack {
	unsigned char *map, *lo, *hi;
	size_t pg;
};

static void stack_make(struct guarded_stack *s)
{
	s->pg = (size_t)sysconf(_SC_PAGESIZE);
	s->map = mmap(NULL, BAD_STACK + 2 * s->pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(s->map != MAP_FAILED);
	s->lo = s->map + s->pg;
	s->hi = s->lo + BAD_STACK;
	ck_assert_int_eq(mprotect(s->lo, BAD_STACK, PROT_READ | PROT_WRITE), 0);
}

static void stack_run(struct guarded_stack *s, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t t;

	ck_assert_int_eq(pthread_attr_init(&attr), 0);
	ck_assert_int_eq(pthread_attr_setstack(&attr, s->lo, BAD_STACK), 0);
	ck_assert_int_eq(pthread_create(&t, &attr, fn, arg), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	pthread_attr_destroy(&attr);
	munmap(s->map, BAD_STACK + 2 * s->pg);
}

/* Read what ep_backtrace() wrote into a pipe. */
static void pipe_drain(int fd, char *buf, size_t len)
{
	size_t got = 0;
	ssize_t r;

	while (got < len - 1 && (r = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)r;
	buf[got] = 0;
}

/*
 * push rbp; movabs rbp, bogus; mov edi, fd; movabs rax, ep_backtrace;
 * call rax; pop rbp; ret: ep_backtrace()'s frame record then holds bogus
 * as the next frame pointer.
 */
static void *jit_bad_fp(uintptr_t bogus, int fd)
{
	int (*bt)(int) = ep_backtrace;
	uint64_t target;
	uint32_t fd32 = (uint32_t)fd;
	struct ep_image img;
	unsigned char *p;
	size_t n = 0;

	memcpy(&target, &bt, sizeof(target));
	ck_assert_int_eq(ep_alloc(pool, 64, &img), 0);
	p = img.rw;
	p[n++] = 0x55;
	p[n++] = 0x48, p[n++] = 0xbd;
	memcpy(p + n, &bogus, 8), n += 8;
	p[n++] = 0xbf;
	memcpy(p + n, &fd32, 4), n += 4;
	p[n++] = 0x48, p[n++] = 0xb8;
	memcpy(p + n, &target, 8), n += 8;
	p[n++] = 0xff, p[n++] = 0xd0;
	ck_assert_uint_eq(n, BAD_FP_CALL_END);
	p[n++] = 0x5d;
	p[n++] = 0xc3;
	ck_assert_int_eq(ep_set_name(pool, img.exec, "bad_fp"), 0);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	return img.exec;
}

enum { NBAD = 7 };
struct bad_run {
	void *code[NBAD];
	int fd[NBAD][2];
	const char *what[NBAD];
	int rc[NBAD];
	char out[NBAD][4096];
};
static uintptr_t g_fake_frame[2];

static void *bad_fp_thread(void *arg)
{
	struct bad_run *b = arg;

	for (int i = 0; i < NBAD; i++) {
		b->rc[i] = tu_as_fn(b->code[i])();
		close(b->fd[i][1]);
	}
	return NULL;
}

/* Call ep_backtrace() under each bogus frame pointer on a guarded stack,
 * through the frame-pointer walk.  (libunwind, the default, is left out:
 * where there is no unwind information it follows frame pointers with its
 * own checks, which are not ours to promise; under Valgrind it faults.) */
static void run_bad_fp(struct bad_run *b)
{
	struct guarded_stack stk;
	uintptr_t bogus[NBAD];

	memset(b, 0, sizeof(*b));
	stack_make(&stk);
	uintptr_t hi = (uintptr_t)stk.hi, lo = (uintptr_t)stk.lo;

	/* a readable frame record outside the stack that points at itself */
	g_fake_frame[0] = (uintptr_t)g_fake_frame;
	g_fake_frame[1] = 0x1234;
	b->what[0] = "the guard page above the stack", bogus[0] = hi + 64;
	b->what[1] = "a record across the end of the stack", bogus[1] = hi - 8;
	b->what[2] = "the guard page below the stack", bogus[2] = lo - 64;
	b->what[3] = "a record outside the stack", bogus[3] = (uintptr_t)g_fake_frame;
	b->what[4] = "a misaligned pointer", bogus[4] = (hi - 4096 + 1003) | 1;
	b->what[5] = "a low address", bogus[5] = 0x10;
	b->what[6] = "the top of the address space", bogus[6] = ~(uintptr_t)0xfff;
	for (int i = 0; i < NBAD; i++) {
		ck_assert_int_eq(pipe(b->fd[i]), 0);
		b->code[i] = jit_bad_fp(bogus[i], b->fd[i][1]);
	}
	ck_assert_int_eq(setenv("EXECPACK_BACKTRACE", "fp", 1), 0);
	stack_run(&stk, bad_fp_thread, b);
	unsetenv("EXECPACK_BACKTRACE");
	for (int i = 0; i < NBAD; i++) {
		pipe_drain(b->fd[i][0], b->out[i], sizeof(b->out[i]));
		close(b->fd[i][0]);
		ck_assert_int_eq(ep_free(pool, b->code[i]), 0);
	}
}

START_TEST(test_backtrace_bad_fp)
{
	struct bad_run *b = calloc(1, sizeof(*b));

	ck_assert_ptr_nonnull(b);
	run_bad_fp(b);
	for (int i = 0; i < NBAD; i++) {
		const char *o = b->out[i];

		/* no fault on the bogus pointer, and the walk stopped there: the
		 * JIT frame is the only one and nothing past it was read */
		ck_assert_msg(b->rc[i] == 1, "%s: ep_backtrace %d:\n%s", b->what[i], b->rc[i], o);
		ck_assert_msg(!strncmp(o, "#0 0x", 5) && strstr(o, " in bad_fp+0x1c [jit]\n") &&
				      !strchr(o, '\n')[1],
			      "%s: not the one JIT frame:\n%s", b->what[i], o);
	}
	free(b);
}
END_TEST

/*
 * The walk through a signal frame, with the handler on an alternate signal
 * stack: "sig_prog" calls its inner part, which sends itself SIGUSR1 with
 * tgkill; the handler's ep_backtrace() must name the interrupted pc
 * (sig_prog+0x25, after the syscall) and, back on the thread's own stack,
 * the return address into the outer part (sig_prog+0x9).
 */
static int g_sig_fd, g_sig_rc;

static void sig_bt_handler(int sig, siginfo_t *si, void *uc)
{
	/* __builtin_frame_address: the handler keeps a frame record */
	volatile uintptr_t frame = (uintptr_t)__builtin_frame_address(0);

	(void)sig, (void)si, (void)uc, (void)frame;
	g_sig_rc = ep_backtrace(g_sig_fd);
}

static void *jit_signaller(pid_t pid, pid_t tid)
{
	struct ep_image img;
	unsigned char *p;
	size_t n = 0;
	uint32_t v;

	ck_assert_int_eq(ep_alloc(pool, 64, &img), 0);
	p = img.rw;
	p[n++] = 0x55;                                  /* push rbp */
	p[n++] = 0x48, p[n++] = 0x89, p[n++] = 0xe5;    /* mov rbp, rsp */
	p[n++] = 0xe8, v = 2, memcpy(p + n, &v, 4), n += 4; /* call inner */
	p[n++] = 0x5d, p[n++] = 0xc3;                   /* pop rbp; ret */
	ck_assert_uint_eq(n, 11);                       /* inner: */
	p[n++] = 0x55;
	p[n++] = 0x48, p[n++] = 0x89, p[n++] = 0xe5;
	p[n++] = 0xbf, v = (uint32_t)pid, memcpy(p + n, &v, 4), n += 4;
	p[n++] = 0xbe, v = (uint32_t)tid, memcpy(p + n, &v, 4), n += 4;
	p[n++] = 0xba, v = SIGUSR1, memcpy(p + n, &v, 4), n += 4;
	p[n++] = 0xb8, v = SYS_tgkill, memcpy(p + n, &v, 4), n += 4;
	p[n++] = 0x0f, p[n++] = 0x05;                   /* syscall */
	ck_assert_uint_eq(n, 0x25);
	p[n++] = 0x5d, p[n++] = 0xc3;
	ck_assert_int_eq(ep_set_name(pool, img.exec, "sig_prog"), 0);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	return img.exec;
}

/*
 * Memcheck (Valgrind 3.19) keeps one "current stack" for the whole process
 * and takes a move of the stack pointer into another registered stack for
 * a stack switch, which it does not track.  After the handler, which runs
 * on the alternate signal stack, returned, the first frame this thread
 * allocated on its own stack with a size memcheck has no fixed-size case
 * for (0x148 bytes: __libc_sigaction, in the sigaction() below) was now
 * and then taken for such a switch: its bytes stayed unaddressable and its
 * stores were reported as invalid writes (one run in five here, three in
 * four on a fresh machine).  A frame of that kind allocated before the
 * JIT call was always addressable and the same one just after it not
 * always; with the alternate stack registered (VALGRIND_STACK_REGISTER)
 * it was unaddressable every time.  So once the handler has returned, the
 * test tells memcheck that the thread's stack below the stack pointer's
 * 128-byte red zone is usable again, undefined as any new frame is, before
 * anything else runs on it.
 */
static void stack_usable_below_sp(const struct guarded_stack *stk)
{
#ifdef HAVE_VALGRIND_MEMCHECK_H
	uintptr_t sp;

	__asm__ volatile("mov %%rsp, %0" : "=r"(sp));
	if (sp - 128 > (uintptr_t)stk->lo)
		VALGRIND_MAKE_MEM_UNDEFINED(stk->lo, sp - 128 - (uintptr_t)stk->lo);
#else
	(void)stk;
#endif
}

static void *sigframe_thread(void *arg)
{
	stack_t ss = { .ss_size = 64 * 1024 };
	struct sigaction sa, old;

	ss.ss_sp = mmap(NULL, ss.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	if (ss.ss_sp == MAP_FAILED || sigaltstack(&ss, NULL) != 0)
		return (void *)1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sig_bt_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, &old);
	tu_as_fn(g_jit)();
	stack_usable_below_sp(arg);
	sigaction(SIGUSR1, &old, NULL);
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	munmap(ss.ss_sp, ss.ss_size);
	return NULL;
}

static void *sigframe_outer(void *arg)
{
	/* the JIT code needs the tid of the thread that runs it */
	g_jit = jit_signaller(getpid(), (pid_t)syscall(SYS_gettid));
	return sigframe_thread(arg);
}

START_TEST(test_backtrace_sigframe)
{
	struct guarded_stack stk;
	int fd[2];

	if (EP_TEST_TSAN)
		return; /* TSan defers the handler to its next interceptor: no
			 * signal frame over the JIT code is left to walk */
	ck_assert_int_eq(pipe(fd), 0);
	g_sig_fd = fd[1];
	g_sig_rc = -1;
	stack_make(&stk);
	ck_assert_int_eq(setenv("EXECPACK_BACKTRACE", "fp", 1), 0);
	stack_run(&stk, sigframe_outer, &stk);
	unsetenv("EXECPACK_BACKTRACE");
	close(fd[1]);
	pipe_drain(fd[0], g_bt, sizeof(g_bt));
	close(fd[0]);
	ck_assert_msg(g_sig_rc >= 2, "ep_backtrace: %d\n%s", g_sig_rc, g_bt);
	if (RUNNING_ON_VALGRIND)
		return; /* Valgrind lays out signal frames its own way */
	ck_assert_msg(strstr(g_bt, " in sig_prog+0x25 [jit]\n"), "no interrupted pc in:\n%s", g_bt);
	ck_assert_msg(strstr(g_bt, " in sig_prog+0x9 [jit]\n"), "no caller frame in:\n%s", g_bt);
	ck_assert_int_eq(ep_free(pool, g_jit), 0);
}
END_TEST
#endif /* __x86_64__ */

static Suite *diag_suite(void)
{
	Suite *s = suite_create("diag");
	TCase *tc = tcase_create("names");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_name_errors);
	tcase_add_test(tc, test_symbolize);
	tcase_add_test(tc, test_symbolize_many_pools);
	tcase_add_test(tc, test_name_before_finalize);
	tcase_add_test(tc, test_symbolize_concurrent);
	tcase_add_test(tc, test_reuse_runs_new_code);
	tcase_add_test(tc, test_perfmap);
	tcase_add_test(tc, test_symbol_size);
	tcase_add_test(tc, test_set_name_size);
	tcase_add_test(tc, test_gdb_batches);
	tcase_add_test(tc, test_perfmap_planted_link);
	tcase_add_test(tc, test_perfmap_planted_hardlink);
	tcase_add_test(tc, test_perfmap_planted_fifo);
	tcase_add_test(tc, test_perfmap_planted_file);
	tcase_add_test(tc, test_set_unwind_errors);
#ifdef JIT_FRAMES
	tcase_add_test(tc, test_backtrace);
#else
	printf("SKIP: test_backtrace: no caller emitter for this architecture in the test\n");
#endif
#if defined(__x86_64__)
	tcase_add_test(tc, test_backtrace_bad_fp);
	tcase_add_test(tc, test_backtrace_sigframe);
#else
	printf("SKIP: test_backtrace_bad_fp, test_backtrace_sigframe: the test's JIT code "
	       "and ep_backtrace()'s signal-frame walk are x86-64 only\n");
#endif
	suite_add_tcase(s, tc);
#if defined(HAVE_LIBUNWIND) && defined(JIT_FRAMES)
	tc = tcase_create("libunwind");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_unwind_name);
	tcase_add_test(tc, test_unwind_dwarf_fp);
	tcase_add_test(tc, test_unwind_dwarf_sp);
	tcase_add_test(tc, test_unwind_default);
	tcase_add_test(tc, test_unwind_cancelled);
	suite_add_tcase(s, tc);
#endif
	return s;
}

int main(void)
{
	struct ep_pool *probe;

	if (ep_pool_create(NULL, &probe) != 0) {
		printf("SKIP: no executable memory here\n");
		return 77;
	}
	ep_pool_destroy(probe);
	SRunner *sr = srunner_create(diag_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
