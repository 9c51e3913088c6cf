/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * jitdump.c - perf's jitdump file, jit-<pid>.dump, for named JIT code.
 *
 * perf's /tmp/perf-<pid>.map gives names only; `perf annotate` needs the
 * code bytes too.  The jitdump format (tools/perf/Documentation/
 * jitdump-specification.txt in Linux) carries them: a file header, then
 * one JIT_CODE_LOAD record per piece of code (name and bytes), and a
 * JIT_CODE_CLOSE record at the end.  `perf inject --jit` turns each load
 * into a small ELF file and an mmap event at the record's time.
 *
 * perf finds the file through its mmap: the process maps it executable
 * (PROT_READ | PROT_EXEC, never writable), which puts an mmap event with
 * the file's name in perf.data; perf checks that the name is jit-<pid>.dump
 * with the pid of the process that mapped it.  The file is never executed.
 *
 * Timestamps are CLOCK_MONOTONIC nanoseconds (the header's
 * JITDUMP_FLAGS_ARCH_TIMESTAMP bit is clear), the clock `perf record -k 1`
 * gives its events; perf inject refuses a recording made with another one.
 *
 * perf has no record for code that goes away: a later load at the same
 * address replaces the earlier one from its time on.  So a free writes
 * nothing, and code reused under a new name gets a new load when it is
 * finalized or renamed.
 *
 * All calls come with diag.c's lock held (jitdump.h).
 */
#include "config.h"
#include "atomic.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "execpack.h"
#include "internal.h"
#include "jitdump.h"

#define JD_MAGIC 0x4A695444u /* "JiTD"; a reader that sees it byte-swapped swaps */
#define JD_VERSION 1
#define JD_CODE_LOAD 0
#define JD_CODE_CLOSE 3

#define JD_MACHINE EP__ARCH_ELF_MACHINE

struct jd_header {
	uint32_t magic, version, total_size, elf_mach, pad1, pid;
	uint64_t timestamp, flags;
};

struct jd_prefix {
	uint32_t id, total_size;
	uint64_t timestamp;
};

struct jd_load {
	struct jd_prefix p;
	uint32_t pid, tid;
	uint64_t vma, code_addr, code_size, code_index;
	/* then the name with its NUL, then the code bytes */
};

_Static_assert(sizeof(struct jd_header) == 40, "jitdump header layout");
_Static_assert(sizeof(struct jd_load) == 56, "jitdump load record layout");

static int g_fd = -1;      /* the open file, or -1 */
static pid_t g_pid;        /* the process that opened it */
static void *g_marker;     /* its executable mapping, for perf to see */
static size_t g_marker_len;
static uint64_t g_index;   /* code_index of the next load */
static bool g_failed;      /* opening failed in this process: no retry */

bool ep__jitdump_wanted(unsigned pool_flags)
{
	static _Atomic int env = -1;
	int e = ep__load_relaxed(&env);

	if (pool_flags & EP_F_JITDUMP)
		return true;
	if (e < 0) {
		const char *s = secure_getenv("EXECPACK_JITDUMP");

		e = s && *s && strcmp(s, "0") != 0;
		ep__store_relaxed(&env, e);
	}
	return e;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Write all of the iovecs or fail; the file is ours alone (O_APPEND, one
 * writer under diag's lock), so a short write is simply continued. */
static int write_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w = writev(fd, iov, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++, n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* After fork(): the file and its mapping are the parent's. */
static void forget_parent(void)
{
	if (g_fd >= 0)
		close(g_fd);
	if (g_marker)
		munmap(g_marker, g_marker_len);
	g_fd = -1;
	g_marker = NULL;
	g_index = 0;
	g_failed = false;
}

/*
 * Create path for this process alone: exclusively (O_EXCL), so that a file,
 * symbolic link or FIFO that someone else put there in a shared directory
 * such as /tmp is never opened, followed, truncated or written (O_EXCL
 * does not follow a link, O_NOFOLLOW says so twice, O_NONBLOCK keeps an
 * open from ever waiting on a FIFO).  What is there already is taken for a
 * file left by an earlier process with this pid and replaced only when it
 * is ours: a regular file owned by our effective uid.  Anything else is
 * left alone and no file is written (-EEXIST).  Mode 0600, less the umask:
 * the file holds the process's code.  A descriptor or -errno.
 */
static int jd_create(const char *path)
{
	const int flags = O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW |
			  O_NONBLOCK;
	int fd = open(path, flags, 0600);
	struct stat st;

	if (fd >= 0 || errno != EEXIST)
		return fd >= 0 ? fd : -errno;
	if (lstat(path, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
		return -EEXIST;
	/* ours: in a sticky directory (/tmp) nobody else can replace it
	 * before the unlink; whatever is there after it, the create below is
	 * exclusive again */
	if (unlink(path) != 0 && errno != ENOENT)
		return -errno;
	fd = open(path, flags, 0600);
	return fd >= 0 ? fd : -errno;
}

/* Open jit-<pid>.dump in EXECPACK_JITDUMP_DIR (default /tmp), write its
 * header and map it.  0 or -errno. */
static int jd_open(void)
{
	const char *dir = secure_getenv("EXECPACK_JITDUMP_DIR");
	char path[PATH_MAX];
	pid_t pid = getpid();

	if (!dir || !*dir)
		dir = "/tmp";
	int n = snprintf(path, sizeof(path), "%s/jit-%ld.dump", dir, (long)pid);

	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	int fd = jd_create(path);

	if (fd < 0)
		return fd;
	struct jd_header h = {
		.magic = JD_MAGIC, .version = JD_VERSION, .total_size = sizeof(h),
		.elf_mach = JD_MACHINE, .pid = (uint32_t)pid, .timestamp = now_ns(),
		.flags = 0, /* CLOCK_MONOTONIC timestamps */
	};
	struct iovec iov = { &h, sizeof(h) };
	size_t len = ep__page_size();
	int rc = write_all(fd, &iov, 1);
	void *m = rc ? MAP_FAILED : mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);

	if (m == MAP_FAILED) {
		rc = rc ? rc : -errno;
		close(fd);
		unlink(path);
		return rc;
	}
	g_fd = fd;
	g_pid = pid;
	g_marker = m;
	g_marker_len = len;
	g_index = 0;
	return 0;
}

void ep__jitdump_load(const void *exec, size_t size, const char *name)
{
	pid_t pid = getpid();

	if (g_pid != pid && (g_fd >= 0 || g_failed))
		forget_parent();
	if (g_fd < 0) {
		if (g_failed)
			return;
		if (jd_open() != 0) {
			g_failed = true; /* one try per process: this runs on every load */
			g_pid = pid;
			return;
		}
	}
	size_t nl = strlen(name) + 1;
	struct jd_load r = {
		.p = { .id = JD_CODE_LOAD, .timestamp = now_ns() },
		.pid = (uint32_t)pid,
		.tid = (uint32_t)syscall(SYS_gettid),
		.vma = (uintptr_t)exec,
		.code_addr = (uintptr_t)exec,
		.code_size = size,
		.code_index = g_index,
	};
	if (sizeof(r) + nl + size > UINT32_MAX)
		return; /* total_size is 32 bits wide */
	r.p.total_size = (uint32_t)(sizeof(r) + nl + size);
	/* the code straight from its executable view: no copy */
	struct iovec iov[3] = { { &r, sizeof(r) }, { (void *)name, nl }, { (void *)exec, size } };

	off_t end = lseek(g_fd, 0, SEEK_END);

	if (write_all(g_fd, iov, 3) == 0)
		g_index++;
	else if (end >= 0 && ftruncate(g_fd, end) != 0) {
		/* a torn record stays: perf stops reading there */
	}
}

void ep__jitdump_close(void)
{
	if (g_fd < 0 || g_pid != getpid())
		return;
	struct jd_prefix p = { .id = JD_CODE_CLOSE, .total_size = sizeof(p),
			       .timestamp = now_ns() };
	struct iovec iov = { &p, sizeof(p) };

	(void)write_all(g_fd, &iov, 1);
	close(g_fd);
	g_fd = -1; /* the mapping stays until exit: perf has seen it */
	g_failed = true; /* nothing after the close, and no new file */
}
