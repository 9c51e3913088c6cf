/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ebpf.h - embedding API of the mini eBPF runtime (interpreter + x86-64 JIT).
 *
 * The runtime implements RFC 9669 (the eBPF ISA), conformance groups
 * base32, base64, divmul32, divmul64, atomic32 and atomic64, plus
 * BPF-to-BPF calls and callx.  It is the showcase consumer of
 * libexecpack: JIT images come out of an embedder-supplied ep_pool.
 *
 * Shape of use (the part a JIT author would copy):
 *
 *	struct ebpf_vm *vm;  ebpf_vm_create(pool, &vm);
 *	ebpf_vm_set_helper(vm, 5, "id", my_helper);
 *	struct ebpf_prog *p; struct ebpf_err e;
 *	ebpf_load(vm, insns, n, "my_prog", &p, &e);   // verifies
 *	ebpf_jit(p, &e);                              // optional
 *	uint64_t r0; ebpf_run(p, buf, len, &r0);      // JIT if compiled
 *	ebpf_unload(p); ebpf_vm_destroy(vm);
 *
 * The verifier is a well-formedness checker, not a safety verifier:
 * memory accesses are not bounds checked at run time, neither by the
 * interpreter nor by the JIT.  Only run trusted programs.
 *
 * All functions returning int return 0 or a negative errno.
 */
#ifndef EBPF_EBPF_H
#define EBPF_EBPF_H

#include <stddef.h>
#include <stdint.h>

struct ep_pool;

/* One 8-byte instruction (little-endian host layout). */
struct ebpf_insn {
	uint8_t code;
	uint8_t dst : 4;
	uint8_t src : 4;
	int16_t off;
	int32_t imm;
};

/* Instruction classes (low 3 bits of code). */
#define EBPF_CLS_LD    0x00
#define EBPF_CLS_LDX   0x01
#define EBPF_CLS_ST    0x02
#define EBPF_CLS_STX   0x03
#define EBPF_CLS_ALU   0x04
#define EBPF_CLS_JMP   0x05
#define EBPF_CLS_JMP32 0x06
#define EBPF_CLS_ALU64 0x07

/* Source bit for ALU/JMP. */
#define EBPF_K 0x00
#define EBPF_X 0x08

/* ALU operations (high 4 bits). */
#define EBPF_ADD  0x00
#define EBPF_SUB  0x10
#define EBPF_MUL  0x20
#define EBPF_DIV  0x30
#define EBPF_OR   0x40
#define EBPF_AND  0x50
#define EBPF_LSH  0x60
#define EBPF_RSH  0x70
#define EBPF_NEG  0x80
#define EBPF_MOD  0x90
#define EBPF_XOR  0xa0
#define EBPF_MOV  0xb0
#define EBPF_ARSH 0xc0
#define EBPF_END  0xd0
#define EBPF_TO_LE 0x00 /* END source bit: ALU class only */
#define EBPF_TO_BE 0x08

/* Jump operations (high 4 bits). */
#define EBPF_JA   0x00
#define EBPF_JEQ  0x10
#define EBPF_JGT  0x20
#define EBPF_JGE  0x30
#define EBPF_JSET 0x40
#define EBPF_JNE  0x50
#define EBPF_JSGT 0x60
#define EBPF_JSGE 0x70
#define EBPF_CALL 0x80
#define EBPF_EXIT 0x90
#define EBPF_JLT  0xa0
#define EBPF_JLE  0xb0
#define EBPF_JSLT 0xc0
#define EBPF_JSLE 0xd0

/* Load/store size (bits 3-4) and mode (bits 5-7). */
#define EBPF_W    0x00
#define EBPF_H    0x08
#define EBPF_B    0x10
#define EBPF_DW   0x18
#define EBPF_IMM  0x00
#define EBPF_ABS  0x20
#define EBPF_IND  0x40
#define EBPF_MEM  0x60
#define EBPF_MEMSX 0x80
#define EBPF_ATOMIC 0xc0

/* Atomic operations (imm of STX|ATOMIC). */
#define EBPF_FETCH   0x01
#define EBPF_XCHG    (0xe0 | EBPF_FETCH)
#define EBPF_CMPXCHG (0xf0 | EBPF_FETCH)

/* CALL source values. */
#define EBPF_PSEUDO_CALL 1 /* src = 1: local call, pc += imm */

#define EBPF_STACK_SIZE  512   /* per frame, r10 points at its top */
#define EBPF_MAX_FRAMES  8     /* call depth, main program included */
#define EBPF_MAX_INSNS   (1 << 20)
#define EBPF_MAX_HELPERS 64

/* Helpers receive r1..r5 and return r0 (SysV: same registers in the JIT). */
typedef uint64_t (*ebpf_helper_fn)(uint64_t r1, uint64_t r2, uint64_t r3,
				   uint64_t r4, uint64_t r5);

/* Error detail from load/verify/jit: instruction index (-1: none) + why. */
struct ebpf_err {
	int insn;
	char msg[160];
};

struct ebpf_vm;   /* helper table + the embedder's pool */
struct ebpf_prog; /* one verified program, optionally JIT-compiled */

/* The pool may be NULL when only the interpreter is used. */
int ebpf_vm_create(struct ep_pool *pool, struct ebpf_vm **out);
void ebpf_vm_destroy(struct ebpf_vm *vm); /* after all its programs */

/*
 * Fill slot idx of the helper table.  Programs loaded later may call it;
 * programs already JIT-compiled keep their target until
 * ebpf_prog_repatch_helpers() patches the live code.
 */
int ebpf_vm_set_helper(struct ebpf_vm *vm, unsigned idx, const char *name,
		       ebpf_helper_fn fn);
ebpf_helper_fn ebpf_vm_get_helper(const struct ebpf_vm *vm, unsigned idx);

/* Verify and load n instructions (copied).  name NULL: "bpf_prog_<n>". */
int ebpf_load(struct ebpf_vm *vm, const struct ebpf_insn *insns, size_t n,
	      const char *name, struct ebpf_prog **out, struct ebpf_err *err);

/*
 * Load from an ELF object (clang -target bpf -O2 -c).  sel names a section
 * or a function; NULL means ".text".  R_BPF_64_64 (lddw of data) and
 * R_BPF_64_32 (local calls) relocations are applied.
 */
int ebpf_load_elf(struct ebpf_vm *vm, const void *elf, size_t len,
		  const char *sel, const char *name, struct ebpf_prog **out,
		  struct ebpf_err *err);

/* Compile to x86-64 into the vm's pool.  Idempotent. */
int ebpf_jit(struct ebpf_prog *prog, struct ebpf_err *err);

/* Run with r1 = ctx, r2 = len.  JIT code if compiled, else interpreter. */
int ebpf_run(const struct ebpf_prog *prog, void *ctx, size_t len,
	     uint64_t *r0);
int ebpf_run_interp(const struct ebpf_prog *prog, void *ctx, size_t len,
		    uint64_t *r0);
int ebpf_run_jit(const struct ebpf_prog *prog, void *ctx, size_t len,
		 uint64_t *r0);

void ebpf_unload(struct ebpf_prog *prog);

const char *ebpf_prog_name(const struct ebpf_prog *prog);
const struct ebpf_insn *ebpf_prog_insns(const struct ebpf_prog *prog,
					size_t *n);
/* JIT image: executable address and size in bytes (NULL/0 if none). */
void *ebpf_prog_code(const struct ebpf_prog *prog, size_t *size);

/*
 * Call sites in JIT code, for live patching with ep_write().  kind says
 * how the target is encoded at *patch: EBPF_SITE_REL32 is the rel32 of a
 * `call rel32` (relative to patch + 4), EBPF_SITE_ABS64 the imm64 of a
 * `movabs r11, imm64; call r11`.  The field lies inside one aligned
 * 8-byte word, so an ep_write() of it is seen whole by threads running
 * the code.
 */
enum ebpf_site_kind { EBPF_SITE_REL32, EBPF_SITE_ABS64 };
struct ebpf_call_site {
	size_t insn;       /* index of the CALL instruction */
	int helper;        /* helper slot, -1 for local calls */
	enum ebpf_site_kind kind;
	void *patch;       /* executable address of the rel32/imm64 */
};
/* Site for instruction insn; -ENOENT if it is no JIT-compiled call. */
int ebpf_prog_call_site(const struct ebpf_prog *prog, size_t insn,
			struct ebpf_call_site *out);
/*
 * Re-point every JIT call to a helper at the vm's current table entry,
 * with ep_write() on the live code.  -ERANGE (nothing written) if a
 * direct call cannot reach the new target.
 */
int ebpf_prog_repatch_helpers(struct ebpf_prog *prog);

/* Parse hex text ("b7 00 .." or "b700..") into bytes; malloc'd. */
int ebpf_parse_hex(const char *text, uint8_t **out, size_t *len);

#endif /* EBPF_EBPF_H */
