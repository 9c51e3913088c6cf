/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ebpf_asm.h - a tiny assembler: one macro per instruction form, usable in
 * array initialisers (struct ebpf_insn prog[] = { MOV64_IMM(0, 1), EXIT() }).
 */
#ifndef EBPF_ASM_H
#define EBPF_ASM_H

#include "ebpf.h"

/* A braced initializer, so tables stay constant; wrap in (struct ebpf_insn)
 * for an expression. */
#define INSN(c, d, s, o, i) \
	{ .code = (c), .dst = (d), .src = (s), .off = (o), .imm = (i) }

/* ALU */
#define ALU64_REG(op, d, s)  INSN(EBPF_CLS_ALU64 | (op) | EBPF_X, d, s, 0, 0)
#define ALU64_IMM(op, d, i)  INSN(EBPF_CLS_ALU64 | (op) | EBPF_K, d, 0, 0, i)
#define ALU32_REG(op, d, s)  INSN(EBPF_CLS_ALU | (op) | EBPF_X, d, s, 0, 0)
#define ALU32_IMM(op, d, i)  INSN(EBPF_CLS_ALU | (op) | EBPF_K, d, 0, 0, i)
#define MOV64_REG(d, s)      ALU64_REG(EBPF_MOV, d, s)
#define MOV64_IMM(d, i)      ALU64_IMM(EBPF_MOV, d, i)
#define MOV32_REG(d, s)      ALU32_REG(EBPF_MOV, d, s)
#define MOV32_IMM(d, i)      ALU32_IMM(EBPF_MOV, d, i)
#define MOVSX64(d, s, bits)  INSN(EBPF_CLS_ALU64 | EBPF_MOV | EBPF_X, d, s, bits, 0)
#define MOVSX32(d, s, bits)  INSN(EBPF_CLS_ALU | EBPF_MOV | EBPF_X, d, s, bits, 0)
#define SDIV64_REG(d, s)     INSN(EBPF_CLS_ALU64 | EBPF_DIV | EBPF_X, d, s, 1, 0)
#define SDIV64_IMM(d, i)     INSN(EBPF_CLS_ALU64 | EBPF_DIV | EBPF_K, d, 0, 1, i)
#define SMOD64_REG(d, s)     INSN(EBPF_CLS_ALU64 | EBPF_MOD | EBPF_X, d, s, 1, 0)
#define SMOD64_IMM(d, i)     INSN(EBPF_CLS_ALU64 | EBPF_MOD | EBPF_K, d, 0, 1, i)
#define SDIV32_REG(d, s)     INSN(EBPF_CLS_ALU | EBPF_DIV | EBPF_X, d, s, 1, 0)
#define SDIV32_IMM(d, i)     INSN(EBPF_CLS_ALU | EBPF_DIV | EBPF_K, d, 0, 1, i)
#define SMOD32_REG(d, s)     INSN(EBPF_CLS_ALU | EBPF_MOD | EBPF_X, d, s, 1, 0)
#define SMOD32_IMM(d, i)     INSN(EBPF_CLS_ALU | EBPF_MOD | EBPF_K, d, 0, 1, i)
#define NEG64(d)             INSN(EBPF_CLS_ALU64 | EBPF_NEG, d, 0, 0, 0)
#define NEG32(d)             INSN(EBPF_CLS_ALU | EBPF_NEG, d, 0, 0, 0)
#define LE(d, bits)          INSN(EBPF_CLS_ALU | EBPF_END | EBPF_TO_LE, d, 0, 0, bits)
#define BE(d, bits)          INSN(EBPF_CLS_ALU | EBPF_END | EBPF_TO_BE, d, 0, 0, bits)
#define BSWAP(d, bits)       INSN(EBPF_CLS_ALU64 | EBPF_END, d, 0, 0, bits)

/* 64-bit immediate: two slots */
#define LDDW(d, v) \
	INSN(EBPF_CLS_LD | EBPF_DW | EBPF_IMM, d, 0, 0, (int32_t)(uint32_t)(uint64_t)(v)), \
	INSN(0, 0, 0, 0, (int32_t)(uint32_t)((uint64_t)(v) >> 32))

/* Memory: sz is EBPF_B/H/W/DW */
#define LDX(sz, d, s, o)     INSN(EBPF_CLS_LDX | EBPF_MEM | (sz), d, s, o, 0)
#define LDXSX(sz, d, s, o)   INSN(EBPF_CLS_LDX | EBPF_MEMSX | (sz), d, s, o, 0)
#define STX(sz, d, s, o)     INSN(EBPF_CLS_STX | EBPF_MEM | (sz), d, s, o, 0)
#define ST(sz, d, o, i)      INSN(EBPF_CLS_ST | EBPF_MEM | (sz), d, 0, o, i)
#define ATOMIC(sz, op, d, s, o) INSN(EBPF_CLS_STX | EBPF_ATOMIC | (sz), d, s, o, op)

/* Jumps */
#define JA(o)                INSN(EBPF_CLS_JMP | EBPF_JA, 0, 0, o, 0)
#define JA32(i)              INSN(EBPF_CLS_JMP32 | EBPF_JA, 0, 0, 0, i)
#define JMP_REG(op, d, s, o) INSN(EBPF_CLS_JMP | (op) | EBPF_X, d, s, o, 0)
#define JMP_IMM(op, d, i, o) INSN(EBPF_CLS_JMP | (op) | EBPF_K, d, 0, o, i)
#define JMP32_REG(op, d, s, o) INSN(EBPF_CLS_JMP32 | (op) | EBPF_X, d, s, o, 0)
#define JMP32_IMM(op, d, i, o) INSN(EBPF_CLS_JMP32 | (op) | EBPF_K, d, 0, o, i)
#define CALL_HELPER(id)      INSN(EBPF_CLS_JMP | EBPF_CALL, 0, 0, 0, id)
#define CALL_LOCAL(rel)      INSN(EBPF_CLS_JMP | EBPF_CALL, 0, EBPF_PSEUDO_CALL, 0, rel)
#define CALLX(reg)           INSN(EBPF_CLS_JMP | EBPF_CALL | EBPF_X, reg, 0, 0, 0)
#define EXIT()               INSN(EBPF_CLS_JMP | EBPF_EXIT, 0, 0, 0, 0)

#endif /* EBPF_ASM_H */
