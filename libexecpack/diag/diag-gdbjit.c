/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-gdbjit.c - the GDB JIT interface.
 *
 * GDB puts a breakpoint in __jit_debug_register_code() and, each time it is
 * called, reads the entry named by __jit_debug_descriptor: an in-memory
 * object file, here a minimal ELF file with a function symbol for each
 * named, finalized allocation, so that `bt`, `info symbol`, `disassemble`
 * and `break` name JIT code.  A gdb attached later reads the whole list.
 *
 * Batches.  gdb's work for each file it is told of grows with the number of
 * files it holds (it re-sets every breakpoint over every object file), so
 * one file per name made N names cost it O(N^2): 4,000 names took 12 s
 * under `gdb -batch -ex run`.  Names are kept in batches of at most
 * BATCH_MAX functions, one file each.  A change (a name set, renamed,
 * narrowed or dropped) re-announces only the batch that holds it:
 * unregister, edit the file in place, register; so gdb reads at most
 * BATCH_MAX symbols per change and holds about N / BATCH_MAX files.  Only
 * growing a file or compacting its names rewrites it, at most once per as
 * many changes as it has functions.
 *
 * Sections.  gdb finds the object file for a pc by section ranges (and
 * drops one of two sections that overlap), and its cost per section read
 * is far above its cost per symbol: a section per function made a change
 * in a batch of 250 cost about 1 ms of gdb's time.  So each batch holds the
 * functions of one address interval, disjoint from the other batches'
 * (g_batch, sorted), sorted by address, and its NOBITS .text sections
 * cover runs of them: a run goes on while the next function starts in the
 * page after the one the run ends in, or in that page, so that no mapping
 * of anything else can lie inside a section (mappings are whole pages).
 * A pc in a run but in no function (a gap, code freed) has no name: gdb
 * takes a symbol only within its size.
 *
 * A file is edited only while its entry is out of the list and gdb has been
 * told so: gdb reads a file when it is registered, and may read it again as
 * long as it holds it.  A gdb that attaches while an entry is out learns
 * its batch at the registration that follows.
 *
 * The two symbols are exported (see libexecpack.map) so that gdb finds them
 * in the library, and they are weak: there is one descriptor per process.
 * When the program, or a library found before this one, defines them too
 * (programs that embed LLVM or LuaJIT do; in a static link with LLVM's
 * ORC, its strong definitions win over these weak ones), every reference
 * here binds to that definition, as gdb's does, and the library links its
 * entries into that list and announces them through that function.  The
 * protocol has no lock: the library's changes are serialized with each
 * other (diag's lock), not with the other JIT's, whose lock is its own.
 */
#include "config.h"

#include <elf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diag-gdbjit.h"
#include "diag.h"
#include "internal.h"

struct jit_code_entry {
	struct jit_code_entry *next_entry, *prev_entry;
	const char *symfile_addr;
	uint64_t symfile_size;
};

struct jit_descriptor {
	uint32_t version;
	uint32_t action_flag; /* 0 none, 1 register, 2 unregister */
	struct jit_code_entry *relevant_entry;
	struct jit_code_entry *first_entry;
};

__attribute__((visibility("default"), weak)) struct jit_descriptor __jit_debug_descriptor = {
	1, 0, NULL, NULL
};

__attribute__((visibility("default"), weak, noinline, used)) void __jit_debug_register_code(void);
void __jit_debug_register_code(void)
{
	__asm__ volatile("" ::: "memory"); /* GDB's breakpoint: keep the call */
}

/*
 * Functions per file: gdb re-reads a whole batch at each change in it, and
 * holds a file per batch.  256 keeps both small (10,000 names: 40 files).
 */
#define BATCH_MAX 256u
#define BATCH_MIN 8u   /* a batch's first file has room for this many */
/* New names between batches go to a young batch of at most YOUNG, which
 * then joins a neighbour: gdb re-reads about YOUNG / 2 symbols per new
 * name, and BATCH_MAX / YOUNG per name at the joins, not BATCH_MAX / 2. */
#define YOUNG 16u
#define RUN_PAGE 4096u /* the smallest page: runs never span a foreign one */

/* Sections: null, .symtab, .strtab, .shstrtab, then the runs' .text
 * sections from FN_SH; function i (by address) is symbol 1 + i. */
enum { SH_SYMTAB = 1, SH_STRTAB, SH_SHSTRTAB, FN_SH };
static const char shstr[] = "\0.symtab\0.strtab\0.shstrtab";
enum { SHSTR_SYMTAB = 1, SHSTR_STRTAB = 9, SHSTR_SHSTRTAB = 17 };
/* then run k's section name, ".text.NNNN": distinct (bfd's section table
 * is a hash of names) */
#define TEXT_NAME 11u
static uint32_t text_name(uint32_t k)
{
	return (uint32_t)sizeof(shstr) + k * TEXT_NAME;
}

struct ep__gdbjit_batch {
	struct jit_code_entry entry; /* in GDB's list while listed */
	struct ep__gdbjit **fn;      /* fn[i]: whose function i is */
	char *file;                  /* the ELF file, laid out for cap and str_cap */
	size_t file_size;
	uint32_t n, cap;
	size_t str_used, str_dead, str_cap; /* .strtab: bytes used, of them freed */
	bool listed;
};

/* The batches by address (their intervals are disjoint).  diag's lock. */
static struct ep__gdbjit_batch **g_batch;
static size_t g_nbatch, g_batch_cap;

static size_t off_sym(uint32_t cap)
{
	return sizeof(Elf64_Ehdr) + (FN_SH + (size_t)cap) * sizeof(Elf64_Shdr);
}

static size_t off_str(uint32_t cap)
{
	return off_sym(cap) + (1 + (size_t)cap) * sizeof(Elf64_Sym);
}

static Elf64_Shdr *shdr(const struct ep__gdbjit_batch *b)
{
	return (Elf64_Shdr *)(void *)(b->file + sizeof(Elf64_Ehdr));
}

static Elf64_Sym *syms(const struct ep__gdbjit_batch *b)
{
	return (Elf64_Sym *)(void *)(b->file + off_sym(b->cap));
}

static char *strtab(const struct ep__gdbjit_batch *b)
{
	return b->file + off_str(b->cap);
}

static const char *fn_name(const struct ep__gdbjit_batch *b, uint32_t i)
{
	return strtab(b) + syms(b)[1 + i].st_name;
}

/* Where b's functions start and end (b->n > 0). */
static uintptr_t lo(const struct ep__gdbjit_batch *b)
{
	return (uintptr_t)syms(b)[1].st_value;
}

static uintptr_t hi(const struct ep__gdbjit_batch *b)
{
	const Elf64_Sym *s = &syms(b)[b->n];

	return (uintptr_t)(s->st_value + s->st_size);
}

/* Symbol s into the last of the k runs, or a new run after them when it
 * starts past the page after that run's end; the runs there now. */
static uint32_t run_add(Elf64_Shdr *sh, uint32_t k, Elf64_Sym *s)
{
	Elf64_Shdr *run = k ? &sh[FN_SH + k - 1] : NULL;
	uint64_t start = s->st_value, end = start + s->st_size;

	if (!run || start / RUN_PAGE > (run->sh_addr + run->sh_size - 1) / RUN_PAGE + 1) {
		run = &sh[FN_SH + k];
		*run = (Elf64_Shdr){ .sh_name = text_name(k), .sh_type = SHT_NOBITS,
				     .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
				     .sh_addr = start, .sh_addralign = 1 };
		k++;
	}
	if (end > run->sh_addr + run->sh_size)
		run->sh_size = end - run->sh_addr;
	s->st_shndx = (Elf64_Section)(FN_SH + k - 1);
	return k;
}

/* The sections (runs) and counts, after a change.  O(n). */
static void finish(struct ep__gdbjit_batch *b)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)(void *)b->file;
	Elf64_Shdr *sh = shdr(b);
	Elf64_Sym *sym = syms(b);
	uint32_t k = 0;

	for (uint32_t i = 0; i < b->n; i++)
		k = run_add(sh, k, &sym[1 + i]);
	if (eh->e_shnum > FN_SH + k) /* runs that went */
		memset(&sh[FN_SH + k], 0, (eh->e_shnum - FN_SH - k) * sizeof(*sh));
	eh->e_shnum = (Elf64_Half)(FN_SH + k);
	sh[SH_SYMTAB].sh_size = (1 + (uint64_t)b->n) * sizeof(Elf64_Sym);
	sh[SH_STRTAB].sh_size = b->str_used;
}

/* finish() after a function was added last to b (b->n > 1), the runs
 * exact before it (every change ends with finish()): only the last run
 * can change, so the other functions' lines are not touched (a linker's
 * names come in address order, one module after another: O(1), not a
 * walk of up to BATCH_MAX symbols per module). */
static void finish_last(struct ep__gdbjit_batch *b)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)(void *)b->file;
	Elf64_Shdr *sh = shdr(b);
	Elf64_Sym *last = &syms(b)[b->n];
	/* (its run is the last) */
	uint32_t k = run_add(sh, (uint32_t)(last[-1].st_shndx - FN_SH) + 1, last);

	eh->e_shnum = (Elf64_Half)(FN_SH + k);
	sh[SH_SYMTAB].sh_size = (1 + (uint64_t)b->n) * sizeof(Elf64_Sym);
	sh[SH_STRTAB].sh_size = b->str_used;
}

/* Function i of b is now start, size, name, for g (its name appended:
 * make_room() made room). */
static void put(struct ep__gdbjit_batch *b, uint32_t i, uintptr_t start, size_t size,
		const char *name, size_t len, struct ep__gdbjit *g)
{
	syms(b)[1 + i] = (Elf64_Sym){ .st_name = (Elf64_Word)b->str_used,
				      .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
				      .st_value = start, .st_size = size };
	memcpy(strtab(b) + b->str_used, name, len);
	b->str_used += len;
	b->fn[i] = g;
	g->b = b;
	g->i = i;
}

/*
 * A new file for b, with room for cap functions and str_cap bytes of
 * names, holding b's first n functions (names compacted).  false without
 * memory: b is as it was.  Only while b is out of the list.
 */
static bool relayout(struct ep__gdbjit_batch *b, uint32_t n, uint32_t cap, size_t str_cap)
{
	size_t o_sym = off_sym(cap), o_str = off_str(cap), o_shstr = o_str + str_cap;
	size_t total = o_shstr + text_name(cap);
	char *f = calloc(1, total);
	struct ep__gdbjit **fn = malloc(cap * sizeof(*fn));

	if (!f || !fn) {
		free(f);
		free(fn);
		return false;
	}
	Elf64_Ehdr *eh = (Elf64_Ehdr *)(void *)f;

	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_ident[EI_OSABI] = ELFOSABI_SYSV;
	eh->e_type = ET_EXEC;
	eh->e_machine = EP__ARCH_ELF_MACHINE;
	eh->e_version = EV_CURRENT;
	eh->e_ehsize = sizeof(Elf64_Ehdr);
	eh->e_shoff = sizeof(Elf64_Ehdr);
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shstrndx = SH_SHSTRTAB;

	Elf64_Shdr *sh = (Elf64_Shdr *)(void *)(f + sizeof(Elf64_Ehdr));

	sh[SH_SYMTAB] = (Elf64_Shdr){ .sh_name = SHSTR_SYMTAB, .sh_type = SHT_SYMTAB,
				      .sh_offset = o_sym, .sh_link = SH_STRTAB, .sh_info = 1,
				      .sh_addralign = 8, .sh_entsize = sizeof(Elf64_Sym) };
	sh[SH_STRTAB] = (Elf64_Shdr){ .sh_name = SHSTR_STRTAB, .sh_type = SHT_STRTAB,
				      .sh_offset = o_str, .sh_addralign = 1 };
	sh[SH_SHSTRTAB] = (Elf64_Shdr){ .sh_name = SHSTR_SHSTRTAB, .sh_type = SHT_STRTAB,
					.sh_offset = o_shstr, .sh_size = text_name(cap),
					.sh_addralign = 1 };
	memcpy(f + o_shstr, shstr, sizeof(shstr));
	for (uint32_t k = 0; k < cap; k++) {
		char *t = f + o_shstr + text_name(k);

		memcpy(t, ".text.", 6);
		for (uint32_t d = 0, v = k; d < 4; d++, v /= 10)
			t[9 - d] = (char)('0' + v % 10);
	}

	struct ep__gdbjit_batch old = *b;

	b->file = f;
	b->file_size = total;
	b->fn = fn;
	b->cap = cap;
	b->str_cap = str_cap;
	b->str_used = 1; /* .strtab starts with a NUL */
	b->str_dead = 0;
	b->n = n;
	for (uint32_t i = 0; i < n; i++) {
		const Elf64_Sym *s = &syms(&old)[1 + i];
		const char *name = fn_name(&old, i);

		put(b, i, (uintptr_t)s->st_value, s->st_size, name, strlen(name) + 1, old.fn[i]);
	}
	free(old.file);
	free(old.fn);
	finish(b);
	return true;
}

/* Room for more functions and len bytes of names (with their NULs),
 * growing or compacting the file if need be.  Out of the list only. */
static bool make_room(struct ep__gdbjit_batch *b, uint32_t more, size_t len)
{
	uint32_t cap = b->cap;
	size_t str_cap = b->str_cap;

	if (b->n + more <= cap && b->str_used + len <= str_cap)
		return true;
	while (b->n + more > cap)
		cap = cap ? (cap * 2 < BATCH_MAX ? cap * 2 : BATCH_MAX) : BATCH_MIN;
	/* the live names and these, with room for as many again: each
	 * rewrite is paid for by as many appends as it copies */
	size_t live = b->str_used - b->str_dead + len;

	if (live * 2 > str_cap || cap != b->cap)
		str_cap = live * 2 > 16 * (size_t)cap ? live * 2 : 16 * (size_t)cap;
	return relayout(b, b->n, cap, str_cap);
}

static void announce(struct jit_code_entry *e, uint32_t action)
{
	__jit_debug_descriptor.relevant_entry = e;
	__jit_debug_descriptor.action_flag = action;
	__jit_debug_register_code();
	__jit_debug_descriptor.action_flag = 0;
}

/* Take b's file out of GDB's list, so that it can be edited. */
static void unlist(struct ep__gdbjit_batch *b)
{
	struct jit_code_entry *e = &b->entry;

	if (!b->listed)
		return;
	if (e->prev_entry)
		e->prev_entry->next_entry = e->next_entry;
	else
		__jit_debug_descriptor.first_entry = e->next_entry;
	if (e->next_entry)
		e->next_entry->prev_entry = e->prev_entry;
	announce(e, 2);
	b->listed = false;
}

/* The index of the last batch starting at or below x, or -1. */
static ptrdiff_t batch_at(uintptr_t x)
{
	size_t l = 0, h = g_nbatch;

	while (l < h) {
		size_t m = l + (h - l) / 2;

		if (lo(g_batch[m]) <= x)
			l = m + 1;
		else
			h = m;
	}
	return (ptrdiff_t)l - 1;
}

/* Put b's file (back) in GDB's list, or free b if it has no function. */
static void relist(struct ep__gdbjit_batch *b)
{
	struct jit_code_entry *e = &b->entry;

	if (!b->n) {
		for (size_t k = 0; k < g_nbatch; k++) {
			if (g_batch[k] == b) {
				memmove(&g_batch[k], &g_batch[k + 1],
					(g_nbatch - k - 1) * sizeof(*g_batch));
				g_nbatch--;
				break;
			}
		}
		free(b->fn);
		free(b->file);
		free(b);
		return;
	}
	e->symfile_addr = b->file;
	e->symfile_size = b->file_size;
	e->prev_entry = NULL;
	e->next_entry = __jit_debug_descriptor.first_entry;
	if (e->next_entry)
		e->next_entry->prev_entry = e;
	__jit_debug_descriptor.first_entry = e;
	announce(e, 1);
	b->listed = true;
}

/* A new, empty batch at g_batch[k] (it takes its place by address once it
 * has a function there).  NULL without memory. */
static struct ep__gdbjit_batch *batch_new(size_t k)
{
	if (g_nbatch == g_batch_cap) {
		size_t cap = g_batch_cap ? 2 * g_batch_cap : 16;
		struct ep__gdbjit_batch **a = realloc(g_batch, cap * sizeof(*a));

		if (!a)
			return NULL;
		g_batch = a;
		g_batch_cap = cap;
	}
	struct ep__gdbjit_batch *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	memmove(&g_batch[k + 1], &g_batch[k], (g_nbatch - k) * sizeof(*g_batch));
	g_batch[k] = b;
	g_nbatch++;
	return b;
}

/* Drop function i of b (out of the list). */
static void drop(struct ep__gdbjit_batch *b, uint32_t i)
{
	b->str_dead += strlen(fn_name(b, i)) + 1;
	b->fn[i]->b = NULL;
	b->n--;
	memmove(&syms(b)[1 + i], &syms(b)[2 + i], (b->n - i) * sizeof(Elf64_Sym));
	memset(&syms(b)[1 + b->n], 0, sizeof(Elf64_Sym));
	memmove(&b->fn[i], &b->fn[i + 1], (b->n - i) * sizeof(*b->fn));
	for (uint32_t j = i; j < b->n; j++)
		b->fn[j]->i = j;
	finish(b);
}

/*
 * Split the full batch g_batch[k] (out of the list): its upper half goes
 * to a new batch after it, out of the list too.  NULL without memory.
 */
static struct ep__gdbjit_batch *split(size_t k)
{
	struct ep__gdbjit_batch *b = g_batch[k], *up = batch_new(k + 1);
	uint32_t half = b->n / 2;
	size_t len = 1;

	if (!up)
		return NULL;
	for (uint32_t i = half; i < b->n; i++)
		len += strlen(fn_name(b, i)) + 1;
	if (!relayout(up, 0, BATCH_MAX, 2 * len)) {
		relist(up); /* (frees it) */
		return NULL;
	}
	for (uint32_t i = half; i < b->n; i++) {
		const Elf64_Sym *s = &syms(b)[1 + i];
		const char *name = fn_name(b, i);
		size_t l = strlen(name) + 1;

		put(up, i - half, (uintptr_t)s->st_value, s->st_size, name, l, b->fn[i]);
		b->str_dead += l;
	}
	up->n = b->n - half;
	memset(&syms(b)[1 + half], 0, up->n * sizeof(Elf64_Sym));
	b->n = half;
	finish(b);
	finish(up);
	return up;
}

/*
 * The batch for a new function at x, out of the list, with room for it and
 * a name of len bytes: the one whose interval holds x (no other may), else
 * a young neighbour, else a new one.  NULL without memory.
 */
static struct ep__gdbjit_batch *batch_for(uintptr_t x, size_t len)
{
	ptrdiff_t k = batch_at(x);
	struct ep__gdbjit_batch *b;

	if (k >= 0 && x < hi(g_batch[k])) {
		b = g_batch[k];
		unlist(b);
		if (b->n == BATCH_MAX) {
			struct ep__gdbjit_batch *up = split((size_t)k);

			if (!up) {
				relist(b);
				return NULL;
			}
			if (x > lo(up)) {
				relist(b);
				b = up;
			} else {
				relist(up);
			}
		}
	} else if (k >= 0 && g_batch[k]->n < YOUNG) {
		b = g_batch[k];
		unlist(b);
	} else if (k + 1 < (ptrdiff_t)g_nbatch && g_batch[k + 1]->n < YOUNG) {
		b = g_batch[k + 1];
		unlist(b);
	} else if (!(b = batch_new((size_t)(k + 1)))) {
		return NULL;
	}
	if (!make_room(b, 1, len)) {
		relist(b); /* (frees a new one) */
		return NULL;
	}
	return b;
}

/*
 * The young batch b (out of the list) joins a neighbour with room for its
 * functions, if there is one: it is then empty.  Their intervals are
 * next to each other, so the joined one holds nobody else's.
 */
static void join(struct ep__gdbjit_batch *b)
{
	size_t k = (size_t)batch_at(lo(b)), len = 0;

	for (uint32_t i = 0; i < b->n; i++)
		len += strlen(fn_name(b, i)) + 1;
	for (int side = 0; side < 2; side++) {
		if (side ? k + 1 >= g_nbatch : k == 0)
			continue;
		struct ep__gdbjit_batch *c = g_batch[side ? k + 1 : k - 1];

		if (c->n + b->n > BATCH_MAX)
			continue;
		unlist(c);
		if (!make_room(c, b->n, len)) {
			relist(c);
			continue;
		}
		/* on the left, b's functions go after c's; on the right, before */
		uint32_t at = side ? 0 : c->n;

		memmove(&syms(c)[1 + at + b->n], &syms(c)[1 + at], (c->n - at) * sizeof(Elf64_Sym));
		memmove(&c->fn[at + b->n], &c->fn[at], (c->n - at) * sizeof(*c->fn));
		c->n += b->n;
		for (uint32_t i = 0; i < b->n; i++) {
			const Elf64_Sym *s = &syms(b)[1 + i];
			const char *name = fn_name(b, i);

			put(c, at + i, (uintptr_t)s->st_value, s->st_size, name, strlen(name) + 1,
			    b->fn[i]);
		}
		for (uint32_t j = at + b->n; j < c->n; j++)
			c->fn[j]->i = j;
		b->n = 0;
		finish(c);
		relist(c);
		return;
	}
}

/* diag's lock held for these. */
void ep__gdbjit_unset(struct ep__gdbjit *g)
{
	struct ep__gdbjit_batch *b = g->b;

	if (!b)
		return;
	unlist(b);
	drop(b, g->i);
	relist(b);
}

void ep__gdbjit_forget(struct ep__gdbjit *g)
{
	struct ep__gdbjit_batch *b = g->b;

	if (!b)
		return;
	unlist(b);
	drop(b, g->i);
	if (!b->n)
		relist(b); /* (frees it) */
}

void ep__gdbjit_flush(void)
{
	for (size_t k = 0; k < g_nbatch; k++)
		if (!g_batch[k]->listed)
			relist(g_batch[k]);
}

/* now: gdb hears of it at once; else at ep__gdbjit_flush() (many at a
 * time: one stop of the program per batch, not per name) */
static void set(struct ep__gdbjit *g, void *exec, size_t size, const char *name, bool now)
{
	struct ep__gdbjit_batch *b = g->b;
	uintptr_t x = (uintptr_t)exec;
	size_t len = strlen(name) + 1;

	if (b && syms(b)[1 + g->i].st_value != x) {
		ep__gdbjit_unset(g); /* (the core never moves code) */
		b = NULL;
	}
	if (b) {
		/* renamed or narrowed: in its place */
		bool same = !strcmp(fn_name(b, g->i), name);

		if (same && syms(b)[1 + g->i].st_size == size)
			return; /* gdb has it already */
		unlist(b);
		if (!same && !make_room(b, 0, len)) {
			drop(b, g->i); /* never the old name */
			relist(b);
			return;
		}
		if (!same) {
			b->str_dead += strlen(fn_name(b, g->i)) + 1;
			syms(b)[1 + g->i].st_name = (Elf64_Word)b->str_used;
			memcpy(strtab(b) + b->str_used, name, len);
			b->str_used += len;
		}
		syms(b)[1 + g->i].st_size = size;
		finish(b);
		if (now)
			relist(b);
		return;
	}
	b = batch_for(x, len);
	if (!b)
		return; /* no memory: gdb just does not learn this name */
	/* its place by address: mostly last (code is mostly placed upwards) */
	uint32_t p = b->n;

	while (p > 0 && syms(b)[p].st_value > x)
		p--;
	memmove(&syms(b)[2 + p], &syms(b)[1 + p], (b->n - p) * sizeof(Elf64_Sym));
	memmove(&b->fn[p + 1], &b->fn[p], (b->n - p) * sizeof(*b->fn));
	b->n++;
	put(b, p, x, size, name, len, g);
	for (uint32_t j = p + 1; j < b->n; j++)
		b->fn[j]->i = j;
	if (p > 0 && p == b->n - 1)
		finish_last(b);
	else
		finish(b);
	if (b->n == YOUNG)
		join(b);
	if (now || !b->n)
		relist(b); /* (frees b if it joined another) */
}

void ep__gdbjit_set(struct ep__gdbjit *g, void *exec, size_t size, const char *name)
{
	set(g, exec, size, name, true);
}

void ep__gdbjit_set_later(struct ep__gdbjit *g, void *exec, size_t size, const char *name)
{
	set(g, exec, size, name, false);
}

void ep__gdbjit_hide(void)
{
	for (size_t k = 0; k < g_nbatch; k++)
		ep__diag_hide_word(g_batch[k]->file, g_batch[k]->file_size);
}
