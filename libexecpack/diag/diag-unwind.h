/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-unwind.h - describing JIT code to unwinders (diag-unwind.c):
 * libunwind's dynamic registry, with a name or with DWARF CFI built for
 * the code's prologue (ep_set_unwind(3)), and libgcc's, with the same CFI.
 * diag.c calls these with its lock held.
 */
#ifndef EP_DIAG_UNWIND_H
#define EP_DIAG_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

/* libgcc's unwinder takes .eh_frame sections (C++ exceptions, glibc's
 * backtrace()) */
#if defined(HAVE___REGISTER_FRAME) && defined(HAVE___DEREGISTER_FRAME)
#define EP__LIBGCC_FRAMES 1
#endif

/* What one allocation has registered. */
struct ep__unwind {
	uint64_t *cfi; /* DWARF kinds: search table, CIE, FDE, zero terminator */
#ifdef HAVE_LIBUNWIND
	bool registered;
	unw_dyn_info_t di;
#endif
#ifdef EP__LIBGCC_FRAMES
	bool gcc_registered;
#endif
};

/* Whether this build has an unwinder to describe code to at all. */
#if defined(HAVE_LIBUNWIND) || defined(EP__LIBGCC_FRAMES)
#define EP__UNWIND_REGISTRY 1
#else
#define EP__UNWIND_REGISTRY 0
#endif

/* EP_UNWIND_DWARF_FP with EXECPACK_UNWIND=dwarf, else EP_UNWIND_NAME. */
int ep__unwind_default_kind(void);

/* ep_set_unwind()'s arguments for an allocation of size bytes: 0, -EINVAL,
 * or -EOPNOTSUPP for a kind this build cannot describe. */
int ep__unwind_check(int kind, size_t prologue, size_t frame, size_t size);

/* Describe [exec, exec+size) (u must be unregistered): by name for
 * EP_UNWIND_NAME (libunwind only), by CFI for the DWARF kinds (libunwind
 * and libgcc).  Without memory the code is simply not described. */
void ep__unwind_register(struct ep__unwind *u, void *exec, size_t size, int kind,
			 size_t prologue, size_t frame, const char *name);
/* Forget it, and what the unwinders cached about the range: before the
 * chunks are reused or described differently. */
void ep__unwind_unregister(struct ep__unwind *u);
/* Under Valgrind, at exit: the range is no pointer to the leak scan (and
 * libgcc, which keeps a copy, forgets it). */
void ep__unwind_hide(struct ep__unwind *u);

#endif /* EP_DIAG_UNWIND_H */
