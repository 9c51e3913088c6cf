/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * memfd-debug.c - exec views a debugger can write (EXECPACK_DEBUG=1): after a
 * store through the alias, the same bytes into the pages a debugger copied.
 */
#include "config.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend-memfd.h"
#include "guard.h"
#include "internal.h"

/* ---- views a debugger can write (EXECPACK_DEBUG=1) ----------------------------
 * A debugger plants a software breakpoint by writing it into the code
 * (ptrace, /proc/<pid>/mem), which the kernel does only in a private
 * mapping, copying the page.  So with EXECPACK_DEBUG=1 the exec view is a
 * private mapping of the memfd, read+exec as ever: a page nobody wrote to
 * is the file's own, and shows every store through the alias at once (a
 * patch of up to 8 bytes stays one store); a page a debugger wrote to is
 * the process's own copy from then on, and what the alias writes reaches
 * it here, by a write to /proc/self/mem, the way the debugger wrote, so
 * that the debugger's other breakpoints in that page stay.  No mapping of
 * the process becomes writable.  Where that write is refused
 * (proc_mem.force_override), the page is mapped from the file again: the
 * code is right, the debugger's breakpoints in that page are gone.
 */
int ep__memfd_debug_wanted(void)
{
	const char *s = secure_getenv("EXECPACK_DEBUG");

	return s && *s && strcmp(s, "0") != 0;
}

/* pagemap: present, swapped, a page of the file (or shared) */
#define PM_PRESENT ((uint64_t)1 << 63)
#define PM_SWAPPED ((uint64_t)1 << 62)
#define PM_FILE ((uint64_t)1 << 61)

struct debug_put {
	int mem;
	off_t at;
	bool done;
};

/* pwrite() reads its buffer, the alias, with the thread's rights (PKRU):
 * it runs in the key's window, as a fill that only reads */
static void debug_put(void *alias, size_t len, void *ctx)
{
	struct debug_put *p = ctx;

	p->done = pwrite(p->mem, alias, len, p->at) == (ssize_t)len;
}

/* After a store through the alias to [off, off+len) of a debug region:
 * the same bytes into the pages of the exec view that are copies. */
void ep__memfd_debug_sync(struct ep__region *r, size_t off, size_t len)
{
	size_t pg = ep__page_size();
	uintptr_t x = (uintptr_t)r->exec;
	int pm, mem = -1;

	if (!len || (r->guards & EP__GUARD_DATA))
		return; /* (a data region's view is shared, never private) */
	/* (opened for each call: after fork() an older descriptor would be
	 * the parent's memory) */
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	for (size_t p = off / pg; p <= (off + len - 1) / pg; p++) {
		uint64_t e = 0;
		/* without pagemap, every page is taken for a copy: the write
		 * makes it one, and it is kept up to date from then on */
		bool copy = pm < 0 ||
			    (pread(pm, &e, sizeof(e), (off_t)((x / pg + p) * sizeof(e))) ==
				     (ssize_t)sizeof(e) &&
			     ((e & PM_SWAPPED) || ((e & PM_PRESENT) && !(e & PM_FILE))));

		if (!copy)
			continue;
		size_t a = p * pg > off ? p * pg : off;
		size_t b = (p + 1) * pg < off + len ? (p + 1) * pg : off + len;

		if (mem < 0)
			mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
		if (mem >= 0) {
			struct debug_put put = { .mem = mem, .at = (off_t)(x + a) };

			ep__alias_fill(r->guards, debug_put, (unsigned char *)r->rw + a, b - a, &put);
			if (put.done)
				continue;
		}
		/* refused: the file's page again (read+exec: committed code) */
		if (r->handle < 0 ||
		    mmap((void *)(x + p * pg), pg, ep__exec_prot(r->guards), MAP_PRIVATE | MAP_FIXED,
			 r->handle, (off_t)(p * pg)) == MAP_FAILED) {
			/* nothing more to try: the process's copy stays stale */
		}
	}
	if (mem >= 0)
		close(mem);
	if (pm >= 0)
		close(pm);
}
