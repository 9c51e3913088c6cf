/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_pool.c - random API sequences on one pool, checked against a model.
 *
 * The model knows which allocations are live, their sizes, whether they are
 * finalized, and what bytes each should hold; after every step the library
 * must agree: contents read back through the exec view, -EINVAL for writes,
 * finalizes and frees that do not name a live allocation, and the stats.
 *
 * Built two ways:
 *   - with -DEP_FUZZ_LIBFUZZER and clang -fsanitize=fuzzer: a libFuzzer
 *     target (`make fuzz`);
 *   - without: a replay driver.  `fuzz_pool_replay FILE|DIR...` runs each
 *     input once; with no arguments it runs a fixed set of pseudo-random
 *     inputs and the seed corpus under $top_srcdir/fuzz/corpus/pool.
 *
 * Input: byte 0 picks the pool (bits 0-2 pack size, bit 3 EP_F_RANDOMIZE,
 * bit 4 a byte limit),
 * byte 1 the limit; then one operation per opcode byte, arguments after it
 * (ep_shrink() is an opcode of 128 or more that is 7 modulo 10).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "execpack.h"

#define MAX_SLOTS 32
#define MAX_STALE 8
#define MAX_OPS 256
#define TRAP 0xcc

#define FCHECK(cond, ...)                                                   \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "fuzz_pool: %s:%d: check failed: %s: ", \
				__FILE__, __LINE__, #cond);                 \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			abort();                                            \
		}                                                           \
	} while (0)

struct slot {
	bool live;
	bool finalized;
	bool large;
	unsigned char *exec;
	unsigned char *rw;
	size_t size;     /* usable bytes (ep_image.size) */
	size_t reserved; /* what the model expects to be charged */
	size_t mapped;   /* a large one's mapping (ep_shrink() keeps it whole) */
	unsigned char *shadow;
};

struct model {
	struct ep_pool *pool;
	size_t pack_size;
	size_t page;
	size_t limit;
	bool randomize;
	struct slot s[MAX_SLOTS];
	uintptr_t stale[MAX_STALE];
	unsigned nstale;
	size_t charged;
};

struct input {
	const uint8_t *p;
	size_t n, at;
};

static uint8_t in_u8(struct input *in)
{
	return in->at < in->n ? in->p[in->at++] : 0;
}

static uint16_t in_u16(struct input *in)
{
	uint16_t lo = in_u8(in);

	return (uint16_t)(lo | (uint16_t)in_u8(in) << 8);
}

static uint32_t in_u32(struct input *in)
{
	uint32_t lo = in_u16(in);

	return lo | (uint32_t)in_u16(in) << 16;
}

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* What a live allocation of `size` is charged (ep_alloc's documented
 * rounding: 64-byte chunks in a pack, pages for large ones, plus the
 * randomization slack). */
static size_t expected_reserved(const struct model *m, size_t size, bool *large)
{
	size_t want = size + (m->randomize ? 48 : 0);

	*large = size > m->pack_size;
	if (*large)
		return round_up(want, m->page);
	return round_up(want < m->pack_size ? want : m->pack_size, EP_CHUNK_SIZE);
}

/* The live slot whose usable bytes contain [a, a+len) (len 0: a itself). */
static struct slot *owner(struct model *m, uintptr_t a, size_t len)
{
	for (int i = 0; i < MAX_SLOTS; i++) {
		struct slot *s = &m->s[i];
		uintptr_t lo = (uintptr_t)s->exec, hi = lo + s->size;

		if (!s->live || a < lo || a >= hi)
			continue;
		return len <= hi - a ? s : NULL;
	}
	return NULL;
}

static struct slot *exact(struct model *m, uintptr_t a)
{
	for (int i = 0; i < MAX_SLOTS; i++)
		if (m->s[i].live && (uintptr_t)m->s[i].exec == a)
			return &m->s[i];
	return NULL;
}

static struct slot *pick_live(struct model *m, uint8_t k)
{
	for (int i = 0; i < MAX_SLOTS; i++) {
		struct slot *s = &m->s[(k + i) % MAX_SLOTS];

		if (s->live)
			return s;
	}
	return NULL;
}

static bool all_trap(const unsigned char *p, size_t n)
{
	static unsigned char traps[4096];

	if (traps[0] != TRAP)
		memset(traps, TRAP, sizeof(traps));
	for (size_t i = 0; i < n; i += sizeof(traps)) {
		size_t k = n - i < sizeof(traps) ? n - i : sizeof(traps);

		if (memcmp(p + i, traps, k) != 0)
			return false;
	}
	return true;
}

/* Bytes given back: traps, or pages the pool uncommitted (a hole: not
 * readable, so nothing runs there either), read through
 * process_vm_readv() so that such a page is an answer, not a fault. */
static bool given_back_trapped(const unsigned char *p, size_t n)
{
	static unsigned char buf[4096];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	while (n) {
		size_t k = page - (uintptr_t)p % page;

		if (k > n)
			k = n;
		if (k > sizeof(buf))
			k = sizeof(buf);
		struct iovec local = { buf, k }, remote = { (void *)p, k };

		if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)k) {
			if (!all_trap(buf, k))
				return false;
		} else if (errno != EFAULT) {
			return all_trap(p, n); /* (no such call here: read it) */
		}
		p += k;
		n -= k;
	}
	return true;
}

/* The exec view holds what the model says: the shadow once finalized,
 * traps before (writes go to the staging buffer). */
static void verify_slot(const struct slot *s)
{
	if (s->finalized) {
		FCHECK(memcmp(s->exec, s->shadow, s->size) == 0, "exec view of %p differs from model",
		       (void *)s->exec);
	} else {
		FCHECK(all_trap(s->exec, s->size), "unfinalized %p is not all traps", (void *)s->exec);
		FCHECK(memcmp(s->rw, s->shadow, s->size) == 0, "staging of %p differs from model",
		       (void *)s->exec);
	}
}

static void verify_stats(struct model *m)
{
	struct ep_stats st;
	size_t live = 0, large = 0, used = 0, lbytes = 0;

	FCHECK(ep_pool_stats(m->pool, &st) == 0, "ep_pool_stats");
	for (int i = 0; i < MAX_SLOTS; i++) {
		const struct slot *s = &m->s[i];

		if (!s->live)
			continue;
		live++;
		if (s->large) {
			large++;
			lbytes += s->mapped;
		} else {
			used += s->reserved;
		}
	}
	FCHECK(st.live_allocs == live, "live_allocs %zu, model %zu", st.live_allocs, live);
	FCHECK(st.large_allocs == large, "large_allocs %zu, model %zu", st.large_allocs, large);
	FCHECK(st.used_bytes == used, "used_bytes %zu, model %zu", st.used_bytes, used);
	FCHECK(st.large_bytes == lbytes, "large_bytes %zu, model %zu", st.large_bytes, lbytes);
	/* committed bytes: a prefix of each pack, all of it at most */
	FCHECK(st.pack_bytes <= st.packs * m->pack_size && !st.packs == !st.pack_bytes,
	       "pack_bytes %zu for %zu packs", st.pack_bytes, st.packs);
	FCHECK(st.used_bytes <= st.pack_bytes, "used %zu > pack bytes %zu", st.used_bytes,
	       st.pack_bytes);
	/* every pack but one cached empty one holds something */
	FCHECK(st.packs <= live - large + 1,
	       "%zu packs for %zu live allocations", st.packs, live);
}

static void slot_drop(struct model *m, struct slot *s)
{
	if (m->nstale < MAX_STALE)
		m->stale[m->nstale++] = (uintptr_t)s->exec;
	else
		m->stale[(uintptr_t)s->exec % MAX_STALE] = (uintptr_t)s->exec;
	m->charged -= s->reserved;
	free(s->shadow);
	memset(s, 0, sizeof(*s));
}

static void op_alloc(struct model *m, struct input *in)
{
	uint8_t mode = in_u8(in);
	uint16_t arg = in_u16(in);
	size_t size;

	if (mode & 0x80)
		size = m->pack_size + 1 + (size_t)(arg & 0xff) * 4096 + (arg >> 8);
	else if ((mode & 0x60) == 0x60)
		size = m->pack_size - (arg % 128); /* around the pack boundary */
	else
		size = arg % (m->pack_size < 8192 ? m->pack_size : 8192);

	struct slot *s = NULL;

	for (int i = 0; i < MAX_SLOTS && !s; i++)
		if (!m->s[i].live)
			s = &m->s[i];
	if (!s)
		return;

	struct ep_image img;
	int rc = ep_alloc(m->pool, size, &img);

	if (size == 0) {
		FCHECK(rc == -EINVAL, "ep_alloc(0) = %d", rc);
		return;
	}
	bool large;
	size_t reserved = expected_reserved(m, size, &large);

	if (m->limit && m->charged + reserved > m->limit) {
		FCHECK(rc == -EPERM, "ep_alloc(%zu) over the limit: %d", size, rc);
		return;
	}
	FCHECK(rc == 0, "ep_alloc(%zu): %d (%s)", size, rc, ep_strerror(rc));
	FCHECK(img.exec && img.rw && img.size >= size && img.size <= reserved,
	       "image for %zu: exec %p rw %p size %zu (reserved %zu)", size, img.exec, img.rw,
	       img.size, reserved);
	FCHECK(m->randomize || img.size == reserved, "size %zu, expected %zu", img.size, reserved);
	FCHECK(((uintptr_t)img.exec & 15) == 0, "exec %p not 16-byte aligned", img.exec);
	/* no overlap with anything live */
	for (int i = 0; i < MAX_SLOTS; i++) {
		const struct slot *o = &m->s[i];
		uintptr_t a = (uintptr_t)img.exec;

		if (o->live)
			FCHECK(a + img.size <= (uintptr_t)o->exec || a >= (uintptr_t)o->exec + o->size,
			       "%p+%zu overlaps live %p+%zu", img.exec, img.size, (void *)o->exec,
			       o->size);
	}
	FCHECK(all_trap(img.rw, img.size), "staging buffer not trap-filled");
	FCHECK(all_trap(img.exec, img.size), "fresh exec range %p+%zu not trap-filled", img.exec,
	       img.size);

	s->shadow = malloc(img.size);
	FCHECK(s->shadow != NULL, "malloc");
	memset(s->shadow, TRAP, img.size);
	s->live = true;
	s->finalized = false;
	s->large = large;
	s->exec = img.exec;
	s->rw = img.rw;
	s->size = img.size;
	s->reserved = reserved;
	s->mapped = large ? reserved : 0;
	m->charged += reserved;

	/* the caller's own writes into rw, as a JIT would emit */
	if (mode & 1) {
		size_t n = in_u8(in) % (img.size < 64 ? img.size : 64);
		uint8_t b = in_u8(in);

		for (size_t i = 0; i < n; i++)
			s->rw[i] = s->shadow[i] = (unsigned char)(b + i);
	}
}

/* An address near a live allocation, or a stale one. */
static uintptr_t pick_addr(struct model *m, struct input *in, struct slot **base)
{
	uint8_t k = in_u8(in), how = in_u8(in);
	struct slot *s = pick_live(m, k);

	*base = s;
	if ((how & 0xc0) == 0xc0 && m->nstale)
		return m->stale[k % m->nstale];
	if (!s)
		return m->nstale ? m->stale[0] : (uintptr_t)0x1000;
	switch (how & 3) {
	case 0: return (uintptr_t)s->exec;
	case 1: return (uintptr_t)s->exec + (how >> 2) % (s->size + 1);
	case 2: return (uintptr_t)s->exec + s->size - ((how >> 2) % 9); /* near the end */
	default: return (uintptr_t)s->exec - 1 - (how >> 2); /* just before */
	}
}

static void op_write(struct model *m, struct input *in)
{
	struct slot *b;
	uintptr_t a = pick_addr(m, in, &b);
	size_t len = in_u8(in);
	unsigned char buf[256];
	uint8_t seed = in_u8(in);

	if (len > 200)
		len = (len - 200) * 64; /* sometimes long, up to 3.5 KiB */
	unsigned char *src = len <= sizeof(buf) ? buf : malloc(len);

	FCHECK(src != NULL, "malloc");
	for (size_t i = 0; i < len; i++)
		src[i] = (unsigned char)(seed * 31 + i);

	struct slot *s = owner(m, a, len);
	int rc = ep_write(m->pool, (void *)a, src, len);

	if (!s) {
		FCHECK(rc == -EINVAL, "ep_write(%#lx, %zu) outside any allocation: %d",
		       (unsigned long)a, len, rc);
	} else {
		FCHECK(rc == 0, "ep_write(%#lx, %zu): %d (%s)", (unsigned long)a, len, rc,
		       ep_strerror(rc));
		size_t off = a - (uintptr_t)s->exec;

		memcpy(s->shadow + off, src, len);
		if (s->finalized)
			FCHECK(memcmp(s->exec + off, src, len) == 0, "live patch not visible");
		else
			FCHECK(all_trap(s->exec + off, len), "staged write reached the exec view");
	}
	if (src != buf)
		free(src);
}

static void op_finalize(struct model *m, struct input *in)
{
	struct slot *b;
	uintptr_t a = pick_addr(m, in, &b);
	struct slot *s = exact(m, a);
	int rc = ep_finalize(m->pool, (void *)a);

	if (!s || s->finalized) {
		FCHECK(rc == -EINVAL, "ep_finalize(%#lx) %s: %d", (unsigned long)a,
		       s ? "twice" : "not an allocation", rc);
		return;
	}
	FCHECK(rc == 0, "ep_finalize: %d (%s)", rc, ep_strerror(rc));
	s->finalized = true;
	s->rw = NULL;
	verify_slot(s);
}

static void op_free(struct model *m, struct input *in)
{
	struct slot *b;
	uintptr_t a = pick_addr(m, in, &b);
	struct slot *s = exact(m, a);
	int rc = ep_free(m->pool, (void *)a);

	if (!s) {
		FCHECK(rc == -EINVAL, "ep_free(%#lx) of no allocation: %d", (unsigned long)a, rc);
		return;
	}
	FCHECK(rc == 0, "ep_free: %d (%s)", rc, ep_strerror(rc));
	slot_drop(m, s);
}

/*
 * ep_shrink(): the whole chunks (pages, for a large one) past exec + size
 * are given back, traps where they were finalized; never grows.
 */
static void op_shrink(struct model *m, struct input *in)
{
	struct slot *b;
	uintptr_t a = pick_addr(m, in, &b);
	uint16_t arg = in_u16(in);
	struct slot *s = exact(m, a);
	size_t size = 0;

	if (s) {
		switch (arg & 3) {
		case 0: size = (arg >> 2) % (s->size + 1); break;      /* 0 included */
		case 1: size = s->size - (arg >> 2) % 65; break;        /* near the end */
		case 2: size = s->size + 1 + (arg >> 2) % 64; break;    /* grows: refused */
		default: size = 1 + (arg >> 2) % 256; break;            /* small */
		}
		if (size > s->size + 64)
			size = s->size;
	} else {
		size = arg;
	}
	int rc = ep_shrink(m->pool, (void *)a, size);

	if (!s || size == 0 || size > s->size) {
		FCHECK(rc == -EINVAL, "ep_shrink(%#lx, %zu) %s: %d", (unsigned long)a, size,
		       s ? "bad size" : "not an allocation", rc);
		return;
	}
	FCHECK(rc == 0, "ep_shrink(%#lx, %zu): %d (%s)", (unsigned long)a, size, rc, ep_strerror(rc));
	size_t off = s->reserved - s->size, keep = round_up(off + size, s->large ? m->page : 64);

	if (keep >= s->reserved)
		return;
	if (s->finalized)
		FCHECK(given_back_trapped(s->exec + (keep - off), s->size - (keep - off)),
		       "the tail given back at %p is not traps", (void *)s->exec);
	m->charged -= s->reserved - keep;
	s->reserved = keep;
	s->size = keep - off;
	verify_slot(s);
}

/* Real code: `mov eax, imm32; ret`, staged or patched live, then called. */
static void op_call(struct model *m, struct input *in)
{
	struct slot *s = pick_live(m, in_u8(in));
	uint32_t v = in_u32(in);
	unsigned char code[6] = { 0xb8, 0, 0, 0, 0, 0xc3 };

	if (!s || s->size < sizeof(code))
		return;
	memcpy(code + 1, &v, 4);
	FCHECK(ep_write(m->pool, s->exec, code, sizeof(code)) == 0, "ep_write code");
	memcpy(s->shadow, code, sizeof(code));
	if (!s->finalized) {
		FCHECK(ep_finalize(m->pool, s->exec) == 0, "ep_finalize code");
		s->finalized = true;
		s->rw = NULL;
	}
	int (*fn)(void);
	void *p = s->exec;

	memcpy(&fn, &p, sizeof(fn));
	FCHECK((uint32_t)fn() == v, "function returned the wrong value");
	verify_slot(s);
}

static void op_invalid(struct model *m, struct input *in)
{
	struct ep_image img;
	struct ep_stats st;
	struct slot *s = pick_live(m, in_u8(in));

	switch (in_u8(in) % 8) {
	case 0: FCHECK(ep_alloc(m->pool, 0, &img) == -EINVAL, "alloc 0"); break;
	case 1: FCHECK(ep_alloc(m->pool, SIZE_MAX, &img) == -ENOMEM, "alloc SIZE_MAX"); break;
	case 2: FCHECK(ep_alloc(m->pool, 64, NULL) == -EINVAL, "alloc NULL out"); break;
	case 3: FCHECK(ep_free(m->pool, NULL) == -EINVAL, "free NULL"); break;
	case 4: FCHECK(ep_finalize(m->pool, NULL) == -EINVAL, "finalize NULL"); break;
	case 5: FCHECK(ep_pool_stats(m->pool, NULL) == -EINVAL, "stats NULL"); break;
	case 6:
		if (s)
			FCHECK(ep_write(m->pool, s->exec, NULL, 1) == -EINVAL, "write NULL src");
		break;
	default:
		FCHECK(ep_write(NULL, s ? s->exec : NULL, &st, 1) == -EINVAL, "write NULL pool");
		break;
	}
}

static void verify_all(struct model *m)
{
	for (int i = 0; i < MAX_SLOTS; i++)
		if (m->s[i].live)
			verify_slot(&m->s[i]);
	verify_stats(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* small packs keep large allocations (bigger than a pack) cheap; the
	 * default 2 MiB pack only in one configuration of eight */
	static const size_t packs[8] = { 64 << 10, 16 << 10, 128 << 10, 64 << 10,
					 16 << 10, 8 << 10, 32 << 10, 0 };
	struct input in = { data, size, 0 };
	struct model m;

	memset(&m, 0, sizeof(m));
	uint8_t cfgb = in_u8(&in), limb = in_u8(&in);
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };

	cfg.pack_size = packs[cfgb & 7];
	cfg.flags = (cfgb & 8) ? EP_F_RANDOMIZE : 0;
	if (cfgb & 16)
		cfg.limit = ((size_t)limb + 1) * 4096;

	int rc = ep_pool_create(&cfg, &m.pool);

	FCHECK(rc == 0, "ep_pool_create: %d (%s)", rc, ep_strerror(rc));
	m.page = (size_t)sysconf(_SC_PAGESIZE);
	m.pack_size = cfg.pack_size ? cfg.pack_size : (size_t)2 << 20;
	m.limit = cfg.limit;
	m.randomize = cfg.flags & EP_F_RANDOMIZE;

	for (int ops = 0; in.at < in.n && ops < MAX_OPS; ops++) {
		uint8_t op = in_u8(&in);

		if (op % 10 == 7 && op >= 128) { /* (older inputs keep their meaning below 128) */
			op_shrink(&m, &in);
			continue;
		}
		switch (op % 10) {
		case 0: case 1: op_alloc(&m, &in); break;
		case 2: case 3: op_write(&m, &in); break;
		case 4: op_finalize(&m, &in); break;
		case 5: op_free(&m, &in); break;
		case 6: op_call(&m, &in); break;
		case 7: verify_stats(&m); break;
		case 8: op_invalid(&m, &in); break;
		default: verify_all(&m); break;
		}
	}
	verify_all(&m);
	/* free everything, in an order the input chooses */
	uint8_t k = in_u8(&in);

	for (int i = 0; i < MAX_SLOTS; i++) {
		struct slot *s = &m.s[(i * 7 + k) % MAX_SLOTS];

		if (s->live) {
			FCHECK(ep_free(m.pool, s->exec) == 0, "final free");
			slot_drop(&m, s);
		}
	}
	struct ep_stats st;

	FCHECK(ep_pool_stats(m.pool, &st) == 0, "stats");
	FCHECK(st.live_allocs == 0 && st.used_bytes == 0 && st.large_bytes == 0 && st.packs <= 1,
	       "after freeing all: %zu live, %zu used, %zu large bytes, %zu packs", st.live_allocs,
	       st.used_bytes, st.large_bytes, st.packs);
	ep_pool_destroy(m.pool);
	return 0;
}

#ifndef EP_FUZZ_LIBFUZZER
/* ---- the replay driver ------------------------------------------------------ */

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0;

	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			uint8_t *nb = realloc(buf, cap);

			if (!nb) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = nb;
		}
		size_t r = fread(buf + n, 1, cap - n, f);

		if (r == 0)
			break;
		n += r;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

static int run_path(const char *path, unsigned *count)
{
	struct stat sb;

	if (stat(path, &sb) != 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		(*count)++;
		return run_file(path);
	}
	DIR *d = opendir(path);
	struct dirent *e;
	int rc = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char p[4096];

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (run_path(p, count))
			rc = -1;
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0;

	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			if (run_path(argv[i], &count))
				rc = 1;
		printf("fuzz_pool: replayed %u inputs\n", count);
		return rc;
	}
	/* no arguments: the seed corpus, then fixed pseudo-random inputs */
	const char *top = getenv("top_srcdir");
	char dir[4096];
	struct stat sb;

	snprintf(dir, sizeof(dir), "%s/fuzz/corpus/pool", top && *top ? top : ".");
	if (stat(dir, &sb) == 0 && run_path(dir, &count))
		rc = 1;
	unsigned seeds = count;
	uint64_t x = 0x2545f4914f6cdd1dull;
	static uint8_t buf[4096];
	const char *q = getenv("EP_TEST_QUICK");
	int n = (q && *q && strcmp(q, "0")) ? 20 : 100;

	for (int i = 0; i < n; i++) {
		size_t len = 1 + (size_t)(x % sizeof(buf));

		for (size_t j = 0; j < len; j++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[j] = (uint8_t)(x >> 24);
		}
		LLVMFuzzerTestOneInput(buf, len);
		count++;
	}
	printf("fuzz_pool: %u corpus inputs and %u generated inputs passed\n", seeds, count - seeds);
	return rc;
}
#endif
