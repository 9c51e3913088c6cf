/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ebpf_int.h - internals shared by the loader, interpreter and JIT. */
#ifndef EBPF_INT_H
#define EBPF_INT_H

#include <stdarg.h>
#include <stdbool.h>

#include "ebpf.h"

struct ebpf_vm {
	struct ep_pool *pool;
	/* Read by callx in JIT code at run time: keep it a plain array. */
	ebpf_helper_fn helpers[EBPF_MAX_HELPERS];
	char helper_names[EBPF_MAX_HELPERS][32];
	unsigned long next_id;
};

struct ebpf_jit_site {
	size_t insn;
	int helper;
	enum ebpf_site_kind kind;
	size_t off; /* offset of the rel32/imm64 inside the image */
};

struct ebpf_prog {
	struct ebpf_vm *vm;
	struct ebpf_insn *insns;
	size_t n;
	bool *fn_start;       /* [n]: first instruction of a (sub)program */
	char name[64];        /* "bpf_prog_<n>" unless the embedder named it */
	void *code;           /* JIT image (exec address) or NULL */
	size_t code_size;     /* bytes of code emitted */
	struct ebpf_jit_site *sites;
	size_t nsites;
	void **blobs;         /* ELF data sections referenced by lddw */
	size_t nblobs;
};

/* Set err (if any) to "insn N: <fmt>" and return -EINVAL. */
int ebpf_fail(struct ebpf_err *err, int insn, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Well-formedness checks.  fn_start[n] holds on entry the function starts
 * known from elsewhere (an ELF symbol table; all false otherwise) and on
 * return also instruction 0 and every local-call target.
 */
int ebpf_verify(const struct ebpf_vm *vm, const struct ebpf_insn *insns,
		size_t n, bool *fn_start, struct ebpf_err *err);

/*
 * ebpf_load() of already relocated instructions whose function boundaries
 * are also known from elsewhere: funcs[nfuncs] are the indexes where a
 * function starts besides 0 and the local-call targets (the ELF loader
 * passes its STT_FUNC symbols, so a function nobody calls stays apart).
 */
int ebpf_load_funcs(struct ebpf_vm *vm, const struct ebpf_insn *insns,
		    size_t n, const size_t *funcs, size_t nfuncs,
		    const char *name, struct ebpf_prog **out,
		    struct ebpf_err *err);

/*
 * The interpreter with a step limit, for harnesses that run programs the
 * verifier cannot prove to terminate (it allows loops): -ETIME after
 * max_steps instructions, 0 = no limit.  ebpf_run_interp() has no limit.
 */
int ebpf_run_interp_steps(const struct ebpf_prog *prog, void *ctx, size_t len,
			  uint64_t *r0, uint64_t max_steps);

int ebpf_jit_compile(struct ebpf_prog *prog, struct ebpf_err *err);
void ebpf_jit_free(struct ebpf_prog *prog);

static inline bool ebpf_is_lddw(const struct ebpf_insn *in)
{
	return in->code == (EBPF_CLS_LD | EBPF_DW | EBPF_IMM);
}

#endif /* EBPF_INT_H */
