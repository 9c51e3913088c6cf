/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ebpf-native - runs the example C programs (progs/) compiled natively:
 * `ebpf-native FUNC [MEMHEX]` prints the result in hex, like ebpf-run, so
 * that the ELF test can compare the eBPF build against it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf.h"
#include "progs/progs.h"

int main(int argc, char **argv)
{
	static const struct { const char *name; u64 (*fn)(const u8 *, u64); } fns[] = {
		{ "filter", filter }, { "checksum", checksum }, { "crc32", crc32 },
		{ "count_words", count_words }, { "byte_sum", byte_sum }, { "scan", scan },
		{ "sum_twice", sum_twice }, { "classify", classify },
	};
	uint8_t *mem = NULL;
	size_t len = 0;

	if (argc < 2 || (argc > 2 && ebpf_parse_hex(argv[2], &mem, &len))) {
		fprintf(stderr, "usage: ebpf-native FUNC [MEMHEX]\n");
		return 1;
	}
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		if (strcmp(argv[1], fns[i].name))
			continue;
		printf("%" PRIx64 "\n", (uint64_t)fns[i].fn(mem, len));
		free(mem);
		return 0;
	}
	fprintf(stderr, "ebpf-native: no function %s\n", argv[1]);
	return 1;
}
