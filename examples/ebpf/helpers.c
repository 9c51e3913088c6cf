/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * helpers.c - the standard helper table of the example tools and tests.
 *
 *   1 add      r1 + r2 + r3 + r4 + r5
 *   2 mul      r1 * r2
 *   3 mix      a 64-bit hash of r1..r5 (order-sensitive)
 *   4 trace    prints r1 in hex on stderr, returns 0
 *   5 identity returns r1 (the bpf_conformance suite relies on it)
 *   6 memsum   sum of the r2 bytes at r1 (0 if r1 is NULL)
 */
#include <inttypes.h>
#include <stdio.h>

#include "helpers.h"

static uint64_t h_add(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	return a + b + c + d + e;
}

static uint64_t h_mul(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	(void)c, (void)d, (void)e;
	return a * b;
}

static uint64_t mix1(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static uint64_t h_mix(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	return mix1(mix1(mix1(mix1(mix1(1, a), b), c), d), e);
}

static uint64_t h_trace(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	(void)b, (void)c, (void)d, (void)e;
	fprintf(stderr, "trace: %" PRIx64 "\n", a);
	return 0;
}

static uint64_t h_identity(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	(void)b, (void)c, (void)d, (void)e;
	return a;
}

static uint64_t h_memsum(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	const uint8_t *p = (const uint8_t *)(uintptr_t)a;
	uint64_t s = 0;

	(void)c, (void)d, (void)e;
	for (uint64_t i = 0; p && i < b; i++)
		s += p[i];
	return s;
}

void ebpf_std_helpers(struct ebpf_vm *vm)
{
	ebpf_vm_set_helper(vm, 1, "add", h_add);
	ebpf_vm_set_helper(vm, 2, "mul", h_mul);
	ebpf_vm_set_helper(vm, 3, "mix", h_mix);
	ebpf_vm_set_helper(vm, 4, "trace", h_trace);
	ebpf_vm_set_helper(vm, 5, "identity", h_identity);
	ebpf_vm_set_helper(vm, 6, "memsum", h_memsum);
}
