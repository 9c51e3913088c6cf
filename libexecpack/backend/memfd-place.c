/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * memfd-place.c - where a region's two views go and how they go away:
 * the exec view's place (anywhere, near an address, or in the pool's code
 * range), the RW alias's random address, and unmapping both.  Below both
 * kinds of region (memfd-map.c's files, memfd-anon.c's anonymous shared
 * memory), which each call it and neither of which it calls.
 */
#include "config.h"

#include <stdint.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "backend-memfd.h"
#include "code-range.h"
#include "internal.h"

/* An address hint far from everything else, so the RW alias is not at a
 * fixed distance from the exec view (mmap ignores a hint that is taken). */
void *ep__memfd_alias_hint(size_t align)
{
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	(void)align;
	return NULL; /* sanitizers own fixed parts of the address space */
#else
	uint64_t r = 0;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		return NULL;
	/* user half of a 47-bit address space, above 4 GiB, below 64 TiB */
	uintptr_t a = (uintptr_t)(r % ((1ull << 46) - (1ull << 32))) + (1ull << 32);

	return (void *)(a & ~(uintptr_t)(align - 1));
#endif
}

/*
 * Where a new exec view of size bytes goes: *want NULL (anywhere), or a
 * PROT_NONE reservation to map over with MAP_FIXED, which replaces it in
 * one step: a free part of the code range, else a range near kind->near.
 */
int ep__memfd_place(const struct ep__memfd_kind *kind, size_t size, void **want)
{
	*want = NULL;
	if (kind->crange)
		return ep__crange_take(kind->crange, size, kind->align, want);
	if (kind->near)
		return ep__near_reserve(kind->near, kind->margin, size, kind->align, want);
	return 0;
}

/* An exec view, or what ep__memfd_place() reserved, goes: back to the code range
 * (PROT_NONE again), or unmapped. */
void ep__memfd_unplace(const struct ep__memfd_kind *kind, void *exec, size_t size)
{
	if (!ep__crange_give(kind->crange, exec, size))
		munmap(exec, size);
}

void ep__memfd_unmap(const struct ep__memfd_kind *kind, struct ep__region *r)
{
	ep__memfd_unplace(kind, r->exec, r->size);
	munmap(r->rw, r->size);
	r->exec = r->rw = NULL;
}
