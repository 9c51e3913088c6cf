/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-firstfit.c - the first-fit floor (bench-firstfit.h), with the
 * library's bitmap and summary compiled in under this floor's names.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench-firstfit.h"
#include "../libexecpack/core/bitmap.c"

/* (the floor's trees come from malloc(), not the library's small blocks) */
void *ep__small_get(size_t size)
{
	return calloc(1, size);
}

void ep__small_put(void *p, size_t size)
{
	(void)size;
	free(p);
}

int bench_ff_init(struct bench_ff *f, size_t size)
{
	int fd = memfd_create("bench-firstfit", MFD_CLOEXEC);
	int rc = 0;

	memset(f, 0, sizeof(*f));
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	f->nchunks = size / BENCH_FF_CHUNK;
	f->rw = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	f->rx = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
	f->chunks = mmap(NULL, f->nchunks, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	close(fd);
	f->used = calloc(EP__BITMAP_WORDS(f->nchunks), sizeof(uint64_t));
	if (f->rw == MAP_FAILED || f->rx == MAP_FAILED || f->chunks == MAP_FAILED || !f->used ||
	    ep__fit_init(&f->fit, f->used, f->nchunks)) {
		rc = -ENOMEM;
		bench_ff_destroy(f);
	}
	return rc;
}

void bench_ff_destroy(struct bench_ff *f)
{
	size_t size = f->nchunks * BENCH_FF_CHUNK;

	if (f->rw && f->rw != MAP_FAILED)
		munmap(f->rw, size);
	if (f->rx && f->rx != MAP_FAILED)
		munmap(f->rx, size);
	if (f->chunks && f->chunks != MAP_FAILED)
		munmap(f->chunks, f->nchunks);
	if (f->fit.level[0])
		ep__fit_destroy(&f->fit);
	free(f->used);
	memset(f, 0, sizeof(*f));
}
