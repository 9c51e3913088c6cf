/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-perfmap.c - perf's /tmp/perf-<pid>.map: "START SIZE name" for each
 * named allocation when it is finalized, renamed or shrunk (perf takes the
 * last line for an address), into a file only this process's user owns.
 */
#include "config.h"
#include "atomic.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag-perfmap.h"
#include "execpack.h"

bool ep__perfmap_wanted(unsigned pool_flags)
{
	static _Atomic int env = -1;
	int e = ep__load_relaxed(&env);

	if (pool_flags & EP_F_PERFMAP)
		return true;
	if (e < 0) {
		const char *s = secure_getenv("EXECPACK_PERFMAP");

		e = s && *s && strcmp(s, "0") != 0;
		ep__store_relaxed(&env, e);
	}
	return e;
}

/*
 * Open /tmp/perf-<pid>.map for appending, or -1.  Its name is predictable
 * and /tmp is everyone's, so whatever is there may have been put there by
 * another user: a symbolic link is not followed, a FIFO or a device is not
 * waited for (O_NONBLOCK: opening a FIFO without a reader fails at once,
 * and one with a reader is refused below), and only a regular file of this
 * process's user with no other name (a hard link to one of its files
 * elsewhere is not the perf map) is written.  The caller holds diag's
 * lock: nothing here may block.
 */
static int perfmap_open(void)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		      0644);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    st.st_nlink != 1) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Append "START SIZE name" to /tmp/perf-<pid>.map, one write(2) per line. */
void ep__perfmap_append(const void *exec, size_t size, const char *name)
{
	char line[EP_NAME_MAX + 48];
	int fd = perfmap_open();

	if (fd < 0)
		return;
	int n = snprintf(line, sizeof(line), "%lx %zx %s\n", (unsigned long)(uintptr_t)exec,
			 size, name);

	if (n > 0 && (size_t)n < sizeof(line) && write(fd, line, (size_t)n) < 0) {
		/* nothing to do: perf maps are best effort */
	}
	close(fd);
}
