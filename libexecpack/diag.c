/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag.c - names and diagnostics for JIT code.
 *
 *   - a process-wide table of named ranges that ep_symbolize() reads
 *     without locks or allocation (usable from a signal handler);
 *   - libunwind registration of finalized named code (libunwind's dynamic
 *     "procedure info" for names, or generated DWARF CFI for stepping);
 *   - perf's /tmp/perf-<pid>.map (and, through jitdump.c, perf's jitdump);
 *   - Valgrind memcheck client requests: every allocation is a chunk of a
 *     memcheck mempool anchored at its pool, so that JIT code the program
 *     loses is reported as "definitely lost";
 *   - ep_backtrace() for crash handlers.
 *
 * The symbol table.  Slots live in segments that are allocated on demand
 * and never freed (segment k holds SEG0 << k slots), so a reader can walk
 * them at any time.  Each slot is a sequence lock: a writer (always holding
 * g_lock) makes the sequence odd, stores the range and name with relaxed
 * atomic stores, and makes it even again; a reader copies the slot and
 * keeps the copy only if it saw the same even sequence before and after.
 * A reader never waits for a writer for long: a slot that stays odd (its
 * writer was interrupted by the very signal handler that is reading) is
 * skipped after a few tries.
 */
#include "config.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#endif
#ifdef HAVE_VALGRIND_MEMCHECK_H
#include <valgrind/memcheck.h>
#include <valgrind/helgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif
#ifndef VALGRIND_CREATE_MEMPOOL
#define VALGRIND_CREATE_MEMPOOL(pool, rz, zeroed) ((void)0)
#define VALGRIND_DESTROY_MEMPOOL(pool) ((void)0)
#define VALGRIND_MEMPOOL_ALLOC(pool, addr, size) ((void)0)
#define VALGRIND_MEMPOOL_FREE(pool, addr) ((void)0)
#define VALGRIND_MEMPOOL_EXISTS(pool) 0
#define VALGRIND_MEMPOOL_CHANGE(pool, a, b, size) ((void)0)
#define VALGRIND_MAKE_MEM_DEFINED(addr, len) ((void)0)
#define VALGRIND_MAKE_MEM_UNDEFINED(addr, len) ((void)0)
#endif
#ifndef VALGRIND_HG_DISABLE_CHECKING
#define VALGRIND_HG_DISABLE_CHECKING(addr, len) ((void)0)
#endif

#ifdef HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
/* libunwind's number for the frame pointer (its aarch64 header has no
 * UNW_TDEP_BP) */
#if defined(__x86_64__)
#define EP__UNW_FP UNW_X86_64_RBP
#elif defined(__aarch64__)
#define EP__UNW_FP UNW_AARCH64_X29
#elif defined(__riscv)
#define EP__UNW_FP UNW_RISCV_X8
#endif
#endif

#include "diag.h"
#include "execpack.h"
#include "internal.h"
#include "jitdump.h"

/* ---- the symbol table ------------------------------------------------------ */

#define NAME_WORDS ((EP_NAME_MAX + 1) / 8)
#define SEG0 64
#define NSEG 26

struct sym_slot {
	unsigned long seq; /* odd while a writer is changing the slot */
	uintptr_t lo, hi;  /* hi == 0: empty */
	uint64_t name[NAME_WORDS];
};

static struct sym_slot *g_seg[NSEG]; /* atomic pointers, set once each */
static size_t g_high;                /* atomic: slots [0, g_high) may be in use */

/* Writers only, under g_lock. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t *g_free_slots, g_nfree, g_capfree;

static size_t seg_start(unsigned k)
{
	return (size_t)SEG0 * (((size_t)1 << k) - 1);
}

static struct sym_slot *slot_at(size_t i)
{
	size_t q = i / SEG0 + 1;
	unsigned k = (unsigned)(63 - __builtin_clzl(q));
	struct sym_slot *seg = __atomic_load_n(&g_seg[k], __ATOMIC_ACQUIRE);

	return seg ? &seg[i - seg_start(k)] : NULL;
}

/* A free slot index, or SIZE_MAX without memory.  g_lock held. */
static size_t slot_get(void)
{
	if (g_nfree)
		return g_free_slots[--g_nfree];

	size_t i = __atomic_load_n(&g_high, __ATOMIC_RELAXED);
	size_t q = i / SEG0 + 1;
	unsigned k = (unsigned)(63 - __builtin_clzl(q));

	if (k >= NSEG)
		return SIZE_MAX;
	if (i == 0) {
		/* before the first store: ep_symbolize() reads these without
		 * g_lock, like the slots, and helgrind does not see the
		 * acquire/release pairing of these atomics */
		VALGRIND_HG_DISABLE_CHECKING(&g_high, sizeof(g_high));
		VALGRIND_HG_DISABLE_CHECKING(g_seg, sizeof(g_seg));
	}
	if (!__atomic_load_n(&g_seg[k], __ATOMIC_RELAXED)) {
		size_t n = (size_t)SEG0 << k;
		struct sym_slot *seg = calloc(n, sizeof(*seg));

		if (!seg)
			return SIZE_MAX;
		/* lock-free by design (sequence locks): not for helgrind to judge */
		VALGRIND_HG_DISABLE_CHECKING(seg, n * sizeof(*seg));
		__atomic_store_n(&g_seg[k], seg, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&g_high, i + 1, __ATOMIC_RELEASE);
	return i;
}

static int slot_put(size_t i)
{
	if (g_nfree == g_capfree) {
		size_t nc = g_capfree ? g_capfree * 2 : 64;
		size_t *nf = realloc(g_free_slots, nc * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		g_free_slots = nf;
		g_capfree = nc;
	}
	g_free_slots[g_nfree++] = i;
	return 0;
}

/* Publish [lo, hi) with name (NULL: empty the slot).  g_lock held. */
static void slot_write(struct sym_slot *s, uintptr_t lo, uintptr_t hi, const char *name)
{
	unsigned long q = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
	uint64_t w[NAME_WORDS];

	memset(w, 0, sizeof(w));
	if (name)
		memcpy(w, name, strlen(name));
	__atomic_store_n(&s->seq, q + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&s->lo, name ? lo : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->hi, name ? hi : 0, __ATOMIC_RELAXED);
	for (size_t j = 0; j < NAME_WORDS; j++)
		__atomic_store_n(&s->name[j], w[j], __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, q + 2, __ATOMIC_RELEASE);
}

/*
 * Look addr up in slot s: 1 and a copy of the name when it is there, 0 when
 * not (or when its writer does not finish in time).  No locks, no calls.
 */
static int slot_read(const struct sym_slot *s, uintptr_t addr, uintptr_t *lo_out,
		     uint64_t name[NAME_WORDS])
{
	for (int tries = 0; tries < 1000; tries++) {
		unsigned long q1 = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);

		if (q1 & 1)
			continue;
		uintptr_t lo = __atomic_load_n(&s->lo, __ATOMIC_RELAXED);
		uintptr_t hi = __atomic_load_n(&s->hi, __ATOMIC_RELAXED);
		bool in = addr >= lo && addr < hi;

		if (in)
			for (size_t j = 0; j < NAME_WORDS; j++)
				name[j] = __atomic_load_n(&s->name[j], __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) != q1)
			continue;
		*lo_out = lo;
		return in;
	}
	return 0;
}

EP_API int ep_symbolize(const void *addr, char *buf, size_t len, size_t *offset)
{
	uintptr_t a = (uintptr_t)addr, lo = 0;
	uint64_t name[NAME_WORDS];
	size_t high = __atomic_load_n(&g_high, __ATOMIC_ACQUIRE);

	for (size_t i = 0; i < high; i++) {
		const struct sym_slot *s = slot_at(i);

		if (!s || !slot_read(s, a, &lo, name))
			continue;
		const char *n = (const char *)name;
		size_t nl = 0;

		while (nl < sizeof(name) && n[nl])
			nl++;
		if (offset)
			*offset = (size_t)(a - lo);
		if (!buf || len == 0)
			return -ERANGE;
		if (nl >= len) {
			memcpy(buf, n, len - 1);
			buf[len - 1] = 0;
			return -ERANGE;
		}
		memcpy(buf, n, nl);
		buf[nl] = 0;
		return 0;
	}
	return -ENOENT;
}

/* ---- per-allocation records -------------------------------------------- */

struct ep__diag {
	struct ep__diag *next, *prev; /* all records, for the exit-time leak hiding */
	size_t slot;                  /* SIZE_MAX: not in the table */
	char *name;                   /* NULL: unnamed */
	bool finalized;
	int kind; /* EP_UNWIND_* */
	size_t prologue, frame;
#ifdef HAVE_LIBUNWIND
	bool registered;
	unw_dyn_info_t di;
	uint64_t *cfi; /* DWARF kinds: search table, CIE and FDE */
#endif
	struct jit_code_entry *gdb; /* GDB JIT interface entry, or NULL */
};

static struct ep__diag *g_records; /* g_lock */

static int default_unwind_kind(void)
{
	static int kind = -1;
	int k = __atomic_load_n(&kind, __ATOMIC_RELAXED);

	if (k < 0) {
		const char *e = secure_getenv("EXECPACK_UNWIND");

		k = e && !strcmp(e, "dwarf") ? EP_UNWIND_DWARF_FP : EP_UNWIND_NAME;
		__atomic_store_n(&kind, k, __ATOMIC_RELAXED);
	}
	return k;
}

/* The record of an allocation, created on first use.  g_lock held. */
static struct ep__diag *record_get(struct ep__diag **d)
{
	if (*d)
		return *d;
	struct ep__diag *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->slot = SIZE_MAX;
	r->kind = default_unwind_kind();
	r->next = g_records;
	if (g_records)
		g_records->prev = r;
	g_records = r;
	*d = r;
	return r;
}

#ifdef HAVE_LIBUNWIND
/* ---- libunwind ------------------------------------------------------------- */

static size_t put_uleb(unsigned char *p, size_t v)
{
	size_t n = 0;

	do {
		unsigned char b = v & 0x7f;

		v >>= 7;
		p[n++] = b | (v ? 0x80 : 0);
	} while (v);
	return n;
}

static size_t put_advance(unsigned char *p, size_t delta)
{
	if (delta < 0x40) {
		p[0] = (unsigned char)(0x40 | delta); /* DW_CFA_advance_loc */
		return 1;
	}
	if (delta <= 0xffff) {
		uint16_t v = (uint16_t)delta;

		p[0] = 0x03; /* DW_CFA_advance_loc2 */
		memcpy(p + 1, &v, 2);
		return 3;
	}
	uint32_t v = (uint32_t)delta;

	p[0] = 0x04; /* DW_CFA_advance_loc4 */
	memcpy(p + 1, &v, 4);
	return 5;
}

/*
 * .eh_frame-format CFI for one procedure, laid out as libunwind's
 * UNW_INFO_FORMAT_IP_OFFSET expects: a one-entry search table (start offset
 * from start_ip, FDE offset from segbase), then the CIE and the FDE;
 * segbase is the start of the buffer.
 */
static uint64_t *cfi_build(uintptr_t start, size_t size, int kind, size_t prologue,
			   size_t frame)
{
	unsigned char b[128];
	size_t n = 8, cie = 8, fde, len_at;

	memset(b, 0, sizeof(b));
	/* CIE: version 1, "zR", code align 1, data align -8, the RA column */
	n += 4;                            /* length, below */
	memset(b + n, 0, 4), n += 4;       /* CIE id */
	b[n++] = 1;
	memcpy(b + n, "zR", 3), n += 3;
	b[n++] = 1;    /* code alignment */
	b[n++] = 0x78; /* data alignment -8 */
	b[n++] = EP__DW_RA; /* return address column (arch.h) */
	b[n++] = 1;    /* augmentation data length */
	b[n++] = 0x00; /* FDE pointers: DW_EH_PE_absptr */
	b[n++] = 0x0c, b[n++] = EP__DW_SP, b[n++] = EP__CFA_AT_ENTRY; /* DW_CFA_def_cfa */
	if (EP__CFA_AT_ENTRY) /* x86: call pushed the return address */
		b[n++] = 0x80 | EP__DW_RA, b[n++] = 1; /* DW_CFA_offset RA at cfa-8 */
	n = (n + 7) & ~(size_t)7;              /* DW_CFA_nop padding */
	uint32_t l32 = (uint32_t)(n - cie - 4);

	memcpy(b + cie, &l32, 4);

	fde = n;
	n += 4; /* length */
	l32 = (uint32_t)(n - cie);
	memcpy(b + n, &l32, 4), n += 4; /* CIE pointer: back to the CIE */
	uint64_t v = start;

	memcpy(b + n, &v, 8), n += 8;
	v = size;
	memcpy(b + n, &v, 8), n += 8;
	b[n++] = 0; /* augmentation data length */
	len_at = n;
	if (kind == EP_UNWIND_DWARF_FP) {
		/* the frame record's prologue (arch.h: push rbp; mov rbp, rsp on
		 * x86-64, stp x29, x30, [sp, #-16]!; mov x29, sp on arm64) */
		n += put_advance(b + n, EP__FP_GROW);
		b[n++] = 0x0e, b[n++] = EP__CFA_AT_ENTRY + 16; /* DW_CFA_def_cfa_offset */
		if (EP__FP_SAVED > EP__FP_GROW)
			n += put_advance(b + n, EP__FP_SAVED - EP__FP_GROW);
		b[n++] = 0x80 | EP__DW_FP, b[n++] = 2; /* DW_CFA_offset fp at cfa-16 */
		if (!EP__CFA_AT_ENTRY)
			b[n++] = 0x80 | EP__DW_RA, b[n++] = 1; /* RA at cfa-8 */
		n += put_advance(b + n, EP__FP_SET - EP__FP_SAVED);
		b[n++] = 0x0c, b[n++] = EP__DW_FP, b[n++] = EP__FP_CFA_OFF; /* DW_CFA_def_cfa */
	} else if (frame) {
		if (prologue)
			n += put_advance(b + n, prologue);
		b[n++] = 0x0e; /* DW_CFA_def_cfa_offset: what the prologue took */
		n += put_uleb(b + n, EP__CFA_AT_ENTRY + frame);
		if (!EP__CFA_AT_ENTRY) /* the prologue stored the link register */
			b[n++] = 0x80 | EP__DW_RA, b[n++] = 1; /* RA at cfa-8 */
	}
	(void)len_at;
	n = (n + 7) & ~(size_t)7;
	l32 = (uint32_t)(n - fde - 4);
	memcpy(b + fde, &l32, 4);

	uint64_t *out = malloc(n);

	if (!out)
		return NULL;
	int32_t ent[2] = { 0, (int32_t)fde }; /* table: start offset 0, FDE */

	memcpy(b, ent, sizeof(ent));
	memcpy(out, b, n);
	return out;
}

/*
 * libunwind caches what it learnt about an address (unw_backtrace()'s frame
 * cache is not invalidated by _U_dyn_register/_U_dyn_cancel): after the range
 * is described differently, or freed for reuse, drop what it knew.
 */
static void flush_unwind_caches(struct ep__diag *r)
{
	unw_flush_cache(unw_local_addr_space, r->di.start_ip, r->di.end_ip);
}

static void unw_unregister(struct ep__diag *r)
{
	if (r->registered) {
		_U_dyn_cancel(&r->di);
		flush_unwind_caches(r);
	}
	r->registered = false;
	free(r->cfi);
	r->cfi = NULL;
}

/* (Re)register a finalized allocation.  g_lock held. */
static void unw_register(struct ep__diag *r, void *exec, size_t size)
{
	unw_unregister(r);
	if (!r->finalized || (!r->name && r->kind == EP_UNWIND_NAME))
		return;
	memset(&r->di, 0, sizeof(r->di));
	r->di.start_ip = (unw_word_t)(uintptr_t)exec;
	r->di.end_ip = (unw_word_t)(uintptr_t)exec + size;
	if (r->kind == EP_UNWIND_NAME) {
		r->di.format = UNW_INFO_FORMAT_DYNAMIC;
		r->di.u.pi.name_ptr = (unw_word_t)(uintptr_t)r->name;
	} else {
		r->cfi = cfi_build((uintptr_t)exec, size, r->kind, r->prologue, r->frame);
		if (!r->cfi)
			return; /* no memory: the code is simply not described */
		r->di.format = UNW_INFO_FORMAT_IP_OFFSET;
		r->di.u.rti.name_ptr = (unw_word_t)(uintptr_t)(r->name ? r->name : "");
		r->di.u.rti.segbase = (unw_word_t)(uintptr_t)r->cfi;
		r->di.u.rti.table_len = 1; /* in words: one 8-byte entry */
		r->di.u.rti.table_data = (unw_word_t)(uintptr_t)r->cfi;
	}
	_U_dyn_register(&r->di);
	flush_unwind_caches(r);
	r->registered = true;
}
#else
static void unw_unregister(struct ep__diag *r)
{
	(void)r;
}

static void unw_register(struct ep__diag *r, void *exec, size_t size)
{
	(void)r, (void)exec, (void)size;
}
#endif

/* ---- GDB JIT interface --------------------------------------------------------
 * GDB puts a breakpoint in __jit_debug_register_code() and, each time it is
 * called, reads the entry named by __jit_debug_descriptor: an in-memory
 * object file.  Each named, finalized allocation gets a minimal ELF file
 * with a NOBITS .text at its address and one function symbol, so `bt` and
 * `info symbol` name JIT frames.
 *
 * The two symbols are exported (see libexecpack.map) so that gdb finds them
 * in the library.  The protocol has no lock of its own: each JIT updates
 * the list under its own, so one list must have one writer.  When the
 * executable or a library found before this one defines the symbols too
 * (programs that embed LLVM or LuaJIT do), the dynamic linker binds the
 * exported names to that other JIT's copies, and gdb, which resolves data
 * symbols as the dynamic linker does, reads only that descriptor.  The
 * list is then the other JIT's: the library leaves it alone and does not
 * register its code with gdb (the rule in libexecpack(7)).  Its own uses go
 * through hidden aliases, which the dynamic linker never rebinds.
 */
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

/* The library's own copies, never interposed. */
extern struct jit_descriptor ep__jit_descriptor
	__attribute__((alias("__jit_debug_descriptor"), visibility("hidden")));
extern void ep__jit_register_code(void)
	__attribute__((alias("__jit_debug_register_code"), visibility("hidden")));

/*
 * Whether the exported descriptor is another object's: its address as the
 * dynamic linker bound it (through the GOT; an asm, so that no compiler
 * assumption about interposition can fold the comparison) against our own.
 * g_lock held.
 */
static bool gdb_descriptor_foreign(void)
{
	static int foreign = -1; /* bindings do not change after load */

	if (foreign < 0) {
		const struct jit_descriptor *bound;

#if defined(__x86_64__) && defined(__PIC__)
		__asm__("movq __jit_debug_descriptor@GOTPCREL(%%rip), %0" : "=r"(bound));
#else
		bound = &__jit_debug_descriptor;
#endif
		foreign = bound != &ep__jit_descriptor;
	}
	return foreign;
}

/* A minimal ELF64 file: header, .text (NOBITS), .symtab, .strtab, .shstrtab. */
static char *gdb_symfile(uintptr_t start, size_t size, const char *name, size_t *len)
{
	static const char shstr[] = "\0.text\0.symtab\0.strtab\0.shstrtab";
	size_t nl = strlen(name);
	size_t off_sym = sizeof(Elf64_Ehdr);
	size_t off_str = off_sym + 2 * sizeof(Elf64_Sym);
	size_t off_shstr = off_str + 1 + nl + 1;
	size_t off_sh = (off_shstr + sizeof(shstr) + 7) & ~(size_t)7;
	size_t total = off_sh + 5 * sizeof(Elf64_Shdr);
	char *f = calloc(1, total);

	if (!f)
		return NULL;
	Elf64_Ehdr *eh = (Elf64_Ehdr *)f;

	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_ident[EI_OSABI] = ELFOSABI_SYSV;
	eh->e_type = ET_EXEC;
	eh->e_machine = EP__ARCH_ELF_MACHINE;
	eh->e_version = EV_CURRENT;
	eh->e_ehsize = sizeof(Elf64_Ehdr);
	eh->e_shoff = off_sh;
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shnum = 5;
	eh->e_shstrndx = 4;

	Elf64_Sym *sym = (Elf64_Sym *)(f + off_sym);

	sym[1].st_name = 1;
	sym[1].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
	sym[1].st_shndx = 1;
	sym[1].st_value = start;
	sym[1].st_size = size;
	memcpy(f + off_str + 1, name, nl);
	memcpy(f + off_shstr, shstr, sizeof(shstr));

	Elf64_Shdr *sh = (Elf64_Shdr *)(f + off_sh);

	sh[1] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_NOBITS,
			      .sh_flags = SHF_ALLOC | SHF_EXECINSTR, .sh_addr = start,
			      .sh_size = size, .sh_addralign = 16 };
	sh[2] = (Elf64_Shdr){ .sh_name = 7, .sh_type = SHT_SYMTAB, .sh_offset = off_sym,
			      .sh_size = 2 * sizeof(Elf64_Sym), .sh_link = 3, .sh_info = 1,
			      .sh_addralign = 8, .sh_entsize = sizeof(Elf64_Sym) };
	sh[3] = (Elf64_Shdr){ .sh_name = 15, .sh_type = SHT_STRTAB, .sh_offset = off_str,
			      .sh_size = 1 + nl + 1, .sh_addralign = 1 };
	sh[4] = (Elf64_Shdr){ .sh_name = 23, .sh_type = SHT_STRTAB, .sh_offset = off_shstr,
			      .sh_size = sizeof(shstr), .sh_addralign = 1 };
	*len = total;
	return f;
}

/* g_lock held for both. */
static void gdb_unregister(struct ep__diag *r)
{
	struct jit_code_entry *e = r->gdb;

	if (!e)
		return;
	if (e->prev_entry)
		e->prev_entry->next_entry = e->next_entry;
	else
		ep__jit_descriptor.first_entry = e->next_entry;
	if (e->next_entry)
		e->next_entry->prev_entry = e->prev_entry;
	ep__jit_descriptor.relevant_entry = e;
	ep__jit_descriptor.action_flag = 2;
	ep__jit_register_code();
	ep__jit_descriptor.action_flag = 0;
	free((void *)e->symfile_addr);
	free(e);
	r->gdb = NULL;
}

static void gdb_register(struct ep__diag *r, void *exec, size_t size)
{
	gdb_unregister(r);
	if (!r->finalized || !r->name || gdb_descriptor_foreign())
		return;
	struct jit_code_entry *e = calloc(1, sizeof(*e));
	size_t len = 0;
	char *file = e ? gdb_symfile((uintptr_t)exec, size, r->name, &len) : NULL;

	if (!file) {
		free(e);
		return; /* no memory: gdb just does not learn this name */
	}
	e->symfile_addr = file;
	e->symfile_size = len;
	e->next_entry = ep__jit_descriptor.first_entry;
	if (e->next_entry)
		e->next_entry->prev_entry = e;
	ep__jit_descriptor.first_entry = e;
	ep__jit_descriptor.relevant_entry = e;
	ep__jit_descriptor.action_flag = 1;
	ep__jit_register_code();
	ep__jit_descriptor.action_flag = 0;
	r->gdb = e;
}

/* ---- perf map -------------------------------------------------------------- */

static bool perfmap_wanted(unsigned pool_flags)
{
	static int env = -1;
	int e = __atomic_load_n(&env, __ATOMIC_RELAXED);

	if (pool_flags & EP_F_PERFMAP)
		return true;
	if (e < 0) {
		const char *s = secure_getenv("EXECPACK_PERFMAP");

		e = s && *s && strcmp(s, "0") != 0;
		__atomic_store_n(&env, e, __ATOMIC_RELAXED);
	}
	return e;
}

/* Append "START SIZE name" to /tmp/perf-<pid>.map, one write(2) per line. */
static void perfmap_append(const void *exec, size_t size, const char *name)
{
	char path[64], line[EP_NAME_MAX + 48];

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		return;
	int n = snprintf(line, sizeof(line), "%lx %zx %s\n", (unsigned long)(uintptr_t)exec,
			 size, name);

	if (n > 0 && (size_t)n < sizeof(line) && write(fd, line, (size_t)n) < 0) {
		/* nothing to do: perf maps are best effort */
	}
	close(fd);
}

/* ---- hooks from heap.c ------------------------------------------------------ */

/*
 * Valgrind (3.19, amd64) reads guest code a little past the instruction it
 * decodes: code whose last byte is the last byte of a mapping followed by
 * unmapped space makes Valgrind itself die of SIGSEGV.  Under Valgrind only,
 * when an allocation ends on a page boundary with nothing mapped after it,
 * put a read-only page there (never executable; if anything is mapped there
 * already, the hint is not taken and nothing changes).  The page stays
 * until exit.
 */
static void valgrind_readahead_guard(void *exec, size_t size)
{
	uintptr_t end = (uintptr_t)exec + size;
	long pg = sysconf(_SC_PAGESIZE);

	if (pg <= 0 || end % (uintptr_t)pg)
		return;
	void *want = (void *)end;
	void *got = mmap(want, (size_t)pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (got != MAP_FAILED && got != want)
		munmap(got, (size_t)pg);
}

void ep__diag_alloc_slow(struct ep__heap *pool, void *exec, size_t size)
{
	if (!RUNNING_ON_VALGRIND)
		return;
	valgrind_readahead_guard(exec, size);
	/* one mempool per pool; its chunks are defined (is_zeroed) since the
	 * exec view always holds the trap fill or code */
	if (!VALGRIND_MEMPOOL_EXISTS(pool))
		VALGRIND_CREATE_MEMPOOL(pool, 0, 1);
	VALGRIND_MEMPOOL_ALLOC(pool, exec, size);
}

void ep__diag_finalize_slow(struct ep__heap *pool, struct ep__diag **d, void *exec,
			    size_t size, unsigned pool_flags)
{
	(void)pool;
	VALGRIND_MAKE_MEM_DEFINED(exec, size);
	if (!*d)
		return;
	pthread_mutex_lock(&g_lock);
	struct ep__diag *r = *d;

	r->finalized = true;
	unw_register(r, exec, size);
	gdb_register(r, exec, size);
	if (r->name && perfmap_wanted(pool_flags))
		perfmap_append(exec, size, r->name);
	if (r->name && ep__jitdump_wanted(pool_flags))
		ep__jitdump_load(exec, size, r->name);
	pthread_mutex_unlock(&g_lock);
}

static void record_drop(struct ep__diag **d)
{
	struct ep__diag *r = *d;

	if (!r)
		return;
	pthread_mutex_lock(&g_lock);
	unw_unregister(r);
	gdb_unregister(r);
	if (r->slot != SIZE_MAX) {
		slot_write(slot_at(r->slot), 0, 0, NULL);
		if (slot_put(r->slot) != 0) {
			/* no memory for the free list: the empty slot is lost, harmless */
		}
	}
	if (r->prev)
		r->prev->next = r->next;
	else
		g_records = r->next;
	if (r->next)
		r->next->prev = r->prev;
	pthread_mutex_unlock(&g_lock);
	free(r->name);
	free(r);
	*d = NULL;
}

void ep__diag_free_slow(struct ep__heap *pool, struct ep__diag **d, void *exec,
			size_t size, bool unmapped)
{
	record_drop(d);
	if (!RUNNING_ON_VALGRIND)
		return;
	VALGRIND_MEMPOOL_FREE(pool, exec);
	/* the trap fill stays readable, as it is without Valgrind */
	if (!unmapped)
		VALGRIND_MAKE_MEM_DEFINED(exec, size);
}

void ep__diag_shrink_slow(struct ep__heap *pool, struct ep__diag **d, void *exec,
			  size_t old_size, size_t size, unsigned pool_flags)
{
	if (RUNNING_ON_VALGRIND) {
		VALGRIND_MEMPOOL_CHANGE(pool, exec, exec, size);
		/* the tail given back holds the trap fill: readable, as freed code is */
		VALGRIND_MAKE_MEM_DEFINED((unsigned char *)exec + size, old_size - size);
	}
	if (!*d)
		return;
	pthread_mutex_lock(&g_lock);
	struct ep__diag *r = *d;

	/* the bytes past size may soon be another allocation's: no name,
	 * unwind entry or gdb symbol may still cover them */
	if (r->slot != SIZE_MAX && r->name)
		slot_write(slot_at(r->slot), (uintptr_t)exec, (uintptr_t)exec + size, r->name);
	if (r->kind == EP_UNWIND_DWARF_SP && r->prologue > size)
		r->prologue = size;
	unw_register(r, exec, size);
	gdb_register(r, exec, size);
	if (r->finalized && r->name && perfmap_wanted(pool_flags))
		perfmap_append(exec, size, r->name); /* perf takes the last line for an address */
	pthread_mutex_unlock(&g_lock);
}

void ep__diag_forget(struct ep__diag **d)
{
	record_drop(d);
}

void ep__diag_pool_destroy(struct ep__heap *pool)
{
	if (RUNNING_ON_VALGRIND && VALGRIND_MEMPOOL_EXISTS(pool))
		VALGRIND_DESTROY_MEMPOOL(pool);
}

static int name_check(const char *name)
{
	if (!name || !*name)
		return -EINVAL;
	size_t n = strnlen(name, EP_NAME_MAX + 1);

	if (n > EP_NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(name, '\n', n))
		return -EINVAL; /* one line per symbol in perf maps */
	return 0;
}

int ep__diag_set_name(struct ep__heap *pool, struct ep__diag **d, void *exec, size_t size,
		      bool finalized, unsigned pool_flags, const char *name)
{
	int rc = name_check(name);

	if (rc)
		return rc;
	char *copy = strdup(name);

	if (!copy)
		return -ENOMEM;
	(void)pool;
	pthread_mutex_lock(&g_lock);
	struct ep__diag *r = record_get(d);

	if (!r) {
		pthread_mutex_unlock(&g_lock);
		free(copy);
		return -ENOMEM;
	}
	if (r->slot == SIZE_MAX && (r->slot = slot_get()) == SIZE_MAX) {
		pthread_mutex_unlock(&g_lock);
		free(copy);
		return -ENOMEM;
	}
	slot_write(slot_at(r->slot), (uintptr_t)exec, (uintptr_t)exec + size, copy);
	r->finalized = finalized;
	unw_unregister(r); /* it points at the old name */
	free(r->name);
	r->name = copy;
	unw_register(r, exec, size);
	gdb_register(r, exec, size);
	if (finalized && perfmap_wanted(pool_flags))
		perfmap_append(exec, size, copy);
	if (finalized && ep__jitdump_wanted(pool_flags))
		ep__jitdump_load(exec, size, copy);
	pthread_mutex_unlock(&g_lock);
	return 0;
}

int ep__diag_set_unwind(struct ep__diag **d, void *exec, size_t size, bool finalized, int kind,
			size_t prologue, size_t frame)
{
	switch (kind) {
	case EP_UNWIND_NAME:
	case EP_UNWIND_DWARF_FP:
		if (prologue || frame)
			return -EINVAL;
		break;
	case EP_UNWIND_DWARF_SP:
		if (prologue > size || frame > ((size_t)1 << 30) || frame % 8)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
#ifndef HAVE_LIBUNWIND
	(void)d, (void)exec, (void)finalized;
	return kind == EP_UNWIND_NAME ? 0 : -EOPNOTSUPP;
#else
	pthread_mutex_lock(&g_lock);
	struct ep__diag *r = record_get(d);

	if (!r) {
		pthread_mutex_unlock(&g_lock);
		return -ENOMEM;
	}
	r->kind = kind;
	r->prologue = prologue;
	r->frame = frame;
	r->finalized = finalized;
	unw_register(r, exec, size);
	pthread_mutex_unlock(&g_lock);
	return 0;
#endif
}

/* ---- memcheck leak reports ------------------------------------------------- */

void ep__diag_hide_word(const void *addr, size_t len)
{
	VALGRIND_MAKE_MEM_UNDEFINED(addr, len);
	(void)addr, (void)len;
}

/*
 * Memcheck checks for leaks after the process has exited.  The library's
 * own records hold the address of every allocation, which would make a
 * lost one "still reachable"; undefined words are not pointers to the leak
 * scan, so at exit, and under Valgrind only, they are marked so.  Nothing
 * reads them after this (a pool call made after the library's destructors
 * would get "uninitialised value" reports).
 */
static void (*g_on_exit)(void);

void ep__diag_on_exit(void (*fn)(void))
{
	__atomic_store_n(&g_on_exit, fn, __ATOMIC_RELEASE);
}

__attribute__((destructor)) static void diag_at_exit(void)
{
	/* the jitdump's closing record is optional: never wait for it (exit()
	 * may come from a signal handler that interrupted a lock holder) */
	if (pthread_mutex_trylock(&g_lock) == 0) {
		ep__jitdump_close();
		pthread_mutex_unlock(&g_lock);
	}
	if (!RUNNING_ON_VALGRIND)
		return;
	void (*hide)(void) = __atomic_load_n(&g_on_exit, __ATOMIC_ACQUIRE);

	if (hide)
		hide();
	pthread_mutex_lock(&g_lock);
	for (struct ep__diag *r = g_records; r; r = r->next) {
#ifdef HAVE_LIBUNWIND
		ep__diag_hide_word(&r->di.start_ip, sizeof(r->di.start_ip));
		ep__diag_hide_word(&r->di.end_ip, sizeof(r->di.end_ip));
#endif
		if (r->gdb)
			ep__diag_hide_word(r->gdb->symfile_addr, r->gdb->symfile_size);
	}
	size_t high = __atomic_load_n(&g_high, __ATOMIC_RELAXED);

	for (size_t i = 0; i < high; i++) {
		struct sym_slot *s = slot_at(i);

		ep__diag_hide_word(&s->lo, 2 * sizeof(uintptr_t));
	}
	pthread_mutex_unlock(&g_lock);
}

/* ---- ep_backtrace ---------------------------------------------------------- */

struct out {
	int fd;
	int err;
	char buf[512];
	size_t n;
};

static void out_flush(struct out *o)
{
	size_t done = 0;

	while (done < o->n) {
		ssize_t w = write(o->fd, o->buf + done, o->n - done);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			o->err = -errno;
			break;
		}
		done += (size_t)w;
	}
	o->n = 0;
}

static void out_str(struct out *o, const char *s)
{
	for (; *s; s++) {
		if (o->n == sizeof(o->buf))
			out_flush(o);
		o->buf[o->n++] = *s;
	}
}

static void out_hex(struct out *o, uintptr_t v)
{
	char t[2 + 16 + 1];
	int i = (int)sizeof(t) - 1;

	t[i] = 0;
	do {
		t[--i] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	t[--i] = 'x';
	t[--i] = '0';
	out_str(o, t + i);
}

static void out_dec(struct out *o, unsigned v)
{
	char t[12];
	int i = (int)sizeof(t) - 1;

	t[i] = 0;
	do {
		t[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	out_str(o, t + i);
}

/* One line: "#N 0xIP in name+0xOFF [jit]".  lookup is ip for the
 * interrupted frame, ip-1 for return addresses (still inside the call). */
static void out_frame(struct out *o, unsigned n, uintptr_t ip, uintptr_t lookup,
		      const char *other, uintptr_t other_off)
{
	char name[EP_NAME_MAX + 1];
	size_t off = 0;
	int rc = ep_symbolize((const void *)lookup, name, sizeof(name), &off);

	out_str(o, "#");
	out_dec(o, n);
	out_str(o, " ");
	out_hex(o, ip);
	if (rc == 0 || rc == -ERANGE) {
		out_str(o, " in ");
		out_str(o, name);
		out_str(o, "+");
		out_hex(o, off + (ip - lookup));
		out_str(o, " [jit]");
	} else if (other) {
		out_str(o, " in ");
		out_str(o, other);
		out_str(o, "+");
		out_hex(o, other_off);
	}
	out_str(o, "\n");
}

/* ---- the frame-pointer walk ------------------------------------------------
 * Async-signal-safe: system calls (open, read, close, sigaction), no locks,
 * no allocation, and no read of memory that was not first checked to lie in
 * the readable mapping that holds the stack being walked.  The mapping is
 * found in /proc/self/maps, parsed as it is read; a thread's stack is one
 * mapping (glibc and the kernel put nothing else readable in between), and
 * its guard pages are mappings of their own, so a frame pointer that leaves
 * it is refused before it is used.
 */

/* The readable mapping [*lo, *hi) that holds addr.  0, or -errno. */
static int map_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	/* per line: START-END PERMS ...; only the first three fields matter */
	enum { START, END, PERMS, REST } st = START;
	uintptr_t s = 0, e = 0;
	char buf[512];
	int rc = -ENOENT;
	ssize_t got;

	while (rc == -ENOENT && (got = read(fd, buf, sizeof(buf))) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		for (ssize_t i = 0; i < got && rc == -ENOENT; i++) {
			char c = buf[i];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

			if (c == '\n') {
				st = START, s = 0, e = 0;
				continue;
			}
			switch (st) {
			case START:
				if (d >= 0)
					s = s << 4 | (uintptr_t)d;
				else
					st = c == '-' ? END : REST;
				break;
			case END:
				if (d >= 0)
					e = e << 4 | (uintptr_t)d;
				else
					st = c == ' ' ? PERMS : REST;
				break;
			case PERMS:
				if (c == 'r' && addr >= s && addr < e) {
					*lo = s;
					*hi = e;
					rc = 0;
				}
				st = REST;
				break;
			case REST:
				break;
			}
		}
	}
	close(fd);
	return rc;
}

#if defined(__x86_64__) && defined(REG_RIP)
#define EP_SIGFRAMES 1
/*
 * The return address the kernel gives signal handlers (glibc's
 * __restore_rt, the same for every handler), or 0.  sigaction(2) reports
 * it for any signal that has a handler.
 */
static uintptr_t sig_restorer(void)
{
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;

		if (sigaction(sig, NULL, &sa) == 0 && sa.sa_restorer)
			return (uintptr_t)sa.sa_restorer;
	}
	return 0;
}
#endif

/*
 * Walk the frame records from fp ([saved fp, return address] pairs, as
 * `push rbp; mov rbp, rsp` makes them; at fp - 16 on riscv64, arch.h's
 * EP__FRAME_RECORD).  Each next record must lie higher on
 * the same stack, 8-byte aligned and wholly inside its mapping.  A record
 * whose return address is the signal restorer is a handler's frame: the
 * interrupted context follows it (x86-64 rt_sigframe: the return address,
 * then the ucontext), and the walk goes on from its pc and frame pointer on
 * the interrupted stack, which is another mapping when the handler runs on
 * an alternate signal stack.
 */
static unsigned fp_walk(struct out *o, const uintptr_t *fp, unsigned n)
{
	uintptr_t cur = (uintptr_t)fp + EP__FRAME_RECORD, lo = cur, hi = 0;
#ifdef EP_SIGFRAMES
	uintptr_t restorer = sig_restorer();
#endif

	if (map_of(cur, &lo, &hi) != 0)
		return n;
	lo = cur;
	while (n < 256 && cur >= lo && cur < hi && cur % 8 == 0 &&
	       hi - cur >= 2 * sizeof(uintptr_t)) {
		const uintptr_t *rec = (const uintptr_t *)cur;
		uintptr_t next = rec[0] + EP__FRAME_RECORD, ip = rec[1];

		if (!ip)
			break;
		out_frame(o, n++, ip, ip - 1, NULL, 0);
#ifdef EP_SIGFRAMES
		if (restorer && ip == restorer) {
			const ucontext_t *uc = (const ucontext_t *)(cur + 2 * sizeof(uintptr_t));
			uintptr_t end = (uintptr_t)&uc->uc_mcontext.gregs[NGREG];

			if (end > hi || n >= 256)
				break;
			uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
			uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];

			next = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
			out_frame(o, n++, pc, pc, NULL, 0); /* the exact pc: no call */
			if (sp < lo || sp >= hi) {
				/* the handler ran on another stack */
				if (map_of(sp, &lo, &hi) != 0)
					break;
			}
			lo = sp;
			cur = next;
			continue;
		}
#endif
		if (next <= cur)
			break;
		lo = cur + 2 * sizeof(uintptr_t);
		cur = next;
	}
	return n;
}

/* EXECPACK_BACKTRACE=fp: the frame-pointer walk even where libunwind is
 * there.  glibc's secure_getenv() is async-signal-safe: it is getenv(),
 * which takes no lock, behind a test of a flag set at startup. */
static bool fp_walk_wanted(void)
{
#ifdef HAVE_LIBUNWIND
	const char *e = secure_getenv("EXECPACK_BACKTRACE");

	return e && !strcmp(e, "fp");
#else
	return true;
#endif
}

EP_API int ep_backtrace(int fd)
{
	struct out o = { .fd = fd };
	unsigned n = 0;
	int saved_errno = errno;
	/* also makes this function keep a frame record: the walk starts here */
	const uintptr_t *fp = __builtin_frame_address(0);

	if (fp_walk_wanted()) {
		n = fp_walk(&o, fp, 0);
	} else {
#ifdef HAVE_LIBUNWIND
		unw_context_t ctx;
		unw_cursor_t cur;
		bool after_signal = true; /* the first frame's ip is exact */

		if (unw_getcontext(&ctx) != 0 || unw_init_local(&cur, &ctx) != 0) {
			errno = saved_errno;
			return -ENOTSUP;
		}
		do {
			unw_word_t ip = 0, off = 0;
			char fn[128];

			if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0)
				break;
			uintptr_t lookup = after_signal ? ip : ip - 1;
			int jit = ep_symbolize((const void *)lookup, NULL, 0, NULL) != -ENOENT;
			bool named = !jit && unw_get_proc_name(&cur, fn, sizeof(fn), &off) == 0;

			out_frame(&o, n++, ip, lookup, named ? fn : NULL, off);
			after_signal = unw_is_signal_frame(&cur) > 0;
			if (n >= 256)
				break;
			unw_word_t fpv = 0, sp = 0, ip1 = 0, sp1 = 0;

			if (jit && (unw_get_reg(&cur, EP__UNW_FP, &fpv) != 0 ||
				    unw_get_reg(&cur, UNW_REG_SP, &sp) != 0))
				fpv = 0;
			int st = unw_step(&cur);

			if (st > 0 && jit && fpv &&
			    (unw_get_reg(&cur, UNW_REG_IP, &ip1) != 0 ||
			     unw_get_reg(&cur, UNW_REG_SP, &sp1) != 0))
				st = 0;
			if (jit && fpv && (st <= 0 || (ip1 == ip && sp1 == sp))) {
				/* libunwind has no rule for this JIT frame and
				 * no frame-pointer fallback (arm64, riscv64):
				 * follow the frame records from here on */
				n = fp_walk(&o, (const uintptr_t *)fpv, n);
				break;
			}
			if (st <= 0)
				break;
		} while (1);
#endif
	}
	out_flush(&o);
	errno = saved_errno;
	return o.err ? o.err : (int)n;
}

/* fork(): fork.c's handlers take diag's lock with the heaps' (after them:
 * names are set with a heap locked), so no child inherits it held. */
void ep__diag_fork_prepare(void)
{
	pthread_mutex_lock(&g_lock);
}

void ep__diag_fork_parent(void)
{
	pthread_mutex_unlock(&g_lock);
}

void ep__diag_fork_child(void)
{
	pthread_mutex_unlock(&g_lock);
}

/* A child that ran no fork handler: a vanished thread may have held it. */
void ep__diag_fork_reset(void)
{
	pthread_mutex_init(&g_lock, NULL);
}
