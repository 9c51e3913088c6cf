/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * verifier.c - load-time well-formedness checks.
 *
 * Not a safety verifier: it proves the program decodes, stays inside
 * itself, ends each function with exit or ja, keeps r10 read-only and
 * addresses only the 512-byte frame through r10.  It does not track
 * pointers, so memory accesses through other registers are unchecked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf_int.h"

int ebpf_fail(struct ebpf_err *err, int insn, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		int k = 0;

		err->insn = insn;
		if (insn >= 0)
			k = snprintf(err->msg, sizeof(err->msg), "insn %d: ", insn);
		va_start(ap, fmt);
		vsnprintf(err->msg + k, sizeof(err->msg) - (size_t)k, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static bool valid_atomic(int32_t imm)
{
	switch (imm) {
	case EBPF_ADD: case EBPF_ADD | EBPF_FETCH:
	case EBPF_OR: case EBPF_OR | EBPF_FETCH:
	case EBPF_AND: case EBPF_AND | EBPF_FETCH:
	case EBPF_XOR: case EBPF_XOR | EBPF_FETCH:
	case EBPF_XCHG: case EBPF_CMPXCHG:
		return true;
	}
	return false;
}

/* r10-based accesses must stay inside the frame [r10-512, r10). */
static int check_stack(const struct ebpf_insn *in, int i, int base, int size,
		       struct ebpf_err *err)
{
	if (base != 10)
		return 0;
	if (in->off < -EBPF_STACK_SIZE || in->off + size > 0)
		return ebpf_fail(err, i, "stack access r10%+d size %d outside the %d-byte frame",
				 in->off, size, EBPF_STACK_SIZE);
	return 0;
}

static int size_bytes(uint8_t code)
{
	switch (code & 0x18) {
	case EBPF_B: return 1;
	case EBPF_H: return 2;
	case EBPF_W: return 4;
	default: return 8;
	}
}

/* Decode checks of one instruction; *skip = 1 for lddw. */
static int check_insn(const struct ebpf_vm *vm, const struct ebpf_insn *insns,
		      size_t n, int i, int *skip, struct ebpf_err *err)
{
	const struct ebpf_insn *in = &insns[i];
	uint8_t cls = in->code & 7, op = in->code & 0xf0;
	bool x = in->code & EBPF_X;

	*skip = 0;
	if (in->dst > 10 || in->src > 10)
		return ebpf_fail(err, i, "invalid register r%d", in->dst > 10 ? in->dst : in->src);
	switch (cls) {
	case EBPF_CLS_LD:
		if ((in->code & 0xe0) == EBPF_ABS || (in->code & 0xe0) == EBPF_IND)
			return ebpf_fail(err, i, "legacy packet load (LD_ABS/LD_IND, opcode 0x%02x) is not supported",
					 in->code);
		if (!ebpf_is_lddw(in))
			return ebpf_fail(err, i, "unknown opcode 0x%02x", in->code);
		if ((size_t)i + 1 >= n)
			return ebpf_fail(err, i, "lddw is missing its second slot");
		if (insns[i + 1].code || insns[i + 1].dst || insns[i + 1].src || insns[i + 1].off)
			return ebpf_fail(err, i, "lddw second slot is not zero apart from imm");
		if (in->src != 0)
			return ebpf_fail(err, i, "lddw src %d (map/BTF pseudo load) is not supported", in->src);
		if (in->off)
			return ebpf_fail(err, i, "lddw with non-zero offset");
		if (in->dst == 10)
			return ebpf_fail(err, i, "write to r10 (read-only frame pointer)");
		*skip = 1;
		return 0;
	case EBPF_CLS_LDX:
		if ((in->code & 0xe0) != EBPF_MEM && (in->code & 0xe0) != EBPF_MEMSX)
			return ebpf_fail(err, i, "unknown opcode 0x%02x", in->code);
		if ((in->code & 0xe0) == EBPF_MEMSX && (in->code & 0x18) == EBPF_DW)
			return ebpf_fail(err, i, "unknown opcode 0x%02x (no 64-bit sign-extending load)", in->code);
		if (in->dst == 10)
			return ebpf_fail(err, i, "write to r10 (read-only frame pointer)");
		if (in->imm)
			return ebpf_fail(err, i, "load with non-zero imm");
		return check_stack(in, i, in->src, size_bytes(in->code), err);
	case EBPF_CLS_ST:
		if ((in->code & 0xe0) != EBPF_MEM)
			return ebpf_fail(err, i, "unknown opcode 0x%02x", in->code);
		if (in->src)
			return ebpf_fail(err, i, "store immediate with non-zero src");
		return check_stack(in, i, in->dst, size_bytes(in->code), err);
	case EBPF_CLS_STX:
		if ((in->code & 0xe0) == EBPF_ATOMIC) {
			if ((in->code & 0x18) != EBPF_W && (in->code & 0x18) != EBPF_DW)
				return ebpf_fail(err, i, "atomic operation on 8/16-bit memory");
			if (!valid_atomic(in->imm))
				return ebpf_fail(err, i, "unknown atomic operation 0x%x", (unsigned)in->imm);
			if ((in->imm & EBPF_FETCH) && in->src == 10)
				return ebpf_fail(err, i, "write to r10 (read-only frame pointer)");
		} else if ((in->code & 0xe0) != EBPF_MEM) {
			return ebpf_fail(err, i, "unknown opcode 0x%02x", in->code);
		} else if (in->imm) {
			return ebpf_fail(err, i, "store with non-zero imm");
		}
		return check_stack(in, i, in->dst, size_bytes(in->code), err);
	case EBPF_CLS_ALU:
	case EBPF_CLS_ALU64:
		if (in->dst == 10)
			return ebpf_fail(err, i, "write to r10 (read-only frame pointer)");
		if (!x && in->src)
			return ebpf_fail(err, i, "immediate ALU op with non-zero src");
		if (x && in->imm && op != EBPF_END)
			return ebpf_fail(err, i, "register ALU op with non-zero imm");
		switch (op) {
		case EBPF_DIV: case EBPF_MOD:
			if (in->off != 0 && in->off != 1)
				return ebpf_fail(err, i, "div/mod offset %d (only 0 or 1 = signed)", in->off);
			return 0;
		case EBPF_MOV:
			if (in->off == 0)
				return 0;
			if (!x || !(in->off == 8 || in->off == 16 ||
				    (in->off == 32 && cls == EBPF_CLS_ALU64)))
				return ebpf_fail(err, i, "bad movsx offset %d", in->off);
			return 0;
		case EBPF_NEG:
			if (x)
				return ebpf_fail(err, i, "unknown opcode 0x%02x", in->code);
			break;
		case EBPF_END:
			if (cls == EBPF_CLS_ALU64 && x)
				return ebpf_fail(err, i, "unknown opcode 0x%02x", in->code);
			if (in->imm != 16 && in->imm != 32 && in->imm != 64)
				return ebpf_fail(err, i, "byte swap width %d (16, 32 or 64)", in->imm);
			if (in->src)
				return ebpf_fail(err, i, "byte swap with non-zero src");
			break;
		case 0xe0: case 0xf0:
			return ebpf_fail(err, i, "unknown opcode 0x%02x", in->code);
		default:
			break;
		}
		if (in->off)
			return ebpf_fail(err, i, "ALU op with non-zero offset");
		return 0;
	case EBPF_CLS_JMP:
	case EBPF_CLS_JMP32:
		if (op == 0xe0 || op == 0xf0)
			return ebpf_fail(err, i, "unknown opcode 0x%02x", in->code);
		if (op == EBPF_CALL || op == EBPF_EXIT) {
			if (cls == EBPF_CLS_JMP32)
				return ebpf_fail(err, i, "unknown opcode 0x%02x", in->code);
			if (op == EBPF_EXIT) {
				if (x || in->dst || in->src || in->off || in->imm)
					return ebpf_fail(err, i, "malformed exit");
				return 0;
			}
			if (x) { /* callx: helper index in a register */
				if (in->src || in->off)
					return ebpf_fail(err, i, "malformed callx");
				/* dst 0 with imm: the register number is in imm (LLVM form). */
				if (in->dst == 0 && (in->imm < 0 || in->imm > 10))
					return ebpf_fail(err, i, "callx register r%d is invalid", in->imm);
				return 0;
			}
			if (in->dst || in->off)
				return ebpf_fail(err, i, "malformed call");
			if (in->src == 0) {
				if (in->imm < 0 || in->imm >= EBPF_MAX_HELPERS || !vm->helpers[in->imm])
					return ebpf_fail(err, i, "call to unknown helper %d", in->imm);
				return 0;
			}
			if (in->src == EBPF_PSEUDO_CALL)
				return 0; /* target checked by the caller */
			return ebpf_fail(err, i, "call src %d (BTF/kfunc) is not supported", in->src);
		}
		if (op == EBPF_JA) {
			if (x || in->dst || in->src)
				return ebpf_fail(err, i, "malformed ja");
			if (cls == EBPF_CLS_JMP && in->imm)
				return ebpf_fail(err, i, "ja with non-zero imm");
			if (cls == EBPF_CLS_JMP32 && in->off)
				return ebpf_fail(err, i, "ja32 with non-zero offset");
			return 0;
		}
		if (!x && in->src)
			return ebpf_fail(err, i, "immediate jump with non-zero src");
		if (x && in->imm)
			return ebpf_fail(err, i, "register jump with non-zero imm");
		return 0;
	}
	return ebpf_fail(err, i, "unknown opcode 0x%02x", in->code);
}

static long jump_target(const struct ebpf_insn *in, int i)
{
	if ((in->code & 7) == EBPF_CLS_JMP32 && (in->code & 0xf0) == EBPF_JA)
		return (long)i + 1 + in->imm;
	if ((in->code & 0xf0) == EBPF_CALL)
		return (long)i + 1 + in->imm;
	return (long)i + 1 + in->off;
}

static bool is_jump(const struct ebpf_insn *in)
{
	uint8_t cls = in->code & 7, op = in->code & 0xf0;

	if (cls != EBPF_CLS_JMP && cls != EBPF_CLS_JMP32)
		return false;
	return op != EBPF_CALL && op != EBPF_EXIT;
}

static bool is_local_call(const struct ebpf_insn *in)
{
	return in->code == (EBPF_CLS_JMP | EBPF_CALL) && in->src == EBPF_PSEUDO_CALL;
}

/* The first local call in function fn whose subtree exceeds the frame limit. */
static int too_deep(const struct ebpf_insn *insns, size_t n, const int *fn_of,
		    const int *start_of, const int *height, int fn, int depth,
		    struct ebpf_err *err)
{
	for (;;) {
		size_t i;
		int callee = -1;

		for (i = (size_t)start_of[fn]; i < n && fn_of[i] == fn; i++) {
			if (!is_local_call(&insns[i]))
				continue;
			callee = fn_of[jump_target(&insns[i], (int)i)];
			if (depth + height[callee] > EBPF_MAX_FRAMES)
				break;
		}
		if (depth + 1 > EBPF_MAX_FRAMES || i == n || fn_of[i] != fn)
			return ebpf_fail(err, (int)i, "call depth exceeds %d frames", EBPF_MAX_FRAMES);
		fn = callee;
		depth++;
	}
}

/*
 * Depth-first walk of the call graph: no recursion, at most
 * EBPF_MAX_FRAMES frames.  Each function is walked once (state 2 = done)
 * and keeps its height, the frames it needs itself included, so a function
 * called from many sites costs one look-up per site and the whole walk is
 * linear in the program size.  C recursion stops at the frame limit.
 */
static int walk_calls(const struct ebpf_insn *insns, size_t n, const int *fn_of,
		      const int *start_of, int fn, int depth, int *state, int *height,
		      struct ebpf_err *err)
{
	int h = 1;

	state[fn] = 1; /* on the current path */
	for (size_t i = (size_t)start_of[fn]; i < n && fn_of[i] == fn; i++) {
		if (!is_local_call(&insns[i]))
			continue;
		int callee = fn_of[jump_target(&insns[i], (int)i)];

		if (state[callee] == 1)
			return ebpf_fail(err, (int)i, "recursive call (not supported)");
		if (depth + 1 > EBPF_MAX_FRAMES)
			return ebpf_fail(err, (int)i, "call depth exceeds %d frames", EBPF_MAX_FRAMES);
		if (state[callee] == 0) {
			int rc = walk_calls(insns, n, fn_of, start_of, callee, depth + 1,
					    state, height, err);

			if (rc)
				return rc;
		}
		/* Walked from a shallower site before: it may not fit here. */
		if (depth + height[callee] > EBPF_MAX_FRAMES)
			return too_deep(insns, n, fn_of, start_of, height, callee, depth + 1, err);
		if (height[callee] + 1 > h)
			h = height[callee] + 1;
	}
	state[fn] = 2;
	height[fn] = h;
	return 0;
}

int ebpf_verify(const struct ebpf_vm *vm, const struct ebpf_insn *insns,
		size_t n, bool *fn_start, struct ebpf_err *err)
{
	bool *second = NULL;
	int *fn_of = NULL, *start_of = NULL, *state = NULL, *height = NULL;
	int rc = 0, nfn = 0;

	if (n == 0)
		return ebpf_fail(err, -1, "empty program");
	if (n > EBPF_MAX_INSNS)
		return ebpf_fail(err, -1, "program too long (%zu instructions, max %d)", n, EBPF_MAX_INSNS);
	second = calloc(n, sizeof(*second));
	fn_of = calloc(n, sizeof(*fn_of));
	start_of = calloc(n, sizeof(*start_of));
	state = calloc(n, sizeof(*state));
	height = calloc(n, sizeof(*height));
	if (!second || !fn_of || !start_of || !state || !height) {
		rc = -ENOMEM;
		goto out;
	}
	fn_start[0] = true; /* the others are symbols (ELF) or call targets */

	/* Pass 1: decode every instruction, mark lddw tails and functions. */
	for (size_t i = 0; i < n; i++) {
		int skip;

		rc = check_insn(vm, insns, n, (int)i, &skip, err);
		if (rc)
			goto out;
		if (skip)
			second[++i] = true;
	}
	for (size_t i = 0; i < n; i++) {
		if (second[i] && fn_start[i]) {
			rc = ebpf_fail(err, (int)i, "function starts in the middle of lddw");
			goto out;
		}
		if (second[i])
			continue;
		if (!is_jump(&insns[i]) && !is_local_call(&insns[i]))
			continue;
		long t = jump_target(&insns[i], (int)i);

		if (t < 0 || (size_t)t >= n) {
			rc = ebpf_fail(err, (int)i, "jump target %ld out of range [0, %zu)", t, n);
			goto out;
		}
		if (second[t]) {
			rc = ebpf_fail(err, (int)i, "jump into the middle of lddw at %ld", t);
			goto out;
		}
		if (is_local_call(&insns[i]))
			fn_start[t] = true;
	}
	/* Pass 2: function boundaries.  Jumps stay inside their function. */
	for (size_t i = 0; i < n; i++) {
		if (fn_start[i])
			start_of[nfn++] = (int)i;
		fn_of[i] = nfn - 1;
	}
	for (size_t i = 0; i < n; i++) {
		if (second[i] || !is_jump(&insns[i]))
			continue;
		long t = jump_target(&insns[i], (int)i);

		if (fn_of[t] != fn_of[i]) {
			rc = ebpf_fail(err, (int)i, "jump to %ld leaves its function", t);
			goto out;
		}
	}
	/*
	 * The kernel's rule: a function's last instruction is exit or an
	 * unconditional jump (that lands inside the function, checked above),
	 * so no path runs off its end.  clang -O2 ends a function with `ja`
	 * back to a shared exit block in the middle.
	 */
	for (int f = 0; f < nfn; f++) {
		size_t end = f + 1 < nfn ? (size_t)start_of[f + 1] : n;
		size_t last = end - 1;
		const struct ebpf_insn *in = &insns[last];
		bool is_ja = (in->code == (EBPF_CLS_JMP | EBPF_JA) ||
			      in->code == (EBPF_CLS_JMP32 | EBPF_JA));
		bool is_exit = in->code == (EBPF_CLS_JMP | EBPF_EXIT);

		if (second[last] || !(is_exit || is_ja)) {
			rc = f + 1 == nfn ?
				ebpf_fail(err, (int)last, "program does not end with exit or ja") :
				ebpf_fail(err, (int)last, "function does not end with exit or ja (falls into the next function)");
			goto out;
		}
	}
	rc = walk_calls(insns, n, fn_of, start_of, 0, 1, state, height, err);
out:
	free(second);
	free(fn_of);
	free(start_of);
	free(state);
	free(height);
	return rc;
}
