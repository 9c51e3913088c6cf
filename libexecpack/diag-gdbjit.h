/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-gdbjit.h - GDB's JIT interface (diag-gdbjit.c): an in-memory ELF
 * file per named, finalized allocation, so that gdb's bt, info symbol and
 * disassemble name JIT code.  diag.c calls these with its lock held.
 */
#ifndef EP_DIAG_GDBJIT_H
#define EP_DIAG_GDBJIT_H

#include <stddef.h>

struct jit_code_entry; /* one allocation's entry in GDB's list */

/* Announce [exec, exec+size) named name to gdb (*e must be NULL).  Nothing
 * is announced when another object owns the list, or without memory. */
void ep__gdbjit_register(struct jit_code_entry **e, void *exec, size_t size, const char *name);
/* Withdraw *e, if any, and set it to NULL. */
void ep__gdbjit_unregister(struct jit_code_entry **e);
/* Under Valgrind, at exit: the file is no pointer to the leak scan. */
void ep__gdbjit_hide(const struct jit_code_entry *e);

#endif /* EP_DIAG_GDBJIT_H */
