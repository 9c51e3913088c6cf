/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * memfd-file.c - the file behind a dual-mapped region: a sized, sealed
 * memfd (MFD_EXEC where the kernel knows it), or a file in a hugetlbfs mount.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend-memfd.h"
#include "internal.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#define F_SEAL_SEAL 0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW 0x0004
#endif

static int sys_memfd_create(const char *name, unsigned flags)
{
	return (int)syscall(SYS_memfd_create, name, flags);
}

static int read_sysctl_int(const char *path, int dflt)
{
	FILE *f = fopen(path, "re");
	int v = dflt;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = dflt;
		fclose(f);
	}
	return v;
}

/* memfd_create with MFD_EXEC where the kernel knows it (6.3+). */
int ep__memfd_open(const struct ep__memfd_kind *kind, size_t size, char *why, size_t whylen)
{
	unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING | kind->mfd_flags;
	int fd;

	if (kind->dir) {
		char tmpl[PATH_MAX];

		if ((size_t)snprintf(tmpl, sizeof(tmpl), "%s/execpack-XXXXXX", kind->dir) >= sizeof(tmpl)) {
			ep__why(why, whylen, "%s: path too long", kind->name);
			return -ENAMETOOLONG;
		}
		fd = mkostemp(tmpl, O_CLOEXEC);
		if (fd < 0) {
			int e = errno;

			ep__why(why, whylen, "%s: cannot create a file in %s: %s", kind->name, kind->dir,
				ep__errno_text(e));
			return -e;
		}
		unlink(tmpl);
	} else {
		fd = sys_memfd_create("execpack", flags | MFD_EXEC);
		if (fd < 0 && errno == EINVAL)
			fd = sys_memfd_create("execpack", flags); /* kernel before MFD_EXEC */
		if (fd < 0) {
			int e = errno;

			if (e == EACCES)
				ep__why(why, whylen, "%s: executable memfd refused (vm.memfd_noexec=%d)",
					kind->name,
					read_sysctl_int("/proc/sys/vm/memfd_noexec", -1));
			else if (e == ENOSYS)
				ep__why(why, whylen, "%s: memfd_create not supported by this kernel",
					kind->name);
			else
				ep__why(why, whylen, "%s: memfd_create: %s", kind->name, ep__errno_text(e));
			return -e;
		}
	}
	if (ftruncate(fd, (off_t)size) < 0) {
		int e = errno;

		ep__why(why, whylen, "%s: cannot size the file: %s", kind->name, ep__errno_text(e));
		close(fd);
		return -e;
	}
	/*
	 * Allocate the pages now where a fault could fail: a hugetlb page can
	 * be mapped (reserved) but still not be had at fault time, under a
	 * cgroup's hugetlb.<size>.max, and the first touch, the fill, would
	 * die of SIGBUS.  fallocate() charges the same limit and says ENOSPC.
	 */
	if (kind->commit) {
		int r;

		do
			r = fallocate(fd, 0, 0, (off_t)size);
		while (r < 0 && errno == EINTR); /* hugetlbfs stops at signals */
		if (r < 0 && errno != EOPNOTSUPP) {
			int e = errno;

			ep__why(why, whylen, "%s: cannot allocate the pages: %s", kind->name,
				ep__errno_text(e));
			close(fd);
			return -e;
		}
	}
	/* a file that cannot shrink cannot SIGBUS its mappings */
	if (!kind->dir)
		(void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	return fd;
}

int ep__memfd_noexec_sysctl(void)
{
	return read_sysctl_int("/proc/sys/vm/memfd_noexec", -1);
}
