/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * track.h - Valgrind and Helgrind client requests and annotations in one
 * place.  Each is a no-op without the Valgrind headers, and the hot paths
 * issue them only under Valgrind (one cached word, ep__under_valgrind()).
 */
#ifndef EP_TRACK_H
#define EP_TRACK_H

#include "internal.h"

#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#endif
#ifdef HAVE_VALGRIND_HELGRIND_H
#include <valgrind/helgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif
/* Helgrind does not see the ordering atomics give; these tell it. */
#ifndef ANNOTATE_HAPPENS_BEFORE
#define ANNOTATE_HAPPENS_BEFORE(obj) ((void)(obj))
#define ANNOTATE_HAPPENS_AFTER(obj) ((void)(obj))
#endif
#define VG_HAPPENS_BEFORE(obj)                        \
	do {                                          \
		if (ep__under_valgrind())             \
			ANNOTATE_HAPPENS_BEFORE(obj); \
	} while (0)
#define VG_HAPPENS_AFTER(obj)                        \
	do {                                         \
		if (ep__under_valgrind())            \
			ANNOTATE_HAPPENS_AFTER(obj); \
	} while (0)
#ifndef VALGRIND_HG_ENABLE_CHECKING
#define VALGRIND_HG_ENABLE_CHECKING(a, n) ((void)(a), (void)(n))
#endif
#if defined(NVALGRIND) && defined(VALGRIND_DISCARD_TRANSLATIONS)
/* valgrind.h for a CPU Valgrind does not know (riscv64 before 3.25)
 * drops the arguments: keep them used */
#undef VALGRIND_DISCARD_TRANSLATIONS
#endif
#ifndef VALGRIND_DISCARD_TRANSLATIONS
#define VALGRIND_DISCARD_TRANSLATIONS(addr, len) ((void)(addr), (void)(len))
#endif

#endif /* EP_TRACK_H */
