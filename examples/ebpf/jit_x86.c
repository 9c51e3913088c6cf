/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * jit_x86.c - eBPF to x86-64 compiler on top of libexecpack.
 *
 * Register map (SysV, so helper calls need no argument shuffling):
 *   r0=rax r1=rdi r2=rsi r3=rdx r4=rcx r5=r8 r6=rbx r7=r13 r8=r14 r9=r15
 *   r10=rbp (frame pointer; the 512-byte frame is [rbp-512, rbp))
 * r9, r10 and r11 are JIT scratch (caller-saved, never hold eBPF state).
 *
 * Each function (main program and every local-call target) gets
 *   push rbp; mov rbp,rsp; sub rsp,512; push rbx,r13,r14,r15
 * so unwinders can walk frame pointers and rsp is 16-byte aligned at every
 * call.  exit is an inline epilogue.
 *
 * Layout is found by iterating emission passes until every instruction
 * offset is stable (jumps shrink to rel8 as distances become known).  The
 * image is then allocated, and passes repeat with the executable address
 * known, so helper calls within +-2 GiB become `call rel32`; the result
 * can only shrink, and the final pass writes into image.rw.  Bytes past
 * the end stay the library's INT3 fill.  NOPs around each call keep the
 * fields that live patching rewrites inside aligned 8-byte words.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf_int.h"
#include "execpack.h"

enum { RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15 };

static const uint8_t regmap[11] = { RAX, RDI, RSI, RDX, RCX, R8, RBX, R13, R14, R15, RBP };

#define MAX_INSN_BYTES 96  /* worst single instruction sequence, with margin */
#define PROLOGUE_MAX   64
#define MAX_PASSES     32

struct jit {
	const struct ebpf_prog *prog;
	uint8_t *buf;
	size_t cap, pos;
	bool overflow;
	/* Layout of the previous pass: start (with prologue), body, end. */
	size_t *start, *body, *end;
	size_t *nstart, *nbody, *nend;
	uintptr_t exec;  /* 0 while unknown: helper calls use the far form */
	bool record;     /* final pass: record call sites */
	struct ebpf_jit_site *sites;
	size_t nsites;
};

static void emit1(struct jit *j, uint8_t b)
{
	if (j->pos < j->cap)
		j->buf[j->pos] = b;
	else
		j->overflow = true;
	j->pos++;
}

static void emit4(struct jit *j, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		emit1(j, (uint8_t)(v >> (8 * i)));
}

static void emit8(struct jit *j, uint64_t v)
{
	emit4(j, (uint32_t)v);
	emit4(j, (uint32_t)(v >> 32));
}

static bool is_imm8(int64_t v)
{
	return v >= -128 && v <= 127;
}

/* REX prefix; force=true for byte registers sil/dil/bpl/spl. */
static void rex(struct jit *j, bool w, int reg, int index, int rm, bool force)
{
	uint8_t r = 0x40 | (w ? 8 : 0) | ((reg & 8) ? 4 : 0) | ((index & 8) ? 2 : 0) |
		    ((rm & 8) ? 1 : 0);

	if (r != 0x40 || force)
		emit1(j, r);
}

static void ops(struct jit *j, const uint8_t *op, int n)
{
	for (int i = 0; i < n; i++)
		emit1(j, op[i]);
}

/* op reg, rm (register-direct). */
static void rr(struct jit *j, bool w, const uint8_t *op, int n, int reg, int rm,
	       bool byteregs)
{
	rex(j, w, reg, 0, rm, byteregs && ((reg >= 4 && reg < 8) || (rm >= 4 && rm < 8)));
	ops(j, op, n);
	emit1(j, (uint8_t)(0xc0 | (reg & 7) << 3 | (rm & 7)));
}

/* op reg, [base + disp]. */
static void rm_mem(struct jit *j, bool w, const uint8_t *op, int n, int reg,
		   int base, int32_t disp, bool bytereg)
{
	rex(j, w, reg, 0, base, bytereg && reg >= 4 && reg < 8);
	ops(j, op, n);
	int mod = (disp == 0 && (base & 7) != RBP) ? 0 : is_imm8(disp) ? 1 : 2;

	emit1(j, (uint8_t)(mod << 6 | (reg & 7) << 3 | (base & 7)));
	if ((base & 7) == RSP)
		emit1(j, 0x24);
	if (mod == 1)
		emit1(j, (uint8_t)disp);
	else if (mod == 2)
		emit4(j, (uint32_t)disp);
}

#define OP1(a) (const uint8_t[]){ a }, 1
#define OP2(a, b) (const uint8_t[]){ a, b }, 2

static void mov_rr(struct jit *j, bool w, int dst, int src)
{
	rr(j, w, OP1(0x89), src, dst, false);
}

static void mov_imm(struct jit *j, bool w, int dst, int32_t imm)
{
	if (imm == 0) {
		rr(j, false, OP1(0x31), dst, dst, false); /* xor r32, r32 */
	} else if (!w || imm > 0) {
		rex(j, false, 0, 0, dst, false);
		emit1(j, (uint8_t)(0xb8 + (dst & 7)));
		emit4(j, (uint32_t)imm);
	} else {
		rex(j, true, 0, 0, dst, false);
		emit1(j, 0xc7);
		emit1(j, (uint8_t)(0xc0 | (dst & 7)));
		emit4(j, (uint32_t)imm);
	}
}

static void mov_imm64(struct jit *j, int dst, uint64_t v)
{
	if (v <= 0xffffffffu) { /* mov r32 zero-extends */
		mov_imm(j, false, dst, (int32_t)(uint32_t)v);
	} else if ((int64_t)v == (int32_t)v) {
		mov_imm(j, true, dst, (int32_t)v);
	} else {
		rex(j, true, 0, 0, dst, false);
		emit1(j, (uint8_t)(0xb8 + (dst & 7)));
		emit8(j, v);
	}
}

/* Group-1 ALU with immediate: ext = /0 add, /1 or, /4 and, /5 sub, /6 xor, /7 cmp. */
static void alu_imm(struct jit *j, bool w, int ext, int dst, int32_t imm)
{
	rex(j, w, 0, 0, dst, false);
	if (is_imm8(imm)) {
		emit1(j, 0x83);
		emit1(j, (uint8_t)(0xc0 | ext << 3 | (dst & 7)));
		emit1(j, (uint8_t)imm);
	} else {
		emit1(j, 0x81);
		emit1(j, (uint8_t)(0xc0 | ext << 3 | (dst & 7)));
		emit4(j, (uint32_t)imm);
	}
}

static void shift_imm(struct jit *j, bool w, int ext, int dst, int amount)
{
	rex(j, w, 0, 0, dst, false);
	if (amount == 1) {
		emit1(j, 0xd1);
		emit1(j, (uint8_t)(0xc0 | ext << 3 | (dst & 7)));
		return;
	}
	emit1(j, 0xc1);
	emit1(j, (uint8_t)(0xc0 | ext << 3 | (dst & 7)));
	emit1(j, (uint8_t)amount);
}

static void shift_cl(struct jit *j, bool w, int ext, int dst)
{
	rex(j, w, 0, 0, dst, false);
	emit1(j, 0xd3);
	emit1(j, (uint8_t)(0xc0 | ext << 3 | (dst & 7)));
}

/* Forward short jump whose rel8 is patched by jfix(). */
static size_t jshort(struct jit *j, uint8_t opc)
{
	emit1(j, opc);
	emit1(j, 0);
	return j->pos;
}

static void jfix(struct jit *j, size_t at)
{
	if (at <= j->cap)
		j->buf[at - 1] = (uint8_t)(j->pos - at);
}

static void prologue(struct jit *j, bool main)
{
	emit1(j, 0x55);                           /* push rbp */
	emit1(j, 0x48); emit1(j, 0x89); emit1(j, 0xe5); /* mov rbp, rsp */
	emit1(j, 0x48); emit1(j, 0x81); emit1(j, 0xec); emit4(j, EBPF_STACK_SIZE);
	emit1(j, 0x53);                           /* push rbx */
	emit1(j, 0x41); emit1(j, 0x55);           /* push r13 */
	emit1(j, 0x41); emit1(j, 0x56);           /* push r14 */
	emit1(j, 0x41); emit1(j, 0x57);           /* push r15 */
	if (main) {
		/* Deterministic start: registers the program did not get read 0. */
		static const int z[] = { RAX, RDX, RCX, R8, RBX, R13, R14, R15 };

		for (size_t i = 0; i < sizeof(z) / sizeof(z[0]); i++)
			mov_imm(j, false, z[i], 0);
	}
}

static void epilogue(struct jit *j)
{
	emit1(j, 0x41); emit1(j, 0x5f); /* pop r15 */
	emit1(j, 0x41); emit1(j, 0x5e); /* pop r14 */
	emit1(j, 0x41); emit1(j, 0x5d); /* pop r13 */
	emit1(j, 0x5b);                 /* pop rbx */
	emit1(j, 0xc9);                 /* leave */
	emit1(j, 0xc3);                 /* ret */
}

static void divmod(struct jit *j, const struct ebpf_insn *in, bool w)
{
	bool x = in->code & EBPF_X, mod = (in->code & 0xf0) == EBPF_MOD;
	bool sign = in->off == 1;
	int dst = regmap[in->dst];
	size_t jz = 0, jne = 0, jdone1 = 0, jdone2 = 0;

	if (!x && in->imm == 0) { /* constant zero divisor: RFC result, no code path */
		if (!mod)
			mov_imm(j, false, dst, 0);
		else if (!w)
			mov_rr(j, false, dst, dst);
		return;
	}
	if (x)
		mov_rr(j, w, R11, regmap[in->src]);
	else
		mov_imm(j, w, R11, in->imm);
	if (dst != RAX)
		mov_rr(j, true, R10, RAX);
	if (dst != RDX)
		mov_rr(j, true, R9, RDX);
	if (dst != RAX)
		mov_rr(j, w, RAX, dst);
	else if (!w)
		mov_rr(j, false, RAX, RAX);
	if (x) {
		rr(j, w, OP1(0x85), R11, R11, false); /* test r11, r11 */
		jz = jshort(j, 0x74);
	}
	if (sign && (x || in->imm == -1)) {
		alu_imm(j, w, 7, R11, -1); /* cmp r11, -1 */
		jne = jshort(j, 0x75);
		if (mod)
			mov_imm(j, false, RDX, 0);
		else
			rr(j, w, OP1(0xf7), 3, RAX, false); /* neg */
		jdone1 = jshort(j, 0xeb);
		jfix(j, jne);
	}
	if (sign) {
		if (w)
			emit1(j, 0x48);
		emit1(j, 0x99); /* cqo / cdq */
		rr(j, w, OP1(0xf7), 7, R11, false); /* idiv r11 */
	} else {
		mov_imm(j, false, RDX, 0);
		rr(j, w, OP1(0xf7), 6, R11, false); /* div r11 */
	}
	if (x) {
		jdone2 = jshort(j, 0xeb);
		jfix(j, jz);
		if (mod)
			mov_rr(j, w, RDX, RAX); /* dst unchanged (zero-extended if 32-bit) */
		else
			mov_imm(j, false, RAX, 0);
		jfix(j, jdone2);
	}
	if (jdone1)
		jfix(j, jdone1);
	int res = mod ? RDX : RAX;

	if (dst == RAX) {
		if (res != RAX)
			mov_rr(j, true, RAX, RDX);
		mov_rr(j, true, RDX, R9);
	} else if (dst == RDX) {
		if (res != RDX)
			mov_rr(j, true, RDX, RAX);
		mov_rr(j, true, RAX, R10);
	} else {
		mov_rr(j, true, dst, res);
		mov_rr(j, true, RAX, R10);
		mov_rr(j, true, RDX, R9);
	}
}

static void shift(struct jit *j, const struct ebpf_insn *in, bool w, int ext)
{
	int dst = regmap[in->dst];

	if (!(in->code & EBPF_X)) {
		int amount = in->imm & (w ? 63 : 31);

		if (amount)
			shift_imm(j, w, ext, dst, amount);
		else if (!w)
			mov_rr(j, false, dst, dst); /* 32-bit op still zero-extends */
		return;
	}
	int src = regmap[in->src];

	if (src == RCX) {
		shift_cl(j, w, ext, dst);
		return;
	}
	mov_rr(j, true, R11, RCX);
	mov_rr(j, true, RCX, src);
	if (dst == RCX) {
		shift_cl(j, w, ext, R11);
		mov_rr(j, true, RCX, R11);
	} else {
		shift_cl(j, w, ext, dst);
		mov_rr(j, true, RCX, R11);
	}
}

static int alu(struct jit *j, const struct ebpf_insn *in, bool w)
{
	bool x = in->code & EBPF_X;
	int dst = regmap[in->dst], src = regmap[in->src];
	static const struct { uint8_t op, rr, ext; } g1[] = {
		{ EBPF_ADD, 0x01, 0 }, { EBPF_OR, 0x09, 1 }, { EBPF_AND, 0x21, 4 },
		{ EBPF_SUB, 0x29, 5 }, { EBPF_XOR, 0x31, 6 },
	};

	for (size_t k = 0; k < sizeof(g1) / sizeof(g1[0]); k++) {
		if ((in->code & 0xf0) != g1[k].op)
			continue;
		if (x)
			rr(j, w, &g1[k].rr, 1, src, dst, false);
		else
			alu_imm(j, w, g1[k].ext, dst, in->imm);
		return 0;
	}
	switch (in->code & 0xf0) {
	case EBPF_MOV:
		if (!x) {
			mov_imm(j, w, dst, in->imm);
		} else if (in->off == 8) {
			rr(j, w, OP2(0x0f, 0xbe), dst, src, true);
		} else if (in->off == 16) {
			rr(j, w, OP2(0x0f, 0xbf), dst, src, false);
		} else if (in->off == 32) {
			rr(j, true, OP1(0x63), dst, src, false); /* movsxd */
		} else if (dst != src || !w) {
			mov_rr(j, w, dst, src);
		}
		return 0;
	case EBPF_MUL:
		if (x)
			rr(j, w, OP2(0x0f, 0xaf), dst, src, false);
		else if (is_imm8(in->imm))
			rr(j, w, OP1(0x6b), dst, dst, false), emit1(j, (uint8_t)in->imm);
		else
			rr(j, w, OP1(0x69), dst, dst, false), emit4(j, (uint32_t)in->imm);
		return 0;
	case EBPF_DIV:
	case EBPF_MOD:
		divmod(j, in, w);
		return 0;
	case EBPF_NEG:
		rr(j, w, OP1(0xf7), 3, dst, false);
		return 0;
	case EBPF_LSH: shift(j, in, w, 4); return 0;
	case EBPF_RSH: shift(j, in, w, 5); return 0;
	case EBPF_ARSH: shift(j, in, w, 7); return 0;
	case EBPF_END:
		if (!w && !(in->code & EBPF_TO_BE)) { /* to little endian: truncate */
			if (in->imm == 16)
				rr(j, false, OP2(0x0f, 0xb7), dst, dst, false);
			else if (in->imm == 32)
				mov_rr(j, false, dst, dst);
			return 0;
		}
		if (in->imm == 16) {
			emit1(j, 0x66); /* rol r16, 8 then movzx */
			rex(j, false, 0, 0, dst, false);
			emit1(j, 0xc1);
			emit1(j, (uint8_t)(0xc0 | (dst & 7)));
			emit1(j, 8);
			rr(j, false, OP2(0x0f, 0xb7), dst, dst, false);
		} else {
			rex(j, in->imm == 64, 0, 0, dst, false);
			emit1(j, 0x0f);
			emit1(j, (uint8_t)(0xc8 + (dst & 7)));
		}
		return 0;
	}
	return -EINVAL;
}

static void ldst(struct jit *j, const struct ebpf_insn *in)
{
	uint8_t cls = in->code & 7, sz = in->code & 0x18;
	int dst = regmap[in->dst], src = regmap[in->src];

	if (cls == EBPF_CLS_LDX) {
		if ((in->code & 0xe0) == EBPF_MEMSX) {
			if (sz == EBPF_B)
				rm_mem(j, true, OP2(0x0f, 0xbe), dst, src, in->off, false);
			else if (sz == EBPF_H)
				rm_mem(j, true, OP2(0x0f, 0xbf), dst, src, in->off, false);
			else
				rm_mem(j, true, OP1(0x63), dst, src, in->off, false);
			return;
		}
		switch (sz) {
		case EBPF_B: rm_mem(j, false, OP2(0x0f, 0xb6), dst, src, in->off, false); break;
		case EBPF_H: rm_mem(j, false, OP2(0x0f, 0xb7), dst, src, in->off, false); break;
		case EBPF_W: rm_mem(j, false, OP1(0x8b), dst, src, in->off, false); break;
		default: rm_mem(j, true, OP1(0x8b), dst, src, in->off, false); break;
		}
		return;
	}
	if (cls == EBPF_CLS_ST) {
		switch (sz) {
		case EBPF_B:
			rm_mem(j, false, OP1(0xc6), 0, dst, in->off, false);
			emit1(j, (uint8_t)in->imm);
			break;
		case EBPF_H:
			emit1(j, 0x66);
			rm_mem(j, false, OP1(0xc7), 0, dst, in->off, false);
			emit1(j, (uint8_t)in->imm);
			emit1(j, (uint8_t)(in->imm >> 8));
			break;
		default:
			rm_mem(j, sz == EBPF_DW, OP1(0xc7), 0, dst, in->off, false);
			emit4(j, (uint32_t)in->imm);
			break;
		}
		return;
	}
	switch (sz) {
	case EBPF_B: rm_mem(j, false, OP1(0x88), src, dst, in->off, true); break;
	case EBPF_H: emit1(j, 0x66); rm_mem(j, false, OP1(0x89), src, dst, in->off, false); break;
	case EBPF_W: rm_mem(j, false, OP1(0x89), src, dst, in->off, false); break;
	default: rm_mem(j, true, OP1(0x89), src, dst, in->off, false); break;
	}
}

static void atomic(struct jit *j, const struct ebpf_insn *in)
{
	bool w = (in->code & 0x18) == EBPF_DW;
	int base = regmap[in->dst], src = regmap[in->src];
	int32_t op = in->imm;

	switch (op) {
	case EBPF_ADD: case EBPF_OR: case EBPF_AND: case EBPF_XOR: {
		uint8_t opc = op == EBPF_ADD ? 0x01 : op == EBPF_OR ? 0x09 : op == EBPF_AND ? 0x21 : 0x31;

		emit1(j, 0xf0);
		rm_mem(j, w, &opc, 1, src, base, in->off, false);
		return;
	}
	case EBPF_ADD | EBPF_FETCH:
		emit1(j, 0xf0);
		rm_mem(j, w, OP2(0x0f, 0xc1), src, base, in->off, false); /* xadd */
		return;
	case EBPF_XCHG:
		rm_mem(j, w, OP1(0x87), src, base, in->off, false);
		return;
	case EBPF_CMPXCHG:
		emit1(j, 0xf0);
		rm_mem(j, w, OP2(0x0f, 0xb1), src, base, in->off, false);
		if (!w)
			mov_rr(j, false, RAX, RAX); /* r0 = zero-extended old value */
		return;
	}
	/* or/and/xor with fetch: cmpxchg loop on [r9], old value in rax. */
	uint8_t opc = (op & ~EBPF_FETCH) == EBPF_OR ? 0x09 : (op & ~EBPF_FETCH) == EBPF_AND ? 0x21 : 0x31;
	int operand = src == RAX ? R10 : src;

	rm_mem(j, true, OP1(0x8d), R9, base, in->off, false); /* lea r9, [base+off] */
	mov_rr(j, true, R10, RAX);
	rm_mem(j, w, OP1(0x8b), RAX, R9, 0, false);
	size_t loop = j->pos;

	mov_rr(j, true, R11, RAX);
	rr(j, w, &opc, 1, operand, R11, false);
	emit1(j, 0xf0);
	rm_mem(j, w, OP2(0x0f, 0xb1), R11, R9, 0, false);
	emit1(j, 0x75);
	emit1(j, (uint8_t)(loop - (j->pos + 1)));
	if (src != RAX) {
		mov_rr(j, w, src, RAX);
		mov_rr(j, true, RAX, R10);
	} else if (!w) {
		mov_rr(j, false, RAX, RAX);
	}
}

static void record_site(struct jit *j, size_t insn, int helper, enum ebpf_site_kind kind,
			size_t off)
{
	if (!j->record)
		return;
	j->sites[j->nsites++] = (struct ebpf_jit_site){ insn, helper, kind, off };
}

/* One x86 NOP instruction of len bytes (0 to 7), the recommended forms. */
static void nop(struct jit *j, unsigned len)
{
	static const uint8_t forms[8][7] = {
		{ 0 }, { 0x90 }, { 0x66, 0x90 }, { 0x0f, 0x1f, 0x00 }, { 0x0f, 0x1f, 0x40, 0x00 },
		{ 0x0f, 0x1f, 0x44, 0x00, 0x00 }, { 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00 },
		{ 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00 },
	};

	for (unsigned k = 0; k < len; k++)
		emit1(j, forms[len][k]);
}

/*
 * The rel32 or imm64 of a call is rewritten in live code (ep_write(),
 * ebpf_prog_repatch_helpers()), and a running thread sees the switch
 * whole only when the field lies inside one aligned 8-byte word (a single
 * store); otherwise it may execute a torn target.  Images start 64-byte
 * aligned, so the offset stands for the address.  pad_field() puts `pre`
 * NOP bytes before an instruction whose field starts `at` bytes in and is
 * `size` bytes long; pad_rest() puts max - pre after it, so that the
 * sequence has the same length wherever it lands and the padding never
 * moves the layout the passes converge on.
 */
static unsigned pad_field(struct jit *j, unsigned at, unsigned size)
{
	unsigned mis = (unsigned)((j->pos + at) % 8), pre = mis + size > 8 ? 8 - mis : 0;

	nop(j, pre);
	return pre;
}

static void pad_rest(struct jit *j, unsigned pre, unsigned max)
{
	nop(j, max - pre);
}

#define PAD_REL32 3 /* most NOP bytes before `call rel32` (e8 + 4 bytes) */
#define PAD_ABS64 7 /* most before `movabs r11, imm64` (49 bb + 8 bytes) */

static void call_helper(struct jit *j, size_t i, int idx)
{
	uintptr_t fn = (uintptr_t)j->prog->vm->helpers[idx];
	unsigned pre;

	if (j->exec) {
		int64_t rel = (int64_t)(fn - (j->exec + j->pos + PAD_REL32 + 5));

		/* margin: the call may still move by the image size between passes */
		if (rel > INT32_MIN + (1 << 24) && rel < INT32_MAX - (1 << 24)) {
			pre = pad_field(j, 1, 4);
			rel = (int64_t)(fn - (j->exec + j->pos + 5));
			emit1(j, 0xe8);
			record_site(j, i, idx, EBPF_SITE_REL32, j->pos);
			emit4(j, (uint32_t)(int32_t)rel);
			pad_rest(j, pre, PAD_REL32);
			return;
		}
	}
	pre = pad_field(j, 2, 8);
	emit1(j, 0x49); emit1(j, 0xbb); /* movabs r11, imm64 */
	record_site(j, i, idx, EBPF_SITE_ABS64, j->pos);
	emit8(j, fn);
	emit1(j, 0x41); emit1(j, 0xff); emit1(j, 0xd3); /* call r11 */
	pad_rest(j, pre, PAD_ABS64);
}

static void callx(struct jit *j, const struct ebpf_insn *in)
{
	int r = regmap[in->dst ? in->dst : (unsigned)in->imm];
	size_t skip1, skip2, done;

	alu_imm(j, true, 7, r, EBPF_MAX_HELPERS);          /* cmp r, MAX */
	skip1 = jshort(j, 0x73);                            /* jae */
	emit1(j, 0x49); emit1(j, 0xbb);
	emit8(j, (uint64_t)(uintptr_t)j->prog->vm->helpers); /* movabs r11, table */
	/* mov r11, [r11 + r*8] */
	emit1(j, (uint8_t)(0x4d | ((r & 8) ? 2 : 0) | 0));
	emit1(j, 0x8b);
	emit1(j, 0x1c);
	emit1(j, (uint8_t)(0xc0 | (r & 7) << 3 | 3));
	rr(j, true, OP1(0x85), R11, R11, false);
	skip2 = jshort(j, 0x74);
	emit1(j, 0x41); emit1(j, 0xff); emit1(j, 0xd3);     /* call r11 */
	done = jshort(j, 0xeb);
	jfix(j, skip1);
	jfix(j, skip2);
	mov_imm(j, false, RAX, 0);
	jfix(j, done);
}

static const uint8_t jcc[16] = {
	[EBPF_JEQ >> 4] = 0x84, [EBPF_JNE >> 4] = 0x85, [EBPF_JGT >> 4] = 0x87,
	[EBPF_JGE >> 4] = 0x83, [EBPF_JLT >> 4] = 0x82, [EBPF_JLE >> 4] = 0x86,
	[EBPF_JSET >> 4] = 0x85, [EBPF_JSGT >> 4] = 0x8f, [EBPF_JSGE >> 4] = 0x8d,
	[EBPF_JSLT >> 4] = 0x8c, [EBPF_JSLE >> 4] = 0x8e,
};

/* Branch to instruction t; opc 0 means jmp. Must be the last bytes of insn i. */
static void branch(struct jit *j, size_t i, size_t t, uint8_t opc)
{
	int64_t rel = (int64_t)j->body[t] - (int64_t)j->end[i];

	/*
	 * Size choice uses last pass's layout; in the pass where the layout
	 * repeats exactly the rel computed here is exact.
	 */
	if (is_imm8(rel)) {
		emit1(j, opc ? (uint8_t)(opc - 0x10) : 0xeb);
		emit1(j, (uint8_t)rel);
	} else if (opc) {
		emit1(j, 0x0f);
		emit1(j, opc);
		emit4(j, (uint32_t)(int32_t)rel);
	} else {
		emit1(j, 0xe9);
		emit4(j, (uint32_t)(int32_t)rel);
	}
}

static int jump(struct jit *j, size_t i)
{
	const struct ebpf_insn *in = &j->prog->insns[i];
	uint8_t op = in->code & 0xf0;
	bool w = (in->code & 7) == EBPF_CLS_JMP, x = in->code & EBPF_X;
	int dst = regmap[in->dst];

	if (op == EBPF_JA) {
		branch(j, i, i + 1 + (size_t)(int64_t)(w ? in->off : in->imm), 0);
		return 0;
	}
	if (op == EBPF_JSET) {
		if (x) {
			rr(j, w, OP1(0x85), regmap[in->src], dst, false);
		} else {
			rex(j, w, 0, 0, dst, false);
			emit1(j, 0xf7);
			emit1(j, (uint8_t)(0xc0 | (dst & 7)));
			emit4(j, (uint32_t)in->imm);
		}
	} else if (x) {
		rr(j, w, OP1(0x39), regmap[in->src], dst, false);
	} else if (in->imm == 0 && (op == EBPF_JEQ || op == EBPF_JNE)) {
		rr(j, w, OP1(0x85), dst, dst, false);
	} else {
		alu_imm(j, w, 7, dst, in->imm);
	}
	branch(j, i, i + 1 + (size_t)(int64_t)in->off, jcc[op >> 4]);
	return 0;
}

static int insn(struct jit *j, size_t i)
{
	const struct ebpf_insn *in = &j->prog->insns[i];
	uint8_t cls = in->code & 7, op = in->code & 0xf0;

	switch (cls) {
	case EBPF_CLS_ALU64:
		return alu(j, in, true);
	case EBPF_CLS_ALU:
		return alu(j, in, false);
	case EBPF_CLS_LD:
		mov_imm64(j, regmap[in->dst],
			  (uint32_t)in->imm | (uint64_t)(uint32_t)in[1].imm << 32);
		return 0;
	case EBPF_CLS_LDX:
	case EBPF_CLS_ST:
		ldst(j, in);
		return 0;
	case EBPF_CLS_STX:
		if ((in->code & 0xe0) == EBPF_ATOMIC)
			atomic(j, in);
		else
			ldst(j, in);
		return 0;
	case EBPF_CLS_JMP:
		if (op == EBPF_EXIT) {
			epilogue(j);
			return 0;
		}
		if (op == EBPF_CALL) {
			if (in->code & EBPF_X) {
				callx(j, in);
			} else if (in->src == EBPF_PSEUDO_CALL) {
				size_t t = i + 1 + (size_t)(int64_t)in->imm;
				unsigned pre = pad_field(j, 1, 4);

				/* The return lands on the NOPs after the call: rel32 ends there. */
				emit1(j, 0xe8);
				record_site(j, i, -1, EBPF_SITE_REL32, j->pos);
				emit4(j, (uint32_t)(int32_t)((int64_t)j->start[t] -
							     (int64_t)(j->end[i] - (PAD_REL32 - pre))));
				pad_rest(j, pre, PAD_REL32);
			} else {
				call_helper(j, i, in->imm);
			}
			return 0;
		}
		return jump(j, i);
	case EBPF_CLS_JMP32:
		return jump(j, i);
	}
	return -EINVAL;
}

/* One emission pass; returns true when the layout equals the previous one. */
static int pass(struct jit *j, bool *stable)
{
	const struct ebpf_prog *p = j->prog;

	j->pos = 0;
	j->overflow = false;
	j->nsites = 0;
	for (size_t i = 0; i < p->n; i++) {
		j->nstart[i] = j->pos;
		if (p->fn_start[i])
			prologue(j, i == 0);
		j->nbody[i] = j->pos;
		int rc = insn(j, i);

		if (rc)
			return rc;
		if (ebpf_is_lddw(&p->insns[i])) {
			j->nend[i] = j->pos;
			i++;
			j->nstart[i] = j->nbody[i] = j->pos;
		}
		j->nend[i] = j->pos;
	}
	if (j->overflow)
		return -E2BIG;
	size_t bytes = p->n * sizeof(size_t);

	*stable = !memcmp(j->start, j->nstart, bytes) && !memcmp(j->body, j->nbody, bytes) &&
		  !memcmp(j->end, j->nend, bytes);
	memcpy(j->start, j->nstart, bytes);
	memcpy(j->body, j->nbody, bytes);
	memcpy(j->end, j->nend, bytes);
	return 0;
}

static int converge(struct jit *j, struct ebpf_err *err)
{
	for (int k = 0; k < MAX_PASSES; k++) {
		bool stable;
		int rc = pass(j, &stable);

		if (rc)
			return ebpf_fail(err, -1, "JIT emission failed (%d)", rc);
		if (stable)
			return 0;
	}
	return ebpf_fail(err, -1, "JIT layout did not converge in %d passes", MAX_PASSES);
}

int ebpf_jit_compile(struct ebpf_prog *prog, struct ebpf_err *err)
{
	struct ep_pool *pool = prog->vm->pool;
	struct jit j = { .prog = prog };
	struct ep_image img;
	size_t n = prog->n, nfn = 0, ncalls = 0, size;
	int rc;

	if (err) {
		err->insn = -1;
		err->msg[0] = 0;
	}
	for (size_t i = 0; i < n; i++) {
		nfn += prog->fn_start[i];
		ncalls += (prog->insns[i].code & 0xf7) == (EBPF_CLS_JMP | EBPF_CALL);
	}
	j.cap = n * MAX_INSN_BYTES + nfn * PROLOGUE_MAX;
	j.buf = malloc(j.cap);
	size_t *arrays = malloc(6 * n * sizeof(size_t));

	j.sites = malloc((ncalls ? ncalls : 1) * sizeof(*j.sites));
	if (!j.buf || !arrays || !j.sites) {
		rc = -ENOMEM;
		goto out;
	}
	j.start = arrays, j.body = arrays + n, j.end = arrays + 2 * n;
	j.nstart = arrays + 3 * n, j.nbody = arrays + 4 * n, j.nend = arrays + 5 * n;
	/* Pessimistic first layout: every distance large, so jumps start long. */
	for (size_t i = 0; i < n; i++)
		j.start[i] = j.body[i] = j.end[i] = i * MAX_INSN_BYTES;

	rc = converge(&j, err);
	if (rc)
		goto out;
	size = j.pos;
	rc = ep_alloc(pool, size, &img);
	if (rc) {
		ebpf_fail(err, -1, "ep_alloc(%zu): %s", size, ep_strerror(rc));
		goto out;
	}
	/* Now near helpers can use call rel32; the code can only shrink. */
	j.exec = (uintptr_t)img.exec;
	rc = converge(&j, err);
	if (rc == 0 && j.pos > size)
		rc = ebpf_fail(err, -1, "JIT image grew after allocation");
	if (rc == 0) {
		uint8_t *scratch = j.buf;
		size_t cap = j.cap;
		bool stable;

		/* Final pass straight into the staging buffer. */
		j.record = true;
		j.buf = img.rw;
		j.cap = size;
		rc = pass(&j, &stable);
		if (rc == 0 && !stable)
			rc = ebpf_fail(err, -1, "JIT final pass changed the layout");
		j.buf = scratch;
		j.cap = cap;
	}
	if (rc == 0)
		rc = ep_finalize(pool, img.exec);
	if (rc) {
		if (err && err->msg[0] == 0)
			ebpf_fail(err, -1, "ep_finalize: %s", ep_strerror(rc));
		ep_free(pool, img.exec);
		goto out;
	}
	prog->code = img.exec;
	prog->code_size = j.pos;
	prog->sites = j.sites;
	prog->nsites = j.nsites;
	j.sites = NULL;
	/*
	 * Name the code for ep_symbolize(), libunwind, perf and gdb.  Only
	 * diagnostics depend on it, so a failure (a name longer than
	 * EP_NAME_MAX) does not fail the JIT.
	 */
	(void)ep_set_name(pool, prog->code, prog->name);
out:
	free(j.buf);
	free(arrays);
	free(j.sites);
	return rc;
}

void ebpf_jit_free(struct ebpf_prog *prog)
{
	if (prog->code)
		ep_free(prog->vm->pool, prog->code);
	prog->code = NULL;
	free(prog->sites);
	prog->sites = NULL;
	prog->nsites = 0;
}

int ebpf_prog_repatch_helpers(struct ebpf_prog *prog)
{
	struct ep_pool *pool = prog->vm->pool;

	if (!prog->code)
		return -ENOEXEC;
	/* Check every site first so that a failure leaves the code untouched. */
	for (size_t i = 0; i < prog->nsites; i++) {
		const struct ebpf_jit_site *s = &prog->sites[i];

		if (s->helper < 0 || s->kind != EBPF_SITE_REL32)
			continue;
		uintptr_t at = (uintptr_t)prog->code + s->off;
		int64_t rel = (int64_t)((uintptr_t)prog->vm->helpers[s->helper] - (at + 4));

		if (rel != (int32_t)rel || !prog->vm->helpers[s->helper])
			return -ERANGE;
	}
	for (size_t i = 0; i < prog->nsites; i++) {
		const struct ebpf_jit_site *s = &prog->sites[i];
		uint8_t *at = (uint8_t *)prog->code + s->off;
		uintptr_t fn = (uintptr_t)prog->vm->helpers[s->helper < 0 ? 0 : s->helper];
		int rc;

		if (s->helper < 0)
			continue;
		if (s->kind == EBPF_SITE_REL32) {
			int32_t rel = (int32_t)(int64_t)(fn - ((uintptr_t)at + 4));

			rc = ep_write(pool, at, &rel, 4);
		} else {
			uint64_t abs = fn;

			rc = ep_write(pool, at, &abs, 8);
		}
		if (rc)
			return rc;
	}
	return 0;
}
