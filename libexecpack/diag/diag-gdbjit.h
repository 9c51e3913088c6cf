/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-gdbjit.h - GDB's JIT interface (diag-gdbjit.c): named, finalized
 * allocations described to gdb in in-memory ELF files, many to a file, so
 * that gdb's bt, info symbol, disassemble and break name JIT code.  diag.c
 * calls these with its lock held.
 */
#ifndef EP_DIAG_GDBJIT_H
#define EP_DIAG_GDBJIT_H

#include <stddef.h>
#include <stdint.h>

struct ep__gdbjit_batch; /* one ELF file, one entry in GDB's list */

/* One name's place in gdb's view (in diag.c's record; zeroed: none). */
struct ep__gdbjit {
	struct ep__gdbjit_batch *b; /* NULL: gdb has no symbol for it */
	uint32_t i;                 /* its function in the batch */
};

/* Tell gdb that [exec, exec+size) is named name, in place of what *g said
 * before (if anything).  g must stay at its address while it is set.
 * Without memory gdb learns no new name, and forgets the old one. */
void ep__gdbjit_set(struct ep__gdbjit *g, void *exec, size_t size, const char *name);
/* The same, but gdb hears of it at ep__gdbjit_flush() (or at the batch's
 * next change): for many names at once. */
void ep__gdbjit_set_later(struct ep__gdbjit *g, void *exec, size_t size, const char *name);
/* Make gdb forget *g's symbol, if any. */
void ep__gdbjit_unset(struct ep__gdbjit *g);
/* The same for many at once: gdb no longer has *g's batch, and has the
 * rest of it again at ep__gdbjit_flush() (or at the batch's next change). */
void ep__gdbjit_forget(struct ep__gdbjit *g);
void ep__gdbjit_flush(void);
/* Under Valgrind, at exit: the files are no pointers to the leak scan. */
void ep__gdbjit_hide(void);

#endif /* EP_DIAG_GDBJIT_H */
