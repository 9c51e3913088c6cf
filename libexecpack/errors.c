/*
 * errors.c - ep_strerror() and the version string.
 *
 * Messages are static strings (no strerror(): it is not thread-safe
 * everywhere and its text varies by locale), worded for what each errno
 * means when this library returns it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "config.h"
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
	case -ENOENT: return "No such file or directory (device node or mount missing)";
	case -ENOSYS: return "Function not implemented by this kernel";
	case -EOPNOTSUPP: return "Operation not supported by this backend or kernel";
	case -EBUSY: return "Busy (the device is in use)";
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
	default: return "Unknown error";
	}
}

EP_API const char *ep_version(void)
{
	return PACKAGE_VERSION;
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
