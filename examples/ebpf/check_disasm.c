/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_disasm.c - listings (disasm.c): the text of every instruction form,
 * listings of whole programs with function starts and 64-bit immediates,
 * no overflow of small buffers on any opcode, and the JIT output through
 * Capstone (or -ENOTSUP in builds without it).
 */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "disasm.h"
#include "ebpf_asm.h"
#include "ebpf_int.h"
#include "execpack.h"
#include "helpers.h"

struct want {
	struct ebpf_insn in[2];
	const char *text;
};

#define W1(i, text) { { i, INSN(0, 0, 0, 0, 0) }, text }

static const struct want table[] = {
	W1(MOV64_IMM(0, 7), "r0 = 7"),
	W1(MOV64_IMM(3, -1), "r3 = -1"),
	W1(MOV32_IMM(1, 5), "w1 = 5"),
	W1(MOV64_REG(0, 10), "r0 = r10"),
	W1(MOV32_REG(2, 9), "w2 = w9"),
	W1(MOVSX64(1, 2, 8), "r1 = (s8)r2"),
	W1(MOVSX32(1, 2, 16), "w1 = (s16)w2"),
	W1(ALU64_IMM(EBPF_ADD, 0, 3), "r0 += 3"),
	W1(ALU64_REG(EBPF_SUB, 4, 5), "r4 -= r5"),
	W1(ALU32_REG(EBPF_MUL, 4, 5), "w4 *= w5"),
	W1(ALU64_IMM(EBPF_DIV, 1, 2), "r1 /= 2"),
	W1(SDIV64_REG(1, 2), "r1 s/= r2"),
	W1(SMOD32_IMM(1, -3), "w1 s%= -3"),
	W1(ALU64_IMM(EBPF_MOD, 1, 7), "r1 %= 7"),
	W1(ALU64_IMM(EBPF_OR, 1, 1), "r1 |= 1"),
	W1(ALU64_IMM(EBPF_AND, 1, 255), "r1 &= 255"),
	W1(ALU64_IMM(EBPF_LSH, 1, 4), "r1 <<= 4"),
	W1(ALU32_IMM(EBPF_RSH, 1, 4), "w1 >>= 4"),
	W1(ALU64_IMM(EBPF_ARSH, 1, 63), "r1 s>>= 63"),
	W1(ALU64_REG(EBPF_XOR, 0, 0), "r0 ^= r0"),
	W1(NEG64(6), "r6 = -r6"),
	W1(NEG32(6), "w6 = -w6"),
	W1(LE(1, 16), "r1 = le16 r1"),
	W1(BE(1, 32), "r1 = be32 r1"),
	W1(BSWAP(1, 64), "r1 = bswap64 r1"),
	W1(LDX(EBPF_W, 2, 1, 4), "r2 = *(u32 *)(r1 + 4)"),
	W1(LDX(EBPF_DW, 0, 10, -8), "r0 = *(u64 *)(r10 - 8)"),
	W1(LDXSX(EBPF_B, 0, 1, 0), "r0 = *(s8 *)(r1 + 0)"),
	W1(ST(EBPF_H, 10, -2, 513), "*(u16 *)(r10 - 2) = 513"),
	W1(STX(EBPF_DW, 10, 1, -16), "*(u64 *)(r10 - 16) = r1"),
	W1(ATOMIC(EBPF_DW, EBPF_ADD, 1, 2, 0), "lock *(u64 *)(r1 + 0) += r2"),
	W1(ATOMIC(EBPF_W, EBPF_XOR, 1, 2, 4), "lock *(u32 *)(r1 + 4) ^= r2"),
	W1(ATOMIC(EBPF_DW, EBPF_AND | EBPF_FETCH, 1, 2, 0),
	   "r2 = atomic_fetch_and((u64 *)(r1 + 0), r2)"),
	W1(ATOMIC(EBPF_DW, EBPF_XCHG, 1, 3, 8), "r3 = xchg((u64 *)(r1 + 8), r3)"),
	W1(ATOMIC(EBPF_W, EBPF_CMPXCHG, 1, 3, 0), "r0 = cmpxchg((u32 *)(r1 + 0), r0, r3)"),
	W1(ATOMIC(EBPF_DW, 0x33, 1, 3, 0), "invalid atomic op 0x33"),
	W1(INSN(EBPF_CLS_LD | EBPF_ABS | EBPF_W, 0, 0, 0, 12), "r0 = *(u32 *)skb[12]"),
	W1(INSN(EBPF_CLS_LD | EBPF_IND | EBPF_B, 0, 3, 0, 1), "r0 = *(u8 *)skb[r3 + 1]"),
	/* jumps: relative offset and the absolute target (from index 0) */
	W1(JA(1), "goto +1 <2>"),
	W1(JA32(0), "gotol +0 <1>"),
	W1(JMP_IMM(EBPF_JEQ, 1, 0, 0), "if r1 == 0 goto +0 <1>"),
	W1(JMP_REG(EBPF_JSGT, 1, 2, 0), "if r1 s> r2 goto +0 <1>"),
	W1(JMP32_IMM(EBPF_JLE, 3, -1, 1), "if w3 <= -1 goto +1 <2>"),
	W1(JMP_REG(EBPF_JSET, 1, 2, 0), "if r1 & r2 goto +0 <1>"),
	W1(JMP_IMM(EBPF_JNE, 1, 5, -1), "if r1 != 5 goto -1 <0>"),
	W1(JMP_IMM(EBPF_JNE, 1, 5, 9), "if r1 != 5 goto +9 <out of range>"),
	W1(CALL_HELPER(5), "call 5 (identity)"),
	W1(CALL_HELPER(40), "call 40"),
	W1(CALL_LOCAL(0), "call +0 <1>"),
	W1(CALLX(4), "callx r4"),
	W1(EXIT(), "exit"),
	W1(INSN(EBPF_CLS_JMP | 0xe0, 0, 0, 0, 0), "invalid jump op 0xe5"),
	W1(INSN(EBPF_CLS_ALU64 | 0xe0, 0, 0, 0, 0), "invalid alu op 0xe7"),
	W1(INSN(EBPF_CLS_LDX | 0x20, 0, 0, 0, 0), "invalid memory op 0x21"),
	{ { LDDW(2, 0x1122334455667788ull) }, "r2 = 0x1122334455667788 ll" },
};

static struct ebpf_vm *make_vm(struct ep_pool *pool)
{
	struct ebpf_vm *vm;

	ck_assert_int_eq(ebpf_vm_create(pool, &vm), 0);
	ebpf_std_helpers(vm);
	return vm;
}

START_TEST(test_table)
{
	struct ebpf_vm *vm = make_vm(NULL);
	char buf[160];
	const struct want *w = &table[_i];
	/* n = 4: jump targets up to index 3 are in range (only a 64-bit load
	 * reads past the first slot) */
	size_t k = ebpf_disasm_insn(vm, w->in, 4, 0, buf, sizeof(buf));

	ck_assert_msg(!strcmp(buf, w->text), "code 0x%02x: got '%s', want '%s'", w->in[0].code,
		      buf, w->text);
	ck_assert_uint_eq(k, ebpf_is_lddw(&w->in[0]) ? 2 : 1);
	ebpf_vm_destroy(vm);
}
END_TEST

/* Every opcode with odd fields, into buffers of every small size: the
 * text is cut, always terminated, never written past len. */
START_TEST(test_any_opcode)
{
	struct ebpf_vm *vm = make_vm(NULL);
	char buf[200];

	for (unsigned c = 0; c < 256; c++) {
		struct ebpf_insn in[2] = { INSN(c, 15, 15, -32768, INT32_MIN), INSN(0, 0, 0, 0, -1) };

		for (size_t len = 1; len <= 120; len += len < 16 ? 1 : 13) {
			memset(buf, 'Z', sizeof(buf));
			size_t k = ebpf_disasm_insn(vm, in, 2, 0, buf, len);

			ck_assert(k == 1 || k == 2);
			ck_assert_msg(memchr(buf, 0, len) != NULL, "code 0x%02x len %zu unterminated",
				      c, len);
			ck_assert_msg(buf[len] == 'Z', "code 0x%02x wrote past %zu bytes", c, len);
		}
		ck_assert(ebpf_disasm_insn(vm, in, 2, 0, buf, sizeof(buf)) >= 1);
		ck_assert_msg(buf[0] != 0, "code 0x%02x: no text", c);
	}
	/* a 64-bit load whose second half is missing */
	struct ebpf_insn half[1] = { INSN(EBPF_CLS_LD | EBPF_DW | EBPF_IMM, 1, 0, 0, 1) };

	ck_assert_uint_eq(ebpf_disasm_insn(vm, half, 1, 0, buf, sizeof(buf)), 1);
	ck_assert_ptr_nonnull(strstr(buf, "invalid"));
	ebpf_vm_destroy(vm);
}
END_TEST

static char *listing(void (*fn)(FILE *, const void *), const void *arg)
{
	/* static: the stream keeps their addresses until fclose() */
	static char *text;
	static size_t len;
	FILE *f;

	text = NULL;
	f = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(f);
	fn(f, arg);
	fclose(f);
	return text;
}

static void dump_prog(FILE *f, const void *p)
{
	ebpf_dump_prog(f, p);
}

static void dump_jited(FILE *f, const void *p)
{
	ck_assert_int_eq(ebpf_dump_jited(f, p), 0);
}

/* r0 = identity(7) via a local function; a 64-bit constant on the way */
static const struct ebpf_insn prog_with_sub[] = {
	MOV64_IMM(1, 7),
	CALL_LOCAL(3),
	LDDW(2, 0xdeadbeefcafeull),
	EXIT(),
	CALL_HELPER(5),
	EXIT(),
};

START_TEST(test_dump_prog)
{
	struct ebpf_vm *vm = make_vm(NULL);
	struct ebpf_prog *p;

	ck_assert_int_eq(ebpf_load(vm, prog_with_sub, 7, "with_sub", &p, NULL), 0);
	char *text = listing(dump_prog, p);

	ck_assert_msg(!strcmp(text, "<with_sub>: 7 instructions\n"
				    "    0: b7 01 00 00 07 00 00 00  r1 = 7\n"
				    "    1: 85 10 00 00 03 00 00 00  call +3 <5>\n"
				    "    2: 18 02 00 00 fe ca ef be  r2 = 0xdeadbeefcafe ll\n"
				    "    3: 00 00 00 00 ad de 00 00\n"
				    "    4: 95 00 00 00 00 00 00 00  exit\n"
				    "<sub_5>:\n"
				    "    5: 85 00 00 00 05 00 00 00  call 5 (identity)\n"
				    "    6: 95 00 00 00 00 00 00 00  exit\n"),
		      "listing:\n%s", text);
	free(text);
	ebpf_unload(p);
	ebpf_vm_destroy(vm);
}
END_TEST

START_TEST(test_dump_jited)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *pool;
	struct ebpf_prog *p;

	ck_assert_int_eq(ep_pool_create(&cfg, &pool), 0);
	struct ebpf_vm *vm = make_vm(pool);

	ck_assert_int_eq(ebpf_load(vm, prog_with_sub, 7, "with_sub", &p, NULL), 0);
	/* not compiled yet */
	ck_assert_int_eq(ebpf_dump_jited(stdout, p), ebpf_can_dump_jited() ? -EINVAL : -ENOTSUP);
	ck_assert_int_eq(ebpf_jit(p, NULL), 0);
	if (!ebpf_can_dump_jited()) {
		ck_assert_int_eq(ebpf_dump_jited(stdout, p), -ENOTSUP);
	} else {
		size_t size = 0;
		unsigned char *code = ebpf_prog_code(p, &size);
		char *text = listing(dump_jited, p);
		char head[128];

		snprintf(head, sizeof(head), "<with_sub>: %zu bytes at 0x%" PRIxPTR "\n", size,
			 (uintptr_t)code);
		ck_assert_msg(!strncmp(text, head, strlen(head)), "header:\n%s", text);
		/* every line's address inside the code, in order, the last one
		 * ends it, and the decoded bytes are the code's own */
		uintptr_t prev = 0, next = (uintptr_t)code;
		int lines = 0;

		for (char *l = strchr(text, '\n') + 1; *l; l = strchr(l, '\n') + 1) {
			char *end;
			uintptr_t a = (uintptr_t)strtoull(l, &end, 16);

			ck_assert_msg(a == next, "line at %" PRIxPTR ", want %" PRIxPTR ": %.80s", a,
				      next, l);
			ck_assert(a >= prev);
			end += 3; /* ":  " */
			unsigned b;
			int used;

			while (sscanf(end, "%2x %n", &b, &used) == 1 && end[2] == ' ') {
				ck_assert_uint_eq(b, code[next - (uintptr_t)code]);
				next++;
				end += used;
			}
			prev = a;
			lines++;
		}
		ck_assert_uint_eq(next, (uintptr_t)code + size);
		ck_assert_int_gt(lines, 5);
		ck_assert_ptr_nonnull(strstr(text, " ret\n"));
		ck_assert_ptr_nonnull(strstr(text, "; helper 5 (identity)"));
		free(text);
	}
	ebpf_unload(p);
	ebpf_vm_destroy(vm);
	ep_pool_destroy(pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("disasm");
	TCase *tc = tcase_create("disasm");

#if !defined(__x86_64__)
	printf("SKIP: the eBPF example's JIT emits x86-64 code\n");
	return 77;
#endif
	tcase_add_loop_test(tc, test_table, 0, (int)(sizeof(table) / sizeof(table[0])));
	tcase_add_test(tc, test_any_opcode);
	tcase_add_test(tc, test_dump_prog);
	tcase_add_test(tc, test_dump_jited);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
