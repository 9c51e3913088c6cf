/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* helpers.h - standard helper table shared by ebpf-run, the tests and the demo. */
#ifndef EBPF_HELPERS_H
#define EBPF_HELPERS_H

#include "ebpf.h"

#define EBPF_HELPER_ADD      1
#define EBPF_HELPER_MUL      2
#define EBPF_HELPER_MIX      3
#define EBPF_HELPER_TRACE    4
#define EBPF_HELPER_IDENTITY 5
#define EBPF_HELPER_MEMSUM   6

void ebpf_std_helpers(struct ebpf_vm *vm);

#endif
