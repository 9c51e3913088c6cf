/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pages.c - the page sizes of the running system, read once.
 *
 * The base page is 4 KiB on x86-64 but 4, 16 or 64 KiB on arm64 kernels;
 * the huge page that vm.nr_hugepages reserves is one PMD: 2 MiB, 32 MiB or
 * 512 MiB with them (a 16 KiB kernel keeps its 2 MiB pages, made of
 * contiguous PTEs, under hugepages-2048kB).  Nothing in the library assumes
 * either size.
 */
#include "config.h"

#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "atomic.h"
#include "internal.h"

static _Atomic size_t g_page, g_huge;

size_t ep__page_size(void)
{
	size_t pg = ep__load_relaxed(&g_page);

	if (!pg) {
		long v = sysconf(_SC_PAGESIZE); /* the kernel's AT_PAGESZ: never fails */

		pg = v > 0 ? (size_t)v : (size_t)getpagesize();
		ep__store_relaxed(&g_page, pg);
	}
	return pg;
}

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif

/* The block size of an empty memfd on default huge pages: the default huge
 * page size, in three system calls (reading /proc/meminfo through stdio
 * took 80 us of a fresh process's first AUTO pool, issue 42).  0 where
 * the kernel has no hugetlb memfds. */
static size_t memfd_huge(void)
{
	/* (the system call: as memfd-file.c, for a C library without the wrapper) */
	int fd = (int)syscall(SYS_memfd_create, "execpack", 1U /* MFD_CLOEXEC */ | MFD_HUGETLB);
	struct stat st;
	size_t h = 0;

	if (fd < 0)
		return 0;
	if (fstat(fd, &st) == 0 && st.st_blksize > 0)
		h = (size_t)st.st_blksize;
	close(fd);
	return h;
}

/* "Hugepagesize:    2048 kB" in /proc/meminfo: the default huge page size */
static size_t meminfo_huge(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[128];
	unsigned long kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Hugepagesize: %lu kB", &kb) == 1)
			break;
	fclose(f);
	return (size_t)kb << 10;
}

static size_t pmd_size(void)
{
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "re");
	unsigned long v = 0;

	if (f) {
		if (fscanf(f, "%lu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

size_t ep__huge_page_size(void)
{
	size_t h = ep__load_relaxed(&g_huge);

	if (!h) {
		h = memfd_huge();
		if (!h || (h & (h - 1)))
			h = meminfo_huge();
		if (!h || (h & (h - 1)))
			h = pmd_size();
		if (!h || (h & (h - 1))) {
			/* one page table page of 8-byte entries maps a PMD */
			size_t pg = ep__page_size();

			h = pg / 8 * pg;
		}
		ep__store_relaxed(&g_huge, h);
	}
	return h;
}
