/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-ops.c - the churn of bench-suite's workload 10, for counting
 * instructions (`make bench-instructions`, tests/bench-instructions.sh).
 *
 * LIVE live programs, sizes log-uniform 16-2048 B, then OPS ops, each of
 * which frees a random live program and JITs a new one (alloc, write,
 * finalize), on libexecpack or on the floor of bench-suite's struct Floor
 * (one memfd mapped RW and RX, slots bumped, freed ones on a LIFO list per
 * 64-byte class, the code written through the RW view, a freed slot
 * refilled with traps), or on that floor staged as ep_alloc() stages code
 * (written into a private buffer of traps, then copied through the RW
 * view), or on the first-fit floor (bench-firstfit.h: the staged floor
 * with first fit over a chunk bitmap, the library's summary, in place of
 * the free lists); execpack is a pool of the memfd backend.  An
 * untimed warm-up of OPS ops comes first; the counted ops run in run_ops()
 * alone, which callgrind collects (--toggle-collect=run_ops).  Every live
 * program is checked at the end.
 *
 * add: execpack with ep_add() of code emitted into a buffer of the
 * caller's instead of ep_alloc(), emit, ep_finalize().
 *
 * Usage: bench-ops execpack|add|floor|staged|firstfit LIVE OPS
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "execpack.h"
#include "bench-firstfit.h"

/* Hidden in the library; resolved only where this is linked statically. */
extern int ep__valgrind __attribute__((weak));
extern int ep__bias_ok __attribute__((weak));

static void die(const char *what, int err)
{
	fprintf(stderr, "bench-ops: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* the generator and sizes of bench-suite */
static uint64_t rng_s;

static uint64_t rng_next(void)
{
	rng_s ^= rng_s << 13;
	rng_s ^= rng_s >> 7;
	rng_s ^= rng_s << 17;
	return rng_s;
}

static uint32_t rng_below(uint32_t n)
{
	return (uint32_t)((rng_next() >> 32) * n >> 32);
}

static size_t log_uniform_size(void)
{
	double u = (double)(rng_next() >> 11) / 9007199254740992.0;
	size_t len = (size_t)(16.0 * exp2(7.0 * u));

	return len < 16 ? 16 : len > 2048 ? 2048 : len;
}

/* mov eax, imm32; ret; NOP padding */
static unsigned char tmpl[2048];

static void emit(void *dst, size_t len, uint32_t imm)
{
	memcpy(dst, tmpl, len);
	memcpy((unsigned char *)dst + 1, &imm, 4);
}

/* ---- the two allocators ---------------------------------------------- */

static struct ep_pool *pool;

enum { CHUNK = EP_CHUNK_SIZE, CLASSES = 2048 / EP_CHUNK_SIZE };
#define FLOOR_SIZE ((size_t)1 << 30)

static struct {
	unsigned char *rw, *rx;
	uint8_t *cls; /* the class of the slot that starts at each chunk */
	size_t top;
	uint32_t *free[CLASSES]; /* chunk indices, last in first out */
	size_t nfree[CLASSES], cap[CLASSES];
} fl;

static void floor_init(void)
{
	int fd = memfd_create("bench-floor", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, (off_t)FLOOR_SIZE))
		die("memfd", errno);
	fl.rw = mmap(NULL, FLOOR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	fl.rx = mmap(NULL, FLOOR_SIZE, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
	fl.cls = mmap(NULL, FLOOR_SIZE / CHUNK, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (fl.rw == MAP_FAILED || fl.rx == MAP_FAILED || fl.cls == MAP_FAILED)
		die("mmap", errno);
	close(fd);
}

/* staged: the floor plus what ep_alloc()'s contract adds, the code written
 * into a private buffer of traps and then copied through the RW view */
static int staged;
static unsigned char stage[2048];

/* A slot of class c (c + 1 chunks): the last freed one, or a new one
 * whose tail past len gets traps unless tail is false. */
static inline unsigned char *floor_slot(size_t c, size_t len, bool tail)
{
	if (fl.nfree[c])
		return fl.rw + (size_t)fl.free[c][--fl.nfree[c]] * CHUNK;

	size_t step = (c + 1) * CHUNK;
	unsigned char *at = fl.rw + fl.top;

	if (fl.top + step > FLOOR_SIZE)
		die("floor", ENOMEM);
	fl.cls[fl.top / CHUNK] = (uint8_t)c;
	fl.top += step;
	if (tail)
		memset(at + len, 0xcc, step - len);
	return at;
}

static void *floor_put(size_t len, uint32_t imm)
{
	unsigned char *at = floor_slot((len + CHUNK - 1) / CHUNK - 1, len, true);

	emit(at, len, imm);
	return fl.rx + (at - fl.rw);
}

static void *staged_put(size_t len, uint32_t imm)
{
	size_t c = (len + CHUNK - 1) / CHUNK - 1, step = (c + 1) * CHUNK;
	unsigned char *at = floor_slot(c, len, false);

	memset(stage, 0xcc, step);
	emit(stage, len, imm);
	memcpy(at, stage, step);
	return fl.rx + (at - fl.rw);
}

static void floor_drop(void *exec)
{
	size_t k = (size_t)((unsigned char *)exec - fl.rx) / CHUNK, c = fl.cls[k];

	memset(fl.rw + k * CHUNK, 0xcc, (c + 1) * CHUNK);
	if (fl.nfree[c] == fl.cap[c]) {
		fl.cap[c] = fl.cap[c] ? 2 * fl.cap[c] : 1024;
		fl.free[c] = realloc(fl.free[c], fl.cap[c] * sizeof(uint32_t));
		if (!fl.free[c])
			die("realloc", ENOMEM);
	}
	fl.free[c][fl.nfree[c]++] = (uint32_t)k;
}

static struct bench_ff ff;

static void *ff_put(size_t len, uint32_t imm)
{
	size_t pos = bench_ff_take(&ff, len);

	if (pos == SIZE_MAX)
		die("first-fit floor", ENOMEM);
	emit(ff.stage, len, imm);
	return bench_ff_commit(&ff, pos);
}

static void *ep_put(size_t len, uint32_t imm)
{
	struct ep_image img;
	int rc = ep_alloc(pool, len, &img);

	if (rc)
		die("ep_alloc", rc);
	emit(img.rw, len, imm);
	if ((rc = ep_finalize(pool, img.exec)))
		die("ep_finalize", rc);
	return img.exec;
}

/* Finished code: emitted into the caller's buffer, then ep_add(). */
static int use_add;
static unsigned char done_code[2048];

static void *ep_add_put(size_t len, uint32_t imm)
{
	void *exec;
	int rc;

	emit(done_code, len, imm);
	if ((rc = ep_add(pool, done_code, len, &exec)))
		die("ep_add", rc);
	return exec;
}

static void ep_drop(void *exec)
{
	int rc = ep_free(pool, exec);

	if (rc)
		die("ep_free", rc);
}

/* ---- the churn -------------------------------------------------------- */

struct prog {
	void *p;
	uint32_t imm, len;
};

struct op {
	uint32_t victim, len, imm;
};

static int use_floor, use_ff;

static inline void *put(size_t len, uint32_t imm)
{
	return use_ff ? ff_put(len, imm)
	       : staged ? staged_put(len, imm)
	       : use_floor ? floor_put(len, imm)
	       : use_add ? ep_add_put(len, imm) : ep_put(len, imm);
}

static inline void one_op(struct prog *live, const struct op *o)
{
	struct prog *pr = &live[o->victim];

	if (use_ff)
		bench_ff_drop(&ff, pr->p);
	else if (use_floor)
		floor_drop(pr->p);
	else
		ep_drop(pr->p);
	pr->len = o->len;
	pr->imm = o->imm;
	pr->p = put(pr->len, pr->imm);
}

/* What callgrind counts: n free + JIT pairs, nothing else. */
static __attribute__((noinline)) void run_ops(struct prog *live, const struct op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		one_op(live, &ops[i]);
}

int main(int argc, char **argv)
{
	long nlive, nops;
	struct prog *live;
	struct op *ops;

	if (argc != 4 ||
	    (strcmp(argv[1], "execpack") && strcmp(argv[1], "floor") && strcmp(argv[1], "staged") &&
	     strcmp(argv[1], "firstfit") && strcmp(argv[1], "add")) ||
	    (nlive = atol(argv[2])) < 1 || (nops = atol(argv[3])) < 1 || nlive > 1000000 ||
	    nops > 100000000) {
		fprintf(stderr, "usage: %s execpack|add|floor|staged|firstfit LIVE OPS\n", argv[0]);
		return 2;
	}
	staged = !strcmp(argv[1], "staged");
	use_ff = !strcmp(argv[1], "firstfit");
	use_add = !strcmp(argv[1], "add");
	use_floor = staged || !strcmp(argv[1], "floor");
	memset(tmpl, 0x90, sizeof(tmpl));
	tmpl[0] = 0xb8;
	tmpl[5] = 0xc3;
	rng_s = 10000 * 0x9e3779b97f4a7c15ull + 1;
	live = calloc((size_t)nlive, sizeof(*live));
	ops = calloc(2 * (size_t)nops, sizeof(*ops));
	if (!live || !ops)
		die("calloc", ENOMEM);
	for (long i = 0; i < nlive; i++) {
		live[i].imm = (uint32_t)rng_next();
		live[i].len = (uint32_t)log_uniform_size();
	}
	for (long i = 0; i < 2 * nops; i++) {
		ops[i].victim = rng_below((uint32_t)nlive);
		ops[i].len = (uint32_t)log_uniform_size();
		ops[i].imm = (uint32_t)rng_next();
	}

	if (use_ff) {
		int rc = bench_ff_init(&ff, FLOOR_SIZE);

		if (rc)
			die("first-fit floor", rc);
	} else if (use_floor) {
		floor_init();
	} else {
		struct ep_config cfg = { 0 };
		int rc;

		cfg.sz = sizeof(cfg);
		cfg.backend = EP_BACKEND_MEMFD;
		if ((rc = ep_pool_create(&cfg, &pool)))
			die("ep_pool_create", rc);
		/* Count what runs natively, not the paths taken for memcheck. */
		if (&ep__valgrind)
			ep__valgrind = 0;
		/* and the lock's bias, which Valgrind cannot have (no
		 * membarrier(2)): one thread, so it is never revoked */
		if (&ep__bias_ok)
			ep__bias_ok = 1;
		else
			fprintf(stderr, "bench-ops: linked against the shared library: the counts "
					"include the library's Valgrind paths\n");
	}
	for (long i = 0; i < nlive; i++)
		live[i].p = put(live[i].len, live[i].imm);
	/* (not a function like run_ops: the compiler would fold the two into one) */
	for (long i = 0; i < nops; i++)
		one_op(live, &ops[i]);
	run_ops(live, ops + nops, (size_t)nops);

	for (long i = 0; i < nlive; i++) {
		unsigned char want[2048];

		emit(want, live[i].len, live[i].imm);
		if (memcmp(live[i].p, want, live[i].len)) {
			fprintf(stderr, "bench-ops: %s: program %ld differs from its code\n",
				argv[1], i);
			return 1;
		}
#if defined(__x86_64__)
		uint32_t (*fn)(void);
		memcpy(&fn, &live[i].p, sizeof(fn));
		if (fn() != live[i].imm) {
			fprintf(stderr, "bench-ops: %s: program %ld returned the wrong value\n",
				argv[1], i);
			return 1;
		}
#endif
	}
	printf("%s: %ld live, %ld ops\n", argv[1], nlive, nops);
	if (use_ff)
		bench_ff_destroy(&ff);
	else if (!use_floor)
		ep_pool_destroy(pool);
	return 0;
}
