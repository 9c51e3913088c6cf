/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * disasm.h - listings of eBPF bytecode and of the x86-64 code the JIT made
 * from it (ebpf-run --dump, --dump-jited).
 */
#ifndef EBPF_DISASM_H
#define EBPF_DISASM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ebpf.h"

/*
 * Instruction i of insns[n] as text ("r0 += r1", "if w1 > 5 goto +2 <6>",
 * "r2 = *(u32 *)(r1 + 4)"), into buf.  vm (may be NULL) names helpers.
 * Returns the slots it took: 2 for a 64-bit immediate load, else 1.  An
 * instruction that does not decode is written as "invalid ..." (as are
 * reserved fields), never refused: listings help with bad programs too.
 */
size_t ebpf_disasm_insn(const struct ebpf_vm *vm, const struct ebpf_insn *insns, size_t n,
			size_t i, char *buf, size_t len);

/* Every instruction, one per line: index, the 8 bytes, the text.  fn_start
 * (may be NULL) marks where functions begin. */
void ebpf_dump_insns(FILE *out, const struct ebpf_vm *vm, const struct ebpf_insn *insns,
		     size_t n, const bool *fn_start);

/* A loaded program's instructions, with its name and function starts. */
void ebpf_dump_prog(FILE *out, const struct ebpf_prog *prog);

/* Whether ebpf_dump_jited() can disassemble (built with Capstone). */
bool ebpf_can_dump_jited(void);

/*
 * The program's x86-64 code, disassembled by Capstone: address, bytes,
 * instruction, and the helper's name after a call to one.  -ENOTSUP when
 * built without Capstone, -EINVAL when the program is not JIT-compiled,
 * -ENOMEM or -EIO when Capstone fails.
 */
int ebpf_dump_jited(FILE *out, const struct ebpf_prog *prog);

#endif /* EBPF_DISASM_H */
