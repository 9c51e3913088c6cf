/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * interp.c - the reference semantics: a plain switch interpreter.
 *
 * Everything the JIT does must match this file; the differential test
 * holds them together.  Memory is accessed unchecked (see ebpf.h).
 */
#include <errno.h>
#include <string.h>

#include "ebpf_int.h"

struct frame {
	size_t ret_pc;
	uint64_t saved[4]; /* r6..r9 */
	uint64_t r10;
};

/* Signed division/modulo per RFC 9669: no traps, INT_MIN / -1 wraps. */
static uint64_t sdiv64(uint64_t a, uint64_t b)
{
	if (b == 0)
		return 0;
	if ((int64_t)b == -1)
		return 0 - a;
	return (uint64_t)((int64_t)a / (int64_t)b);
}

static uint64_t smod64(uint64_t a, uint64_t b)
{
	if (b == 0)
		return a;
	if ((int64_t)b == -1)
		return 0;
	return (uint64_t)((int64_t)a % (int64_t)b);
}

static uint32_t sdiv32(uint32_t a, uint32_t b)
{
	if (b == 0)
		return 0;
	if ((int32_t)b == -1)
		return 0 - a;
	return (uint32_t)((int32_t)a / (int32_t)b);
}

static uint32_t smod32(uint32_t a, uint32_t b)
{
	if (b == 0)
		return a;
	if ((int32_t)b == -1)
		return 0;
	return (uint32_t)((int32_t)a % (int32_t)b);
}

static uint64_t alu64(const struct ebpf_insn *in, uint64_t d, uint64_t s)
{
	switch (in->code & 0xf0) {
	case EBPF_ADD: return d + s;
	case EBPF_SUB: return d - s;
	case EBPF_MUL: return d * s;
	case EBPF_DIV: return in->off ? sdiv64(d, s) : (s ? d / s : 0);
	case EBPF_MOD: return in->off ? smod64(d, s) : (s ? d % s : d);
	case EBPF_OR: return d | s;
	case EBPF_AND: return d & s;
	case EBPF_XOR: return d ^ s;
	case EBPF_LSH: return d << (s & 63);
	case EBPF_RSH: return d >> (s & 63);
	case EBPF_ARSH: return (uint64_t)((int64_t)d >> (s & 63));
	case EBPF_NEG: return 0 - d;
	case EBPF_MOV:
		switch (in->off) {
		case 8: return (uint64_t)(int64_t)(int8_t)s;
		case 16: return (uint64_t)(int64_t)(int16_t)s;
		case 32: return (uint64_t)(int64_t)(int32_t)s;
		default: return s;
		}
	case EBPF_END: /* ALU64 END is an unconditional byte swap */
		switch (in->imm) {
		case 16: return __builtin_bswap16((uint16_t)d);
		case 32: return __builtin_bswap32((uint32_t)d);
		default: return __builtin_bswap64(d);
		}
	}
	return d;
}

static uint32_t alu32(const struct ebpf_insn *in, uint64_t d64, uint32_t s)
{
	uint32_t d = (uint32_t)d64;

	switch (in->code & 0xf0) {
	case EBPF_ADD: return d + s;
	case EBPF_SUB: return d - s;
	case EBPF_MUL: return d * s;
	case EBPF_DIV: return in->off ? sdiv32(d, s) : (s ? d / s : 0);
	case EBPF_MOD: return in->off ? smod32(d, s) : (s ? d % s : d);
	case EBPF_OR: return d | s;
	case EBPF_AND: return d & s;
	case EBPF_XOR: return d ^ s;
	case EBPF_LSH: return d << (s & 31);
	case EBPF_RSH: return d >> (s & 31);
	case EBPF_ARSH: return (uint32_t)((int32_t)d >> (s & 31));
	case EBPF_NEG: return 0 - d;
	case EBPF_MOV:
		switch (in->off) {
		case 8: return (uint32_t)(int32_t)(int8_t)s;
		case 16: return (uint32_t)(int32_t)(int16_t)s;
		default: return s;
		}
	}
	return d;
}

/* ALU-class END: to little endian truncates, to big endian swaps. */
static uint64_t endian(const struct ebpf_insn *in, uint64_t d)
{
	if (in->code & EBPF_TO_BE) {
		switch (in->imm) {
		case 16: return __builtin_bswap16((uint16_t)d);
		case 32: return __builtin_bswap32((uint32_t)d);
		default: return __builtin_bswap64(d);
		}
	}
	switch (in->imm) {
	case 16: return (uint16_t)d;
	case 32: return (uint32_t)d;
	default: return d;
	}
}

static bool cond64(uint8_t op, uint64_t a, uint64_t b)
{
	switch (op) {
	case EBPF_JEQ: return a == b;
	case EBPF_JNE: return a != b;
	case EBPF_JGT: return a > b;
	case EBPF_JGE: return a >= b;
	case EBPF_JLT: return a < b;
	case EBPF_JLE: return a <= b;
	case EBPF_JSET: return a & b;
	case EBPF_JSGT: return (int64_t)a > (int64_t)b;
	case EBPF_JSGE: return (int64_t)a >= (int64_t)b;
	case EBPF_JSLT: return (int64_t)a < (int64_t)b;
	case EBPF_JSLE: return (int64_t)a <= (int64_t)b;
	}
	return false;
}

static bool cond32(uint8_t op, uint32_t a, uint32_t b)
{
	switch (op) {
	case EBPF_JSGT: return (int32_t)a > (int32_t)b;
	case EBPF_JSGE: return (int32_t)a >= (int32_t)b;
	case EBPF_JSLT: return (int32_t)a < (int32_t)b;
	case EBPF_JSLE: return (int32_t)a <= (int32_t)b;
	}
	return cond64(op, a, b);
}

static uint64_t atomic_op(const struct ebpf_insn *in, void *addr, uint64_t *src,
			  uint64_t *r0)
{
	bool w64 = (in->code & 0x18) == EBPF_DW;
	int32_t op = in->imm;
	uint64_t old;

	if (w64) {
		uint64_t *p = addr;

		switch (op & ~EBPF_FETCH) {
		case EBPF_ADD: old = __atomic_fetch_add(p, *src, __ATOMIC_SEQ_CST); break;
		case EBPF_OR: old = __atomic_fetch_or(p, *src, __ATOMIC_SEQ_CST); break;
		case EBPF_AND: old = __atomic_fetch_and(p, *src, __ATOMIC_SEQ_CST); break;
		case EBPF_XOR: old = __atomic_fetch_xor(p, *src, __ATOMIC_SEQ_CST); break;
		case EBPF_XCHG & ~EBPF_FETCH: old = __atomic_exchange_n(p, *src, __ATOMIC_SEQ_CST); break;
		default: /* cmpxchg */
			old = *r0;
			__atomic_compare_exchange_n(p, &old, *src, false, __ATOMIC_SEQ_CST,
						    __ATOMIC_SEQ_CST);
			*r0 = old;
			return 0;
		}
	} else {
		uint32_t *p = addr, s = (uint32_t)*src, o;

		switch (op & ~EBPF_FETCH) {
		case EBPF_ADD: o = __atomic_fetch_add(p, s, __ATOMIC_SEQ_CST); break;
		case EBPF_OR: o = __atomic_fetch_or(p, s, __ATOMIC_SEQ_CST); break;
		case EBPF_AND: o = __atomic_fetch_and(p, s, __ATOMIC_SEQ_CST); break;
		case EBPF_XOR: o = __atomic_fetch_xor(p, s, __ATOMIC_SEQ_CST); break;
		case EBPF_XCHG & ~EBPF_FETCH: o = __atomic_exchange_n(p, s, __ATOMIC_SEQ_CST); break;
		default:
			o = (uint32_t)*r0;
			__atomic_compare_exchange_n(p, &o, s, false, __ATOMIC_SEQ_CST,
						    __ATOMIC_SEQ_CST);
			*r0 = o;
			return 0;
		}
		old = o;
	}
	if (op & EBPF_FETCH)
		*src = old;
	return 0;
}

int ebpf_run_interp(const struct ebpf_prog *prog, void *ctx, size_t len,
		    uint64_t *r0)
{
	return ebpf_run_interp_steps(prog, ctx, len, r0, 0);
}

int ebpf_run_interp_steps(const struct ebpf_prog *prog, void *ctx, size_t len,
			  uint64_t *r0, uint64_t max_steps)
{
	/* One 512-byte frame per call level, the main program on top. */
	_Alignas(16) uint8_t stack[EBPF_MAX_FRAMES * EBPF_STACK_SIZE];
	struct frame frames[EBPF_MAX_FRAMES];
	const struct ebpf_insn *insns = prog->insns;
	const ebpf_helper_fn *helpers = prog->vm->helpers;
	uint64_t reg[11] = { 0 };
	size_t pc = 0;
	int depth = 0;
	/* Counts down; 0 (no limit) starts at the maximum, which no run reaches. */
	uint64_t left = max_steps ? max_steps : UINT64_MAX;

	reg[1] = (uint64_t)(uintptr_t)ctx;
	reg[2] = len;
	reg[10] = (uint64_t)(uintptr_t)(stack + sizeof(stack));

	for (;;) {
		if (left-- == 0)
			return -ETIME;
		const struct ebpf_insn *in = &insns[pc++];
		uint8_t cls = in->code & 7, op = in->code & 0xf0;
		bool x = in->code & EBPF_X;
		void *addr;

		switch (cls) {
		case EBPF_CLS_ALU64:
			if (op == EBPF_END)
				reg[in->dst] = alu64(in, reg[in->dst], 0);
			else
				reg[in->dst] = alu64(in, reg[in->dst],
						     x ? reg[in->src] : (uint64_t)(int64_t)in->imm);
			break;
		case EBPF_CLS_ALU:
			if (op == EBPF_END)
				reg[in->dst] = endian(in, reg[in->dst]);
			else
				reg[in->dst] = alu32(in, reg[in->dst],
						     x ? (uint32_t)reg[in->src] : (uint32_t)in->imm);
			break;
		case EBPF_CLS_LD: /* lddw (the only LD the verifier admits) */
			reg[in->dst] = (uint32_t)in->imm | ((uint64_t)(uint32_t)insns[pc].imm << 32);
			pc++;
			break;
		case EBPF_CLS_LDX:
			addr = (void *)(uintptr_t)(reg[in->src] + (uint64_t)(int64_t)in->off);
			if ((in->code & 0xe0) == EBPF_MEMSX) {
				switch (in->code & 0x18) {
				case EBPF_B: { int8_t v; memcpy(&v, addr, 1); reg[in->dst] = (uint64_t)(int64_t)v; break; }
				case EBPF_H: { int16_t v; memcpy(&v, addr, 2); reg[in->dst] = (uint64_t)(int64_t)v; break; }
				default: { int32_t v; memcpy(&v, addr, 4); reg[in->dst] = (uint64_t)(int64_t)v; break; }
				}
				break;
			}
			switch (in->code & 0x18) {
			case EBPF_B: { uint8_t v; memcpy(&v, addr, 1); reg[in->dst] = v; break; }
			case EBPF_H: { uint16_t v; memcpy(&v, addr, 2); reg[in->dst] = v; break; }
			case EBPF_W: { uint32_t v; memcpy(&v, addr, 4); reg[in->dst] = v; break; }
			default: memcpy(&reg[in->dst], addr, 8); break;
			}
			break;
		case EBPF_CLS_ST:
		case EBPF_CLS_STX: {
			uint64_t v = cls == EBPF_CLS_ST ? (uint64_t)(int64_t)in->imm : reg[in->src];

			addr = (void *)(uintptr_t)(reg[in->dst] + (uint64_t)(int64_t)in->off);
			if ((in->code & 0xe0) == EBPF_ATOMIC) {
				atomic_op(in, addr, &reg[in->src], &reg[0]);
				break;
			}
			switch (in->code & 0x18) {
			case EBPF_B: { uint8_t b = (uint8_t)v; memcpy(addr, &b, 1); break; }
			case EBPF_H: { uint16_t h = (uint16_t)v; memcpy(addr, &h, 2); break; }
			case EBPF_W: { uint32_t w = (uint32_t)v; memcpy(addr, &w, 4); break; }
			default: memcpy(addr, &v, 8); break;
			}
			break;
		}
		case EBPF_CLS_JMP:
			if (op == EBPF_EXIT) {
				if (depth == 0) {
					*r0 = reg[0];
					return 0;
				}
				depth--;
				memcpy(&reg[6], frames[depth].saved, sizeof(frames[depth].saved));
				reg[10] = frames[depth].r10;
				pc = frames[depth].ret_pc;
				break;
			}
			if (op == EBPF_CALL) {
				if (x || in->src == 0) {
					uint64_t idx = x ? reg[in->dst ? in->dst : (unsigned)in->imm] : (uint64_t)in->imm;
					ebpf_helper_fn fn = idx < EBPF_MAX_HELPERS ? helpers[idx] : NULL;

					/* An empty callx slot yields 0, as in the JIT. */
					reg[0] = fn ? fn(reg[1], reg[2], reg[3], reg[4], reg[5]) : 0;
					break;
				}
				if (depth + 1 >= EBPF_MAX_FRAMES)
					return -E2BIG;
				frames[depth].ret_pc = pc;
				memcpy(frames[depth].saved, &reg[6], sizeof(frames[depth].saved));
				frames[depth].r10 = reg[10];
				depth++;
				reg[10] -= EBPF_STACK_SIZE;
				pc += (size_t)(int64_t)in->imm;
				break;
			}
			if (op == EBPF_JA) {
				pc += (size_t)(int64_t)in->off;
				break;
			}
			if (cond64(op, reg[in->dst], x ? reg[in->src] : (uint64_t)(int64_t)in->imm))
				pc += (size_t)(int64_t)in->off;
			break;
		case EBPF_CLS_JMP32:
			if (op == EBPF_JA) {
				pc += (size_t)(int64_t)in->imm;
				break;
			}
			if (cond32(op, (uint32_t)reg[in->dst], x ? (uint32_t)reg[in->src] : (uint32_t)in->imm))
				pc += (size_t)(int64_t)in->off;
			break;
		}
	}
}
