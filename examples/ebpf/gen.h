/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gen.h - structured generator of random valid, terminating eBPF programs
 * (for the differential test, the demo and the benchmarks).
 *
 * Programs read and write only an EBPF_GEN_CTX-byte context (r1 at entry)
 * and the top EBPF_GEN_STACK bytes of their frames, jump only forward
 * except in counted loops, and fold every register and stack slot into r0
 * before exit, so equal r0 and context mean equal behaviour.
 */
#ifndef EBPF_GEN_H
#define EBPF_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "ebpf.h"

#define EBPF_GEN_CTX   64
#define EBPF_GEN_STACK 64

/* Next value of a xorshift64* generator; *state must not be 0. */
uint64_t ebpf_gen_rand(uint64_t *state);

/*
 * Write a program of about target instructions (at most cap) into out;
 * returns its length.  Uses helpers 1 (add), 2 (mul) and 3 (mix) of the
 * standard table.  flags: EBPF_GEN_NO_CALLS leaves out helper and local
 * calls.
 */
#define EBPF_GEN_NO_CALLS 1u
size_t ebpf_gen_prog(uint64_t *state, struct ebpf_insn *out, size_t cap,
		     size_t target, unsigned flags);

#endif
