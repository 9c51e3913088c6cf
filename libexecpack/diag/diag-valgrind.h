/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-valgrind.h - the Valgrind client requests the diagnostics issue
 * (no-ops without the Valgrind headers), and memcheck's view of JIT code
 * (diag-valgrind.c): every allocation is a chunk of a memcheck mempool
 * anchored at its heap, so that JIT code the program loses is reported as
 * "definitely lost".
 */
#ifndef EP_DIAG_VALGRIND_H
#define EP_DIAG_VALGRIND_H

#include <stdbool.h>
#include <stddef.h>

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

struct ep__heap;

/* What became of a freed allocation's memory. */
enum ep__freed {
	EP__FREED_MAPPED,   /* chunks given back, still mapped (trap fill) */
	EP__FREED_UNMAPPED, /* a large allocation's mapping, unmapped */
};

/* Under Valgrind only (each returns at once otherwise, but for finalize,
 * whose request is a no-op outside Valgrind): */
/* the finalized code is defined */
void ep__vg_finalize(void *exec, size_t size);
/* the allocation is gone */
void ep__vg_free(struct ep__heap *heap, void *exec, size_t size, enum ep__freed how);
/* the allocation now ends size bytes after exec */
void ep__vg_shrink(struct ep__heap *heap, void *exec, size_t old_size, size_t size);
/* the pool is gone */
void ep__vg_pool_destroy(struct ep__heap *heap);

#endif /* EP_DIAG_VALGRIND_H */
