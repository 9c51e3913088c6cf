/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * disasm.c - text for eBPF instructions, and the JIT's x86-64 output
 * through Capstone when the build found it (HAVE_CAPSTONE).
 *
 * The bytecode syntax is the C-like one of the kernel's verifier logs and
 * bpftool ("r1 = *(u64 *)(r10 - 8)", "if r1 s> r2 goto +3"): the one eBPF
 * developers read.  Jump and call targets also carry the absolute index
 * ("<7>"), which a listing is read by.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CAPSTONE
#include <capstone/capstone.h>
#endif

#include "disasm.h"
#include "ebpf_int.h"

/* A bounded appender: output past the end is cut, never overflowed. */
struct text {
	char *buf;
	size_t len, pos;
};

__attribute__((format(printf, 2, 3)))
static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;

	if (t->pos >= t->len)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(t->buf + t->pos, t->len - t->pos, fmt, ap);

	va_end(ap);
	if (n > 0)
		t->pos += (size_t)n < t->len - t->pos ? (size_t)n : t->len - t->pos - 1;
}

static const char *alu_op(unsigned op, bool sdiv)
{
	switch (op) {
	case EBPF_ADD: return "+=";
	case EBPF_SUB: return "-=";
	case EBPF_MUL: return "*=";
	case EBPF_DIV: return sdiv ? "s/=" : "/=";
	case EBPF_OR: return "|=";
	case EBPF_AND: return "&=";
	case EBPF_LSH: return "<<=";
	case EBPF_RSH: return ">>=";
	case EBPF_MOD: return sdiv ? "s%=" : "%=";
	case EBPF_XOR: return "^=";
	case EBPF_MOV: return "=";
	case EBPF_ARSH: return "s>>=";
	default: return NULL;
	}
}

static const char *jmp_op(unsigned op)
{
	switch (op) {
	case EBPF_JEQ: return "==";
	case EBPF_JGT: return ">";
	case EBPF_JGE: return ">=";
	case EBPF_JSET: return "&";
	case EBPF_JNE: return "!=";
	case EBPF_JSGT: return "s>";
	case EBPF_JSGE: return "s>=";
	case EBPF_JLT: return "<";
	case EBPF_JLE: return "<=";
	case EBPF_JSLT: return "s<";
	case EBPF_JSLE: return "s<=";
	default: return NULL;
	}
}

static unsigned size_bits(unsigned sz)
{
	return sz == EBPF_B ? 8 : sz == EBPF_H ? 16 : sz == EBPF_W ? 32 : 64;
}

/* "(r1 + 8)", "(r10 - 8)" */
static void put_addr(struct text *t, unsigned reg, int off)
{
	put(t, "(r%u %c %d)", reg, off < 0 ? '-' : '+', off < 0 ? -off : off);
}

/* " <target>" for a relative jump or call from i, when it is in range */
static void put_target(struct text *t, size_t i, long long rel, size_t n)
{
	long long to = (long long)i + 1 + rel;

	if (to >= 0 && (unsigned long long)to < n)
		put(t, " <%lld>", to);
	else
		put(t, " <out of range>");
}

static void put_alu(struct text *t, const struct ebpf_insn *in)
{
	bool is64 = (in->code & 7) == EBPF_CLS_ALU64, x = in->code & EBPF_X;
	unsigned op = in->code & 0xf0;
	char r = is64 ? 'r' : 'w';

	if (op == EBPF_NEG) {
		put(t, "%c%u = -%c%u", r, in->dst, r, in->dst);
		return;
	}
	if (op == EBPF_END) {
		const char *kind = is64 ? "bswap" : x ? "be" : "le";

		put(t, "r%u = %s%d r%u", in->dst, kind, in->imm, in->dst);
		return;
	}
	if (op == EBPF_MOV && x && in->off) {
		put(t, "%c%u = (s%d)%c%u", r, in->dst, in->off, r, in->src);
		return;
	}
	const char *sym = alu_op(op, in->off == 1);

	if (!sym) {
		put(t, "invalid alu op 0x%02x", in->code);
		return;
	}
	if (x)
		put(t, "%c%u %s %c%u", r, in->dst, sym, r, in->src);
	else
		put(t, "%c%u %s %d", r, in->dst, sym, in->imm);
}

static void put_atomic(struct text *t, const struct ebpf_insn *in)
{
	unsigned bits = size_bits(in->code & 0x18);
	int op = in->imm;
	const char *name = NULL, *sym = NULL;

	switch (op & ~EBPF_FETCH) {
	case EBPF_ADD: name = "add", sym = "+="; break;
	case EBPF_OR: name = "or", sym = "|="; break;
	case EBPF_AND: name = "and", sym = "&="; break;
	case EBPF_XOR: name = "xor", sym = "^="; break;
	default: break;
	}
	if (op == EBPF_XCHG) {
		put(t, "r%u = xchg((u%u *)", in->src, bits);
		put_addr(t, in->dst, in->off);
		put(t, ", r%u)", in->src);
	} else if (op == EBPF_CMPXCHG) {
		put(t, "r0 = cmpxchg((u%u *)", bits);
		put_addr(t, in->dst, in->off);
		put(t, ", r0, r%u)", in->src);
	} else if (name && (op & EBPF_FETCH)) {
		put(t, "r%u = atomic_fetch_%s((u%u *)", in->src, name, bits);
		put_addr(t, in->dst, in->off);
		put(t, ", r%u)", in->src);
	} else if (name) {
		put(t, "lock *(u%u *)", bits);
		put_addr(t, in->dst, in->off);
		put(t, " %s r%u", sym, in->src);
	} else {
		put(t, "invalid atomic op 0x%x", (unsigned)op);
	}
}

static void put_mem(struct text *t, const struct ebpf_insn *in)
{
	unsigned cls = in->code & 7, mode = in->code & 0xe0, bits = size_bits(in->code & 0x18);

	if (cls == EBPF_CLS_LDX && (mode == EBPF_MEM || mode == EBPF_MEMSX)) {
		put(t, "r%u = *(%c%u *)", in->dst, mode == EBPF_MEMSX ? 's' : 'u', bits);
		put_addr(t, in->src, in->off);
	} else if (cls == EBPF_CLS_ST && mode == EBPF_MEM) {
		put(t, "*(u%u *)", bits);
		put_addr(t, in->dst, in->off);
		put(t, " = %d", in->imm);
	} else if (cls == EBPF_CLS_STX && mode == EBPF_MEM) {
		put(t, "*(u%u *)", bits);
		put_addr(t, in->dst, in->off);
		put(t, " = r%u", in->src);
	} else if (cls == EBPF_CLS_STX && mode == EBPF_ATOMIC) {
		put_atomic(t, in);
	} else if (cls == EBPF_CLS_LD && mode == EBPF_ABS) {
		put(t, "r0 = *(u%u *)skb[%d]", bits, in->imm); /* legacy packet access */
	} else if (cls == EBPF_CLS_LD && mode == EBPF_IND) {
		put(t, "r0 = *(u%u *)skb[r%u + %d]", bits, in->src, in->imm);
	} else {
		put(t, "invalid memory op 0x%02x", in->code);
	}
}

static void put_jmp(struct text *t, const struct ebpf_vm *vm, const struct ebpf_insn *in,
		    size_t i, size_t n)
{
	bool is32 = (in->code & 7) == EBPF_CLS_JMP32, x = in->code & EBPF_X;
	unsigned op = in->code & 0xf0;
	char r = is32 ? 'w' : 'r';

	switch (op) {
	case EBPF_JA:
		if (is32) {
			put(t, "gotol %+d", in->imm);
			put_target(t, i, in->imm, n);
		} else {
			put(t, "goto %+d", in->off);
			put_target(t, i, in->off, n);
		}
		return;
	case EBPF_EXIT:
		put(t, "exit");
		return;
	case EBPF_CALL:
		if (x) {
			put(t, "callx r%u", in->dst);
		} else if (in->src == EBPF_PSEUDO_CALL) {
			put(t, "call %+d", in->imm);
			put_target(t, i, in->imm, n);
		} else {
			put(t, "call %d", in->imm);
			if (vm && in->imm >= 0 && in->imm < EBPF_MAX_HELPERS &&
			    vm->helper_names[in->imm][0])
				put(t, " (%s)", vm->helper_names[in->imm]);
		}
		return;
	default:
		break;
	}
	const char *sym = jmp_op(op);

	if (!sym) {
		put(t, "invalid jump op 0x%02x", in->code);
		return;
	}
	if (x)
		put(t, "if %c%u %s %c%u goto %+d", r, in->dst, sym, r, in->src, in->off);
	else
		put(t, "if %c%u %s %d goto %+d", r, in->dst, sym, in->imm, in->off);
	put_target(t, i, in->off, n);
}

size_t ebpf_disasm_insn(const struct ebpf_vm *vm, const struct ebpf_insn *insns, size_t n,
			size_t i, char *buf, size_t len)
{
	struct text t = { buf, len, 0 };
	const struct ebpf_insn *in = &insns[i];

	if (len)
		buf[0] = 0;
	if (ebpf_is_lddw(in)) {
		if (i + 1 >= n) {
			put(&t, "invalid: 64-bit immediate load without its second half");
			return 1;
		}
		uint64_t v = (uint32_t)in->imm | (uint64_t)(uint32_t)insns[i + 1].imm << 32;

		put(&t, "r%u = 0x%" PRIx64 " ll", in->dst, v);
		return 2;
	}
	switch (in->code & 7) {
	case EBPF_CLS_ALU:
	case EBPF_CLS_ALU64:
		put_alu(&t, in);
		break;
	case EBPF_CLS_JMP:
	case EBPF_CLS_JMP32:
		put_jmp(&t, vm, in, i, n);
		break;
	default:
		put_mem(&t, in);
		break;
	}
	return 1;
}

static void dump_line(FILE *out, size_t i, const struct ebpf_insn *in, const char *text)
{
	const unsigned char *b = (const unsigned char *)in;

	fprintf(out, "%5zu: %02x %02x %02x %02x %02x %02x %02x %02x%s%s\n", i, b[0], b[1], b[2],
		b[3], b[4], b[5], b[6], b[7], text[0] ? "  " : "", text);
}

void ebpf_dump_insns(FILE *out, const struct ebpf_vm *vm, const struct ebpf_insn *insns,
		     size_t n, const bool *fn_start)
{
	char text[160];

	for (size_t i = 0; i < n;) {
		if (fn_start && fn_start[i] && i > 0)
			fprintf(out, "<sub_%zu>:\n", i);
		size_t k = ebpf_disasm_insn(vm, insns, n, i, text, sizeof(text));

		dump_line(out, i, &insns[i], text);
		if (k == 2)
			dump_line(out, i + 1, &insns[i + 1], "");
		i += k;
	}
}

void ebpf_dump_prog(FILE *out, const struct ebpf_prog *prog)
{
	fprintf(out, "<%s>: %zu instructions\n", prog->name, prog->n);
	ebpf_dump_insns(out, prog->vm, prog->insns, prog->n, prog->fn_start);
}

#ifdef HAVE_CAPSTONE
bool ebpf_can_dump_jited(void)
{
	return true;
}

/*
 * The helper whose address is the instruction's last operand ("call
 * 0x...", or the "movabs r11, 0x..." before an indirect call), or -1.
 */
static int helper_in(const struct ebpf_vm *vm, const char *op_str)
{
	const char *hex = strrchr(op_str, ' ');
	char *end;

	hex = hex ? hex + 1 : op_str;
	if (strncmp(hex, "0x", 2))
		return -1;
	uint64_t v = strtoull(hex, &end, 16);

	if (*end)
		return -1;
	for (int h = 0; h < EBPF_MAX_HELPERS; h++)
		if (vm->helpers[h] && (uint64_t)(uintptr_t)vm->helpers[h] == v)
			return h;
	return -1;
}

int ebpf_dump_jited(FILE *out, const struct ebpf_prog *prog)
{
	csh h;

	if (!prog->code)
		return -EINVAL;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
		return -EIO;
	cs_insn *insn = cs_malloc(h);

	if (!insn) {
		cs_close(&h);
		return -ENOMEM;
	}
	const uint8_t *p = prog->code;
	size_t left = prog->code_size;
	uint64_t addr = (uintptr_t)prog->code;

	fprintf(out, "<%s>: %zu bytes at 0x%" PRIx64 "\n", prog->name, prog->code_size, addr);
	while (left) {
		const uint8_t *at = p;

		if (!cs_disasm_iter(h, &p, &left, &addr, insn)) {
			/* not an instruction: show the byte and go on */
			fprintf(out, "  %16" PRIx64 ":  %02x%*s.byte 0x%02x\n", addr, at[0], 30, "",
				at[0]);
			p++, left--, addr++;
			continue;
		}
		char bytes[64];
		size_t bl = 0;

		for (size_t k = 0; k < insn->size && bl + 3 < sizeof(bytes); k++)
			bl += (size_t)snprintf(bytes + bl, sizeof(bytes) - bl, "%02x ", insn->bytes[k]);
		fprintf(out, "  %16" PRIx64 ":  %-32s%s%s%s", insn->address, bytes, insn->mnemonic,
			insn->op_str[0] ? " " : "", insn->op_str);
		int hl = helper_in(prog->vm, insn->op_str);

		if (hl >= 0)
			fprintf(out, "  ; helper %d (%s)", hl, prog->vm->helper_names[hl]);
		fputc('\n', out);
	}
	cs_free(insn, 1);
	cs_close(&h);
	return 0;
}
#else
bool ebpf_can_dump_jited(void)
{
	return false;
}

int ebpf_dump_jited(FILE *out, const struct ebpf_prog *prog)
{
	(void)out, (void)prog;
	return -ENOTSUP;
}
#endif
