/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-perfmap.c - perf's /tmp/perf-<pid>.map: "START SIZE name" for each
 * named allocation when it is finalized, renamed or shrunk (perf takes the
 * last line for an address).
 */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag-perfmap.h"
#include "execpack.h"

bool ep__perfmap_wanted(unsigned pool_flags)
{
	static int env = -1;
	int e = __atomic_load_n(&env, __ATOMIC_RELAXED);

	if (pool_flags & EP_F_PERFMAP)
		return true;
	if (e < 0) {
		const char *s = getenv("EXECPACK_PERFMAP");

		e = s && *s && strcmp(s, "0") != 0;
		__atomic_store_n(&env, e, __ATOMIC_RELAXED);
	}
	return e;
}

/* Append "START SIZE name" to /tmp/perf-<pid>.map, one write(2) per line. */
void ep__perfmap_append(const void *exec, size_t size, const char *name)
{
	char path[64], line[EP_NAME_MAX + 48];

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		return;
	int n = snprintf(line, sizeof(line), "%lx %zx %s\n", (unsigned long)(uintptr_t)exec,
			 size, name);

	if (n > 0 && (size_t)n < sizeof(line) && write(fd, line, (size_t)n) < 0) {
		/* nothing to do: perf maps are best effort */
	}
	close(fd);
}
