/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_ebpf.c - the eBPF example's loader, verifier and JIT, checked
 * against its interpreter.
 *
 * Property: arbitrary bytes are either rejected with an error, or the
 * program they load gives the same r0 and the same context bytes in the
 * JIT as in the interpreter.
 *
 * The example's verifier is not a safety verifier (memory accesses through
 * any register but r10 are unchecked), so "run whatever verifies" would
 * crash on wild pointers.  Every loaded program is therefore JIT-compiled
 * (compiling is always safe), but executed only when one of these holds:
 *   - it came unchanged from the generator (gen.c guarantees safety), or
 *   - the conservative filter below proves it safe and deterministic:
 *     every load/store is r10 + constant (the verifier bounds those to
 *     the frame) or an unmodified copy of the context pointer + constant
 *     inside the context; stack bytes are written before they are read;
 *     no register that differs between the engines is read (r10 itself,
 *     r1-r5 after a helper call, where the JIT's SysV call clobbers them
 *     and the interpreter keeps them).
 * The vm has only pure helpers (1 add, 2 mul, 3 mix, 5 identity), so even
 * callx with any index is safe: other slots are empty and return 0.
 * Termination: the interpreter runs first with a step limit; the JIT runs
 * only if the interpreter finished (a JIT that then loops is a mismatch
 * and shows as a libFuzzer timeout).
 *
 * Input: byte 0 selects the mode (low 2 bits):
 *   0  the rest as raw instructions (ebpf_load);
 *   1  byte 1 picks a section/function name, the rest is an ELF object
 *      (ebpf_load_elf);
 *   2, 3  bytes 1-8 seed the generator, byte 9 the size, byte 10 flags;
 *      the generated program is run, then (mode 3) every further 4 bytes
 *      mutate one instruction (index, field, value) and the result goes
 *      through the raw-instruction path again.
 * The context's initial bytes are a hash of the whole input.
 *
 * Built two ways, like fuzz_pool.c: with -DEP_FUZZ_LIBFUZZER a libFuzzer
 * target (`make fuzz`); without, a replay driver (`fuzz_ebpf_replay
 * FILE|DIR...`; no arguments: the seed corpus under
 * $top_srcdir/fuzz/corpus/ebpf plus fixed pseudo-random inputs;
 * `--write-seeds DIR` writes the hand-written seed corpus).
 */
#include "config.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "execpack.h"
#include "ebpf_asm.h"
#include "ebpf_int.h"
#include "gen.h"
#include "helpers.h"

#define CTX_LEN     64
#define STEP_LIMIT  (1u << 16)  /* interpreter steps: well under 1 ms */
#define MAX_ANALYZE 4096        /* longer programs are compiled, not run */
#define MAX_ROUNDS  256         /* filter fixpoint rounds before giving up */
#define GEN_CAP     4096

#define FCHECK(cond, ...)                                                     \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "fuzz_ebpf: %s:%d: check failed: %s: ", \
				__FILE__, __LINE__, #cond);                   \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
			abort();                                              \
		}                                                             \
	} while (0)

static struct ep_pool *pool;
static struct ebpf_vm *vm;

/* What the replay driver reports, so a run shows how much got executed. */
static struct {
	unsigned long loaded, rejected, ran, filtered, timeouts, gen, gen_accepted;
} stats;

/* Arguments each registered helper reads (the others are left empty). */
static const int helper_args[EBPF_MAX_HELPERS] = { [1] = 5, [2] = 2, [3] = 5, [5] = 1 };

static void setup_once(void)
{
	struct ep_config cfg = { .sz = sizeof(cfg) };

	if (vm)
		return;
	/* One pool and vm per process: pool creation costs more than a run. */
	FCHECK(ep_pool_create(&cfg, &pool) == 0, "ep_pool_create");
	FCHECK(ebpf_vm_create(pool, &vm) == 0, "ebpf_vm_create");
	ebpf_std_helpers(vm);
	/* trace writes to stderr, memsum dereferences r1: not for wild input */
	ebpf_vm_set_helper(vm, EBPF_HELPER_TRACE, NULL, NULL);
	ebpf_vm_set_helper(vm, EBPF_HELPER_MEMSUM, NULL, NULL);
}

static void dump(const struct ebpf_insn *p, size_t n)
{
	const uint8_t *b = (const uint8_t *)p;

	for (size_t i = 0; i < n * 8; i++)
		fprintf(stderr, "%02x%c", b[i], i % 8 == 7 ? '\n' : ' ');
}

/* ---- the conservative filter ------------------------------------------------
 * A forward dataflow over all functions at once: per instruction, the type
 * of each register and which bytes of the current frame are written.
 * Function entry: the meet of the callers' registers, a fresh frame.  After
 * a local call: r0-r5 from the meet of the callee's exits, r6-r9 and the
 * frame from before the call (both engines preserve them).
 */
enum { T_CTX = 1, T_SCALAR, T_UNDEF };

struct astate {
	bool reached;
	uint8_t r[11];
	uint64_t stk[EBPF_STACK_SIZE / 64]; /* bit b: byte r10 - 512 + b written */
};

static uint8_t meet(uint8_t a, uint8_t b)
{
	if (a == b)
		return a;
	return a == T_UNDEF || b == T_UNDEF ? T_UNDEF : T_SCALAR; /* ctx vs scalar */
}

/* dst = dst meet src; true if dst changed. */
static bool merge(struct astate *dst, const struct astate *src)
{
	bool changed = false;

	if (!src->reached)
		return false;
	if (!dst->reached) {
		*dst = *src;
		return true;
	}
	for (int i = 0; i < 11; i++) {
		uint8_t m = meet(dst->r[i], src->r[i]);

		changed |= m != dst->r[i];
		dst->r[i] = m;
	}
	for (size_t i = 0; i < sizeof(dst->stk) / sizeof(dst->stk[0]); i++) {
		uint64_t m = dst->stk[i] & src->stk[i];

		changed |= m != dst->stk[i];
		dst->stk[i] = m;
	}
	return changed;
}

/* A register whose value is the same in both engines (r10 never is). */
static bool defined(const struct astate *s, unsigned r)
{
	return r < 10 && s->r[r] != T_UNDEF;
}

static int width(uint8_t code)
{
	static const int w[4] = { 4, 2, 1, 8 }; /* EBPF_W, H, B, DW */

	return w[(code >> 3) & 3];
}

/* A memory access the filter allows; marks written stack bytes. */
static bool access_ok(struct astate *s, unsigned base, int off, int size, bool rd, bool wr)
{
	if (base == 10) {
		/* the verifier keeps r10 accesses inside [r10-512, r10) */
		for (int b = EBPF_STACK_SIZE + off; b < EBPF_STACK_SIZE + off + size; b++) {
			uint64_t bit = 1ull << (b % 64);

			if (rd && !(s->stk[b / 64] & bit))
				return false;
			if (wr)
				s->stk[b / 64] |= bit;
		}
		return true;
	}
	return base < 10 && s->r[base] == T_CTX && off >= 0 && off + size <= CTX_LEN;
}

static bool safe_to_run(const struct ebpf_prog *p)
{
	const struct ebpf_insn *insns = p->insns;
	size_t n = p->n;
	bool ok = false;

	if (n > MAX_ANALYZE)
		return false;
	struct astate *st = calloc(n, sizeof(*st));
	struct astate *fexit = calloc(n, sizeof(*fexit)); /* per function start */
	size_t *fn_of = calloc(n, sizeof(*fn_of));

	FCHECK(st && fexit && fn_of, "calloc");
	for (size_t i = 0, f = 0; i < n; i++) {
		if (p->fn_start[i])
			f = i;
		fn_of[i] = f;
	}
	/* Main entry: r1 = ctx, r2 = len, everything else 0 in both engines. */
	st[0].reached = true;
	for (int r = 0; r < 10; r++)
		st[0].r[r] = T_SCALAR;
	st[0].r[1] = T_CTX;

	for (int round = 0; round < MAX_ROUNDS; round++) {
		bool changed = false;

		for (size_t i = 0; i < n; i++) {
			const struct ebpf_insn *in = &insns[i];
			uint8_t cls = in->code & 7, op = in->code & 0xf0;
			bool x = in->code & EBPF_X;
			struct astate s = st[i];
			size_t next = i + 1;

			if (!s.reached)
				goto skip_lddw;
			switch (cls) {
			case EBPF_CLS_ALU:
			case EBPF_CLS_ALU64:
				if (op == EBPF_MOV) {
					if (x && !defined(&s, in->src))
						goto out;
					/* only a plain 64-bit copy keeps the ctx pointer usable */
					s.r[in->dst] = x && cls == EBPF_CLS_ALU64 && in->off == 0 ?
						       s.r[in->src] : T_SCALAR;
					break;
				}
				/* END's X bit means "to big endian", not a source */
				if (!defined(&s, in->dst) ||
				    (x && op != EBPF_END && !defined(&s, in->src)))
					goto out;
				s.r[in->dst] = T_SCALAR;
				break;
			case EBPF_CLS_LD: /* lddw */
				s.r[in->dst] = T_SCALAR;
				next = i + 2;
				break;
			case EBPF_CLS_LDX:
				if (!access_ok(&s, in->src, in->off, width(in->code), true, false))
					goto out;
				s.r[in->dst] = T_SCALAR;
				break;
			case EBPF_CLS_ST:
				if (!access_ok(&s, in->dst, in->off, width(in->code), false, true))
					goto out;
				break;
			case EBPF_CLS_STX:
				if (!defined(&s, in->src))
					goto out;
				if ((in->code & 0xe0) != EBPF_ATOMIC) {
					if (!access_ok(&s, in->dst, in->off, width(in->code), false, true))
						goto out;
					break;
				}
				/*
				 * Misaligned atomics: split locks in the JIT, misaligned
				 * __atomic builtins in the interpreter.  Frame and
				 * context are 16-byte aligned in both engines.
				 */
				if (in->off % width(in->code) ||
				    !access_ok(&s, in->dst, in->off, width(in->code), true, true))
					goto out;
				if (in->imm == EBPF_CMPXCHG) {
					if (!defined(&s, 0))
						goto out;
					s.r[0] = T_SCALAR;
				} else if (in->imm & EBPF_FETCH) {
					s.r[in->src] = T_SCALAR;
				}
				break;
			case EBPF_CLS_JMP:
			case EBPF_CLS_JMP32:
				if (op == EBPF_EXIT) {
					if (fn_of[i] == 0) {
						if (!defined(&s, 0))
							goto out;
					} else {
						changed |= merge(&fexit[fn_of[i]], &s);
					}
					goto skip_lddw; /* no successor */
				}
				if (op == EBPF_CALL && in->src == EBPF_PSEUDO_CALL && !x) {
					size_t t = i + 1 + (size_t)(int64_t)in->imm;
					struct astate e = s, *ret = &fexit[t];

					memset(e.stk, 0, sizeof(e.stk));
					changed |= merge(&st[t], &e);
					if (!ret->reached)
						goto skip_lddw; /* no return state yet */
					memcpy(s.r, ret->r, 6); /* r0-r5 as the callee left them */
					break;
				}
				if (op == EBPF_CALL) {
					int nargs = 5;

					if (x) {
						if (!defined(&s, in->dst ? in->dst : (unsigned)in->imm))
							goto out;
					} else {
						nargs = helper_args[in->imm];
					}
					for (int r = 1; r <= nargs; r++)
						if (!defined(&s, (unsigned)r))
							goto out;
					s.r[0] = T_SCALAR;
					for (int r = 1; r <= 5; r++)
						s.r[r] = T_UNDEF;
					break;
				}
				if (op == EBPF_JA) {
					next = i + 1 + (size_t)(int64_t)(cls == EBPF_CLS_JMP ? in->off : in->imm);
					break;
				}
				if (!defined(&s, in->dst) || (x && !defined(&s, in->src)))
					goto out;
				changed |= merge(&st[i + 1 + (size_t)(int64_t)in->off], &s);
				break;
			}
			changed |= merge(&st[next], &s);
skip_lddw:
			if (ebpf_is_lddw(in))
				i++;
		}
		if (!changed) {
			ok = true;
			break;
		}
	}
out:
	free(st);
	free(fexit);
	free(fn_of);
	return ok;
}

/* ---- running ------------------------------------------------------------- */

static void run_both(const struct ebpf_prog *p, const uint8_t *ctx0)
{
	/* One buffer for both runs: a program may return the ctx address. */
	_Alignas(16) uint8_t ctx[CTX_LEN], after[CTX_LEN];
	uint64_t ri, rj;
	int rc;

	memcpy(ctx, ctx0, CTX_LEN);
	rc = ebpf_run_interp_steps(p, ctx, CTX_LEN, &ri, STEP_LIMIT);
	if (rc == -ETIME) {
		stats.timeouts++; /* may not terminate: the JIT has no limit */
		return;
	}
	FCHECK(rc == 0, "interpreter failed on a verified program: %d", rc);
	memcpy(after, ctx, CTX_LEN);
	memcpy(ctx, ctx0, CTX_LEN);
	FCHECK(ebpf_run_jit(p, ctx, CTX_LEN, &rj) == 0, "no JIT code");
	stats.ran++;
	if (ri != rj || memcmp(after, ctx, CTX_LEN)) {
		dump(p->insns, p->n);
		FCHECK(0, "JIT and interpreter differ (%zu insns): interp r0=0x%llx jit r0=0x%llx%s",
		       p->n, (unsigned long long)ri, (unsigned long long)rj,
		       memcmp(after, ctx, CTX_LEN) ? ", context differs" : "");
	}
}

/* A loaded program: compile it, run it if that is safe, unload it. */
static void exercise(struct ebpf_prog *p, const uint8_t *ctx0, bool trusted)
{
	struct ebpf_err err;
	int rc;

	stats.loaded++;
	rc = ebpf_jit(p, &err);
	if (rc) {
		dump(p->insns, p->n);
		FCHECK(0, "verified program not compiled: %d %s", rc, err.msg);
	}
	if (trusted || safe_to_run(p))
		run_both(p, ctx0);
	else
		stats.filtered++;
	ebpf_unload(p);
}

/* A load error must be an error with a reason, pointing inside the input. */
static void check_reject(int rc, const struct ebpf_err *err, struct ebpf_prog *p, size_t n)
{
	stats.rejected++;
	FCHECK(p == NULL, "failed load returned a program");
	FCHECK(rc == -EINVAL || rc == -ENOMEM, "load returned %d", rc);
	FCHECK(rc != -EINVAL || err->msg[0], "rejection without a reason");
	FCHECK(err->insn < 0 || (size_t)err->insn < n, "error at insn %d of %zu: %s", err->insn, n,
	       err->msg);
}

static void try_insns(const struct ebpf_insn *insns, size_t n, const uint8_t *ctx0)
{
	struct ebpf_prog *p = NULL;
	struct ebpf_err err;
	int rc = ebpf_load(vm, insns, n, NULL, &p, &err);

	if (rc)
		check_reject(rc, &err, p, n);
	else
		exercise(p, ctx0, false);
}

static void try_elf(const uint8_t *data, size_t size, uint8_t selb, const uint8_t *ctx0)
{
	static const char *const sels[] = { NULL, ".text", "prog", "main", "f", "xdp", "" , "g" };
	struct ebpf_prog *p = NULL;
	struct ebpf_err err;
	/* elf.c reads the headers in place: give it malloc's alignment */
	void *buf = malloc(size ? size : 1);
	int rc;

	FCHECK(buf != NULL, "malloc");
	memcpy(buf, data, size);
	rc = ebpf_load_elf(vm, buf, size, sels[selb % 8], NULL, &p, &err);
	free(buf); /* the program must not keep pointers into the object */
	if (rc)
		check_reject(rc, &err, p, SIZE_MAX);
	else
		exercise(p, ctx0, false);
}

static void try_gen(const uint8_t *data, size_t size, bool mutate, const uint8_t *ctx0)
{
	static struct ebpf_insn prog[GEN_CAP], mut[GEN_CAP];
	uint64_t seed = 0;
	size_t at = 11;

	for (size_t i = 0; i < 8; i++)
		seed |= (uint64_t)(i + 1 < size ? data[i + 1] : 0) << (8 * i);
	seed |= 1; /* xorshift needs a non-zero state */
	uint8_t tb = size > 9 ? data[9] : 0;
	/* mostly short programs (the JIT's passes dominate the time), some long */
	size_t target = 20 + (tb < 240 ? tb : (size_t)(tb - 239) * 64);
	unsigned flags = size > 10 && (data[10] & 1) ? EBPF_GEN_NO_CALLS : 0;
	size_t n = ebpf_gen_prog(&seed, prog, GEN_CAP, target, flags);
	struct ebpf_prog *p = NULL;
	struct ebpf_err err;

	if (n == 0)
		return;
	if (ebpf_load(vm, prog, n, NULL, &p, &err)) {
		dump(prog, n);
		FCHECK(0, "generated program rejected: %s", err.msg);
	}
	stats.gen++;
	/* gen.c promises safety; the filter's opinion measures its precision */
	stats.gen_accepted += safe_to_run(p);
	exercise(p, ctx0, true);
	if (!mutate)
		return;
	memcpy(mut, prog, n * sizeof(*prog));
	for (; at + 4 <= size; at += 4) {
		struct ebpf_insn *in = &mut[(data[at] | (size_t)data[at + 1] << 8) % n];
		uint8_t v = data[at + 3];

		switch (data[at + 2] % 6) {
		case 0: in->code = v; break;
		case 1: in->dst = v & 15; break;
		case 2: in->src = v & 15; break;
		case 3: in->off = (int16_t)(int8_t)v; break;
		case 4: in->imm = (int32_t)(int8_t)v; break;
		default: in->imm ^= (int32_t)(1u << (v % 32)); break;
		}
	}
	try_insns(mut, n, ctx0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ebpf_insn insns[EBPF_MAX_INSNS / 64];
	_Alignas(16) uint8_t ctx0[CTX_LEN];
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the input */

	setup_once();
	if (size == 0)
		return 0;
	for (size_t i = 0; i < size; i++)
		h = (h ^ data[i]) * 0x100000001b3ull;
	for (size_t i = 0; i < CTX_LEN; i++) {
		h ^= h >> 29;
		h *= 0xbf58476d1ce4e5b9ull;
		ctx0[i] = (uint8_t)(h >> 56);
	}
	switch (data[0] & 3) {
	case 0: {
		size_t n = (size - 1) / 8;

		if (n > sizeof(insns) / sizeof(insns[0]))
			n = sizeof(insns) / sizeof(insns[0]);
		/* copied: the input has no alignment, instructions want 4 */
		memcpy(insns, data + 1, n * 8);
		try_insns(insns, n, ctx0);
		break;
	}
	case 1:
		try_elf(data + (size > 2 ? 2 : size), size > 2 ? size - 2 : 0, size > 1 ? data[1] : 0,
			ctx0);
		break;
	default:
		try_gen(data, size, (data[0] & 3) == 3, ctx0);
		break;
	}
	return 0;
}

#ifndef EP_FUZZ_LIBFUZZER
/* ---- the replay driver ------------------------------------------------------ */

static const char *current = "(generated)";

static void on_alarm(int sig)
{
	(void)sig;
	/* A hang is a finding: name the input, then die loudly. */
	static const char msg[] = "fuzz_ebpf: input timed out: ";

	(void)!write(2, msg, sizeof(msg) - 1);
	(void)!write(2, current, strlen(current));
	(void)!write(2, "\n", 1);
	abort();
}

static void run_one(const char *name, const uint8_t *buf, size_t n)
{
	current = name;
	alarm(20);
	LLVMFuzzerTestOneInput(buf, n);
	alarm(0);
}

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		if (n == cap) {
			uint8_t *nb = realloc(buf, cap = cap ? cap * 2 : 4096);

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
	run_one(path, buf, n);
	free(buf);
	return 0;
}

static int run_path(const char *path, unsigned *count)
{
	struct stat sb;
	DIR *d;
	struct dirent *e;
	int rc = 0;

	if (stat(path, &sb) != 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		(*count)++;
		return run_file(path);
	}
	if (!(d = opendir(path)))
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

/* ---- the seed corpus, written by --write-seeds ---------------------------
 * fuzz/corpus/ebpf/elf-regress-* are not written here: they are inputs the
 * fuzzer found (misaligned section headers, an unterminated section name),
 * kept so that sanitizer builds replay them.
 */

struct seed {
	const char *name;
	const struct ebpf_insn *insns;
	size_t n;
};

#define SEED(name, ...) { name, (const struct ebpf_insn[]){ __VA_ARGS__ }, \
	sizeof((const struct ebpf_insn[]){ __VA_ARGS__ }) / sizeof(struct ebpf_insn) }

static const struct seed seeds[] = {
	SEED("raw-ret", MOV64_IMM(0, 42), EXIT()),
	SEED("raw-alu", LDDW(0, 0x0123456789abcdefull), MOV64_IMM(3, -7),
	     ALU64_REG(EBPF_MUL, 0, 3), ALU32_IMM(EBPF_ADD, 0, 5), SDIV64_IMM(0, -3),
	     ALU64_REG(EBPF_MOD, 0, 2), ALU64_IMM(EBPF_ARSH, 0, 3), BE(0, 32), BSWAP(0, 64),
	     MOVSX64(4, 0, 8), ALU64_REG(EBPF_LSH, 0, 4), ALU64_REG(EBPF_XOR, 0, 4), EXIT()),
	SEED("raw-stack", ST(EBPF_DW, 10, -8, 7), MOV64_IMM(3, 0x55), STX(EBPF_W, 10, 3, -16),
	     ST(EBPF_W, 10, -12, -1), ATOMIC(EBPF_DW, EBPF_ADD | EBPF_FETCH, 10, 3, -8),
	     ATOMIC(EBPF_W, EBPF_XCHG, 10, 3, -16), MOV64_IMM(0, 7),
	     ATOMIC(EBPF_DW, EBPF_CMPXCHG, 10, 3, -8), LDX(EBPF_DW, 4, 10, -16),
	     LDXSX(EBPF_B, 5, 10, -12), ALU64_REG(EBPF_ADD, 0, 4), ALU64_REG(EBPF_ADD, 0, 5),
	     ALU64_REG(EBPF_ADD, 0, 3), EXIT()),
	SEED("raw-ctx", MOV64_REG(6, 1), LDX(EBPF_DW, 0, 1, 0), LDX(EBPF_B, 3, 6, 63),
	     STX(EBPF_H, 6, 3, 10), ST(EBPF_DW, 1, 56, -2), ATOMIC(EBPF_W, EBPF_OR, 6, 3, 4),
	     ALU64_REG(EBPF_ADD, 0, 3), ALU64_REG(EBPF_ADD, 0, 2), EXIT()),
	SEED("raw-loop", MOV64_IMM(0, 1), MOV64_IMM(9, 10), ALU64_IMM(EBPF_MUL, 0, 3),
	     ALU64_IMM(EBPF_SUB, 9, 1), JMP_IMM(EBPF_JNE, 9, 0, -3), JMP32_IMM(EBPF_JSGT, 0, 5, 1),
	     MOV64_IMM(0, 0), EXIT()),
	SEED("raw-forever", JA(-1), EXIT()),
	SEED("raw-calls", MOV64_IMM(1, 3), MOV64_IMM(2, 4), CALL_HELPER(2), MOV64_REG(6, 0),
	     MOV64_IMM(1, 1), MOV64_IMM(2, 2), MOV64_IMM(3, 3), MOV64_IMM(4, 4), MOV64_IMM(5, 5),
	     MOV64_IMM(7, 5), CALLX(7), ALU64_REG(EBPF_ADD, 6, 0), MOV64_REG(1, 6),
	     CALL_LOCAL(2), ALU64_REG(EBPF_ADD, 0, 6), EXIT(),
	     /* the local function: its own frame, r6 preserved */
	     ST(EBPF_DW, 10, -8, 9), LDX(EBPF_DW, 0, 10, -8), ALU64_REG(EBPF_ADD, 0, 1),
	     MOV64_IMM(6, 0), EXIT()),
	SEED("raw-callx-empty", MOV64_IMM(1, 9), MOV64_IMM(2, 0), MOV64_IMM(3, 0), MOV64_IMM(4, 0),
	     MOV64_IMM(5, 0), MOV64_IMM(0, 6), CALLX(0), EXIT()),
	/* verified, but the load is through a scalar: compiled, never run */
	SEED("raw-wild", LDX(EBPF_DW, 0, 2, 0), EXIT()),
	SEED("raw-undef-after-call", MOV64_IMM(1, 1), CALL_HELPER(5), MOV64_REG(0, 1), EXIT()),
	SEED("raw-bad-opcode", INSN(0xff, 0, 0, 0, 0), EXIT()),
	SEED("raw-bad-jump", JA(5), EXIT()),
	SEED("raw-stack-oob", LDX(EBPF_DW, 0, 10, -516), EXIT()),
};

static int write_file(const char *dir, const char *name, const void *a, size_t na,
		      const void *b, size_t nb)
{
	char p[4096];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (!(f = fopen(p, "wb")))
		return -1;
	fwrite(a, 1, na, f);
	fwrite(b, 1, nb, f);
	return fclose(f);
}

/*
 * A minimal relocatable BPF object: null section, .text (code), .strtab
 * (names), .symtab (section symbol + function "f" at instruction entry),
 * .shstrtab.  entry > 0 makes the loader build its call+exit stub.
 */
static size_t make_elf(uint8_t *out, const struct ebpf_insn *code, size_t n, size_t entry)
{
	static const char shstr[] = "\0.text\0.strtab\0.symtab\0.shstrtab";
	static const char str[] = "\0f";
	Elf64_Ehdr eh = { 0 };
	Elf64_Shdr sh[5] = { { 0 } };
	Elf64_Sym sym[2] = { { 0 } };
	size_t at = sizeof(eh);

	memcpy(out + at, code, n * 8);
	sh[1] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_PROGBITS,
			      .sh_flags = SHF_ALLOC | SHF_EXECINSTR, .sh_offset = at,
			      .sh_size = n * 8, .sh_addralign = 8 };
	at += n * 8;
	memcpy(out + at, str, sizeof(str));
	sh[2] = (Elf64_Shdr){ .sh_name = 7, .sh_type = SHT_STRTAB, .sh_offset = at,
			      .sh_size = sizeof(str), .sh_addralign = 1 };
	at = (at + sizeof(str) + 7) & ~(size_t)7;
	sym[1] = (Elf64_Sym){ .st_name = 1, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
			      .st_shndx = 1, .st_value = entry * 8 };
	memcpy(out + at, sym, sizeof(sym));
	sh[3] = (Elf64_Shdr){ .sh_name = 15, .sh_type = SHT_SYMTAB, .sh_link = 2, .sh_info = 1,
			      .sh_offset = at, .sh_size = sizeof(sym), .sh_addralign = 8,
			      .sh_entsize = sizeof(Elf64_Sym) };
	at += sizeof(sym);
	memcpy(out + at, shstr, sizeof(shstr));
	sh[4] = (Elf64_Shdr){ .sh_name = 23, .sh_type = SHT_STRTAB, .sh_offset = at,
			      .sh_size = sizeof(shstr), .sh_addralign = 1 };
	at = (at + sizeof(shstr) + 7) & ~(size_t)7;
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_REL;
	eh.e_machine = 247; /* EM_BPF */
	eh.e_version = EV_CURRENT;
	eh.e_ehsize = sizeof(eh);
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = 5;
	eh.e_shstrndx = 4;
	eh.e_shoff = at;
	memcpy(out, &eh, sizeof(eh));
	memcpy(out + at, sh, sizeof(sh));
	return at + sizeof(sh);
}

static int write_seeds(const char *dir)
{
	static uint8_t elf[4096];
	static const struct ebpf_insn two_fn[] = {
		MOV64_IMM(0, 1), EXIT(),
		MOV64_REG(0, 2), ALU64_IMM(EBPF_ADD, 0, 100), EXIT(),
	};
	int rc = 0;

	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
		rc |= write_file(dir, seeds[i].name, "\0", 1, seeds[i].insns, seeds[i].n * 8);
	/* mode 1, selector 0 (.text) and 4 ("f", not first: the stub) */
	size_t n = make_elf(elf, two_fn, 5, 0);

	rc |= write_file(dir, "elf-text", "\1\0", 2, elf, n);
	n = make_elf(elf, two_fn, 5, 2);
	rc |= write_file(dir, "elf-func", "\1\4", 2, elf, n);
	/* generator: seed, size, flags; the last one with mutations */
	rc |= write_file(dir, "gen-small", "\2\1\2\3\4\5\6\7\10\10\0", 11, "", 0);
	rc |= write_file(dir, "gen-large", "\2\x5e\xed\x20\x24\0\0\0\1\xff\0", 11, "", 0);
	rc |= write_file(dir, "gen-nocalls", "\2\x42\0\0\0\0\0\0\0\x40\1", 11, "", 0);
	rc |= write_file(dir, "gen-mutate", "\3\x11\x22\x33\x44\0\0\0\0\x20\0",
			 11, "\5\0\3\x7f\x10\0\0\xb7\x03\0\4\x40", 12);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0, seeds_run;
	int rc = 0;

#if !defined(__x86_64__)
	(void)argc, (void)argv, (void)count, (void)seeds_run, (void)rc;
	printf("SKIP: the eBPF example's JIT emits x86-64 code\n");
	return 77;
#endif
	signal(SIGALRM, on_alarm);
	if (argc == 3 && !strcmp(argv[1], "--write-seeds"))
		return write_seeds(argv[2]) ? 1 : 0;
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			if (run_path(argv[i], &count))
				rc = 1;
	} else {
		/* no arguments: the seed corpus, then fixed pseudo-random inputs */
		const char *top = getenv("top_srcdir");
		char dir[4096];
		struct stat sb;

		snprintf(dir, sizeof(dir), "%s/fuzz/corpus/ebpf", top && *top ? top : ".");
		if (stat(dir, &sb) == 0 && run_path(dir, &count))
			rc = 1;
		seeds_run = count;
		uint64_t x = 0x2545f4914f6cdd1dull;
		static uint8_t buf[2048];
		const char *q = getenv("EP_TEST_QUICK");
		int n = (q && *q && strcmp(q, "0")) ? 100 : 1000;

		for (int i = 0; i < n; i++) {
			size_t len = 1 + (size_t)(x % sizeof(buf));

			for (size_t j = 0; j < len; j++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				buf[j] = (uint8_t)(x >> 24);
			}
			buf[0] = (uint8_t)i; /* every mode in turn */
			run_one("(generated)", buf, len);
			count++;
		}
		printf("fuzz_ebpf: %u corpus inputs, %u generated\n", seeds_run, count - seeds_run);
	}
	printf("fuzz_ebpf: %lu loaded, %lu rejected, %lu ran on both engines (equal), "
	       "%lu not run (filter), %lu stopped by the step limit; "
	       "filter accepts %lu of %lu generated programs\n",
	       stats.loaded, stats.rejected, stats.ran, stats.filtered, stats.timeouts,
	       stats.gen_accepted, stats.gen);
	ebpf_vm_destroy(vm);
	ep_pool_destroy(pool);
	return rc;
}
#endif
