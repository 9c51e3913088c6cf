/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag.c - names and diagnostics for JIT code: the record each named
 * allocation carries, and the hooks heap.c calls, which hand each change
 * to the concerns that follow it:
 *
 *   - diag-symtab.c: the process-wide table of named ranges that
 *     ep_symbolize() reads without locks or allocation;
 *   - diag-unwind.c: libunwind registration of finalized code (a name, or
 *     generated DWARF CFI for stepping);
 *   - diag-gdbjit.c: the GDB JIT interface;
 *   - diag-perfmap.c: perf's /tmp/perf-<pid>.map (and, through jitdump.c,
 *     perf's jitdump);
 *   - diag-valgrind.c: Valgrind memcheck client requests;
 *   - diag-backtrace.c: ep_backtrace() for crash handlers.
 *
 * One lock (g_lock) orders every writer of all of them; the core calls in
 * with a heap's lock held, never the other way round.
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diag-gdbjit.h"
#include "diag-perfmap.h"
#include "diag-symtab.h"
#include "diag-unwind.h"
#include "diag-valgrind.h"
#include "diag.h"
#include "execpack.h"
#include "internal.h"
#include "jitdump.h"

/* ---- per-allocation records -------------------------------------------- */

/* Every writer of the diagnostics holds it. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* One symbol inside an allocation (ep_set_symbols()): a names-table slot
 * of its own, and its own place with the unwinders and gdb. */
struct sym {
	size_t off, size; /* from exec; narrowed by ep_shrink() */
	char *name;
	size_t slot;
	struct ep__unwind unw; /* EP_UNWIND_NAME only */
	struct ep__gdbjit gdb;
};

struct ep__diag {
	struct ep__diag *next, *prev; /* all records, for the exit-time leak hiding */
	size_t slot;                  /* SIZE_MAX: not in the table */
	char *name;                   /* NULL: unnamed */
	size_t end;                   /* ep_shrink()'s size: the program has no more
				       * bytes from exec (0: not shrunk) */
	size_t code;                  /* ep_set_name_size()'s size (0: none) */
	bool finalized;
	bool data; /* a data allocation's: no unwind entry, no gdb symbol */
	int kind; /* EP_UNWIND_* */
	size_t prologue, frame;
	/* diag-unwind.c's, made when first registered: most records (a
	 * linker's, of symbols only) never are, and it is a hundred bytes */
	struct ep__unwind *unw;
	struct ep__gdbjit gdb;        /* its symbol in gdb's view (diag-gdbjit.c) */
	struct sym *syms;             /* by offset, disjoint (never moved while set) */
	size_t nsyms;
};

static struct ep__diag *g_records; /* g_lock */

/* Its slot in the names table, or SIZE_MAX (info.c's shortcut; read with
 * the allocation's heap lock, under which names are set). */
size_t ep__diag_name_slot(const struct ep__diag *d)
{
	return d && d->name ? d->slot : SIZE_MAX;
}

bool ep__diag_has_symbols(const struct ep__diag *d)
{
	return d && d->nsyms;
}

/* The record of an allocation, created on first use (pool_flags: its
 * heap's, EP__DIAG_DATA for data).  g_lock held. */
static struct ep__diag *record_get(struct ep__diag **d, unsigned pool_flags)
{
	if (*d)
		return *d;
	struct ep__diag *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->slot = SIZE_MAX;
	r->data = pool_flags & EP__DIAG_DATA;
	r->kind = ep__unwind_default_kind();
	r->next = g_records;
	if (g_records)
		g_records->prev = r;
	g_records = r;
	*d = r;
	return r;
}

/*
 * The bytes a name covers: the program's, not the trap fill past them.
 * size is the allocation's, from exec (heap.c); the program has fewer where
 * the caller said so, with ep_shrink() (at most) or ep_set_name_size().
 * Every consumer (the symbol table, the unwinders, gdb, the perf map,
 * jitdump) gets this one extent.
 */
static size_t program_size(const struct ep__diag *r, size_t size)
{
	return r->end && r->end < size ? r->end : size;
}

static size_t code_size(const struct ep__diag *r, size_t size)
{
	size = program_size(r, size);
	return r->code && r->code < size ? r->code : size;
}

/* (Re)describe a finalized allocation to the unwinders.  g_lock held. */
static void unw_unregister(struct ep__diag *r)
{
	for (size_t i = 0; i < r->nsyms; i++)
		ep__unwind_unregister(&r->syms[i].unw);
	if (r->unw)
		ep__unwind_unregister(r->unw);
}

/* (Re)describe a finalized allocation to the unwinders.  g_lock held.
 * Its symbols go after its own entry, by name: libunwind takes the newest
 * entry holding a pc, so they win inside their ranges.  (With CFI, the
 * allocation's one entry stays: it is what steps through the frames.) */
static void unw_register(struct ep__diag *r, void *exec, size_t size)
{
	unw_unregister(r);
	if (!r->finalized || r->data)
		return; /* (data: no frame of code is ever in it) */
	if ((r->name || r->kind != EP_UNWIND_NAME) && EP__UNWIND_REGISTRY &&
	    (r->unw || (r->unw = calloc(1, sizeof(*r->unw)))))
		ep__unwind_register(r->unw, exec, size, r->kind, r->prologue, r->frame,
				    r->name); /* (no memory: not described, as there) */
	if (r->kind != EP_UNWIND_NAME)
		return;
	for (size_t i = 0; i < r->nsyms; i++) {
		struct sym *y = &r->syms[i];

		ep__unwind_register(&y->unw, (char *)exec + y->off, y->size, EP_UNWIND_NAME, 0, 0,
				    y->name);
	}
}

/* (Re)announce a finalized, named allocation to gdb.  g_lock held.  One
 * with symbols is its symbols there: gdb's functions do not overlap. */
static void gdb_register(struct ep__diag *r, void *exec, size_t size)
{
	if (!r->finalized || !r->name || r->nsyms || r->data)
		ep__gdbjit_unset(&r->gdb);
	else
		ep__gdbjit_set(&r->gdb, exec, size, r->name);
}

/* gdb's view of the symbols: all of them at once, one stop of the program
 * per batch of gdb's, not one per symbol. */
static void gdb_syms(struct ep__diag *r, void *exec)
{
	if (!r->finalized || r->data)
		return; /* (gdb's functions are code) */
	for (size_t i = 0; i < r->nsyms; i++) {
		struct sym *y = &r->syms[i];

		ep__gdbjit_set_later(&y->gdb, (char *)exec + y->off, y->size, y->name);
	}
	ep__gdbjit_flush();
}

/* A line and a jitdump record per symbol of a finalized allocation, after
 * the allocation's own: perf takes the newest for an address. */
static void perf_syms(struct ep__diag *r, void *exec, unsigned pool_flags)
{
	bool map = ep__perfmap_wanted(pool_flags), dump = ep__jitdump_wanted(pool_flags);

	if (!r->finalized || (!map && !dump))
		return;
	for (size_t i = 0; i < r->nsyms; i++) {
		struct sym *y = &r->syms[i];

		if (map)
			ep__perfmap_append((char *)exec + y->off, y->size, y->name);
		if (dump)
			ep__jitdump_load((char *)exec + y->off, y->size, y->name);
	}
}

/* Forget symbols [from, nsyms): their slots, unwinder entries and gdb
 * symbols (gdb hears at the next ep__gdbjit_flush()). */
static void syms_drop(struct ep__diag *r, size_t from)
{
	for (size_t i = from; i < r->nsyms; i++) {
		struct sym *y = &r->syms[i];

		ep__unwind_unregister(&y->unw);
		ep__gdbjit_forget(&y->gdb);
		if (y->slot != SIZE_MAX)
			ep__symtab_put(y->slot);
		free(y->name);
	}
	r->nsyms = from;
	if (!from) {
		free(r->syms);
		r->syms = NULL;
	}
}

static void gdb_unregister(struct ep__diag *r)
{
	ep__gdbjit_unset(&r->gdb);
}

/* ---- hooks from heap.c ------------------------------------------------------ */

void ep__diag_finalize_slow(struct ep__heap *heap, struct ep__diag **d, void *exec,
			    size_t size, unsigned pool_flags)
{
	(void)heap;
	ep__vg_finalize(exec, size);
	if (!*d)
		return;
	pthread_mutex_lock(&g_lock);
	struct ep__diag *r = *d;

	r->finalized = true;
	size = code_size(r, size);
	unw_register(r, exec, size);
	gdb_register(r, exec, size);
	gdb_syms(r, exec);
	if (r->name && ep__perfmap_wanted(pool_flags))
		ep__perfmap_append(exec, size, r->name);
	if (r->name && ep__jitdump_wanted(pool_flags))
		ep__jitdump_load(exec, size, r->name);
	perf_syms(r, exec, pool_flags);
	pthread_mutex_unlock(&g_lock);
}

/* When gdb hears that a record's symbols are gone. */
enum gdb_when {
	GDB_NOW,
	GDB_DEFER, /* ep_pool_destroy(), which tells gdb once at its end */
};

static void record_drop(struct ep__diag **d, enum gdb_when when)
{
	struct ep__diag *r = *d;

	if (!r)
		return;
	pthread_mutex_lock(&g_lock);
	unw_unregister(r);
	bool had_syms = r->nsyms;

	syms_drop(r, 0);
	if (when == GDB_DEFER) {
		ep__gdbjit_forget(&r->gdb);
	} else {
		gdb_unregister(r);
		if (had_syms)
			ep__gdbjit_flush();
	}
	if (r->slot != SIZE_MAX)
		ep__symtab_put(r->slot);
	if (r->prev)
		r->prev->next = r->next;
	else
		g_records = r->next;
	if (r->next)
		r->next->prev = r->prev;
	pthread_mutex_unlock(&g_lock);
	free(r->name);
	free(r->unw);
	free(r);
	*d = NULL;
}

void ep__diag_free_slow(struct ep__heap *heap, struct ep__diag **d, void *exec,
			size_t size, enum ep__freed how)
{
	record_drop(d, GDB_NOW);
	ep__vg_free(heap, exec, size, how);
}

void ep__diag_shrink_slow(struct ep__heap *heap, struct ep__diag **d, void *exec,
			  size_t old_size, size_t size, size_t code, unsigned pool_flags)
{
	ep__vg_shrink(heap, exec, old_size, size);
	if (!*d)
		return;
	pthread_mutex_lock(&g_lock);
	struct ep__diag *r = *d;
	size_t was = code_size(r, old_size);

	/* the program ends at code: no name, unwind entry or gdb symbol may
	 * cover the bytes past it, trap fill now (and past size, soon another
	 * allocation's) */
	if (!r->end || code < r->end)
		r->end = code;
	/* symbols past the program's end go, one across it ends there */
	size_t keep = r->nsyms, cut = r->end;

	while (keep && r->syms[keep - 1].off >= cut)
		keep--;
	bool syms_changed = keep < r->nsyms ||
			    (keep && r->syms[keep - 1].off + r->syms[keep - 1].size > cut);

	if (syms_changed) {
		syms_drop(r, keep);
		if (keep && r->syms[keep - 1].off + r->syms[keep - 1].size > cut) {
			struct sym *y = &r->syms[keep - 1];

			y->size = cut - y->off;
			ep__symtab_set_inner(y->slot, (uintptr_t)exec + y->off,
					     (uintptr_t)exec + cut, y->name);
			if (r->finalized) {
				if (!r->data)
					ep__gdbjit_set_later(&y->gdb, (char *)exec + y->off,
							     y->size, y->name);
				if (ep__perfmap_wanted(pool_flags))
					ep__perfmap_append((char *)exec + y->off, y->size, y->name);
				if (ep__jitdump_wanted(pool_flags))
					ep__jitdump_load((char *)exec + y->off, y->size, y->name);
			}
		}
		ep__gdbjit_flush();
	}
	size = code_size(r, size);
	if (size == was) {
		if (syms_changed)
			unw_register(r, exec, size);
		pthread_mutex_unlock(&g_lock);
		return; /* (ep_shrink() past the program's end: nothing to redo) */
	}
	if (r->slot != SIZE_MAX && r->name)
		ep__symtab_set(r->slot, (uintptr_t)exec, (uintptr_t)exec + size, r->name);
	if (r->kind == EP_UNWIND_DWARF_SP && r->prologue > size)
		r->prologue = size;
	unw_register(r, exec, size);
	gdb_register(r, exec, size);
	/* perf and perf inject take the last line, the newest record, for an
	 * address */
	if (r->finalized && r->name && ep__perfmap_wanted(pool_flags))
		ep__perfmap_append(exec, size, r->name);
	if (r->finalized && r->name && ep__jitdump_wanted(pool_flags))
		ep__jitdump_load(exec, size, r->name);
	if (r->name)
		perf_syms(r, exec, pool_flags); /* (after the allocation's line) */
	pthread_mutex_unlock(&g_lock);
}

void ep__diag_forget(struct ep__diag **d)
{
	record_drop(d, GDB_DEFER);
}

/* After the pool's forgets: gdb hears of every file they changed once,
 * not twice per name (10,000 names: 20,000 stops of the program). */
void ep__diag_pool_destroy(struct ep__heap *heap)
{
	pthread_mutex_lock(&g_lock);
	ep__gdbjit_flush();
	pthread_mutex_unlock(&g_lock);
	ep__vg_pool_destroy(heap);
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

int ep__diag_set_name(struct ep__diag **d, void *exec, size_t size, bool finalized,
		      unsigned pool_flags, const char *name, size_t want)
{
	int rc = name_check(name);

	if (rc)
		return rc;
	char *copy = strdup(name);

	if (!copy)
		return -ENOMEM;
	pthread_mutex_lock(&g_lock);
	if (want > (*d ? program_size(*d, size) : size)) {
		/* more than the allocation has, or than ep_shrink() left */
		pthread_mutex_unlock(&g_lock);
		free(copy);
		return -EINVAL;
	}
	struct ep__diag *r = record_get(d, pool_flags);

	if (!r) {
		pthread_mutex_unlock(&g_lock);
		free(copy);
		return -ENOMEM;
	}
	size_t len = strlen(copy);

	if (r->slot == SIZE_MAX ? (r->slot = ep__symtab_get(len)) == SIZE_MAX
				: ep__symtab_fit(r->slot, len) != 0) {
		pthread_mutex_unlock(&g_lock);
		free(copy);
		return -ENOMEM;
	}
	if (want)
		r->code = want;
	size = code_size(r, size);
	ep__symtab_set(r->slot, (uintptr_t)exec, (uintptr_t)exec + size, copy);
	r->finalized = finalized;
	unw_unregister(r); /* it points at the old name */
	free(r->name);
	r->name = copy;
	unw_register(r, exec, size);
	gdb_register(r, exec, size);
	if (finalized && ep__perfmap_wanted(pool_flags))
		ep__perfmap_append(exec, size, copy);
	if (finalized && ep__jitdump_wanted(pool_flags))
		ep__jitdump_load(exec, size, copy);
	perf_syms(r, exec, pool_flags); /* (after the allocation's line) */
	pthread_mutex_unlock(&g_lock);
	return 0;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

static void syms_free(struct sym *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i].slot != SIZE_MAX)
			ep__symtab_put(v[i].slot);
		free(v[i].name);
	}
	free(v);
}

int ep__diag_set_symbols(struct ep__diag **d, void *exec, size_t size, bool finalized,
			 unsigned pool_flags, const struct ep_symbol *syms, size_t n)
{
	struct sym *v = NULL;

	if (n) {
		if (n > SIZE_MAX / sizeof(*v) || !(v = calloc(n, sizeof(*v))))
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			v[i].slot = SIZE_MAX;
	}
	/* copies first, checked: on any error nothing has changed */
	for (size_t i = 0; i < n; i++) {
		const char *name = syms[i].name;

		if (!name || !*name || !syms[i].size ||
		    memchr(name, '\n', strnlen(name, EP_NAME_MAX))) {
			syms_free(v, n);
			return -EINVAL; /* (a perf map line per symbol: no newline) */
		}
		v[i].off = syms[i].offset;
		v[i].size = syms[i].size;
		if (!(v[i].name = strndup(name, EP_NAME_MAX))) {
			syms_free(v, n);
			return -ENOMEM;
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), sym_cmp);
	pthread_mutex_lock(&g_lock);
	size_t have = *d ? program_size(*d, size) : size;
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		if (v[i].off >= have || v[i].size > have - v[i].off ||
		    (i && v[i].off < v[i - 1].off + v[i - 1].size))
			rc = -EINVAL; /* past what the allocation has, or overlapping */
	}
	struct ep__diag *r = rc || (!n && !*d) ? *d : record_get(d, pool_flags);

	if (!rc && n && !r)
		rc = -ENOMEM;
	for (size_t i = 0; i < n && !rc; i++)
		if ((v[i].slot = ep__symtab_get(strlen(v[i].name))) == SIZE_MAX)
			rc = -ENOMEM;
	if (rc || !r) {
		pthread_mutex_unlock(&g_lock);
		syms_free(v, n);
		return rc;
	}
	bool had = r->nsyms;

	r->finalized = finalized;
	unw_unregister(r);
	syms_drop(r, 0);
	r->syms = v;
	r->nsyms = n;
	for (size_t i = 0; i < n; i++)
		ep__symtab_set_inner(v[i].slot, (uintptr_t)exec + v[i].off,
				     (uintptr_t)exec + v[i].off + v[i].size, v[i].name);
	size = code_size(r, size);
	unw_register(r, exec, size);
	if (had || n)
		gdb_register(r, exec, size); /* (the allocation's name, or not) */
	gdb_syms(r, exec);
	if (had && !n)
		ep__gdbjit_flush();
	perf_syms(r, exec, pool_flags);
	pthread_mutex_unlock(&g_lock);
	return 0;
}

int ep__diag_set_unwind(struct ep__diag **d, void *exec, size_t size, bool finalized, int kind,
			size_t prologue, size_t frame)
{
	int rc = ep__unwind_check(kind, prologue, frame, size);

	if (rc || !EP__UNWIND_REGISTRY)
		return rc;
	pthread_mutex_lock(&g_lock);
	struct ep__diag *r = record_get(d, 0); /* (code: heap.c refuses data) */

	if (!r) {
		pthread_mutex_unlock(&g_lock);
		return -ENOMEM;
	}
	r->kind = kind;
	r->prologue = prologue;
	r->frame = frame;
	r->finalized = finalized;
	unw_register(r, exec, code_size(r, size));
	pthread_mutex_unlock(&g_lock);
	return 0;
}

/* ---- memcheck leak reports ------------------------------------------------- */

/*
 * Memcheck checks for leaks after the process has exited.  The library's
 * own records hold the address of every allocation, which would make a
 * lost one "still reachable"; undefined words are not pointers to the leak
 * scan, so at exit, and under Valgrind only, they are marked so.  Nothing
 * reads them after this (a pool call made after the library's destructors
 * would get "uninitialised value" reports).  The core's records (heaps,
 * ep_lookup()'s entries) sit above this file: the core registers one hook
 * to be told, rather than diag calling up into it.
 */
static void (*_Atomic g_on_exit)(void);

void ep__diag_on_exit(void (*fn)(void))
{
	ep__store_release(&g_on_exit, fn);
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
	void (*hide)(void) = ep__load_acquire(&g_on_exit);

	if (hide)
		hide();
	pthread_mutex_lock(&g_lock);
	for (struct ep__diag *r = g_records; r; r = r->next) {
		if (r->unw)
			ep__unwind_hide(r->unw);
		for (size_t i = 0; i < r->nsyms; i++)
			ep__unwind_hide(&r->syms[i].unw);
	}
	ep__gdbjit_hide();
	ep__symtab_hide();
	pthread_mutex_unlock(&g_lock);
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
