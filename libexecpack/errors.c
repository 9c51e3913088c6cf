/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * errors.c - ep_strerror() and the version string (from execpack.h's
 * EP_VERSION_* macros, where configure.ac reads it too).
 *
 * The messages for the codes the library returns itself are static strings
 * worded for what each errno means when this library returns it.  Codes a
 * system call passes through that are not worded here get the C library's
 * description from strerrordesc_np(), a constant untranslated string (not
 * strerror(): it may fill a static buffer, so it is not thread-safe, and its
 * text depends on the locale).  tests/check_errors.c checks that every code
 * the sources return has a text of its own.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "execpack.h"
#include "internal.h"

EP_API const char *ep_strerror(int err)
{
	if (err > 0)
		err = -err;
	switch (err) {
	case 0: return "Success";
	case -EINVAL: return "Invalid argument (bad pointer, size, flag or config, not a live allocation, or already finalized)";
	case -ENOMEM: return "Out of memory (or address space, or mappings: vm.max_map_count)";
	case -EPERM: return "Operation not permitted (pool limit reached, or executable mapping refused)";
	case -EACCES: return "Permission denied (executable memory refused: vm.memfd_noexec, noexec mount, or security policy)";
	case -ENOSPC: return "No space (no free huge pages, or the device's byte limit)";
	case -ENODEV: return "No such device (backend not available on this system)";
	case -ENOENT: return "No such file or directory (device node or mount missing; ep_lookup: an address in no live allocation)";
	case -ENOSYS: return "Function not implemented by this kernel";
	case -EOPNOTSUPP: return "Operation not supported by this backend or kernel";
	case -EBUSY: return "Busy (the device is in use, or a patch window is open on the allocation)";
	case -EDEADLK: return "Resource deadlock avoided (a fill callback called back into the library)";
	case -EFAULT: return "Bad address";
	case -E2BIG: return "Argument too large (config struct from a newer library with non-zero new fields)";
	case -EMFILE: return "Too many open files";
	case -ENFILE: return "Too many open files in system";
	case -EAGAIN: return "Resource temporarily unavailable";
	case -ERANGE: return "Result too large for the buffer";
	case -EOVERFLOW: return "Size overflow";
	case -EIO: return "Input/output error";
	case -EBADF: return "Bad file descriptor";
	case -ENOTTY: return "Inappropriate ioctl (device is not an execpack device)";
	case -EEXIST: return "Already exists";
	case -ESRCH: return "Not found";
	case -ENAMETOOLONG: return "Name or path too long (a name longer than EP_NAME_MAX, or a path that does not fit)";
	case -EPROTO: return "Protocol mismatch (the kernel module's ABI version or page size is not the library's)";
	case -ENXIO: return "No such device or address (device node without its module)";
	case -EROFS: return "Read-only file system";
	case -EADDRNOTAVAIL: return "Address not available (no free range within rel32 reach of ep_config.near)";
	case -EINTR: return "Interrupted system call";
	default:
#ifdef HAVE_STRERRORDESC_NP
		if (err > -INT_MAX) {
			const char *s = strerrordesc_np(-err);

			if (s)
				return s;
		}
#endif
		return "Unknown error";
	}
}

const char *ep__errno_text(int e)
{
#ifdef HAVE_STRERRORDESC_NP
	const char *s = strerrordesc_np(e < 0 && e > -INT_MAX ? -e : e);

	if (s)
		return s;
#endif
	return ep_strerror(e);
}

#define EP_STR_(x) #x
#define EP_STR(x) EP_STR_(x)

EP_API const char *ep_version(void)
{
	return EP_STR(EP_VERSION_MAJOR) "." EP_STR(EP_VERSION_MINOR) "." EP_STR(EP_VERSION_PATCH);
}

void ep__why(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}
