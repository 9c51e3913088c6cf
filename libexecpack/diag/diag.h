/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag.h - diagnostics for JIT code: names, symbolization, libunwind
 * registration, perf maps and Valgrind client requests (diag.c, which
 * hands each change to diag-*.c).  The core's only way in.
 *
 * heap.c calls the ep__diag_* hooks with the heap's lock held, so that for
 * one allocation they are ordered like the calls that caused them.  Each
 * allocation carries one pointer, owned by diag.c (struct ep__alloc.diag),
 * that is NULL until the allocation is named.
 */
#ifndef EP_DIAG_H
#define EP_DIAG_H

#include <stdbool.h>
#include <stddef.h>

#include "diag-valgrind.h"
#include "internal.h"

struct ep__heap; /* types.h: one heap (a key for memcheck, never looked into) */
struct ep__diag; /* per named allocation, diag.c only */

void ep__diag_alloc_slow(struct ep__heap *heap, void *exec, size_t size);
void ep__diag_finalize_slow(struct ep__heap *heap, struct ep__diag **d, void *exec,
			    size_t size, unsigned pool_flags);
void ep__diag_free_slow(struct ep__heap *heap, struct ep__diag **d, void *exec,
			size_t size, enum ep__freed how);

/* The hooks below are on the hot paths: outside Valgrind, for an
 * allocation without a name or unwind info, they cost one test. */

/* ep_alloc() handed out [exec, exec+size). */
static inline void ep__diag_alloc(struct ep__heap *heap, void *exec, size_t size)
{
	if (ep__under_valgrind())
		ep__diag_alloc_slow(heap, exec, size);
}

/* The allocation at exec was finalized (its code is in place). */
static inline void ep__diag_finalize(struct ep__heap *heap, struct ep__diag **d, void *exec,
				     size_t size, unsigned pool_flags)
{
	if (*d || ep__under_valgrind())
		ep__diag_finalize_slow(heap, d, exec, size, pool_flags);
}

/* ep_free(): the allocation is gone. */
static inline void ep__diag_free(struct ep__heap *heap, struct ep__diag **d, void *exec,
				 size_t size, enum ep__freed how)
{
	if (*d || ep__under_valgrind())
		ep__diag_free_slow(heap, d, exec, size, how);
}

void ep__diag_shrink_slow(struct ep__heap *heap, struct ep__diag **d, void *exec,
			  size_t old_size, size_t size, size_t code, unsigned pool_flags);

/* ep_shrink(): the allocation at exec now ends size bytes after it (old_size
 * before), and the program in it code bytes after it (ep_shrink()'s size,
 * at most size): names cover no more.  Also where no whole chunk was given
 * back (size == old_size). */
static inline void ep__diag_shrink(struct ep__heap *heap, struct ep__diag **d, void *exec,
				   size_t old_size, size_t size, size_t code, unsigned pool_flags)
{
	if (*d || ep__under_valgrind())
		ep__diag_shrink_slow(heap, d, exec, old_size, size, code, pool_flags);
}

/* ep_pool_destroy(): forget one allocation that was still live ... */
void ep__diag_forget(struct ep__diag **d);
/* ... and, after all of them, the pool itself. */
void ep__diag_pool_destroy(struct ep__heap *heap);

/* In pool_flags of ep__diag_set_name() and _set_symbols(): the allocation is
 * data (ep_alloc_data()), named for ep_symbolize() and ep_lookup() only:
 * libunwind and gdb hear of code alone.  (No EP_F_* flag has this bit.) */
#define EP__DIAG_DATA (1u << 31)
/* ep_set_name() and ep_set_unwind() with the allocation resolved; want:
 * ep_set_name_size()'s size of the program (0: ep_set_name()). */
int ep__diag_set_name(struct ep__diag **d, void *exec, size_t size, bool finalized,
		      unsigned pool_flags, const char *name, size_t want);
int ep__diag_set_unwind(struct ep__diag **d, void *exec, size_t size, bool finalized,
			int kind, size_t prologue, size_t frame);
/* ep_set_symbols(), the same way (syms: n of them, unchecked). */
struct ep_symbol;
int ep__diag_set_symbols(struct ep__diag **d, void *exec, size_t size, bool finalized,
			 unsigned pool_flags, const struct ep_symbol *syms, size_t n);

/*
 * Under Valgrind only, at exit: fn (set by fork.c, which knows every heap
 * and info.c's entries) makes the pool's own copies of allocation
 * addresses invisible to memcheck's leak scan with ep__diag_hide_word(), so
 * that an allocation the program lost shows as "definitely lost".  A hook,
 * not a call: the core it tells sits above diag.
 */
void ep__diag_on_exit(void (*fn)(void));
void ep__diag_hide_word(const void *addr, size_t len);

/* fork handlers (fork.c): diag's lock across fork(), or reset in a child
 * that ran none */
void ep__diag_fork_prepare(void);
void ep__diag_fork_parent(void);
void ep__diag_fork_child(void);
void ep__diag_fork_reset(void);

/* The names table's slot of d's name (diag-symtab.h), or SIZE_MAX. */
size_t ep__diag_name_slot(const struct ep__diag *d);
/* Whether d has symbols (ep_set_symbols()): ep_lookup() then looks for one. */
bool ep__diag_has_symbols(const struct ep__diag *d);

#endif /* EP_DIAG_H */
