/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * JIT code for tests/llvm-perfmap.sh: run with EXECPACK_PERFMAP=1, it
 * looks itself up in /tmp/perf-<pid>.map: the entry named after
 * llvm_perfmap_inner, a function in the middle of its module, must cover
 * that function's address, and so must no other entry.  Exit 0 if so.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) int llvm_perfmap_first(int x)
{
	return x * 3 + 1;
}

__attribute__((noinline)) int llvm_perfmap_inner(int x)
{
	return llvm_perfmap_first(x) ^ 0x55;
}

__attribute__((noinline)) int llvm_perfmap_last(int x)
{
	return llvm_perfmap_inner(x) - 7;
}

int main(void)
{
	char path[64], line[512], name[300];
	unsigned long start, size, fn = (unsigned long)&llvm_perfmap_inner;
	int named = 0, others = 0;

	if (llvm_perfmap_last(2) != ((2 * 3 + 1) ^ 0x55) - 7)
		return 3;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(path, "r");
	if (!f) {
		printf("no %s\n", path);
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %lx %299[^\n]", &start, &size, name) != 3)
			continue;
		if (fn < start || fn >= start + size)
			continue;
		if (strstr(name, "llvm_perfmap_inner"))
			named++;
		else
			others++;
	}
	fclose(f);
	printf("llvm_perfmap_inner: %d entries name it, %d others cover it\n", named, others);
	return named >= 1 && others == 0 ? 0 : 2;
}
