/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_ebpf.c - conformance-style table: every instruction form with an
 * expected r0 (and memory where it matters), run on the interpreter and
 * the JIT; every verifier rejection with its instruction index and
 * reason; live patching of a JIT call with ep_write().
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <elf.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ebpf_asm.h"
#include "ebpf_int.h"
#include "execpack.h"
#include "helpers.h"

#define PROG(...) (const struct ebpf_insn[]){ __VA_ARGS__ }, \
	sizeof((const struct ebpf_insn[]){ __VA_ARGS__ }) / sizeof(struct ebpf_insn)

struct tcase {
	const char *name;
	const char *mem;   /* input memory, NULL for none */
	size_t memlen;
	uint64_t expect;
	const char *mem_after; /* expected memory afterwards, or NULL */
	const struct ebpf_insn *insns;
	size_t n;
};

#define T(name, expect, ...) { name, NULL, 0, expect, NULL, PROG(__VA_ARGS__) }
#define TM(name, mem, expect, ...) { name, mem, sizeof(mem) - 1, expect, NULL, PROG(__VA_ARGS__) }
#define TMA(name, mem, after, expect, ...) { name, mem, sizeof(mem) - 1, expect, after, PROG(__VA_ARGS__) }

#define R0 0
#define R1 1
#define R2 2
#define R3 3
#define R4 4
#define R5 5
#define R6 6
#define R7 7
#define R8 8
#define R9 9
#define R10 10
#define U64(x) ((uint64_t)(x))

static const struct tcase cases[] = {
	/* --- base: mov, add, sub, and, or, xor (64 and 32 bit, reg and imm) --- */
	T("mov64 imm", 7, MOV64_IMM(R0, 7), EXIT()),
	T("mov64 imm sign-extends", U64(-1), MOV64_IMM(R0, -1), EXIT()),
	T("mov32 imm zero-extends", 0xffffffff, MOV32_IMM(R0, -1), EXIT()),
	T("mov64 reg", 5, MOV64_IMM(R3, 5), MOV64_REG(R0, R3), EXIT()),
	T("mov32 reg truncates", 0x89abcdef, LDDW(R4, 0x0123456789abcdefull), MOV32_REG(R0, R4), EXIT()),
	T("exit returns r0 = 0 by default", 0, EXIT()),
	T("add64 imm", 10, MOV64_IMM(R0, 7), ALU64_IMM(EBPF_ADD, R0, 3), EXIT()),
	T("add64 reg", 0x100000000ull, MOV32_IMM(R0, -1), MOV64_IMM(R1, 1), ALU64_REG(EBPF_ADD, R0, R1), EXIT()),
	T("add32 wraps", 0, MOV32_IMM(R0, -1), MOV64_IMM(R1, 1), ALU32_REG(EBPF_ADD, R0, R1), EXIT()),
	T("add32 imm clears high", 3, LDDW(R0, 0xffffffff00000001ull), ALU32_IMM(EBPF_ADD, R0, 2), EXIT()),
	T("sub64 imm", U64(-4), MOV64_IMM(R0, 3), ALU64_IMM(EBPF_SUB, R0, 7), EXIT()),
	T("sub64 reg", 1, MOV64_IMM(R0, 8), MOV64_IMM(R9, 7), ALU64_REG(EBPF_SUB, R0, R9), EXIT()),
	T("sub32 reg", 0xfffffffc, MOV64_IMM(R0, 3), MOV64_IMM(R7, 7), ALU32_REG(EBPF_SUB, R0, R7), EXIT()),
	T("sub32 imm", 0xfffffffe, MOV64_IMM(R0, 0), ALU32_IMM(EBPF_SUB, R0, 2), EXIT()),
	T("and64 imm", 0x0c, MOV64_IMM(R0, 0x3c), ALU64_IMM(EBPF_AND, R0, 0x0f), EXIT()),
	T("and64 imm negative", 0x123456789abcdef0ull, LDDW(R0, 0x123456789abcdefful), ALU64_IMM(EBPF_AND, R0, -16), EXIT()),
	T("and64 reg", 0x10, MOV64_IMM(R0, 0x31), MOV64_IMM(R5, 0x1e), ALU64_REG(EBPF_AND, R0, R5), EXIT()),
	T("and32 reg", 0x0f, LDDW(R0, 0xff0000000full), MOV32_IMM(R2, -1), ALU32_REG(EBPF_AND, R0, R2), EXIT()),
	T("and32 imm", 0x30, LDDW(R0, 0xff00000030ull), ALU32_IMM(EBPF_AND, R0, 0x7f), EXIT()),
	T("or64 imm", 0x3f, MOV64_IMM(R0, 0x30), ALU64_IMM(EBPF_OR, R0, 0x0f), EXIT()),
	T("or64 reg", U64(-1), MOV64_IMM(R0, 0), MOV64_IMM(R8, -1), ALU64_REG(EBPF_OR, R0, R8), EXIT()),
	T("or32 reg", 0xffffffff, MOV64_IMM(R0, 0), MOV64_IMM(R8, -1), ALU32_REG(EBPF_OR, R0, R8), EXIT()),
	T("or32 imm", 0x80000001, MOV64_IMM(R0, 1), ALU32_IMM(EBPF_OR, R0, 0x80000000), EXIT()),
	T("xor64 imm", 0xff, MOV64_IMM(R0, 0xf0), ALU64_IMM(EBPF_XOR, R0, 0x0f), EXIT()),
	T("xor64 reg", 0, MOV64_IMM(R0, 77), MOV64_REG(R6, R0), ALU64_REG(EBPF_XOR, R0, R6), EXIT()),
	T("xor32 imm", 0xfffffff0, MOV64_IMM(R0, 0xf), ALU32_IMM(EBPF_XOR, R0, -1), EXIT()),
	T("xor32 reg", 0xffff, LDDW(R0, 0x100000000ull), MOV64_IMM(R3, 0xffff), ALU32_REG(EBPF_XOR, R0, R3), EXIT()),
	T("neg64", U64(-5), MOV64_IMM(R0, 5), NEG64(R0), EXIT()),
	T("neg32", 0xfffffffb, MOV64_IMM(R0, 5), NEG32(R0), EXIT()),
	T("all registers", 45,
	  MOV64_IMM(R0, 0), MOV64_IMM(R1, 1), MOV64_IMM(R2, 2), MOV64_IMM(R3, 3), MOV64_IMM(R4, 4),
	  MOV64_IMM(R5, 5), MOV64_IMM(R6, 6), MOV64_IMM(R7, 7), MOV64_IMM(R8, 8), MOV64_IMM(R9, 9),
	  ALU64_REG(EBPF_ADD, R0, R1), ALU64_REG(EBPF_ADD, R0, R2), ALU64_REG(EBPF_ADD, R0, R3),
	  ALU64_REG(EBPF_ADD, R0, R4), ALU64_REG(EBPF_ADD, R0, R5), ALU64_REG(EBPF_ADD, R0, R6),
	  ALU64_REG(EBPF_ADD, R0, R7), ALU64_REG(EBPF_ADD, R0, R8), ALU64_REG(EBPF_ADD, R0, R9), EXIT()),
	T("r10 readable", 0, MOV64_REG(R0, R10), ALU64_REG(EBPF_SUB, R0, R10), EXIT()),

	/* --- shifts, every form; x86 needs cl for register counts --- */
	T("lsh64 imm", 0x100, MOV64_IMM(R0, 1), ALU64_IMM(EBPF_LSH, R0, 8), EXIT()),
	T("lsh64 imm 63", 0x8000000000000000ull, MOV64_IMM(R0, 1), ALU64_IMM(EBPF_LSH, R0, 63), EXIT()),
	T("lsh64 reg", 0x10, MOV64_IMM(R0, 1), MOV64_IMM(R1, 4), ALU64_REG(EBPF_LSH, R0, R1), EXIT()),
	T("lsh64 reg masks to 63", 2, MOV64_IMM(R0, 1), MOV64_IMM(R2, 65), ALU64_REG(EBPF_LSH, R0, R2), EXIT()),
	T("lsh64 by r4 (cl)", 0x80, MOV64_IMM(R0, 1), MOV64_IMM(R4, 7), ALU64_REG(EBPF_LSH, R0, R4), EXIT()),
	T("lsh64 of r4 by r1", 0x30, MOV64_IMM(R4, 3), MOV64_IMM(R1, 4), ALU64_REG(EBPF_LSH, R4, R1), MOV64_REG(R0, R4), EXIT()),
	T("lsh64 r4 by r4", 0x30, MOV64_IMM(R4, 3), ALU64_REG(EBPF_LSH, R4, R4), ALU64_IMM(EBPF_LSH, R4, 1), MOV64_REG(R0, R4), EXIT()),
	T("lsh keeps r4", 0x15, MOV64_IMM(R0, 1), MOV64_IMM(R4, 20), MOV64_IMM(R1, 3), ALU64_REG(EBPF_LSH, R0, R1),
	  ALU64_REG(EBPF_ADD, R0, R4), ALU64_IMM(EBPF_SUB, R0, 7), EXIT()),
	T("lsh32 imm", 0x80000000, MOV64_IMM(R0, 1), ALU32_IMM(EBPF_LSH, R0, 31), EXIT()),
	T("lsh32 reg masks to 31", 2, MOV64_IMM(R0, 1), MOV64_IMM(R7, 33), ALU32_REG(EBPF_LSH, R0, R7), EXIT()),
	T("lsh32 drops high", 0, MOV64_IMM(R0, 1), ALU32_IMM(EBPF_LSH, R0, 31), ALU32_IMM(EBPF_LSH, R0, 1), EXIT()),
	T("rsh64 imm", 1, MOV64_IMM(R0, -1), ALU64_IMM(EBPF_RSH, R0, 63), EXIT()),
	T("rsh64 reg", 0x0fffffffffffffffull, MOV64_IMM(R0, -1), MOV64_IMM(R3, 4), ALU64_REG(EBPF_RSH, R0, R3), EXIT()),
	T("rsh32 imm", 0x7fffffff, MOV64_IMM(R0, -1), ALU32_IMM(EBPF_RSH, R0, 1), EXIT()),
	T("rsh32 reg", 0x0fffffff, MOV64_IMM(R0, -1), MOV64_IMM(R4, 4), ALU32_REG(EBPF_RSH, R0, R4), EXIT()),
	T("arsh64 imm", U64(-1), MOV64_IMM(R0, -2), ALU64_IMM(EBPF_ARSH, R0, 1), EXIT()),
	T("arsh64 reg", 0xfff0000000000000ull, LDDW(R0, 0x8000000000000000ull), MOV64_IMM(R5, 11), ALU64_REG(EBPF_ARSH, R0, R5), EXIT()),
	T("arsh32 imm", 0xffff8000, MOV32_IMM(R0, 0x80000000), ALU32_IMM(EBPF_ARSH, R0, 16), EXIT()),
	T("arsh32 reg", 0xfffffff8, MOV32_IMM(R0, -16), MOV64_IMM(R9, 1), ALU32_REG(EBPF_ARSH, R0, R9), EXIT()),
	T("shift by 0 (32-bit) zero-extends", 5, LDDW(R0, 0xff00000005ull), ALU32_IMM(EBPF_LSH, R0, 0), EXIT()),

	/* --- mul/div/mod: divmul32, divmul64 --- */
	T("mul64 imm", 42, MOV64_IMM(R0, 6), ALU64_IMM(EBPF_MUL, R0, 7), EXIT()),
	T("mul64 imm32", 0x100000000ull, MOV64_IMM(R0, 16), ALU64_IMM(EBPF_MUL, R0, 0x10000000), EXIT()),
	T("mul64 reg", 0xfffffffe00000001ull, MOV32_IMM(R0, -1), MOV32_IMM(R1, -1), ALU64_REG(EBPF_MUL, R0, R1), EXIT()),
	T("mul64 negative", U64(-21), MOV64_IMM(R0, 3), ALU64_IMM(EBPF_MUL, R0, -7), EXIT()),
	T("mul32 reg", 1, MOV32_IMM(R0, -1), MOV32_IMM(R1, -1), ALU32_REG(EBPF_MUL, R0, R1), EXIT()),
	T("mul32 imm", 0xfffffff9, MOV64_IMM(R0, 7), ALU32_IMM(EBPF_MUL, R0, -1), EXIT()),
	T("div64 imm", 33, MOV64_IMM(R0, 100), ALU64_IMM(EBPF_DIV, R0, 3), EXIT()),
	T("div64 reg", 0x2000000000000000ull, MOV64_IMM(R0, -1), ALU64_IMM(EBPF_RSH, R0, 1), ALU64_IMM(EBPF_ADD, R0, 1),
	  MOV64_IMM(R2, 4), ALU64_REG(EBPF_DIV, R0, R2), EXIT()),
	T("div64 imm is sign-extended then unsigned", 1, MOV64_IMM(R0, -1), ALU64_IMM(EBPF_DIV, R0, -1), EXIT()),
	T("div64 by zero reg", 0, MOV64_IMM(R0, 9), MOV64_IMM(R1, 0), ALU64_REG(EBPF_DIV, R0, R1), EXIT()),
	T("div64 by zero imm", 0, MOV64_IMM(R0, 9), ALU64_IMM(EBPF_DIV, R0, 0), EXIT()),
	T("div32 reg", 0x7fffffff, MOV32_IMM(R0, -1), MOV64_IMM(R3, 2), ALU32_REG(EBPF_DIV, R0, R3), EXIT()),
	T("div32 high divisor bits ignored", 4, MOV64_IMM(R0, 12), LDDW(R1, 0x100000003ull), ALU32_REG(EBPF_DIV, R0, R1), EXIT()),
	T("div32 imm", 0x55555555, MOV32_IMM(R0, -1), ALU32_IMM(EBPF_DIV, R0, 3), EXIT()),
	T("div32 by zero reg", 0, LDDW(R0, 0x1234567800000009ull), MOV64_IMM(R1, 0), ALU32_REG(EBPF_DIV, R0, R1), EXIT()),
	T("mod64 imm", 1, MOV64_IMM(R0, 100), ALU64_IMM(EBPF_MOD, R0, 3), EXIT()),
	T("mod64 reg", 5, MOV64_IMM(R0, 47), MOV64_IMM(R7, 7), ALU64_REG(EBPF_MOD, R0, R7), EXIT()),
	T("mod64 by zero keeps dst", 0x123456789ull, LDDW(R0, 0x123456789ull), MOV64_IMM(R1, 0), ALU64_REG(EBPF_MOD, R0, R1), EXIT()),
	T("mod64 by zero imm", 9, MOV64_IMM(R0, 9), ALU64_IMM(EBPF_MOD, R0, 0), EXIT()),
	T("mod32 reg", 2, MOV64_IMM(R0, 47), MOV64_IMM(R1, 5), ALU32_REG(EBPF_MOD, R0, R1), EXIT()),
	T("mod32 imm", 0, MOV32_IMM(R0, -1), ALU32_IMM(EBPF_MOD, R0, 3), EXIT()),
	T("mod32 by zero zero-extends", 0x9, LDDW(R0, 0x1234567800000009ull), MOV64_IMM(R1, 0), ALU32_REG(EBPF_MOD, R0, R1), EXIT()),
	T("mod32 by zero imm zero-extends", 0x9, LDDW(R0, 0x1234567800000009ull), ALU32_IMM(EBPF_MOD, R0, 0), EXIT()),
	T("div r3 (rdx) by r0 (rax)", 7 + 3, MOV64_IMM(R0, 3), MOV64_IMM(R3, 21), ALU64_REG(EBPF_DIV, R3, R0),
	  ALU64_REG(EBPF_ADD, R0, R3), ALU64_IMM(EBPF_SUB, R0, 0), EXIT()),
	T("mod r0 by r3 keeps r3", 21 + 1, MOV64_IMM(R0, 22), MOV64_IMM(R3, 21), ALU64_REG(EBPF_MOD, R0, R3),
	  ALU64_REG(EBPF_ADD, R0, R3), EXIT()),
	T("div keeps r0 and r3", 3 + 5 + 100, MOV64_IMM(R0, 3), MOV64_IMM(R3, 5), MOV64_IMM(R6, 1000),
	  MOV64_IMM(R7, 10), ALU64_REG(EBPF_DIV, R6, R7), ALU64_REG(EBPF_ADD, R0, R3), ALU64_REG(EBPF_ADD, R0, R6), EXIT()),
	T("div self", 1, MOV64_IMM(R3, 77), ALU64_REG(EBPF_DIV, R3, R3), MOV64_REG(R0, R3), EXIT()),
	T("sdiv64 reg", U64(-3), MOV64_IMM(R0, -10), MOV64_IMM(R1, 3), SDIV64_REG(R0, R1), EXIT()),
	T("sdiv64 imm", U64(-5), MOV64_IMM(R0, 10), SDIV64_IMM(R0, -2), EXIT()),
	T("sdiv64 INT_MIN / -1 wraps", 0x8000000000000000ull, LDDW(R0, 0x8000000000000000ull), MOV64_IMM(R1, -1), SDIV64_REG(R0, R1), EXIT()),
	T("sdiv64 imm -1", 0x8000000000000000ull, LDDW(R0, 0x8000000000000000ull), SDIV64_IMM(R0, -1), EXIT()),
	T("sdiv64 by zero", 0, MOV64_IMM(R0, -10), MOV64_IMM(R1, 0), SDIV64_REG(R0, R1), EXIT()),
	T("smod64 reg", U64(-1), MOV64_IMM(R0, -10), MOV64_IMM(R1, 3), SMOD64_REG(R0, R1), EXIT()),
	T("smod64 imm", 1, MOV64_IMM(R0, 10), SMOD64_IMM(R0, -3), EXIT()),
	T("smod64 INT_MIN % -1 is 0", 0, LDDW(R0, 0x8000000000000000ull), MOV64_IMM(R1, -1), SMOD64_REG(R0, R1), EXIT()),
	T("smod64 by zero", U64(-10), MOV64_IMM(R0, -10), MOV64_IMM(R1, 0), SMOD64_REG(R0, R1), EXIT()),
	T("sdiv32 reg", 0xfffffffd, MOV32_IMM(R0, -10), MOV32_IMM(R1, 3), SDIV32_REG(R0, R1), EXIT()),
	T("sdiv32 imm", 0xfffffffb, MOV32_IMM(R0, 10), SDIV32_IMM(R0, -2), EXIT()),
	T("sdiv32 INT_MIN / -1", 0x80000000, MOV32_IMM(R0, 0x80000000), MOV32_IMM(R1, -1), SDIV32_REG(R0, R1), EXIT()),
	T("sdiv32 by zero", 0, MOV32_IMM(R0, -10), MOV64_IMM(R1, 0), SDIV32_REG(R0, R1), EXIT()),
	T("smod32 reg", 0xffffffff, MOV32_IMM(R0, -10), MOV32_IMM(R1, 3), SMOD32_REG(R0, R1), EXIT()),
	T("smod32 imm", 1, MOV32_IMM(R0, 10), SMOD32_IMM(R0, -3), EXIT()),
	T("smod32 INT_MIN % -1", 0, MOV32_IMM(R0, 0x80000000), SMOD32_IMM(R0, -1), EXIT()),
	T("smod32 by zero", 0xfffffff6, LDDW(R0, 0x55555555fffffff6ull), MOV64_IMM(R1, 0), SMOD32_REG(R0, R1), EXIT()),
	T("sdiv32 ignores high bits", 0xfffffffe, LDDW(R0, 0x00000001fffffffcull), LDDW(R2, 0x0000000700000002ull), SDIV32_REG(R0, R2), EXIT()),

	/* --- movsx and byte swaps --- */
	T("movsx64 8", U64(-128), MOV64_IMM(R1, 0x180), MOVSX64(R0, R1, 8), EXIT()),
	T("movsx64 16", U64(-2), MOV64_IMM(R1, 0x1fffe), MOVSX64(R0, R1, 16), EXIT()),
	T("movsx64 32", U64(-1), MOV32_IMM(R1, -1), MOVSX64(R0, R1, 32), EXIT()),
	T("movsx64 8 positive", 0x7f, MOV64_IMM(R1, 0x37f), MOVSX64(R0, R1, 8), EXIT()),
	T("movsx64 8 from rsi (sil)", U64(-1), MOV64_IMM(R2, 0xff), MOVSX64(R0, R2, 8), EXIT()),
	T("movsx32 8", 0xffffff80, MOV64_IMM(R1, 0x80), MOVSX32(R0, R1, 8), EXIT()),
	T("movsx32 16", 0xffff8000, MOV64_IMM(R1, 0x8000), MOVSX32(R0, R1, 16), EXIT()),
	T("movsx32 8 from rdi (dil)", 0xfffffffe, MOV64_IMM(R1, 0xfe), MOVSX32(R7, R1, 8), MOV64_REG(R0, R7), EXIT()),
	T("le16", 0x3412, LDDW(R0, 0x1122334455663412ull), LE(R0, 16), EXIT()),
	T("le32", 0x55663412, LDDW(R0, 0x1122334455663412ull), LE(R0, 32), EXIT()),
	T("le64", 0x1122334455663412ull, LDDW(R0, 0x1122334455663412ull), LE(R0, 64), EXIT()),
	T("be16", 0x1234, LDDW(R0, 0x1122334455663412ull), BE(R0, 16), EXIT()),
	T("be32", 0x12346655, LDDW(R0, 0x1122334455663412ull), BE(R0, 32), EXIT()),
	T("be64", 0x1234665544332211ull, LDDW(R0, 0x1122334455663412ull), BE(R0, 64), EXIT()),
	T("be16 on r8 (r14)", 0xcdab, MOV64_IMM(R8, 0xabcd), BE(R8, 16), MOV64_REG(R0, R8), EXIT()),
	T("bswap16", 0x1234, LDDW(R0, 0x1122334455663412ull), BSWAP(R0, 16), EXIT()),
	T("bswap32", 0x12346655, LDDW(R0, 0x1122334455663412ull), BSWAP(R0, 32), EXIT()),
	T("bswap64", 0x1234665544332211ull, LDDW(R0, 0x1122334455663412ull), BSWAP(R0, 64), EXIT()),

	/* --- lddw --- */
	T("lddw", 0x1122334455667788ull, LDDW(R0, 0x1122334455667788ull), EXIT()),
	T("lddw high bit low word", 0x80000000ull, LDDW(R0, 0x80000000ull), EXIT()),
	T("lddw negative 32", U64(-2), LDDW(R0, U64(-2)), EXIT()),
	T("lddw into r9", 0xdeadbeefcafef00dull, LDDW(R9, 0xdeadbeefcafef00dull), MOV64_REG(R0, R9), EXIT()),

	/* --- jumps: every condition, both widths, taken and not taken --- */
#define JT(nm, cls, op, a, b, taken) \
	T(nm, taken, LDDW(R1, a), LDDW(R2, b), MOV64_IMM(R0, 0), cls##_REG(op, R1, R2, 1), EXIT(), MOV64_IMM(R0, 1), EXIT())
#define JI(nm, cls, op, a, imm, taken) \
	T(nm, taken, LDDW(R1, a), MOV64_IMM(R0, 0), cls##_IMM(op, R1, imm, 1), EXIT(), MOV64_IMM(R0, 1), EXIT())
	JT("jeq reg taken", JMP, EBPF_JEQ, 5, 5, 1), JT("jeq reg not", JMP, EBPF_JEQ, 5, 6, 0),
	JI("jeq imm taken", JMP, EBPF_JEQ, U64(-1), -1, 1), JI("jeq imm 0", JMP, EBPF_JEQ, 0, 0, 1),
	JI("jeq imm sign-extended not", JMP, EBPF_JEQ, 0xffffffff, -1, 0),
	JT("jne reg", JMP, EBPF_JNE, 5, 6, 1), JI("jne imm not", JMP, EBPF_JNE, 5, 5, 0), JI("jne imm 0", JMP, EBPF_JNE, 1, 0, 1),
	JT("jgt reg unsigned", JMP, EBPF_JGT, U64(-1), 1, 1), JT("jgt reg equal", JMP, EBPF_JGT, 3, 3, 0),
	JI("jgt imm", JMP, EBPF_JGT, 10, 9, 1), JI("jgt imm not", JMP, EBPF_JGT, 9, 9, 0),
	JT("jge reg", JMP, EBPF_JGE, 3, 3, 1), JT("jge reg not", JMP, EBPF_JGE, 2, 3, 0),
	JI("jge imm", JMP, EBPF_JGE, U64(-1), -1, 1), JI("jge imm not", JMP, EBPF_JGE, 0, 1, 0),
	JT("jlt reg", JMP, EBPF_JLT, 1, U64(-1), 1), JT("jlt reg not", JMP, EBPF_JLT, 3, 3, 0),
	JI("jlt imm", JMP, EBPF_JLT, 2, 3, 1), JI("jlt imm not", JMP, EBPF_JLT, U64(-1), 3, 0),
	JT("jle reg", JMP, EBPF_JLE, 3, 3, 1), JT("jle reg not", JMP, EBPF_JLE, 4, 3, 0),
	JI("jle imm", JMP, EBPF_JLE, 3, 3, 1), JI("jle imm not", JMP, EBPF_JLE, 4, 3, 0),
	JT("jset reg", JMP, EBPF_JSET, 0x18, 0x10, 1), JT("jset reg not", JMP, EBPF_JSET, 0x18, 0x7, 0),
	JI("jset imm", JMP, EBPF_JSET, 0x8000000000000000ull, -1, 1), JI("jset imm not", JMP, EBPF_JSET, 0x100000000ull, 0xffff, 0),
	JT("jsgt reg", JMP, EBPF_JSGT, 1, U64(-1), 1), JT("jsgt reg not", JMP, EBPF_JSGT, U64(-1), 1, 0),
	JI("jsgt imm", JMP, EBPF_JSGT, U64(-1), -2, 1), JI("jsgt imm not", JMP, EBPF_JSGT, U64(-2), -2, 0),
	JT("jsge reg", JMP, EBPF_JSGE, U64(-3), U64(-3), 1), JT("jsge reg not", JMP, EBPF_JSGE, U64(-4), U64(-3), 0),
	JI("jsge imm", JMP, EBPF_JSGE, 0, -1, 1), JI("jsge imm not", JMP, EBPF_JSGE, U64(-2), -1, 0),
	JT("jslt reg", JMP, EBPF_JSLT, U64(-1), 0, 1), JT("jslt reg not", JMP, EBPF_JSLT, 0, U64(-1), 0),
	JI("jslt imm", JMP, EBPF_JSLT, U64(-5), -4, 1), JI("jslt imm not", JMP, EBPF_JSLT, 7, -4, 0),
	JT("jsle reg", JMP, EBPF_JSLE, U64(-1), U64(-1), 1), JT("jsle reg not", JMP, EBPF_JSLE, 1, U64(-1), 0),
	JI("jsle imm", JMP, EBPF_JSLE, U64(-9), -9, 1), JI("jsle imm not", JMP, EBPF_JSLE, U64(-8), -9, 0),
	JT("jeq32 reg ignores high", JMP32, EBPF_JEQ, 0x100000005ull, 0x200000005ull, 1),
	JI("jeq32 imm", JMP32, EBPF_JEQ, 0xffffffff, -1, 1), JI("jeq32 imm not", JMP32, EBPF_JEQ, 0xfffffffe, -1, 0),
	JT("jne32 reg", JMP32, EBPF_JNE, 0x100000005ull, 0x100000006ull, 1), JI("jne32 imm not", JMP32, EBPF_JNE, 0x500000005ull, 5, 0),
	JT("jgt32 reg", JMP32, EBPF_JGT, 0x00000000ffffffffull, 0x1000000001ull, 1), JI("jgt32 imm not", JMP32, EBPF_JGT, 0x1000000001ull, 2, 0),
	JT("jge32 reg", JMP32, EBPF_JGE, 0x700000003ull, 3, 1), JI("jge32 imm not", JMP32, EBPF_JGE, 0x900000002ull, 3, 0),
	JT("jlt32 reg", JMP32, EBPF_JLT, 0x900000002ull, 3, 1), JI("jlt32 imm not", JMP32, EBPF_JLT, 0xffffffffull, 3, 0),
	JT("jle32 reg", JMP32, EBPF_JLE, 0x900000003ull, 3, 1), JI("jle32 imm not", JMP32, EBPF_JLE, 4, 3, 0),
	JT("jset32 reg", JMP32, EBPF_JSET, 0x100000001ull, 0x1, 1), JI("jset32 imm not", JMP32, EBPF_JSET, 0xff00000000ull, -1, 0),
	JT("jsgt32 reg", JMP32, EBPF_JSGT, 1, 0xffffffff, 1), JI("jsgt32 imm not", JMP32, EBPF_JSGT, 0x80000000ull, 0, 0),
	JT("jsge32 reg", JMP32, EBPF_JSGE, 0xfffffffd, 0xfffffffd, 1), JI("jsge32 imm not", JMP32, EBPF_JSGE, 0xfffffffe, -1, 0),
	JT("jslt32 reg", JMP32, EBPF_JSLT, 0x1ffffffff, 0, 1), JI("jslt32 imm not", JMP32, EBPF_JSLT, 0x7fffffff, 0, 0),
	JT("jsle32 reg", JMP32, EBPF_JSLE, 0x80000000, 0x7fffffff, 1), JI("jsle32 imm not", JMP32, EBPF_JSLE, 1, 0, 0),
	T("ja", 2, MOV64_IMM(R0, 1), JA(1), EXIT(), MOV64_IMM(R0, 2), EXIT()),
	T("ja32", 3, MOV64_IMM(R0, 1), JA32(2), EXIT(), EXIT(), MOV64_IMM(R0, 3), EXIT()),
	T("ja backwards loop", 10, MOV64_IMM(R0, 0), MOV64_IMM(R1, 10), ALU64_IMM(EBPF_ADD, R0, 1),
	  ALU64_IMM(EBPF_SUB, R1, 1), JMP_IMM(EBPF_JEQ, R1, 0, 1), JA(-4), EXIT()),
	T("long forward jump (rel32)", 1, MOV64_IMM(R0, 1), JA(40),
	  LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9),
	  LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9),
	  LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9), LDDW(R0, 9), EXIT()),
	T("loop 1000 (backward jcc)", 500500, MOV64_IMM(R0, 0), MOV64_IMM(R1, 1000), ALU64_REG(EBPF_ADD, R0, R1),
	  ALU64_IMM(EBPF_SUB, R1, 1), JMP_IMM(EBPF_JNE, R1, 0, -3), EXIT()),

	/* --- memory: ldx/st/stx of all widths, sign-extending loads --- */
	TM("ldxb", "\x11\x22\x33\x44", 0x33, LDX(EBPF_B, R0, R1, 2), EXIT()),
	TM("ldxh", "\x11\x22\x33\x44", 0x3322, LDX(EBPF_H, R0, R1, 1), EXIT()),
	TM("ldxw", "\x11\x22\x33\x44\x55", 0x55443322, LDX(EBPF_W, R0, R1, 1), EXIT()),
	TM("ldxdw", "\x01\x02\x03\x04\x05\x06\x07\x88", 0x8807060504030201ull, LDX(EBPF_DW, R0, R1, 0), EXIT()),
	TM("ldxb zero-extends", "\xff", 0xff, MOV64_IMM(R0, -1), LDX(EBPF_B, R0, R1, 0), EXIT()),
	TM("ldxh same reg", "\x34\x12", 0x1234, LDX(EBPF_H, R1, R1, 0), MOV64_REG(R0, R1), EXIT()),
	TM("ldxsb", "\x80", U64(-128), LDXSX(EBPF_B, R0, R1, 0), EXIT()),
	TM("ldxsh", "\x00\xfe\xff", U64(-2), LDXSX(EBPF_H, R0, R1, 1), EXIT()),
	TM("ldxsw", "\xfe\xff\xff\xff", U64(-2), LDXSX(EBPF_W, R0, R1, 0), EXIT()),
	TM("ldxsb positive", "\x7f", 0x7f, LDXSX(EBPF_B, R0, R1, 0), EXIT()),
	TM("r2 holds the length", "abcdef", 6, MOV64_REG(R0, R2), EXIT()),
	T("no memory: r1 NULL, r2 0", 0, MOV64_REG(R0, R1), ALU64_REG(EBPF_OR, R0, R2), EXIT()),
	TMA("stb", "\0\0\0\0", "\0\0\x99\0", 0, ST(EBPF_B, R1, 2, 0x99), EXIT()),
	TMA("sth", "\0\0\0\0", "\0\x34\x12\0", 0, ST(EBPF_H, R1, 1, 0x1234), EXIT()),
	TMA("stw", "\0\0\0\0\0", "\0\x44\x33\x22\x11", 0, ST(EBPF_W, R1, 1, 0x11223344), EXIT()),
	TMA("stdw sign-extends imm", "\0\0\0\0\0\0\0\0", "\xfe\xff\xff\xff\xff\xff\xff\xff", 0, ST(EBPF_DW, R1, 0, -2), EXIT()),
	TMA("stxb from r2 (sil)", "\0\0", "\x02\0", 0, MOV64_REG(R3, R1), MOV64_IMM(R2, 0x102), STX(EBPF_B, R3, R2, 0), EXIT()),
	TMA("stxb from r1 (dil)", "\0\0", "\x00\x00", 0, MOV64_REG(R3, R1), MOV64_IMM(R1, 0x100), STX(EBPF_B, R3, R1, 1), EXIT()),
	TMA("stxh", "\0\0\0", "\0\xcd\xab", 0, MOV64_IMM(R4, 0xabcd), STX(EBPF_H, R1, R4, 1), EXIT()),
	TMA("stxw", "\0\0\0\0", "\x78\x56\x34\x12", 0, LDDW(R5, 0xffffffff12345678ull), STX(EBPF_W, R1, R5, 0), EXIT()),
	TMA("stxdw", "\0\0\0\0\0\0\0\0", "\x08\x07\x06\x05\x04\x03\x02\x01", 0, LDDW(R9, 0x0102030405060708ull), STX(EBPF_DW, R1, R9, 0), EXIT()),
	T("stack round trip, all widths", 0x1122334455667788ull + 0xab + 0xcdef + 0x89abcdef,
	  LDDW(R1, 0x1122334455667788ull), STX(EBPF_DW, R10, R1, -8), ST(EBPF_B, R10, -9, 0xab),
	  ST(EBPF_H, R10, -12, 0xcdef), MOV32_IMM(R2, 0x89abcdef), STX(EBPF_W, R10, R2, -16),
	  LDX(EBPF_DW, R0, R10, -8), LDX(EBPF_B, R3, R10, -9), ALU64_REG(EBPF_ADD, R0, R3),
	  LDX(EBPF_H, R3, R10, -12), ALU64_REG(EBPF_ADD, R0, R3), LDX(EBPF_W, R3, R10, -16), ALU64_REG(EBPF_ADD, R0, R3), EXIT()),
	T("stack bottom", 7, ST(EBPF_DW, R10, -512, 7), LDX(EBPF_DW, R0, R10, -512), EXIT()),
	T("stack via copied pointer", 9, MOV64_REG(R6, R10), ALU64_IMM(EBPF_ADD, R6, -64), ST(EBPF_W, R6, 4, 9),
	  LDX(EBPF_W, R0, R10, -60), EXIT()),
	TM("load via r0 (rax) base", "\x05\0\0\0\0\0\0\0", 5, MOV64_REG(R0, R1), LDX(EBPF_DW, R0, R0, 0), EXIT()),
	TM("load via r7 (r13 base needs disp)", "\x06", 6, MOV64_REG(R7, R1), LDX(EBPF_B, R0, R7, 0), EXIT()),
	TM("load via r6 large offset", "\x01", 1, MOV64_REG(R6, R1), ALU64_IMM(EBPF_ADD, R6, -1000), LDX(EBPF_B, R0, R6, 1000), EXIT()),

	/* --- atomics: atomic32 / atomic64 --- */
	TMA("atomic add64", "\x01\0\0\0\0\0\0\0", "\x03\0\0\0\0\0\0\0", 0, MOV64_IMM(R2, 2), ATOMIC(EBPF_DW, EBPF_ADD, R1, R2, 0), EXIT()),
	TMA("atomic add32", "\xff\xff\xff\xff\x01", "\x01\0\0\0\x01", 0, MOV64_IMM(R2, 2), ATOMIC(EBPF_W, EBPF_ADD, R1, R2, 0), EXIT()),
	TMA("atomic or64", "\x01\0\0\0\0\0\0\0", "\x03\0\0\0\0\0\0\x80", 0, LDDW(R2, 0x8000000000000002ull), ATOMIC(EBPF_DW, EBPF_OR, R1, R2, 0), EXIT()),
	TMA("atomic and32", "\x0f\xf0\0\0", "\x0a\x00\0\0", 0, MOV64_IMM(R3, 0x0a), ATOMIC(EBPF_W, EBPF_AND, R1, R3, 0), EXIT()),
	TMA("atomic xor64", "\xff\0\0\0\0\0\0\0", "\xf0\0\0\0\0\0\0\0", 0, MOV64_IMM(R4, 0x0f), ATOMIC(EBPF_DW, EBPF_XOR, R1, R4, 0), EXIT()),
	TMA("atomic fetch add64", "\x05\0\0\0\0\0\0\0", "\x0c\0\0\0\0\0\0\0", 5, MOV64_IMM(R0, 7), ATOMIC(EBPF_DW, EBPF_ADD | EBPF_FETCH, R1, R0, 0), EXIT()),
	TMA("atomic fetch add32 zero-extends", "\xfe\xff\xff\xff", "\xff\xff\xff\xff", 0xfffffffe, MOV64_IMM(R5, 1),
	    ATOMIC(EBPF_W, EBPF_ADD | EBPF_FETCH, R1, R5, 0), MOV64_REG(R0, R5), EXIT()),
	TMA("atomic fetch or64", "\x10\0\0\0\0\0\0\0", "\x11\0\0\0\0\0\0\0", 0x10 + 100, MOV64_IMM(R0, 100), MOV64_IMM(R2, 1),
	    ATOMIC(EBPF_DW, EBPF_OR | EBPF_FETCH, R1, R2, 0), ALU64_REG(EBPF_ADD, R0, R2), EXIT()),
	TMA("atomic fetch and32", "\xff\x00\0\0", "\x0f\0\0\0", 0xff, MOV64_IMM(R2, 0x0f),
	    ATOMIC(EBPF_W, EBPF_AND | EBPF_FETCH, R1, R2, 0), MOV64_REG(R0, R2), EXIT()),
	TMA("atomic fetch xor64 src r0", "\x0f\0\0\0\0\0\0\0", "\x0c\0\0\0\0\0\0\0", 0x0f, MOV64_IMM(R0, 3),
	    ATOMIC(EBPF_DW, EBPF_XOR | EBPF_FETCH, R1, R0, 0), EXIT()),
	TMA("atomic fetch xor32 base r0", "\0\0\0\0\x0f\0\0\0", "\0\0\0\0\x0c\0\0\0", 0x0f + 3, MOV64_REG(R0, R1), MOV64_IMM(R2, 3),
	    ATOMIC(EBPF_W, EBPF_XOR | EBPF_FETCH, R0, R2, 4), MOV64_REG(R0, R2), ALU64_IMM(EBPF_ADD, R0, 3), EXIT()),
	TMA("xchg64", "\x01\0\0\0\0\0\0\0", "\x09\0\0\0\0\0\0\0", 1, MOV64_IMM(R2, 9), ATOMIC(EBPF_DW, EBPF_XCHG, R1, R2, 0), MOV64_REG(R0, R2), EXIT()),
	TMA("xchg32", "\x01\0\0\0\x07", "\x09\0\0\0\x07", 1, LDDW(R2, 0x500000009ull), ATOMIC(EBPF_W, EBPF_XCHG, R1, R2, 0), MOV64_REG(R0, R2), EXIT()),
	TMA("cmpxchg64 success", "\x05\0\0\0\0\0\0\0", "\x09\0\0\0\0\0\0\0", 5, MOV64_IMM(R0, 5), MOV64_IMM(R2, 9),
	    ATOMIC(EBPF_DW, EBPF_CMPXCHG, R1, R2, 0), EXIT()),
	TMA("cmpxchg64 failure", "\x05\0\0\0\0\0\0\0", "\x05\0\0\0\0\0\0\0", 5, MOV64_IMM(R0, 6), MOV64_IMM(R2, 9),
	    ATOMIC(EBPF_DW, EBPF_CMPXCHG, R1, R2, 0), EXIT()),
	TMA("cmpxchg32 success zero-extends r0", "\x05\0\0\0", "\x09\0\0\0", 5, LDDW(R0, 0x700000005ull), MOV64_IMM(R2, 9),
	    ATOMIC(EBPF_W, EBPF_CMPXCHG, R1, R2, 0), EXIT()),
	TMA("cmpxchg32 failure", "\x05\0\0\0", "\x05\0\0\0", 5, MOV64_IMM(R0, 4), MOV64_IMM(R2, 9),
	    ATOMIC(EBPF_W, EBPF_CMPXCHG, R1, R2, 0), EXIT()),
	T("atomic on stack", 15, ST(EBPF_DW, R10, -8, 10), MOV64_IMM(R1, 5), ATOMIC(EBPF_DW, EBPF_ADD, R10, R1, -8),
	  LDX(EBPF_DW, R0, R10, -8), EXIT()),

	/* --- calls: helpers, callx, local calls --- */
	T("helper identity", 42, MOV64_IMM(R1, 42), CALL_HELPER(EBPF_HELPER_IDENTITY), EXIT()),
	T("helper gets r1..r5", 15, MOV64_IMM(R1, 1), MOV64_IMM(R2, 2), MOV64_IMM(R3, 3), MOV64_IMM(R4, 4),
	  MOV64_IMM(R5, 5), CALL_HELPER(EBPF_HELPER_ADD), EXIT()),
	T("helper keeps r6..r9", 6 + 7 + 8 + 9 + 6, MOV64_IMM(R6, 6), MOV64_IMM(R7, 7), MOV64_IMM(R8, 8), MOV64_IMM(R9, 9),
	  MOV64_IMM(R1, 2), MOV64_IMM(R2, 3), CALL_HELPER(EBPF_HELPER_MUL), ALU64_REG(EBPF_ADD, R0, R6),
	  ALU64_REG(EBPF_ADD, R0, R7), ALU64_REG(EBPF_ADD, R0, R8), ALU64_REG(EBPF_ADD, R0, R9), EXIT()),
	T("callx (conformance form)", 2, MOV64_IMM(R1, -1), MOV64_IMM(R2, 5), CALLX(R2), MOV64_IMM(R0, 2), EXIT()),
	T("callx result", 12, MOV64_IMM(R1, 3), MOV64_IMM(R2, 4), MOV64_IMM(R8, EBPF_HELPER_MUL), CALLX(R8), EXIT()),
	T("callx register in imm (LLVM form)", 12, MOV64_IMM(R1, 3), MOV64_IMM(R2, 4), MOV64_IMM(R7, EBPF_HELPER_MUL),
	  INSN(0x8d, 0, 0, 0, 7), EXIT()),
	T("callx empty slot gives 0", 0, MOV64_IMM(R0, 9), MOV64_IMM(R6, 40), CALLX(R6), EXIT()),
	T("callx out of range gives 0", 0, MOV64_IMM(R0, 9), MOV64_IMM(R6, 1000), CALLX(R6), EXIT()),
	T("local call", 1,
	  MOV64_IMM(R1, 1), MOV64_IMM(R2, 2), MOV64_IMM(R3, 3), MOV64_IMM(R4, 4), MOV64_IMM(R5, 5),
	  MOV64_IMM(R6, 6), MOV64_IMM(R7, 7), MOV64_IMM(R8, 8), MOV64_IMM(R9, 9),
	  ST(EBPF_DW, R10, -8, 0x11223344),
	  CALL_LOCAL(11),
	  JMP_IMM(EBPF_JNE, R0, 15, 8), JMP_IMM(EBPF_JNE, R6, 6, 7), JMP_IMM(EBPF_JNE, R7, 7, 6),
	  JMP_IMM(EBPF_JNE, R8, 8, 5), JMP_IMM(EBPF_JNE, R9, 9, 4), LDX(EBPF_DW, R1, R10, -8),
	  JMP_IMM(EBPF_JNE, R1, 0x11223344, 2), MOV64_IMM(R0, 1), EXIT(), MOV64_IMM(R0, -1), EXIT(),
	  /* func: r0 = r1+..+r5, clobber r6..r9 and its own frame */
	  MOV64_REG(R0, R1), ALU64_REG(EBPF_ADD, R0, R2), ALU64_REG(EBPF_ADD, R0, R3), ALU64_REG(EBPF_ADD, R0, R4),
	  ALU64_REG(EBPF_ADD, R0, R5), ST(EBPF_DW, R10, -8, 0x55), MOV64_IMM(R6, 0), MOV64_IMM(R7, 0),
	  MOV64_IMM(R8, 0), MOV64_IMM(R9, 0), EXIT()),
	T("nested local calls", 8,
	  MOV64_IMM(R1, 1), CALL_LOCAL(1), EXIT(),
	  ALU64_IMM(EBPF_LSH, R1, 1), CALL_LOCAL(1), EXIT(),
	  ALU64_IMM(EBPF_LSH, R1, 1), CALL_LOCAL(1), EXIT(),
	  ALU64_IMM(EBPF_LSH, R1, 1), MOV64_REG(R0, R1), EXIT()),
	T("local call frames are distinct", 3,
	  ST(EBPF_DW, R10, -8, 1), CALL_LOCAL(3), LDX(EBPF_DW, R1, R10, -8), ALU64_REG(EBPF_ADD, R0, R1), EXIT(),
	  ST(EBPF_DW, R10, -8, 2), LDX(EBPF_DW, R0, R10, -8), EXIT()),
	T("helper from a local function", 21, MOV64_IMM(R1, 20), CALL_LOCAL(2), ALU64_IMM(EBPF_ADD, R0, 1), EXIT(),
	  CALL_HELPER(EBPF_HELPER_IDENTITY), EXIT()),
	/*
	 * The last instruction may be `ja` (the kernel's rule: exit or an
	 * unconditional jump), as in bpf_conformance's exit-not-last and ja32.
	 */
	T("ends in ja (exit not last)", 3, MOV64_IMM(R0, 1), JA(1), EXIT(), ALU64_IMM(EBPF_ADD, R0, 2), JA(-3)),
	T("ends in ja32", 5, MOV64_IMM(R0, 1), JA32(1), EXIT(), ALU64_IMM(EBPF_ADD, R0, 4), JA32(-3)),
	T("last function ends in ja", 6, MOV64_IMM(R1, 5), CALL_LOCAL(1), EXIT(),
	  MOV64_REG(R0, R1), JA(1), EXIT(), ALU64_IMM(EBPF_ADD, R0, 1), JA(-3)),
	T("ends in a ja loop", 10, MOV64_IMM(R0, 0), JA(1), EXIT(), ALU64_IMM(EBPF_ADD, R0, 1),
	  JMP_IMM(EBPF_JEQ, R0, 10, -3), JA(-3)),
	/* clang -O2's shape of a C filter: the shared exit block sits mid-function, the last goto jumps back to it */
#define C_FILTER MOV64_IMM(R0, 0), LDX(EBPF_B, R2, R1, 0), JMP_IMM(EBPF_JNE, R2, 0x45, 1), JA(1), EXIT(), \
	LDX(EBPF_B, R3, R1, 1), MOV64_IMM(R0, 1), JMP_IMM(EBPF_JEQ, R3, 6, -4), MOV64_IMM(R0, 2), \
	JMP_IMM(EBPF_JEQ, R3, 17, -6), MOV64_IMM(R0, 0), JA(-8)
	TM("C filter ending in goto -8: tcp", "\x45\x06", 1, C_FILTER),
	TM("C filter ending in goto -8: udp", "\x45\x11", 2, C_FILTER),
	TM("C filter ending in goto -8: icmp", "\x45\x01", 0, C_FILTER),
	TM("C filter ending in goto -8: not ipv4", "\x60\x06", 0, C_FILTER),
	T("local function loop then ja end", 6, MOV64_IMM(R1, 3), CALL_LOCAL(1), EXIT(),
	  MOV64_IMM(R0, 0), ALU64_REG(EBPF_ADD, R0, R1), ALU64_IMM(EBPF_SUB, R1, 1), JMP_IMM(EBPF_JNE, R1, 0, -3), EXIT()),
};

static struct ep_pool *pool;

static void setup(void)
{
	struct ep_config cfg = { .sz = sizeof(cfg) };

	ck_assert_int_eq(ep_pool_create(&cfg, &pool), 0);
}

static void teardown(void)
{
	ep_pool_destroy(pool);
	pool = NULL;
}

static void run_case(const struct tcase *c, bool jit)
{
	struct ebpf_vm *vm;
	struct ebpf_prog *p;
	struct ebpf_err err;
	uint8_t mem[64] = { 0 };
	uint64_t r0 = 0xdead;

	ck_assert_int_eq(ebpf_vm_create(pool, &vm), 0);
	ebpf_std_helpers(vm);
	ck_assert_msg(ebpf_load(vm, c->insns, c->n, NULL, &p, &err) == 0, "%s: load: %s", c->name, err.msg);
	if (jit)
		ck_assert_msg(ebpf_jit(p, &err) == 0, "%s: jit: %s", c->name, err.msg);
	memcpy(mem, c->mem ? c->mem : "", c->memlen);
	int rc = jit ? ebpf_run_jit(p, c->mem ? mem : NULL, c->memlen, &r0)
		     : ebpf_run_interp(p, c->mem ? mem : NULL, c->memlen, &r0);

	ck_assert_int_eq(rc, 0);
	ck_assert_msg(r0 == c->expect, "%s (%s): r0 = 0x%llx, expected 0x%llx", c->name,
		      jit ? "jit" : "interp", (unsigned long long)r0, (unsigned long long)c->expect);
	if (c->mem_after)
		ck_assert_msg(!memcmp(mem, c->mem_after, c->memlen), "%s (%s): memory differs", c->name,
			      jit ? "jit" : "interp");
	ebpf_unload(p);
	ebpf_vm_destroy(vm);
}

START_TEST(test_interp)
{
	run_case(&cases[_i], false);
}
END_TEST

START_TEST(test_jit)
{
	run_case(&cases[_i], true);
}
END_TEST

/* --- verifier rejections: each with the index and reason reported --- */
struct rcase {
	const char *name;
	int insn;
	const char *reason;
	const struct ebpf_insn *insns;
	size_t n;
};

#define REJ(name, insn, reason, ...) { name, insn, reason, PROG(__VA_ARGS__) }

static const struct rcase rejects[] = {
	REJ("jump past end", 0, "out of range", JA(5), EXIT()),
	REJ("jump before start", 1, "out of range", MOV64_IMM(R0, 0), JA(-3), EXIT()),
	REJ("conditional jump out of range", 0, "out of range", JMP_IMM(EBPF_JEQ, R0, 0, 2), EXIT()),
	REJ("ja32 out of range", 0, "out of range", JA32(9), EXIT()),
	REJ("jump into lddw", 0, "middle of lddw", JA(1), LDDW(R0, 1), EXIT()),
	REJ("unknown opcode", 1, "unknown opcode 0xff", MOV64_IMM(R0, 0), INSN(0xff, 0, 0, 0, 0), EXIT()),
	REJ("unknown ALU op 0xe0", 0, "unknown opcode", INSN(EBPF_CLS_ALU64 | 0xe0, 0, 0, 0, 0), EXIT()),
	REJ("unknown jump op", 0, "unknown opcode", INSN(EBPF_CLS_JMP | 0xe0, 0, 0, 0, 0), EXIT()),
	REJ("call in JMP32", 0, "unknown opcode", INSN(EBPF_CLS_JMP32 | EBPF_CALL, 0, 0, 0, 1), EXIT()),
	REJ("64-bit sign-extending load", 0, "unknown opcode", LDXSX(EBPF_DW, R0, R1, 0), EXIT()),
	REJ("bad register dst", 0, "invalid register r11", MOV64_IMM(11, 0), EXIT()),
	REJ("bad register src", 0, "invalid register r12", MOV64_REG(R0, 12), EXIT()),
	REJ("write to r10 (alu)", 0, "r10", MOV64_IMM(R10, 0), EXIT()),
	REJ("write to r10 (add)", 0, "r10", ALU64_IMM(EBPF_ADD, R10, -8), EXIT()),
	REJ("write to r10 (load)", 0, "r10", LDX(EBPF_DW, R10, R1, 0), EXIT()),
	REJ("write to r10 (lddw)", 0, "r10", LDDW(R10, 1), EXIT()),
	REJ("write to r10 (atomic fetch)", 0, "r10", ATOMIC(EBPF_DW, EBPF_ADD | EBPF_FETCH, R1, R10, 0), EXIT()),
	REJ("lddw truncated", 1, "second slot", MOV64_IMM(R0, 0), INSN(0x18, 0, 0, 0, 0)),
	REJ("lddw bad second slot", 0, "second slot", INSN(0x18, 0, 0, 0, 1), INSN(0x07, 0, 0, 0, 0), EXIT()),
	REJ("lddw map pseudo src", 0, "not supported", INSN(0x18, 0, 1, 0, 1), INSN(0, 0, 0, 0, 0), EXIT()),
	REJ("no exit at end", 0, "does not end with exit", MOV64_IMM(R0, 0)),
	REJ("ends in a conditional jump", 1, "does not end with exit or ja",
	    MOV64_IMM(R0, 0), JMP_IMM(EBPF_JEQ, R0, 0, -2)),
	REJ("ends in a call", 1, "does not end with exit or ja", MOV64_IMM(R1, 0), CALL_HELPER(5)),
	REJ("ends in ja past the end", 1, "out of range", MOV64_IMM(R0, 0), JA(0)),
	REJ("ends in ja32 past the end", 1, "out of range", MOV64_IMM(R0, 0), JA32(0)),
	REJ("function ends in conditional jump", 4, "falls into", CALL_LOCAL(2), CALL_LOCAL(3), EXIT(),
	    MOV64_IMM(R0, 0), JMP_IMM(EBPF_JEQ, R0, 0, -2), EXIT()),
	REJ("ends with lddw", 2, "does not end", EXIT(), LDDW(R0, 1)),
	REJ("empty program", -1, "empty", EXIT()), /* n forced to 0 below */
	REJ("stack below frame", 0, "outside", ST(EBPF_DW, R10, -520, 0), EXIT()),
	REJ("stack above frame", 0, "outside", LDX(EBPF_W, R0, R10, -2), EXIT()),
	REJ("stack positive offset", 0, "outside", STX(EBPF_B, R10, R1, 0), EXIT()),
	REJ("legacy LD_ABS", 0, "legacy packet", INSN(0x30, 0, 0, 0, 0), EXIT()),
	REJ("legacy LD_IND", 0, "legacy packet", INSN(0x40, 0, 1, 0, 0), EXIT()),
	REJ("unknown helper", 0, "unknown helper 40", CALL_HELPER(40), EXIT()),
	REJ("negative helper", 0, "unknown helper", CALL_HELPER(-1), EXIT()),
	REJ("BTF call", 0, "not supported", INSN(0x85, 0, 2, 0, 1), EXIT()),
	REJ("local call out of range", 0, "out of range", CALL_LOCAL(5), EXIT()),
	REJ("recursion", 3, "recursive", CALL_LOCAL(1), EXIT(), MOV64_IMM(R0, 0), CALL_LOCAL(-2), EXIT()),
	REJ("call depth", 14, "depth",
	    CALL_LOCAL(1), EXIT(), CALL_LOCAL(1), EXIT(), CALL_LOCAL(1), EXIT(), CALL_LOCAL(1), EXIT(),
	    CALL_LOCAL(1), EXIT(), CALL_LOCAL(1), EXIT(), CALL_LOCAL(1), EXIT(), CALL_LOCAL(1), EXIT(),
	    CALL_LOCAL(1), EXIT(), EXIT()),
	REJ("jump into another function", 1, "leaves its function", CALL_LOCAL(1), JA(1), EXIT(), EXIT()),
	REJ("function falls through", 2, "falls into", CALL_LOCAL(2), EXIT(), MOV64_IMM(R0, 0), EXIT()),
	REJ("bad atomic op", 0, "unknown atomic", ATOMIC(EBPF_DW, 0x10, R1, R2, 0), EXIT()),
	REJ("atomic on a byte", 0, "8/16-bit", ATOMIC(EBPF_B, EBPF_ADD, R1, R2, 0), EXIT()),
	REJ("bad byte swap width", 0, "byte swap width", BE(R0, 8), EXIT()),
	REJ("bswap with source bit", 0, "unknown opcode", INSN(0xdf, 0, 0, 0, 16), EXIT()),
	REJ("bad div offset", 0, "div/mod offset", INSN(0x3f, 0, 1, 2, 0), EXIT()),
	REJ("bad movsx offset", 0, "movsx", MOVSX64(R0, R1, 4), EXIT()),
	REJ("movsx32 of 32", 0, "movsx", MOVSX32(R0, R1, 32), EXIT()),
	REJ("alu offset", 0, "non-zero offset", INSN(0x0f, 0, 1, 3, 0), EXIT()),
	REJ("exit with fields", 0, "malformed exit", INSN(0x95, 1, 0, 0, 0), EXIT()),
	REJ("neg with source bit", 0, "unknown opcode", INSN(0x8f, 0, 0, 0, 0), EXIT()),
	REJ("ST with src", 0, "non-zero src", INSN(0x7a, 1, 2, 0, 0), EXIT()),
	REJ("callx bad register in imm", 0, "callx register", INSN(0x8d, 0, 0, 0, 11), EXIT()),
	REJ("STX mode ABS", 0, "unknown opcode", INSN(0x23, 1, 2, 0, 0), EXIT()),
};

START_TEST(test_reject)
{
	const struct rcase *c = &rejects[_i];
	struct ebpf_vm *vm;
	struct ebpf_prog *p = NULL;
	struct ebpf_err err;
	size_t n = strcmp(c->name, "empty program") ? c->n : 0;

	ck_assert_int_eq(ebpf_vm_create(NULL, &vm), 0);
	ebpf_std_helpers(vm);
	ck_assert_msg(ebpf_load(vm, c->insns, n, NULL, &p, &err) == -EINVAL, "%s: accepted", c->name);
	ck_assert_msg(err.insn == c->insn, "%s: insn %d, expected %d (%s)", c->name, err.insn, c->insn, err.msg);
	ck_assert_msg(strstr(err.msg, c->reason), "%s: message '%s' lacks '%s'", c->name, err.msg, c->reason);
	ck_assert_ptr_null(p);
	ebpf_vm_destroy(vm);
}
END_TEST

/* --- JIT specifics: names, INT3 holes, live call patching --- */
START_TEST(test_names)
{
	static const struct ebpf_insn prog[] = { MOV64_IMM(R0, 1), EXIT() };
	struct ebpf_vm *vm;
	struct ebpf_prog *a, *b;

	ck_assert_int_eq(ebpf_vm_create(pool, &vm), 0);
	ck_assert_int_eq(ebpf_load(vm, prog, 2, NULL, &a, NULL), 0);
	ck_assert_int_eq(ebpf_load(vm, prog, 2, "xdp_filter", &b, NULL), 0);
	ck_assert_str_eq(ebpf_prog_name(a), "bpf_prog_0");
	ck_assert_str_eq(ebpf_prog_name(b), "xdp_filter");
	/* the JIT'd code carries the name: symbolizers find it */
	char sym[64];
	size_t off = 99, size = 0;

	ck_assert_int_eq(ebpf_jit(b, NULL), 0);
	unsigned char *code = ebpf_prog_code(b, &size);

	ck_assert_ptr_nonnull(code);
	ck_assert_int_eq(ep_symbolize(code + size - 1, sym, sizeof(sym), &off), 0);
	ck_assert_str_eq(sym, "xdp_filter");
	ck_assert_uint_eq(off, size - 1);
	ebpf_unload(a);
	ebpf_unload(b);
	ebpf_vm_destroy(vm);
}
END_TEST

START_TEST(test_int3_tail)
{
	static const struct ebpf_insn prog[] = { MOV64_IMM(R0, 1), EXIT() };
	struct ebpf_vm *vm;
	struct ebpf_prog *p;
	size_t size;

	ck_assert_int_eq(ebpf_vm_create(pool, &vm), 0);
	ck_assert_int_eq(ebpf_load(vm, prog, 2, NULL, &p, NULL), 0);
	ck_assert_int_eq(ebpf_jit(p, NULL), 0);
	const uint8_t *code = ebpf_prog_code(p, &size);

	ck_assert_ptr_nonnull(code);
	ck_assert_uint_eq(code[0], 0x55); /* push rbp: frame-pointer prologue */
	ck_assert_uint_eq(code[size - 1], 0xc3);
	/* The rest of the 64-byte chunk is the library's trap fill. */
	for (size_t i = size; i < (size + 63) / 64 * 64; i++)
		ck_assert_uint_eq(code[i], 0xcc);
	ebpf_unload(p);
	ebpf_vm_destroy(vm);
}
END_TEST

/* A helper that lives in the pool, so it is within rel32 reach of the JIT code. */
static void *pool_helper(uint32_t value)
{
	struct ep_image img;
	uint8_t code[6] = { 0xb8, 0, 0, 0, 0, 0xc3 }; /* mov eax, imm32; ret */

	memcpy(code + 1, &value, 4);
	ck_assert_int_eq(ep_alloc(pool, sizeof(code), &img), 0);
	memcpy(img.rw, code, sizeof(code));
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	return img.exec;
}

START_TEST(test_patch_rel32)
{
	static const struct ebpf_insn prog[] = { MOV64_IMM(R6, 1), CALL_HELPER(7), ALU64_REG(EBPF_ADD, R0, R6), EXIT() };
	void *h42 = pool_helper(42), *h99 = pool_helper(99);
	struct ebpf_vm *vm;
	struct ebpf_prog *p;
	struct ebpf_call_site site;
	uint64_t r0;

	ck_assert_int_eq(ebpf_vm_create(pool, &vm), 0);
	ck_assert_int_eq(ebpf_vm_set_helper(vm, 7, "pool42", (ebpf_helper_fn)(uintptr_t)h42), 0);
	ck_assert_int_eq(ebpf_load(vm, prog, 4, NULL, &p, NULL), 0);
	ck_assert_int_eq(ebpf_jit(p, NULL), 0);
	ck_assert_int_eq(ebpf_run(p, NULL, 0, &r0), 0);
	ck_assert_uint_eq(r0, 43);

	ck_assert_int_eq(ebpf_prog_call_site(p, 1, &site), 0);
	ck_assert_int_eq(site.kind, EBPF_SITE_REL32);
	ck_assert_int_eq(site.helper, 7);
	/* Re-point the live call: rel32 is relative to the end of the call. */
	int32_t rel = (int32_t)((intptr_t)h99 - ((intptr_t)site.patch + 4));

	ck_assert_int_eq(ep_write(pool, site.patch, &rel, 4), 0);
	ck_assert_int_eq(ebpf_run(p, NULL, 0, &r0), 0);
	ck_assert_uint_eq(r0, 100);

	/* The embedder-facing path: change the table, repatch the program. */
	ebpf_vm_set_helper(vm, 7, "pool42", (ebpf_helper_fn)(uintptr_t)h42);
	ck_assert_int_eq(ebpf_prog_repatch_helpers(p), 0);
	ck_assert_int_eq(ebpf_run(p, NULL, 0, &r0), 0);
	ck_assert_uint_eq(r0, 43);
	ck_assert_int_eq(ebpf_prog_call_site(p, 0, &site), -ENOENT);
	ebpf_unload(p);
	ebpf_vm_destroy(vm);
	ep_free(pool, h42);
	ep_free(pool, h99);
}
END_TEST

static uint64_t native_7(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	(void)a, (void)b, (void)c, (void)d, (void)e;
	return 7;
}

static uint64_t native_8(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	(void)a, (void)b, (void)c, (void)d, (void)e;
	return 8;
}

START_TEST(test_repatch_native)
{
	static const struct ebpf_insn prog[] = { CALL_HELPER(9), EXIT() };
	struct ebpf_vm *vm;
	struct ebpf_prog *p;
	struct ebpf_call_site site;
	uint64_t r0;

	ck_assert_int_eq(ebpf_vm_create(pool, &vm), 0);
	ebpf_vm_set_helper(vm, 9, "n7", native_7);
	ck_assert_int_eq(ebpf_load(vm, prog, 2, NULL, &p, NULL), 0);
	ck_assert_int_eq(ebpf_jit(p, NULL), 0);
	ck_assert_int_eq(ebpf_run(p, NULL, 0, &r0), 0);
	ck_assert_uint_eq(r0, 7);
	ck_assert_int_eq(ebpf_prog_call_site(p, 0, &site), 0);
	ebpf_vm_set_helper(vm, 9, "n8", native_8);
	/* Either form (rel32 when near, imm64 when far) must be patchable. */
	ck_assert_int_eq(ebpf_prog_repatch_helpers(p), 0);
	ck_assert_int_eq(ebpf_run(p, NULL, 0, &r0), 0);
	ck_assert_uint_eq(r0, 8);
	ck_assert_int_eq(ebpf_run_interp(p, NULL, 0, &r0), 0);
	ck_assert_uint_eq(r0, 8);
	ebpf_unload(p);
	ebpf_vm_destroy(vm);
}
END_TEST

START_TEST(test_hex)
{
	uint8_t *b;
	size_t n;

	ck_assert_int_eq(ebpf_parse_hex("b7 00 0A\n95", &b, &n), 0);
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(b[2], 0x0a);
	free(b);
	ck_assert_int_eq(ebpf_parse_hex("b700", &b, &n), 0);
	ck_assert_uint_eq(n, 2);
	free(b);
	ck_assert_int_eq(ebpf_parse_hex("b7 0", &b, &n), -EINVAL);
	ck_assert_int_eq(ebpf_parse_hex("zz", &b, &n), -EINVAL);
}
END_TEST

/*
 * ELF loader robustness (found by fuzz/fuzz_ebpf.c): a minimal object
 * (null, .text with `mov r0, 7; exit`, .shstrtab), then one defect each.
 * Before the fixes these read out of bounds or misaligned; ASan/UBSan
 * builds (build-aux/sanitizers.sh) catch a regression, plain builds see
 * the error.
 */
static _Alignas(8) uint8_t elf_buf[512];

static size_t mini_elf(void)
{
	static const struct ebpf_insn code[] = { MOV64_IMM(R0, 7), EXIT() };
	static const char shstr[] = "\0.text\0.shstrtab";
	Elf64_Ehdr eh = { .e_type = ET_REL, .e_machine = 247, .e_version = EV_CURRENT,
			  .e_ehsize = sizeof(Elf64_Ehdr), .e_shentsize = sizeof(Elf64_Shdr),
			  .e_shnum = 3, .e_shstrndx = 2, .e_shoff = 104 };
	Elf64_Shdr sh[3] = {
		{ 0 },
		{ .sh_name = 1, .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
		  .sh_offset = 64, .sh_size = sizeof(code) },
		{ .sh_name = 7, .sh_type = SHT_STRTAB, .sh_offset = 80, .sh_size = sizeof(shstr) },
	};

	memset(elf_buf, 0, sizeof(elf_buf));
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	memcpy(elf_buf, &eh, sizeof(eh));
	memcpy(elf_buf + 64, code, sizeof(code));
	memcpy(elf_buf + 80, shstr, sizeof(shstr));
	memcpy(elf_buf + 104, sh, sizeof(sh));
	return 104 + sizeof(sh);
}

static Elf64_Shdr *elf_sh(int i)
{
	return (Elf64_Shdr *)(elf_buf + 104) + i;
}

static void elf_expect(const void *buf, size_t len, int rc, const char *msg)
{
	struct ebpf_vm *vm;
	struct ebpf_prog *p = NULL;
	struct ebpf_err err;

	ck_assert_int_eq(ebpf_vm_create(NULL, &vm), 0);
	ck_assert_int_eq(ebpf_load_elf(vm, buf, len, NULL, NULL, &p, &err), rc);
	if (rc == 0) {
		uint64_t r0;

		ck_assert_int_eq(ebpf_run_interp(p, NULL, 0, &r0), 0);
		ck_assert_uint_eq(r0, 7);
		ebpf_unload(p);
	} else {
		ck_assert_ptr_null(p);
		ck_assert_msg(strstr(err.msg, msg), "error '%s', expected '%s'", err.msg, msg);
	}
	ebpf_vm_destroy(vm);
}

START_TEST(test_elf_robust)
{
	size_t n = mini_elf();
	static _Alignas(8) uint8_t copy[sizeof(elf_buf) + 8];

	elf_expect(elf_buf, n, 0, NULL);
	/* section headers at an odd offset: were read as misaligned structs */
	memmove(elf_buf + 105, elf_buf + 104, n - 104);
	((Elf64_Ehdr *)elf_buf)->e_shoff = 105;
	elf_expect(elf_buf, n + 1, -EINVAL, "section headers are malformed");
	/* the whole image misaligned */
	n = mini_elf();
	memcpy(copy + 1, elf_buf, n);
	elf_expect(copy + 1, n, -EINVAL, "not 8-byte aligned");
	/* names that run to the end of the file unterminated: strcmp read past it */
	n = mini_elf();
	memcpy(elf_buf + n, ".tex", 4);
	elf_sh(2)->sh_offset = n;
	elf_sh(2)->sh_size = 4;
	elf_sh(1)->sh_name = elf_sh(2)->sh_name = 0;
	/* exactly sized, so that ASan sees a read past the end */
	uint8_t *exact = malloc(n + 4);

	ck_assert_ptr_nonnull(exact);
	memcpy(exact, elf_buf, n + 4);
	elf_expect(exact, n + 4, -EINVAL, "no code section or function named '.text'");
	free(exact);
	/* code in a NOBITS section far outside the file: was memcpy'd from there */
	n = mini_elf();
	elf_sh(1)->sh_type = SHT_NOBITS;
	elf_sh(1)->sh_offset = 1u << 30;
	elf_expect(elf_buf, n, -EINVAL, "section .text is empty");
	/* a NOBITS name table */
	n = mini_elf();
	elf_sh(2)->sh_type = SHT_NOBITS;
	elf_sh(2)->sh_offset = 1u << 30;
	elf_expect(elf_buf, n, -EINVAL, "name table has no contents");
}
END_TEST


static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * levels functions, each calling the next from k sites and summing the
 * results, then a leaf returning 1: r0 = k^levels.  The verifier used to
 * walk a function once per call site, k^levels walks in all.
 */
static size_t call_tree(struct ebpf_insn *out, int k, int levels)
{
	size_t n = 0;

	for (int l = 0; l < levels; l++) {
		size_t next = n + 2 * (size_t)k + 3; /* start of function l + 1 */

		out[n++] = (struct ebpf_insn)MOV64_IMM(R6, 0);
		for (int c = 0; c < k; c++) {
			out[n] = (struct ebpf_insn)CALL_LOCAL((int32_t)(next - (n + 1)));
			n++;
			out[n++] = (struct ebpf_insn)ALU64_REG(EBPF_ADD, R6, R0);
		}
		out[n++] = (struct ebpf_insn)MOV64_REG(R0, R6);
		out[n++] = (struct ebpf_insn)EXIT();
		ck_assert_uint_eq(n, next);
	}
	out[n++] = (struct ebpf_insn)MOV64_IMM(R0, 1);
	out[n++] = (struct ebpf_insn)EXIT();
	return n;
}

START_TEST(test_verify_linear)
{
	static struct ebpf_insn prog[7 * (2 * 26 + 3) + 2];
	struct ebpf_vm *vm;
	struct ebpf_prog *p;
	struct ebpf_err err;
	uint64_t r0;
	size_t n;

	ck_assert_int_eq(ebpf_vm_create(pool, &vm), 0);
	/* Small enough to run: both engines agree on 3^7. */
	n = call_tree(prog, 3, 7);
	ck_assert_msg(ebpf_load(vm, prog, n, NULL, &p, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(ebpf_run_interp(p, NULL, 0, &r0), 0);
	ck_assert_uint_eq(r0, 2187);
	ck_assert_int_eq(ebpf_jit(p, &err), 0);
	ck_assert_int_eq(ebpf_run_jit(p, NULL, 0, &r0), 0);
	ck_assert_uint_eq(r0, 2187);
	ebpf_unload(p);
	/* 7 levels of 26 call sites: 26^7 walks before, one per function now. */
	n = call_tree(prog, 26, 7);
	double t0 = now();

	ck_assert_msg(ebpf_load(vm, prog, n, NULL, &p, &err) == 0, "%s", err.msg);
	double t = now() - t0;

	ck_assert_msg(t < 1.0, "verifying %zu instructions took %.2f s", n, t);
	ebpf_unload(p);
	/* One more level is one frame too many, found at the leaf's caller. */
	n = call_tree(prog, 26, 7);
	prog[n - 2] = (struct ebpf_insn)CALL_LOCAL(1);
	prog[n - 1] = (struct ebpf_insn)EXIT();
	struct ebpf_insn *deeper = malloc((n + 2) * sizeof(*deeper));

	ck_assert_ptr_nonnull(deeper);
	memcpy(deeper, prog, n * sizeof(*deeper));
	deeper[n] = (struct ebpf_insn)MOV64_IMM(R0, 1);
	deeper[n + 1] = (struct ebpf_insn)EXIT();
	ck_assert_int_eq(ebpf_load(vm, deeper, n + 2, NULL, &p, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "depth"), "%s", err.msg);
	ck_assert_int_eq(err.insn, (int)n - 2);
	/* A function reached at two depths: fits from the shallow site, not the deep one. */
	static const struct ebpf_insn two_depths[] = {
		CALL_LOCAL(2), CALL_LOCAL(3), EXIT(),  /* main: f (2 frames), g */
		CALL_LOCAL(3), EXIT(),                 /* f: 7 frames deep from here */
		CALL_LOCAL(-3), EXIT(),                /* g: f again, at 3 frames */
		CALL_LOCAL(1), EXIT(), CALL_LOCAL(1), EXIT(), CALL_LOCAL(1), EXIT(),
		CALL_LOCAL(1), EXIT(), CALL_LOCAL(1), EXIT(), MOV64_IMM(R0, 1), EXIT(),
	};
	ck_assert_int_eq(ebpf_load(vm, two_depths, sizeof(two_depths) / sizeof(two_depths[0]), NULL, &p, &err),
			 -EINVAL);
	ck_assert_msg(strstr(err.msg, "depth"), "%s", err.msg);
	ck_assert_int_eq(err.insn, 15);
	/* Without g, f's depth fits. */
	static const struct ebpf_insn one_depth[] = {
		CALL_LOCAL(2), MOV64_IMM(R0, 1), EXIT(),
		CALL_LOCAL(3), EXIT(),
		MOV64_IMM(R0, 0), EXIT(),
		CALL_LOCAL(1), EXIT(), CALL_LOCAL(1), EXIT(), CALL_LOCAL(1), EXIT(),
		CALL_LOCAL(1), EXIT(), CALL_LOCAL(1), EXIT(), MOV64_IMM(R0, 1), EXIT(),
	};
	ck_assert_msg(ebpf_load(vm, one_depth, sizeof(one_depth) / sizeof(one_depth[0]), NULL, &p, &err) == 0,
		      "%s", err.msg);
	ebpf_unload(p);
	free(deeper);
	ebpf_vm_destroy(vm);
}
END_TEST

/*
 * A relocatable BPF object built section by section: what clang emits,
 * without needing clang.  Section 0 is the null one; the name table is
 * added by elfb_end().
 */
struct elfb {
	_Alignas(8) uint8_t buf[4096];
	size_t len;
	Elf64_Shdr sh[12];
	int nsh;
	char names[256];
	size_t names_len;
};

static void elfb_start(struct elfb *b)
{
	memset(b, 0, sizeof(*b));
	b->len = sizeof(Elf64_Ehdr);
	b->nsh = 1;
	b->names_len = 1;
}

static int elfb_sec(struct elfb *b, const char *name, uint32_t type, uint64_t flags, const void *data,
		    size_t size, uint32_t link, uint32_t info, uint64_t entsize)
{
	size_t nl = strlen(name) + 1;

	b->len = (b->len + 7) / 8 * 8;
	ck_assert_uint_le(b->len + size, sizeof(b->buf));
	ck_assert_uint_le(b->names_len + nl, sizeof(b->names));
	memcpy(b->buf + b->len, data, size);
	memcpy(b->names + b->names_len, name, nl);
	b->sh[b->nsh] = (Elf64_Shdr){ .sh_name = (uint32_t)b->names_len, .sh_type = type,
				      .sh_flags = flags, .sh_offset = b->len, .sh_size = size,
				      .sh_link = link, .sh_info = info, .sh_entsize = entsize };
	b->names_len += nl;
	b->len += size;
	return b->nsh++;
}

static size_t elfb_end(struct elfb *b)
{
	/* The table holds its own name: sized for it, filled once it is in. */
	int shstr = elfb_sec(b, ".shstrtab", SHT_STRTAB, 0, b->names, b->names_len + sizeof(".shstrtab"),
			     0, 0, 0);

	memcpy(b->buf + b->sh[shstr].sh_offset, b->names, b->names_len);
	Elf64_Ehdr eh = { .e_type = ET_REL, .e_machine = 247, .e_version = EV_CURRENT,
			  .e_ehsize = sizeof(Elf64_Ehdr), .e_shentsize = sizeof(Elf64_Shdr),
			  .e_shnum = (uint16_t)b->nsh, .e_shstrndx = (uint16_t)shstr };

	b->len = (b->len + 7) / 8 * 8;
	eh.e_shoff = b->len;
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	memcpy(b->buf, &eh, sizeof(eh));
	ck_assert_uint_le(b->len + (size_t)b->nsh * sizeof(Elf64_Shdr), sizeof(b->buf));
	memcpy(b->buf + b->len, b->sh, (size_t)b->nsh * sizeof(Elf64_Shdr));
	b->len += (size_t)b->nsh * sizeof(Elf64_Shdr);
	return b->len;
}

#define FUNC(name, sec, value, size) { .st_name = name, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), \
	.st_shndx = sec, .st_value = value, .st_size = size }

/*
 * What clang -O2 makes of three functions in .text and one in a section
 * of its own: twice() first, then two callers nobody calls.  Functions
 * were delimited only at call targets, so first() and second() merged
 * into twice() ("recursive call") and only one of the four loaded.
 */
static size_t multi_elf(struct elfb *b, uint64_t bad_value)
{
	static const struct ebpf_insn text[] = {
		/* twice(x) = 2x + 1 */
		MOV64_REG(R0, R1), ALU64_IMM(EBPF_LSH, R0, 1), ALU64_IMM(EBPF_OR, R0, 1), EXIT(),
		/* first() = twice(3) + 100 */
		MOV64_IMM(R1, 3), CALL_LOCAL(-6), ALU64_IMM(EBPF_ADD, R0, 100), EXIT(),
		/* second() = twice(5) * 3, with a shared exit block and a final ja */
		MOV64_IMM(R1, 5), CALL_LOCAL(-10), ALU64_IMM(EBPF_MUL, R0, 3), JA(1), EXIT(), JA(-2),
	};
	/* named() = twice(10) ^ 5, calling into .text through a relocation */
	static const struct ebpf_insn xdp[] = {
		MOV64_IMM(R1, 10), CALL_LOCAL(-1), ALU64_IMM(EBPF_XOR, R0, 5), EXIT(),
	};
	static const char str[] = "\0twice\0first\0second\0named";
	Elf64_Sym syms[] = {
		{ 0 }, FUNC(1, 1, 0, 32), FUNC(7, 1, 32, 32), FUNC(13, 1, 64, 48), FUNC(20, 2, 0, 32),
	};
	Elf64_Rel rel = { .r_offset = 8, .r_info = ELF64_R_INFO(1, 10 /* R_BPF_64_32 */) };

	if (bad_value)
		syms[3].st_value = bad_value;
	elfb_start(b);
	ck_assert_int_eq(elfb_sec(b, ".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, text, sizeof(text),
				  0, 0, 0), 1);
	ck_assert_int_eq(elfb_sec(b, "xdp", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, xdp, sizeof(xdp),
				  0, 0, 0), 2);
	ck_assert_int_eq(elfb_sec(b, ".strtab", SHT_STRTAB, 0, str, sizeof(str), 0, 0, 0), 3);
	ck_assert_int_eq(elfb_sec(b, ".symtab", SHT_SYMTAB, 0, syms, sizeof(syms), 3, 1, sizeof(Elf64_Sym)), 4);
	elfb_sec(b, ".relxdp", SHT_REL, 0, &rel, sizeof(rel), 4, 2, sizeof(rel));
	return elfb_end(b);
}

START_TEST(test_elf_multi)
{
	static const struct { const char *sel; uint64_t r0; } want[] = {
		{ NULL, 1 }, { ".text", 1 }, { "twice", 1 }, { "first", 107 }, { "second", 33 },
		{ "named", 16 }, { "xdp", 16 },
	};
	static struct elfb b;
	size_t len = multi_elf(&b, 0);
	struct ebpf_vm *vm;

	ck_assert_int_eq(ebpf_vm_create(pool, &vm), 0);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct ebpf_prog *p = NULL;
		struct ebpf_err err;
		uint64_t r0 = 0xdead;

		ck_assert_msg(ebpf_load_elf(vm, b.buf, len, want[i].sel, NULL, &p, &err) == 0, "%s: %s",
			      want[i].sel ? want[i].sel : "(default)", err.msg);
		ck_assert_int_eq(ebpf_run_interp(p, NULL, 0, &r0), 0);
		ck_assert_msg(r0 == want[i].r0, "%s (interp): %llu", want[i].sel, (unsigned long long)r0);
		ck_assert_int_eq(ebpf_jit(p, &err), 0);
		ck_assert_int_eq(ebpf_run_jit(p, NULL, 0, &r0), 0);
		ck_assert_msg(r0 == want[i].r0, "%s (jit): %llu", want[i].sel, (unsigned long long)r0);
		ebpf_unload(p);
	}
	/* A symbol that does not fit its section is an error, not a boundary. */
	static const uint64_t bad[] = { 4, 96, 120, UINT64_MAX - 7 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ebpf_prog *p = NULL;
		struct ebpf_err err;

		len = multi_elf(&b, bad[i]);
		ck_assert_int_eq(ebpf_load_elf(vm, b.buf, len, "first", NULL, &p, &err), -EINVAL);
		ck_assert_msg(strstr(err.msg, "'second' is misaligned or outside .text"), "%s", err.msg);
		ck_assert_ptr_null(p);
	}
	ebpf_vm_destroy(vm);
}
END_TEST

/*
 * lddw of a data symbol: st_value + addend was checked against the
 * section size after the addition, which wraps; a symbol at 2^64 - 4
 * with addend 8 pointed 4 bytes into the copy... by luck.
 */
static size_t data_elf(struct elfb *b, uint64_t value, int32_t addend)
{
	const struct ebpf_insn text[] = { LDDW(R1, 0), LDX(EBPF_W, R0, R1, 0), EXIT() };
	static const uint32_t data[2] = { 0x11111111, 0x22222222 };
	static const char str[] = "\0table";
	Elf64_Sym syms[] = {
		{ 0 }, { .st_name = 1, .st_info = ELF64_ST_INFO(STB_LOCAL, STT_OBJECT), .st_shndx = 2,
			 .st_value = value, .st_size = 8 },
	};
	Elf64_Rel rel = { .r_offset = 0, .r_info = ELF64_R_INFO(1, 1 /* R_BPF_64_64 */) };
	struct ebpf_insn code[sizeof(text) / sizeof(text[0])];

	memcpy(code, text, sizeof(code));
	code[0].imm = addend;
	elfb_start(b);
	elfb_sec(b, ".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, code, sizeof(code), 0, 0, 0);
	elfb_sec(b, ".data", SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, data, sizeof(data), 0, 0, 0);
	elfb_sec(b, ".strtab", SHT_STRTAB, 0, str, sizeof(str), 0, 0, 0);
	elfb_sec(b, ".symtab", SHT_SYMTAB, 0, syms, sizeof(syms), 3, 1, sizeof(Elf64_Sym));
	elfb_sec(b, ".rel.text", SHT_REL, 0, &rel, sizeof(rel), 4, 1, sizeof(rel));
	return elfb_end(b);
}

START_TEST(test_elf_data_bounds)
{
	static const struct { uint64_t value; int32_t addend; int rc; uint64_t r0; } c[] = {
		{ 0, 0, 0, 0x11111111 }, { 0, 4, 0, 0x22222222 }, { 4, 0, 0, 0x22222222 },
		{ 0, 8, 0, 0 }, /* the end itself may be addressed (an empty tail object) */
		{ 0, 9, -EINVAL, 0 }, { 9, 0, -EINVAL, 0 },
		{ UINT64_MAX - 3, 8, -EINVAL, 0 }, { UINT64_MAX, 1, -EINVAL, 0 }, { 8, -1, -EINVAL, 0 },
	};
	static struct elfb b;
	struct ebpf_vm *vm;

	ck_assert_int_eq(ebpf_vm_create(NULL, &vm), 0);
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct ebpf_prog *p = NULL;
		struct ebpf_err err;
		size_t len = data_elf(&b, c[i].value, c[i].addend);

		ck_assert_msg(ebpf_load_elf(vm, b.buf, len, NULL, NULL, &p, &err) == c[i].rc,
			      "case %zu: %s", i, c[i].rc ? "accepted" : err.msg);
		if (c[i].rc) {
			ck_assert_msg(strstr(err.msg, "past the end of .data"), "case %zu: %s", i, err.msg);
			ck_assert_ptr_null(p);
			continue;
		}
		if (c[i].r0) {
			uint64_t r0;

			ck_assert_int_eq(ebpf_run_interp(p, NULL, 0, &r0), 0);
			ck_assert_uint_eq(r0, c[i].r0);
		}
		ebpf_unload(p);
	}
	ebpf_vm_destroy(vm);
}
END_TEST

/* Function boundaries handed to the loader are checked like the code. */
START_TEST(test_load_funcs)
{
	static const struct ebpf_insn prog[] = { LDDW(R0, 1), EXIT(), MOV64_IMM(R0, 2), EXIT() };
	struct ebpf_vm *vm;
	struct ebpf_prog *p = NULL;
	struct ebpf_err err;
	size_t f;
	uint64_t r0;

	ck_assert_int_eq(ebpf_vm_create(NULL, &vm), 0);
	f = 1;
	ck_assert_int_eq(ebpf_load_funcs(vm, prog, 5, &f, 1, NULL, &p, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "insn 1: function starts in the middle of lddw"), "%s", err.msg);
	f = 5;
	ck_assert_int_eq(ebpf_load_funcs(vm, prog, 5, &f, 1, NULL, &p, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "outside the program"), "%s", err.msg);
	ck_assert_ptr_null(p);
	/* An uncalled function after the main one: a function of its own. */
	f = 3;
	ck_assert_int_eq(ebpf_load_funcs(vm, prog, 5, &f, 1, NULL, &p, &err), 0);
	ck_assert_int_eq(ebpf_run_interp(p, NULL, 0, &r0), 0);
	ck_assert_uint_eq(r0, 1);
	ebpf_unload(p);
	ebpf_vm_destroy(vm);
}
END_TEST

/*
 * Live repatching: ep_write() switches a field atomically only inside one
 * aligned 8-byte word, so every call field the JIT hands out must sit in
 * one.  The program mixes calls with instructions of every length, so the
 * calls land at every alignment.
 */
static uint64_t ret_1(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	(void)a, (void)b, (void)c, (void)d, (void)e;
	return 1;
}

static uint64_t ret_256(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	(void)a, (void)b, (void)c, (void)d, (void)e;
	return 256;
}

#define NCALLS 48

/* r6 sums NCALLS/2 calls of slot 7, r7 of slot 9; r0 = r6 | r7 << 32. */
static size_t repatch_prog(struct ebpf_insn *out)
{
	static const struct ebpf_insn filler[] = {
		ALU64_IMM(EBPF_ADD, R8, 1), MOV64_IMM(R8, 0x12345), ALU64_REG(EBPF_XOR, R8, R9),
		LDDW(R9, 0x1122334455667788ull), ALU32_IMM(EBPF_MUL, R8, 3), MOV64_IMM(R8, 0),
		ALU64_IMM(EBPF_SUB, R9, 1000000),
	};
	static const int starts[7] = { 0, 1, 2, 3, 5, 6, 7 }; /* lddw takes two slots */
	size_t n = 0;

	out[n++] = (struct ebpf_insn)MOV64_IMM(R6, 0);
	out[n++] = (struct ebpf_insn)MOV64_IMM(R7, 0);
	out[n++] = (struct ebpf_insn)MOV64_IMM(R9, 0);
	for (int c = 0; c < NCALLS; c++) {
		for (int k = 0; k <= c % 4; k++) {
			const struct ebpf_insn *f = &filler[starts[(c + k) % 7]];

			out[n++] = f[0];
			if (ebpf_is_lddw(f))
				out[n++] = f[1];
		}
		out[n++] = (struct ebpf_insn)CALL_HELPER(c % 2 ? 9 : 7);
		out[n++] = (struct ebpf_insn)ALU64_REG(EBPF_ADD, c % 2 ? R7 : R6, R0);
	}
	out[n++] = (struct ebpf_insn)CALL_LOCAL(4);
	out[n++] = (struct ebpf_insn)ALU64_IMM(EBPF_LSH, R7, 32);
	out[n++] = (struct ebpf_insn)MOV64_REG(R0, R6);
	out[n++] = (struct ebpf_insn)ALU64_REG(EBPF_OR, R0, R7);
	out[n++] = (struct ebpf_insn)EXIT();
	out[n++] = (struct ebpf_insn)MOV64_IMM(R0, 0); /* the local function */
	out[n++] = (struct ebpf_insn)EXIT();
	return n;
}

/* Each half of r0 counts calls: k returned 1 and NCALLS/2 - k returned 256. */
static bool repatch_result_ok(uint64_t r0)
{
	for (int half = 0; half < 2; half++) {
		uint32_t v = (uint32_t)(r0 >> (32 * half));

		if ((v & 0xff) + (v >> 8) != NCALLS / 2)
			return false;
	}
	return true;
}

static void check_sites_aligned(const struct ebpf_prog *p, int *nrel, int *nabs)
{
	size_t n;
	const struct ebpf_insn *in = ebpf_prog_insns(p, &n);

	for (size_t i = 0; i < n; i++) {
		struct ebpf_call_site site;

		if ((in[i].code & 0xf7) != (EBPF_CLS_JMP | EBPF_CALL))
			continue;
		ck_assert_int_eq(ebpf_prog_call_site(p, i, &site), 0);
		unsigned size = site.kind == EBPF_SITE_REL32 ? 4 : 8;
		uintptr_t at = (uintptr_t)site.patch;

		ck_assert_msg(at % 8 + size <= 8, "insn %zu: %u-byte call field at 0x%lx crosses an 8-byte word",
			      i, size, (unsigned long)at);
		*(site.kind == EBPF_SITE_REL32 ? nrel : nabs) += 1;
	}
}

START_TEST(test_call_sites_aligned)
{
	static struct ebpf_insn prog[8 * NCALLS + 16];
	void *h1 = pool_helper(1), *h256 = pool_helper(256);
	struct ebpf_vm *vm;
	struct ebpf_prog *p;
	struct ebpf_err err;
	size_t n = repatch_prog(prog);
	uint64_t r0;
	int nrel = 0, nabs = 0;

	ck_assert_int_eq(ebpf_vm_create(pool, &vm), 0);
	/* Slot 7 in the pool: rel32.  Slot 9 native: rel32 or imm64, by distance. */
	ebpf_vm_set_helper(vm, 7, "pool_1", (ebpf_helper_fn)(uintptr_t)h1);
	ebpf_vm_set_helper(vm, 9, "ret_256", ret_256);
	ck_assert_msg(ebpf_load(vm, prog, n, NULL, &p, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(ebpf_jit(p, &err), 0);
	check_sites_aligned(p, &nrel, &nabs);
	ck_assert_int_ge(nrel, NCALLS / 2 + 1);
	ck_assert_int_eq(nrel + nabs, NCALLS + 1);
	ck_assert_int_eq(ebpf_run_jit(p, NULL, 0, &r0), 0);
	ck_assert_uint_eq(r0, (uint64_t)(NCALLS / 2 * 256) << 32 | NCALLS / 2);
	ck_assert_int_eq(ebpf_run_interp(p, NULL, 0, &r0), 0);
	ck_assert_uint_eq(r0, (uint64_t)(NCALLS / 2 * 256) << 32 | NCALLS / 2);
	ebpf_unload(p);
	/* Both slots native: the imm64 form where the binary is far from the pool, aligned too. */
	ebpf_vm_set_helper(vm, 7, "ret_1", ret_1);
	ck_assert_int_eq(ebpf_load(vm, prog, n, NULL, &p, &err), 0);
	ck_assert_int_eq(ebpf_jit(p, &err), 0);
	check_sites_aligned(p, &nrel, &nabs);
	ck_assert_int_eq(ebpf_run_jit(p, NULL, 0, &r0), 0);
	ck_assert_uint_eq(r0, (uint64_t)(NCALLS / 2 * 256) << 32 | NCALLS / 2);
	ebpf_unload(p);
	ebpf_vm_destroy(vm);
	ep_free(pool, h1);
	ep_free(pool, h256);
}
END_TEST

struct runner {
	const struct ebpf_prog *prog;
	int stop;   /* atomic */
	long runs;  /* atomic */
	long bad;
	uint64_t bad_r0;
};

static void *run_loop(void *arg)
{
	struct runner *r = arg;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		uint64_t r0 = 0;

		ebpf_run_jit(r->prog, NULL, 0, &r0);
		if (!repatch_result_ok(r0)) {
			r->bad++;
			r->bad_r0 = r0;
		}
		__atomic_add_fetch(&r->runs, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/*
 * Two helpers in one pool allocation, returning 1 and 256, 0x10140 bytes
 * apart: their rel32s differ in the low three bytes, so a rel32 torn at
 * any byte inside them lands in the trap fill between (SIGTRAP).
 */
static void *far_pair(void *h[2])
{
	static const uint8_t code[2][6] = {
		{ 0xb8, 1, 0, 0, 0, 0xc3 }, { 0xb8, 0, 1, 0, 0, 0xc3 }, /* mov eax, imm32; ret */
	};
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(pool, 0x10200, &img), 0);
	memcpy((uint8_t *)img.rw + 0x40, code[0], 6);
	memcpy((uint8_t *)img.rw + 0x10180, code[1], 6);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	h[0] = (uint8_t *)img.exec + 0x40;
	h[1] = (uint8_t *)img.exec + 0x10180;
	return img.exec;
}

/*
 * One thread runs the program while this one repatches its helpers, for
 * about half a second: a torn call target crashed the runner (SIGSEGV,
 * SIGTRAP) or returned something no helper returns.  Slot 7 switches
 * between the pair above (rel32 sites), slot 9 between a native function
 * and one in the pool (imm64 sites, all 8 bytes differ, where the binary
 * is far from the pool).
 */
START_TEST(test_repatch_live)
{
	static struct ebpf_insn prog[8 * NCALLS + 16];
	void *h[2], *alloc = far_pair(h), *pool1 = pool_helper(1);
	ebpf_helper_fn slot9[2] = { (ebpf_helper_fn)(uintptr_t)pool1, ret_256 };
	struct ebpf_vm *vm;
	struct ebpf_prog *p;
	struct ebpf_err err;
	struct runner r = { 0 };
	pthread_t th;
	size_t n = repatch_prog(prog);
	long patches = 0;

	ck_assert_int_eq(ebpf_vm_create(pool, &vm), 0);
	ebpf_vm_set_helper(vm, 7, "pool", (ebpf_helper_fn)(uintptr_t)h[0]);
	ebpf_vm_set_helper(vm, 9, "native", slot9[1]); /* the site is compiled for it */
	ck_assert_int_eq(ebpf_load(vm, prog, n, NULL, &p, &err), 0);
	ck_assert_int_eq(ebpf_jit(p, &err), 0);
	r.prog = p;
	ck_assert_int_eq(pthread_create(&th, NULL, run_loop, &r), 0);
	double t0 = now(), t;

	do {
		ebpf_vm_set_helper(vm, 7, "pool", (ebpf_helper_fn)(uintptr_t)h[patches % 2]);
		ebpf_vm_set_helper(vm, 9, "slot9", slot9[(patches / 2) % 2]);
		ck_assert_int_eq(ebpf_prog_repatch_helpers(p), 0);
		patches++;
		t = now() - t0;
		/* at least some runs and patches, however loaded the machine (or
		 * slow under Valgrind); never long */
	} while (t < 20.0 && (t < 0.5 || patches <= 100 ||
			      __atomic_load_n(&r.runs, __ATOMIC_ACQUIRE) < 100));
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(r.bad == 0, "%ld of %ld runs returned a value no helper gives (0x%llx)", r.bad, r.runs,
		      (unsigned long long)r.bad_r0);
	ck_assert_int_gt(r.runs, 0);
	ck_assert_int_gt(patches, 100);
	ebpf_unload(p);
	ebpf_vm_destroy(vm);
	ep_free(pool, alloc);
	ep_free(pool, pool1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ebpf");
	TCase *tc = tcase_create("table");
	int nf;

#if !defined(__x86_64__)
	printf("SKIP: the eBPF example's JIT emits x86-64 code\n");
	return 77;
#endif
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, test_interp, 0, sizeof(cases) / sizeof(cases[0]));
	tcase_add_loop_test(tc, test_jit, 0, sizeof(cases) / sizeof(cases[0]));
	tcase_add_loop_test(tc, test_reject, 0, sizeof(rejects) / sizeof(rejects[0]));
	suite_add_tcase(s, tc);
	tc = tcase_create("jit");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_int3_tail);
	tcase_add_test(tc, test_patch_rel32);
	tcase_add_test(tc, test_repatch_native);
	tcase_add_test(tc, test_hex);
	tcase_add_test(tc, test_elf_robust);
	tcase_add_test(tc, test_verify_linear);
	tcase_add_test(tc, test_elf_multi);
	tcase_add_test(tc, test_elf_data_bounds);
	tcase_add_test(tc, test_load_funcs);
	tcase_add_test(tc, test_call_sites_aligned);
	tcase_add_test(tc, test_repatch_live);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}
