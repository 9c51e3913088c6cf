/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vm.c - helper table, program objects, dispatch between JIT and interpreter. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf_int.h"

int ebpf_vm_create(struct ep_pool *pool, struct ebpf_vm **out)
{
	struct ebpf_vm *vm = calloc(1, sizeof(*vm));

	if (!vm)
		return -ENOMEM;
	vm->pool = pool;
	*out = vm;
	return 0;
}

void ebpf_vm_destroy(struct ebpf_vm *vm)
{
	free(vm);
}

int ebpf_vm_set_helper(struct ebpf_vm *vm, unsigned idx, const char *name,
		       ebpf_helper_fn fn)
{
	if (idx >= EBPF_MAX_HELPERS)
		return -EINVAL;
	/* Atomic store: callx in running JIT code reads the slot. */
	__atomic_store_n(&vm->helpers[idx], fn, __ATOMIC_RELEASE);
	snprintf(vm->helper_names[idx], sizeof(vm->helper_names[idx]), "%s",
		 name ? name : "");
	return 0;
}

ebpf_helper_fn ebpf_vm_get_helper(const struct ebpf_vm *vm, unsigned idx)
{
	return idx < EBPF_MAX_HELPERS ? vm->helpers[idx] : NULL;
}

int ebpf_load_funcs(struct ebpf_vm *vm, const struct ebpf_insn *insns,
		    size_t n, const size_t *funcs, size_t nfuncs,
		    const char *name, struct ebpf_prog **out,
		    struct ebpf_err *err)
{
	struct ebpf_prog *p;
	int rc;

	if (err) {
		err->insn = -1;
		err->msg[0] = 0;
	}
	if (!vm || !insns || !out)
		return ebpf_fail(err, -1, "invalid argument");
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->vm = vm;
	p->n = n;
	p->insns = malloc((n ? n : 1) * sizeof(*insns));
	p->fn_start = malloc((n ? n : 1) * sizeof(bool));
	if (!p->insns || !p->fn_start) {
		ebpf_unload(p);
		return -ENOMEM;
	}
	memcpy(p->insns, insns, n * sizeof(*insns));
	memset(p->fn_start, 0, (n ? n : 1) * sizeof(bool));
	for (size_t k = 0; k < nfuncs; k++) {
		if (funcs[k] >= n) {
			ebpf_unload(p);
			return ebpf_fail(err, -1, "function start %zu outside the program", funcs[k]);
		}
		p->fn_start[funcs[k]] = true;
	}
	rc = ebpf_verify(vm, p->insns, n, p->fn_start, err);
	if (rc) {
		ebpf_unload(p);
		return rc;
	}
	if (name && *name)
		snprintf(p->name, sizeof(p->name), "%s", name);
	else
		snprintf(p->name, sizeof(p->name), "bpf_prog_%lu", vm->next_id);
	vm->next_id++;
	*out = p;
	return 0;
}

int ebpf_load(struct ebpf_vm *vm, const struct ebpf_insn *insns, size_t n,
	      const char *name, struct ebpf_prog **out, struct ebpf_err *err)
{
	return ebpf_load_funcs(vm, insns, n, NULL, 0, name, out, err);
}

int ebpf_jit(struct ebpf_prog *prog, struct ebpf_err *err)
{
	if (prog->code)
		return 0;
	if (!prog->vm->pool)
		return ebpf_fail(err, -1, "no executable memory pool given to the vm");
#if !defined(__x86_64__)
	/* the JIT emits x86-64 code: elsewhere programs run interpreted */
	return ebpf_fail(err, -1, "the JIT emits x86-64 code only; run the interpreter");
#else
	return ebpf_jit_compile(prog, err);
#endif
}

int ebpf_run_jit(const struct ebpf_prog *prog, void *ctx, size_t len,
		 uint64_t *r0)
{
	uint64_t (*fn)(void *, size_t);

	if (!prog->code)
		return -ENOEXEC;
	/* The image is code; a cast through uintptr_t avoids object->function warnings. */
	fn = (uint64_t (*)(void *, size_t))(uintptr_t)prog->code;
	*r0 = fn(ctx, len);
	return 0;
}

int ebpf_run(const struct ebpf_prog *prog, void *ctx, size_t len, uint64_t *r0)
{
	if (prog->code)
		return ebpf_run_jit(prog, ctx, len, r0);
	return ebpf_run_interp(prog, ctx, len, r0);
}

void ebpf_unload(struct ebpf_prog *prog)
{
	if (!prog)
		return;
	ebpf_jit_free(prog);
	for (size_t i = 0; i < prog->nblobs; i++)
		free(prog->blobs[i]);
	free(prog->blobs);
	free(prog->insns);
	free(prog->fn_start);
	free(prog);
}

const char *ebpf_prog_name(const struct ebpf_prog *prog)
{
	return prog->name;
}

const struct ebpf_insn *ebpf_prog_insns(const struct ebpf_prog *prog, size_t *n)
{
	if (n)
		*n = prog->n;
	return prog->insns;
}

void *ebpf_prog_code(const struct ebpf_prog *prog, size_t *size)
{
	if (size)
		*size = prog->code ? prog->code_size : 0;
	return prog->code;
}

int ebpf_prog_call_site(const struct ebpf_prog *prog, size_t insn,
			struct ebpf_call_site *out)
{
	for (size_t i = 0; i < prog->nsites; i++) {
		const struct ebpf_jit_site *s = &prog->sites[i];

		if (s->insn != insn)
			continue;
		out->insn = s->insn;
		out->helper = s->helper;
		out->kind = s->kind;
		out->patch = (uint8_t *)prog->code + s->off;
		return 0;
	}
	return -ENOENT;
}

int ebpf_parse_hex(const char *text, uint8_t **out, size_t *len)
{
	size_t cap = strlen(text) / 2 + 1, n = 0;
	uint8_t *buf = malloc(cap);
	int hi = -1;

	if (!buf)
		return -ENOMEM;
	for (const char *c = text; *c; c++) {
		int v;

		if (isspace((unsigned char)*c) || *c == ',') {
			if (hi >= 0) /* a lone digit between separators */
				goto bad;
			continue;
		}
		if (c[0] == '0' && (c[1] == 'x' || c[1] == 'X') && hi < 0) {
			c++;
			continue;
		}
		if (!isxdigit((unsigned char)*c))
			goto bad;
		v = isdigit((unsigned char)*c) ? *c - '0' : (tolower((unsigned char)*c) - 'a' + 10);
		if (hi < 0) {
			hi = v;
		} else {
			buf[n++] = (uint8_t)(hi << 4 | v);
			hi = -1;
		}
	}
	if (hi >= 0)
		goto bad;
	*out = buf;
	*len = n;
	return 0;
bad:
	free(buf);
	return -EINVAL;
}
