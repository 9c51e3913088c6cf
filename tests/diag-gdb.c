/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-gdb.c - check_diag's tests of how much code a symbol covers
 * (ep_shrink(), ep_set_name_size()) in ep_symbolize(), the perf map and GDB's
 * JIT list, and that list at scale.
 */
#include "config.h"

#include "diag-suite.h"

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
		ck_assert_msg(diag_map_has(want), "no '%s' in the perf map", want);
}

START_TEST(test_symbol_size)
{
	struct ep_pool *p = diag_make_pool(EP_F_PERFMAP);
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
		exec[i] = diag_jit(diag_pool, 64, (uint32_t)i);
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
		ck_assert_int_eq(ep_set_name_size(diag_pool, exec[i], live[i].name, live[i].size), 0);
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

			ck_assert_int_eq(ep_alloc(diag_pool, 64, &img), 0);
			tu_emit_ret_imm(img.rw, 1);
			ck_assert_int_eq(ep_finalize(diag_pool, img.exec), 0);
			exec[i] = img.exec;
			live[i] = (struct gdb_fn){ (uintptr_t)img.exec, 64, "" };
			snprintf(live[i].name, sizeof(live[i].name), "again_%d_%d", i, k);
			ck_assert_int_eq(ep_set_name(diag_pool, img.exec, live[i].name), 0);
			named[i] = 1;
		} else if (op == 0) {
			/* long names, to outgrow a file's string table */
			snprintf(live[i].name, sizeof(live[i].name), "renamed_%d_%d_xxxxxxxxxxxxxxxx", i,
				 k);
			ck_assert_int_eq(ep_set_name(diag_pool, exec[i], live[i].name), 0);
		} else {
			ck_assert_int_eq(ep_free(diag_pool, exec[i]), 0);
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
			ck_assert_int_eq(ep_free(diag_pool, exec[i]), 0);
	ck_assert_ptr_null(__jit_debug_descriptor.first_entry);

	/* in order, as a JIT names its code: full files */
	for (int i = 0; i < N; i++) {
		exec[i] = diag_jit(diag_pool, 64, (uint32_t)i);
		live[i] = (struct gdb_fn){ (uintptr_t)exec[i], 64, "" };
		snprintf(live[i].name, sizeof(live[i].name), "seq_%d", i);
		ck_assert_int_eq(ep_set_name(diag_pool, exec[i], live[i].name), 0);
		want[i] = live[i];
	}
	files = gdb_list_check(want, N);
	ck_assert_msg(files <= N / 200 + 2, "%d names named in order in %zu files", N, files);

	/* a pool destroyed with names in it: gdb keeps the other pool's,
	 * which may share its files */
	struct ep_pool *q = diag_make_pool(0);
	size_t n = 0;

	for (int i = 0; i < N; i++) {
		if (i % 2) {
			want[n++] = live[i];
			continue;
		}
		ck_assert_int_eq(ep_free(diag_pool, exec[i]), 0);
		exec[i] = diag_jit(q, 64, (uint32_t)i);
		ck_assert_int_eq(ep_set_name(q, exec[i], "in_q"), 0);
	}
	ep_pool_destroy(q);
	gdb_list_check(want, n);
	free(want);
}
END_TEST

START_TEST(test_set_name_size)
{
	struct ep_pool *p = diag_make_pool(EP_F_PERFMAP);
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

#ifdef HAVE_LIBUNWIND
/* libunwind's list of registered procedures (exported for remote
 * unwinders, declared in no header). */
extern unw_word_t _U_dyn_info_list_addr(void);

/* Whether libunwind has a procedure registered that holds addr. */
static int unw_has(const void *addr)
{
	const unw_dyn_info_list_t *l = (const unw_dyn_info_list_t *)_U_dyn_info_list_addr();

	for (const unw_dyn_info_t *di = l->first; di; di = di->next)
		if ((uintptr_t)addr >= di->start_ip && (uintptr_t)addr < di->end_ip)
			return 1;
	return 0;
}
#endif

/* A named data allocation (ep_alloc_data()) is named for ep_symbolize()
 * and ep_lookup(), never to gdb or libunwind: it holds no code, and
 * ep_set_unwind() refuses it. */
START_TEST(test_data_not_code)
{
	struct ep_pool *p = diag_make_pool(0);
	struct ep_image ro, rw, c;
	const struct ep_symbol sym = { 16, 32, "rw_sym" };
	struct ep_info info;
	char buf[64];
	size_t off = 0;

	ck_assert_int_eq(ep_alloc_data(p, 64, 0, EP_DATA_RO, &ro), 0);
	ck_assert_int_eq(ep_alloc_data(p, 64, 0, EP_DATA_RW, &rw), 0);
	ck_assert_int_eq(ep_set_unwind(p, ro.exec, EP_UNWIND_NAME, 0, 0), -EINVAL);
	ck_assert_int_eq(ep_set_name(p, ro.exec, "ro_named"), 0);
	ck_assert_int_eq(ep_set_symbols(p, rw.exec, &sym, 1), 0);
	ck_assert_int_eq(ep_finalize(p, ro.exec), 0);
	ck_assert_int_eq(ep_finalize(p, rw.exec), 0);
	ck_assert_int_eq(ep_set_unwind(p, ro.exec, EP_UNWIND_NAME, 0, 0), -EINVAL);
	ck_assert_int_eq(ep_set_unwind(p, rw.exec, EP_UNWIND_NAME, 0, 0), -EINVAL);
	/* code beside it, named: what gdb and libunwind do hear of */
	ck_assert_int_eq(ep_alloc(p, 64, &c), 0);
	tu_emit_ret_imm(c.rw, 5);
	ck_assert_int_eq(ep_set_name(p, c.exec, "code_named"), 0);
	ck_assert_int_eq(ep_finalize(p, c.exec), 0);

	ck_assert_int_eq(ep_symbolize((char *)ro.exec + 3, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "ro_named");
	ck_assert_int_eq(ep_symbolize((char *)rw.exec + 20, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "rw_sym");
	ck_assert_uint_eq(off, 4);
	ck_assert_int_eq(ep_lookup(ro.exec, &info), 0);
	ck_assert_str_eq(info.name, "ro_named");
	if (gdb_symbol_size(c.exec) != -2) {
		ck_assert_int_eq(gdb_symbol_size(c.exec), 64);
		ck_assert_int_eq(gdb_symbol_size(ro.exec), -1);
		ck_assert_int_eq(gdb_symbol_size((char *)rw.exec + 16), -1);
	}
#ifdef HAVE_LIBUNWIND
	ck_assert(unw_has(c.exec));
	ck_assert(!unw_has(ro.exec));
	ck_assert(!unw_has((char *)rw.exec + 16));
#endif
	/* renamed, narrowed: still not code */
	ck_assert_int_eq(ep_set_name(p, ro.exec, "ro_again"), 0);
	ck_assert_int_eq(ep_shrink(p, rw.exec, 24), 0);
	ck_assert_int_eq(ep_symbolize((char *)rw.exec + 20, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "rw_sym");
	if (gdb_symbol_size(c.exec) != -2) {
		ck_assert_int_eq(gdb_symbol_size(ro.exec), -1);
		ck_assert_int_eq(gdb_symbol_size((char *)rw.exec + 16), -1);
	}
#ifdef HAVE_LIBUNWIND
	ck_assert(!unw_has(ro.exec));
	ck_assert(!unw_has((char *)rw.exec + 16));
#endif
	ck_assert_int_eq(((tu_fn)c.exec)(), 5);
	ep_pool_destroy(p);
}
END_TEST

/* (in the order main() runs them) */
void diag_add_gdb_tests(TCase *tc)
{
	tcase_add_test(tc, test_symbol_size);
	tcase_add_test(tc, test_set_name_size);
	tcase_add_test(tc, test_gdb_batches);
	tcase_add_test(tc, test_data_not_code);
}
