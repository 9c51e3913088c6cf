/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * meta.c - the library's large tables, out of anonymous memory reserved
 * in big stretches and handed out in whole pages.
 *
 * A pack's maps are sized for its whole pack_size and the route table's
 * nodes for 16 MiB of address space, but a pool with a few programs
 * writes only their first words.  calloc() clears (and so makes resident)
 * all of a block it reuses from the heap; pages of an anonymous mapping
 * that were never written cost nothing, so here a table costs what was
 * written of it.  One mapping serves many tables, so that they add no
 * mapping per pack; a block given back is emptied with MADV_DONTNEED
 * (zero again, no longer resident) and kept for the next request of its
 * size, with its link in its first bytes.  Under Valgrind the tables are
 * malloc() blocks, as memcheck's leak scan of the library's words expects
 * (fork.c hides them at exit; a scan of this mapping found the lost
 * allocation of tests/valgrind-diag.sh still reachable).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "lock.h"
#include "meta.h"

#define STRETCH ((size_t)64 << 20) /* address space only: MAP_NORESERVE */

pthread_mutex_t ep__meta_lock = PTHREAD_MUTEX_INITIALIZER;

struct spare {
	struct spare *next;
	size_t size;
};

static unsigned char *g_at, *g_end; /* the unused rest of the last stretch */
static struct spare *g_spares;      /* given back (ep__meta_lock) */

static size_t pages_of(size_t size)
{
	size_t pg = ep__page_size();

	return (size + pg - 1) / pg * pg;
}

void *ep__meta_get(size_t size)
{
	void *p = NULL;

	if (ep__under_valgrind())
		return calloc(1, size ? size : 1);
	size = pages_of(size ? size : 1);
	ep__mutex_lock(&ep__meta_lock);
	for (struct spare **s = &g_spares; *s; s = &(*s)->next) {
		if ((*s)->size == size) {
			p = *s;
			*s = (*s)->next;
			memset(p, 0, sizeof(struct spare)); /* (the rest is zero) */
			goto out;
		}
	}
	if ((size_t)(g_end - g_at) < size) {
		size_t len = size > STRETCH ? size : STRETCH;
		void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (m == MAP_FAILED)
			goto out; /* (the rest of the old stretch stays unused) */
		/* where transparent huge pages are "always" (the default of
		 * many kernels), the first table written would make a whole
		 * huge page of the stretch resident: 2 MiB, or 32 MiB with
		 * 16 KiB pages.  (Without THP in the kernel this fails, and
		 * there is nothing to do.) */
		(void)madvise(m, len, MADV_NOHUGEPAGE);
		g_at = m;
		g_end = g_at + len;
	}
	p = g_at;
	g_at += size;
out:
	ep__mutex_unlock(&ep__meta_lock);
	return p;
}

void ep__meta_put(void *p, size_t size)
{
	if (!p)
		return;
	if (ep__under_valgrind()) {
		free(p);
		return;
	}
	size = pages_of(size ? size : 1);
	/* the pages go, and read as zeros after; where that fails, zeros
	 * are written */
	if (madvise(p, size, MADV_DONTNEED))
		memset(p, 0, size);
	struct spare *s = p;

	ep__mutex_lock(&ep__meta_lock);
	s->size = size;
	s->next = g_spares;
	g_spares = s;
	ep__mutex_unlock(&ep__meta_lock);
}
