/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-valgrind.c - memcheck's view of JIT code: every allocation is a
 * chunk of a memcheck mempool anchored at its heap, so that JIT code the
 * program loses is reported as "definitely lost", and the words that would
 * keep it reachable are hidden from the leak scan at exit.
 */
#include "config.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "diag-valgrind.h"
#include "diag.h"

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

void ep__diag_alloc_slow(struct ep__heap *heap, void *exec, size_t size)
{
	if (!RUNNING_ON_VALGRIND)
		return;
	valgrind_readahead_guard(exec, size);
	/* one mempool per pool; its chunks are defined (is_zeroed) since the
	 * exec view always holds the trap fill or code */
	if (!VALGRIND_MEMPOOL_EXISTS(heap))
		VALGRIND_CREATE_MEMPOOL(heap, 0, 1);
	VALGRIND_MEMPOOL_ALLOC(heap, exec, size);
}

void ep__vg_finalize(void *exec, size_t size)
{
	VALGRIND_MAKE_MEM_DEFINED(exec, size);
	(void)exec, (void)size;
}

void ep__vg_free(struct ep__heap *heap, void *exec, size_t size, enum ep__freed how)
{
	if (!RUNNING_ON_VALGRIND)
		return;
	VALGRIND_MEMPOOL_FREE(heap, exec);
	/* the trap fill stays readable, as it is without Valgrind */
	if (how == EP__FREED_MAPPED)
		VALGRIND_MAKE_MEM_DEFINED(exec, size);
	(void)heap, (void)size;
}

void ep__vg_shrink(struct ep__heap *heap, void *exec, size_t old_size, size_t size)
{
	if (RUNNING_ON_VALGRIND) {
		VALGRIND_MEMPOOL_CHANGE(heap, exec, exec, size);
		/* the tail given back holds the trap fill: readable, as freed code is */
		VALGRIND_MAKE_MEM_DEFINED((unsigned char *)exec + size, old_size - size);
	}
	(void)heap, (void)exec, (void)old_size, (void)size;
}

void ep__vg_pool_destroy(struct ep__heap *heap)
{
	if (RUNNING_ON_VALGRIND && VALGRIND_MEMPOOL_EXISTS(heap))
		VALGRIND_DESTROY_MEMPOOL(heap);
	(void)heap;
}

void ep__diag_hide_word(const void *addr, size_t len)
{
	VALGRIND_MAKE_MEM_UNDEFINED(addr, len);
	(void)addr, (void)len;
}
