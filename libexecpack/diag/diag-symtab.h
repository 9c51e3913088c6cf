/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-symtab.h - the process-wide table of named ranges (diag-symtab.c)
 * that ep_symbolize() reads without locks or allocation.  Writers hold
 * diag's lock (diag.c).
 */
#ifndef EP_DIAG_SYMTAB_H
#define EP_DIAG_SYMTAB_H

#include <stddef.h>
#include <stdint.h>

/* A free slot with room for a name of len bytes, or SIZE_MAX without
 * memory. */
size_t ep__symtab_get(size_t len);
/* Room in slot for a name of len bytes: 0, or -ENOMEM (the slot as it
 * was).  ep__symtab_set() and _set_inner() then never fail. */
int ep__symtab_fit(size_t slot, size_t len);
/* Empty a slot and keep it for reuse. */
void ep__symtab_put(size_t slot);
/* Publish [lo, hi) with name in a slot (NULL: empty it). */
void ep__symtab_set(size_t slot, uintptr_t lo, uintptr_t hi, const char *name);
/* The same for a symbol inside a named allocation (ep_set_symbols()),
 * which ep__symtab_find() prefers to the allocation's own name. */
void ep__symtab_set_inner(size_t slot, uintptr_t lo, uintptr_t hi, const char *name);
/* The named range holding addr: 2 (a symbol) or 1 (an allocation's name),
 * its start and its name (EP_NAME_MAX + 1 bytes, NUL terminated); 0 if
 * none.  Lock-free, async-signal-safe. */
int ep__symtab_find(uintptr_t addr, uintptr_t *lo, char *name);
/* The name in slot if its range starts at addr: 1 and the name; else 0. */
int ep__symtab_read(size_t slot, uintptr_t addr, char *name);
/* Under Valgrind, at exit: the ranges are no pointers to the leak scan. */
void ep__symtab_hide(void);

/* In a child made without fork()'s handlers, diag's lock held: a slot a
 * vanished writer left odd is emptied and made even. */
void ep__symtab_fork_reset(void);
#ifdef EP_TEST_HOOKS
_Atomic unsigned long *ep__symtab_seq_for_test(size_t slot);
#endif

#endif /* EP_DIAG_SYMTAB_H */
