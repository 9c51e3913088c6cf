/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note OR MIT */
/*
 * execpack_uapi.h - ABI of /dev/execpack, shared by the kernel module and
 * the library's kmod backend.
 *
 * Every argument struct starts with a __u32 size set by the caller to
 * sizeof() of the struct it was compiled with.  The module accepts older
 * (shorter) structs, zero-filling the missing tail, and newer (longer)
 * ones whose unknown tail is all zero; it copies back only size bytes.
 * A field may therefore be appended in a later version, never moved.
 * A struct is at most one page (page_size, as for openat2 and clone3): a
 * larger size is E2BIG before anything past the size field is read.  The
 * module reads size once per call, so a size changed by another thread
 * during the call changes neither what is read nor what is copied back.
 *
 * The module dispatches on the ioctl type and number only, so the size
 * encoded in the command does not change when a struct grows.
 *
 * All ioctls return 0 or -1 with errno set:
 *   EINVAL  malformed struct (size below the first version's), bad flags,
 *           length or pattern length
 *   E2BIG   size larger than a page, or an unknown non-zero tail in a newer
 *           struct
 *   ENOENT  no pack with that id in this open file
 *   ERANGE  offset/length outside the pack (overflow-safe check)
 *   EPERM   the per-user byte limit (module parameter user_limit) is hit
 *   EFAULT  bad user pointer (for COPY: the pack is unchanged, see there)
 *   ENOMEM  out of kernel memory
 */
#ifndef EXECPACK_UAPI_H
#define EXECPACK_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define EXECPACK_DEVICE "/dev/execpack"

/* Bumped on incompatible changes only; growth goes through size fields. */
#define EXECPACK_ABI_VERSION 1

/* Longest repeated fill pattern; a pattern may also be one whole page. */
#define EXECPACK_PATTERN_MAX 64

/* EXECPACK_IOC_INFO: what the module supports and what this user has used. */
struct execpack_info {
	__u32 size;
	__u32 abi_version;   /* out: EXECPACK_ABI_VERSION */
	__u64 page_size;     /* out: granularity of pack sizes */
	__u64 max_pack;      /* out: largest pack one create may ask for */
	__u64 user_limit;    /* out: per-user byte limit, 0 = none */
	__u64 user_used;     /* out: bytes charged to the caller's user */
};

/*
 * EXECPACK_IOC_CREATE: a pack of len bytes (a multiple of page_size), every
 * byte filled with the pattern before it can be mapped.  Offset x holds
 * pattern[x % pattern_len].  mmap(fd, offset = cookie) maps it, PROT_READ
 * and PROT_EXEC only.  The id is usable (by any thread) once the call has
 * returned 0; when the result cannot be written back (EFAULT) no pack was
 * made and nothing is charged.
 */
struct execpack_create {
	__u32 size;
	__u32 flags;         /* in: must be 0 */
	__u64 len;           /* in: bytes */
	__u64 pattern;       /* in: user pointer to the fill pattern */
	__u32 pattern_len;   /* in: 1..EXECPACK_PATTERN_MAX or page_size */
	__u32 id;            /* out: pack id, for the other ioctls */
	__u64 cookie;        /* out: mmap offset of the pack */
};

/*
 * EXECPACK_IOC_COPY: copy len bytes from user src to offset off.  All or
 * nothing: when src cannot be read whole (NULL, a kernel address, a range
 * that runs into an unmapped page) the call fails with EFAULT and the pack
 * is exactly as it was, byte for byte.  A copy of at most 8 bytes inside one
 * aligned 8-byte word of the pack is read first, then stored as one 8-byte
 * store (a thread running the code sees the old or the new bytes, never a
 * mix).  A longer copy pins src's pages (get_user_pages) before it writes
 * the pack, so src must be ordinary memory: a VM_IO or VM_PFNMAP mapping is
 * EFAULT too; once pinned, src is read whole even if another thread unmaps
 * it meanwhile.
 */
struct execpack_copy {
	__u32 size;
	__u32 id;
	__u64 off;
	__u64 src;           /* user pointer */
	__u64 len;
};

/*
 * EXECPACK_IOC_FILL: refill [off, off+len) with the pack's pattern, phase
 * taken from the start of the range: byte off+i = pattern[i % pattern_len].
 */
struct execpack_fill {
	__u32 size;
	__u32 id;
	__u64 off;
	__u64 len;
};

/*
 * EXECPACK_IOC_DESTROY: forget a pack.  Its memory (and its charge) goes
 * away when the last mapping of it is unmapped.
 */
struct execpack_destroy {
	__u32 size;
	__u32 id;
};

#define EXECPACK_IOC_MAGIC 0xE8
#define EXECPACK_IOC_INFO    _IOWR(EXECPACK_IOC_MAGIC, 0, struct execpack_info)
#define EXECPACK_IOC_CREATE  _IOWR(EXECPACK_IOC_MAGIC, 1, struct execpack_create)
#define EXECPACK_IOC_COPY    _IOW(EXECPACK_IOC_MAGIC, 2, struct execpack_copy)
#define EXECPACK_IOC_FILL    _IOW(EXECPACK_IOC_MAGIC, 3, struct execpack_fill)
#define EXECPACK_IOC_DESTROY _IOW(EXECPACK_IOC_MAGIC, 4, struct execpack_destroy)

#endif /* EXECPACK_UAPI_H */
