/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gen.c - random valid eBPF programs; see gen.h for the guarantees. */
#include <stdbool.h>
#include <string.h>

#include "ebpf_asm.h"
#include "gen.h"

struct g {
	uint64_t *rs;
	struct ebpf_insn *out;
	size_t n, cap;
	unsigned flags;
	size_t calls[64]; /* local call sites to patch */
	size_t ncalls;
};

uint64_t ebpf_gen_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

static unsigned rnd(struct g *g, unsigned n)
{
	return (unsigned)(ebpf_gen_rand(g->rs) % n);
}

static void put(struct g *g, struct ebpf_insn in)
{
	if (g->n < g->cap)
		g->out[g->n] = in;
	g->n++;
}

#define PUT(...) put(g, (struct ebpf_insn)__VA_ARGS__)

static void put_lddw(struct g *g, uint8_t r, uint64_t v)
{
	struct ebpf_insn two[] = { LDDW(r, v) };

	put(g, two[0]);
	put(g, two[1]);
}

/* Value registers: never r1 before it is overwritten, never r6 (ctx), r9 (loops), r10. */
static const uint8_t vregs[] = { 0, 2, 3, 4, 5, 7, 8 };
static const uint8_t fregs[] = { 0, 1, 2, 3, 4, 5 }; /* inside local functions */

static uint8_t vreg(struct g *g, bool fn)
{
	return fn ? fregs[rnd(g, sizeof(fregs))] : vregs[rnd(g, sizeof(vregs))];
}

static int32_t imm(struct g *g)
{
	switch (rnd(g, 8)) {
	case 0: return 0;
	case 1: return -1;
	case 2: return (int32_t)rnd(g, 64);
	case 3: return INT32_MIN;
	case 4: return (int32_t)rnd(g, 256) - 128;
	default: return (int32_t)(uint32_t)ebpf_gen_rand(g->rs);
	}
}

static void alu(struct g *g, bool fn)
{
	static const uint8_t ops[] = { EBPF_ADD, EBPF_SUB, EBPF_MUL, EBPF_DIV, EBPF_OR, EBPF_AND,
				       EBPF_LSH, EBPF_RSH, EBPF_NEG, EBPF_MOD, EBPF_XOR, EBPF_MOV,
				       EBPF_ARSH, EBPF_END };
	uint8_t op = ops[rnd(g, sizeof(ops))];
	uint8_t cls = rnd(g, 2) ? EBPF_CLS_ALU64 : EBPF_CLS_ALU;
	uint8_t d = vreg(g, fn), s = vreg(g, fn);
	bool x = rnd(g, 2);
	int16_t off = 0;
	int32_t k = x ? 0 : imm(g);

	switch (op) {
	case EBPF_NEG:
		x = false, k = 0;
		break;
	case EBPF_END: {
		static const int w[] = { 16, 32, 64 };

		k = w[rnd(g, 3)];
		s = 0;
		x = cls == EBPF_CLS_ALU && rnd(g, 2); /* to_be on ALU, bswap on ALU64 */
		PUT(INSN(cls | op | (x ? EBPF_X : 0), d, 0, 0, k));
		return;
	}
	case EBPF_DIV:
	case EBPF_MOD:
		off = (int16_t)rnd(g, 2);
		break;
	case EBPF_MOV:
		if (x && rnd(g, 3) == 0) {
			static const int16_t sx[] = { 8, 16, 32 };

			off = sx[rnd(g, cls == EBPF_CLS_ALU64 ? 3 : 2)];
		}
		break;
	case EBPF_LSH: case EBPF_RSH: case EBPF_ARSH:
		if (!x)
			k = (int32_t)rnd(g, cls == EBPF_CLS_ALU64 ? 64 : 32);
		break;
	}
	PUT(INSN(cls | op | (x ? EBPF_X : 0), d, x ? s : 0, off, k));
}

static const uint8_t sizes[] = { EBPF_B, EBPF_H, EBPF_W, EBPF_DW };
static const int widths[] = { 1, 2, 4, 8 };

static int16_t aligned(struct g *g, int area, int w)
{
	return (int16_t)(rnd(g, (unsigned)(area / w)) * (unsigned)w);
}

static void mem(struct g *g, bool fn)
{
	unsigned z = rnd(g, 4);
	uint8_t sz = sizes[z];
	int w = widths[z];
	bool stack = fn || rnd(g, 2);
	uint8_t base = stack ? 10 : 6;
	int16_t off = stack ? (int16_t)(aligned(g, EBPF_GEN_STACK, w) - EBPF_GEN_STACK)
			    : aligned(g, EBPF_GEN_CTX, w);

	switch (rnd(g, 5)) {
	case 0:
		PUT(LDX(sz, vreg(g, fn), base, off));
		break;
	case 1:
		if (sz == EBPF_DW)
			sz = EBPF_W;
		PUT(LDXSX(sz, vreg(g, fn), base, off));
		break;
	case 2:
		PUT(ST(sz, base, off, imm(g)));
		break;
	case 3:
		PUT(STX(sz, base, vreg(g, fn), off));
		break;
	default: {
		static const int32_t aops[] = {
			EBPF_ADD, EBPF_OR, EBPF_AND, EBPF_XOR, EBPF_ADD | EBPF_FETCH,
			EBPF_OR | EBPF_FETCH, EBPF_AND | EBPF_FETCH, EBPF_XOR | EBPF_FETCH,
			EBPF_XCHG, EBPF_CMPXCHG,
		};
		uint8_t asz = rnd(g, 2) ? EBPF_DW : EBPF_W;
		int aw = asz == EBPF_DW ? 8 : 4;

		off = stack ? (int16_t)(aligned(g, EBPF_GEN_STACK, aw) - EBPF_GEN_STACK)
			    : aligned(g, EBPF_GEN_CTX, aw);
		PUT(ATOMIC(asz, aops[rnd(g, sizeof(aops) / sizeof(aops[0]))], base, vreg(g, fn), off));
		break;
	}
	}
}

static void straight(struct g *g, bool fn)
{
	unsigned k = rnd(g, 10);

	if (k < 6)
		alu(g, fn);
	else if (k < 9)
		mem(g, fn);
	else if (rnd(g, 2))
		put_lddw(g, vreg(g, fn), ebpf_gen_rand(g->rs));
	else
		PUT(MOV64_IMM(vreg(g, fn), imm(g)));
}

static void cond_jump(struct g *g, bool fn, int16_t off)
{
	static const uint8_t ops[] = { EBPF_JEQ, EBPF_JGT, EBPF_JGE, EBPF_JSET, EBPF_JNE, EBPF_JSGT,
				       EBPF_JSGE, EBPF_JLT, EBPF_JLE, EBPF_JSLT, EBPF_JSLE };
	uint8_t cls = rnd(g, 2) ? EBPF_CLS_JMP : EBPF_CLS_JMP32;
	uint8_t op = ops[rnd(g, sizeof(ops))];

	if (rnd(g, 2))
		PUT(INSN(cls | op | EBPF_X, vreg(g, fn), vreg(g, fn), off, 0));
	else
		PUT(INSN(cls | op, vreg(g, fn), 0, off, imm(g)));
}

static void helper_call(struct g *g)
{
	static const int ids[] = { 1, 2, 3 };

	for (uint8_t r = 1; r <= 5; r++)
		if (rnd(g, 2))
			PUT(MOV64_REG(r, vregs[rnd(g, sizeof(vregs))]));
	PUT(CALL_HELPER(ids[rnd(g, 3)]));
	/* r1..r5 are undefined after a helper call: give them fresh values. */
	for (uint8_t r = 1; r <= 5; r++)
		PUT(MOV64_IMM(r, imm(g)));
}

/* Body of a function; depth limits nesting of skip blocks. */
static void block(struct g *g, size_t budget, bool fn, int depth)
{
	size_t end = g->n + budget;

	while (g->n < end && g->n + 40 < g->cap) {
		unsigned k = rnd(g, 20);

		if (k < 12) {
			straight(g, fn);
		} else if (k < 15 && depth < 3) { /* forward skip over a sub-block */
			size_t at = g->n;

			PUT(JA(0));
			block(g, 1 + rnd(g, 6), fn, depth + 1);
			int16_t off = (int16_t)(g->n - at - 1);
			size_t save = g->n;

			g->n = at;
			if (rnd(g, 8) == 0)
				PUT(JA(off));
			else
				cond_jump(g, fn, off);
			g->n = save;
		} else if (k < 17 && !fn && depth < 2) { /* counted loop on r9 */
			PUT(MOV64_IMM(9, 1 + (int32_t)rnd(g, 8)));
			size_t top = g->n;
			size_t len = 1 + rnd(g, 6);

			for (size_t i = 0; i < len; i++)
				straight(g, false);
			PUT(ALU64_IMM(EBPF_SUB, 9, 1));
			PUT(JMP_IMM(EBPF_JNE, 9, 0, (int16_t)(top - g->n - 1)));
		} else if (k < 19 && !fn && !(g->flags & EBPF_GEN_NO_CALLS)) {
			helper_call(g);
		} else if (!fn && !(g->flags & EBPF_GEN_NO_CALLS) && g->ncalls < 64) {
			for (uint8_t r = 1; r <= 5; r++)
				PUT(MOV64_REG(r, vregs[rnd(g, sizeof(vregs))]));
			g->calls[g->ncalls++] = g->n;
			PUT(CALL_LOCAL(0));
		} else {
			straight(g, fn);
		}
	}
}

size_t ebpf_gen_prog(uint64_t *state, struct ebpf_insn *out, size_t cap,
		     size_t target, unsigned flags)
{
	struct g g0 = { .rs = state, .out = out, .cap = cap, .flags = flags }, *g = &g0;

	if (cap < 200)
		return 0;
	/* Entry: keep ctx in r6, give every value register and slot a value. */
	PUT(MOV64_REG(6, 1));
	for (size_t i = 0; i < sizeof(vregs); i++)
		put_lddw(g, vregs[i], ebpf_gen_rand(g->rs));
	PUT(MOV64_IMM(1, imm(g)));
	PUT(MOV64_IMM(9, 0));
	for (int off = -EBPF_GEN_STACK; off < 0; off += 8)
		PUT(STX(EBPF_DW, 10, vregs[rnd(g, sizeof(vregs))], (int16_t)off));
	block(g, target > 60 ? target - 60 : 10, false, 0);
	/* Fold registers and stack into r0 so that any difference shows. */
	for (size_t i = 1; i < sizeof(vregs); i++) {
		PUT(ALU64_IMM(EBPF_MUL, 0, 0x3b9aca07));
		PUT(ALU64_REG(EBPF_XOR, 0, vregs[i]));
	}
	PUT(ALU64_REG(EBPF_ADD, 0, 9));
	for (int off = -EBPF_GEN_STACK; off < 0; off += 8) {
		PUT(LDX(EBPF_DW, 1, 10, (int16_t)off));
		PUT(ALU64_IMM(EBPF_MUL, 0, 31));
		PUT(ALU64_REG(EBPF_ADD, 0, 1));
	}
	PUT(EXIT());
	if (g->ncalls) {
		/* One local function, called from every site. */
		size_t fn = g->n;

		/* Its frame starts uninitialised: write every slot first. */
		for (int off = -EBPF_GEN_STACK; off < 0; off += 8)
			PUT(STX(EBPF_DW, 10, fregs[rnd(g, sizeof(fregs))], (int16_t)off));
		block(g, 4 + rnd(g, 20), true, 0);
		for (int off = -EBPF_GEN_STACK; off < 0; off += 8) {
			PUT(LDX(EBPF_DW, 1, 10, (int16_t)off));
			PUT(ALU64_REG(EBPF_ADD, 0, 1));
		}
		PUT(EXIT());
		for (size_t i = 0; i < g->ncalls; i++)
			out[g->calls[i]].imm = (int32_t)(fn - g->calls[i] - 1);
	}
	return g->n <= cap ? g->n : 0;
}
