/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-firstfit.h - the first-fit floor of the churn benchmarks
 * (bench-ops, bench-suite's workload 10): the staged floor's work (code
 * written into a private buffer of traps, copied through the RW view, a
 * freed slot refilled with traps) with first fit over a chunk bitmap in
 * place of the free lists.  The bitmap and its summary are the library's
 * own code (libexecpack/core/bitmap.c, compiled in bench-firstfit.c under other
 * names), over one sparse memfd mapped RW and RX: no packs to choose
 * between, no lock, no lookup from an address beyond a subtraction, no
 * state, no records, no counts.  What first fit costs by itself.
 */
#ifndef BENCH_FIRSTFIT_H
#define BENCH_FIRSTFIT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* (the library's names are hidden in it; these are this copy's) */
#define ep__bitmap_next_set_far bench_ff_next_set_far
#define ep__bitmap_prev_set bench_ff_prev_set
#define ep__bitmap_set_far bench_ff_set_far
#define ep__bitmap_clear_far bench_ff_clear_far
#define ep__fit_init bench_ff_fit_init
#define ep__small_get bench_ff_small_get
#define ep__small_put bench_ff_small_put
#define ep__fit_destroy bench_ff_fit_destroy
#define ep__fit_mark bench_ff_fit_mark
#define ep__fit_mark_set bench_ff_fit_mark_set
#define ep__fit_mark_clear bench_ff_fit_mark_clear
#define ep__fit_longest bench_ff_fit_longest
#define ep__fit_find bench_ff_fit_find
#define ep__fit_find_aligned bench_ff_fit_find_aligned

#ifdef __cplusplus
extern "C" {
#endif

#include "../libexecpack/core/bitmap.h"

#define BENCH_FF_CHUNK 64
#define BENCH_FF_MAX 2048

struct bench_ff {
	unsigned char *rw, *rx;
	uint8_t *chunks; /* the chunk count of the slot that starts at each chunk */
	uint64_t *used;
	size_t nchunks;
	struct ep__fit fit;
	unsigned char stage[BENCH_FF_MAX];
};

/* A floor of size bytes (a multiple of 64 * 64); 0, or -errno. */
int bench_ff_init(struct bench_ff *f, size_t size);
void bench_ff_destroy(struct bench_ff *f);

/* A slot for len bytes (1..2048), first fit: its first chunk, or SIZE_MAX
 * when the floor is full.  f->stage holds the slot's length of traps: the
 * caller writes the code there and calls bench_ff_commit(). */
static inline size_t bench_ff_take(struct bench_ff *f, size_t len)
{
	size_t n = (len + BENCH_FF_CHUNK - 1) / BENCH_FF_CHUNK;
	size_t pos = ep__fit_find(&f->fit, f->used, n, NULL);

	if (pos >= f->nchunks)
		return SIZE_MAX;
	ep__bitmap_set(f->used, pos, n);
	ep__fit_mark_set(&f->fit, f->used, pos, n);
	f->chunks[pos] = (uint8_t)n;
	memset(f->stage, 0xcc, n * BENCH_FF_CHUNK);
	return pos;
}

/* The staged code goes in; the slot's executable address. */
static inline void *bench_ff_commit(struct bench_ff *f, size_t pos)
{
	memcpy(f->rw + pos * BENCH_FF_CHUNK, f->stage, f->chunks[pos] * (size_t)BENCH_FF_CHUNK);
	return f->rx + pos * BENCH_FF_CHUNK;
}

static inline void bench_ff_drop(struct bench_ff *f, void *exec)
{
	size_t pos = (size_t)((unsigned char *)exec - f->rx) / BENCH_FF_CHUNK, n = f->chunks[pos];

	memset(f->rw + pos * BENCH_FF_CHUNK, 0xcc, n * BENCH_FF_CHUNK);
	ep__bitmap_clear(f->used, pos, n);
	ep__fit_mark_clear(&f->fit, f->used, pos, n);
}

#ifdef __cplusplus
}
#endif

#endif /* BENCH_FIRSTFIT_H */
