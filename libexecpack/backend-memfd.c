/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * backend-memfd.c - dual mapping of anonymous memory.
 *
 * Each region is anonymous shared memory (or, where that cannot be made
 * executable, a sealed memfd) mapped twice, MAP_SHARED: once read+exec
 * (what callers see) and once read+write at an unrelated address (the alias
 * that never leaves the library).  No mapping is ever writable and
 * executable at once, which also keeps this working under
 * PR_SET_MDWE(PR_MDWE_REFUSE_EXEC_GAIN).  The hugetlb backend reuses all of
 * this with a different memfd flavour (ep__memfd_* below).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend-memfd.h"
#include "code-range.h"
#include "guard.h"
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
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels say EINVAL */
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

/* An address hint far from everything else, so the RW alias is not at a
 * fixed distance from the exec view (mmap ignores a hint that is taken). */
static void *alias_hint(size_t align)
{
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	(void)align;
	return NULL; /* sanitizers own fixed parts of the address space */
#else
	uint64_t r = 0;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		return NULL;
	/* user half of a 47-bit address space, above 4 GiB, below 64 TiB */
	uintptr_t a = (uintptr_t)(r % ((1ull << 46) - (1ull << 32))) + (1ull << 32);

	return (void *)(a & ~(uintptr_t)(align - 1));
#endif
}

/*
 * Where a new exec view of size bytes goes: *want NULL (anywhere), or a
 * PROT_NONE reservation to map over with MAP_FIXED, which replaces it in
 * one step: a free part of the code range, else a range near kind->near.
 */
static int place(const struct ep__memfd_kind *kind, size_t size, void **want)
{
	*want = NULL;
	if (kind->crange)
		return ep__crange_take(kind->crange, size, kind->align, want);
	if (kind->near)
		return ep__near_reserve(kind->near, kind->margin, size, kind->align, want);
	return 0;
}

/* An exec view, or what place() reserved, goes: back to the code range
 * (PROT_NONE again), or unmapped. */
static void unplace(const struct ep__memfd_kind *kind, void *exec, size_t size)
{
	if (!ep__crange_give(kind->crange, exec, size))
		munmap(exec, size);
}

int ep__memfd_map_fd(const struct ep__memfd_kind *kind, int fd, size_t size,
		     ep_fill_fn fill, void *fill_ctx, struct ep__region *out,
		     char *why, size_t whylen)
{
	return ep__memfd_map_fd_part(kind, fd, size, size, fill, fill_ctx, out, why, whylen);
}

/*
 * The exec view of a part-committed region is one PROT_NONE mapping of the
 * whole file with its first commit bytes mapped again over it, read+exec:
 * a stray jump past them faults, and the file's pages there are never
 * touched.  Growing it later is an mprotect() (ep__memfd_commit()).
 */
int ep__memfd_map_fd_part(const struct ep__memfd_kind *kind, int fd, size_t size,
			  size_t commit, ep_fill_fn fill, void *fill_ctx,
			  struct ep__region *out, char *why, size_t whylen)
{
	void *want;
	/* first: the one failure that needs nothing undone */
	int prc = place(kind, size, &want);

	if (prc) {
		if (prc == EP__CRANGE_FULL)
			ep__why(why, whylen, "%s: no free %zu bytes left in the code range",
				kind->name, size);
		else
			ep__why(why, whylen, "%s: no free range of %zu bytes within rel32 reach of %p",
				kind->name, size, kind->near);
		return prc;
	}
	void *rw = mmap(alias_hint(kind->align), size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (rw == MAP_FAILED) {
		int e = errno;

		ep__why(why, whylen, "%s: cannot map the writable alias: %s", kind->name, ep__errno_text(e));
		if (want)
			unplace(kind, want, size);
		return -e;
	}
	int rc = ep__guard_alias(kind->guards, rw, size); /* (under the key before any store) */

	if (rc) {
		ep__why(why, whylen, "%s: cannot put the alias under the protection key: %s",
			kind->name, ep__errno_text(rc));
		munmap(rw, size);
		if (want)
			unplace(kind, want, size);
		return rc;
	}
	/* fill before any executable view exists: never map unset memory exec */
	if (fill)
		ep__alias_fill(kind->guards, fill, rw, commit, fill_ctx);
	int xprot = ep__exec_prot(kind->guards);
	/* (over the reservation place() made, replacing it in one step) */
	int share = kind->debug ? MAP_PRIVATE : MAP_SHARED;
	void *exec = mmap(want, size, commit < size ? PROT_NONE : xprot,
			  share | (want ? MAP_FIXED : 0), fd, 0);

	if (exec != MAP_FAILED && commit < size &&
	    mmap(exec, commit, xprot, share | MAP_FIXED, fd, 0) == MAP_FAILED) {
		int e = errno;

		unplace(kind, exec, size);
		want = NULL;
		exec = MAP_FAILED;
		errno = e;
	}

	if (exec == MAP_FAILED) {
		int e = errno;

		if (want)
			unplace(kind, want, size);
		if (e == EPERM || e == EACCES)
			ep__why(why, whylen, "%s: exec mapping refused (vm.memfd_noexec=%d, or a noexec "
				"mount or security policy)", kind->name,
				read_sysctl_int("/proc/sys/vm/memfd_noexec", -1));
		else
			ep__why(why, whylen, "%s: cannot map the exec view: %s", kind->name, ep__errno_text(e));
		munmap(rw, size);
		return -e;
	}
	(void)madvise(rw, size, MADV_DONTDUMP); /* the writable alias stays out of cores */
	out->exec = exec;
	out->rw = rw;
	out->size = size;
	out->committed = commit;
	/* a private exec view keeps its file, to map a page of it again */
	out->handle = kind->debug ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
	out->guards = (unsigned char)kind->guards;
	return 0;
}

/* ---- anonymous shared memory -------------------------------------------------
 * perf reads /tmp/perf-<pid>.map only for samples in memory it takes for
 * anonymous (its is_anon_memory(): //anon, /dev/zero, /anon_hugepage, or a
 * MAP_HUGETLB mapping): a memfd's views are "/memfd:execpack (deleted)" to
 * it, and their samples only addresses in that file.  MAP_SHARED |
 * MAP_ANONYMOUS memory is a shmem object of its own, "/dev/zero (deleted)"
 * in /proc/self/maps, and mremap() of a shared mapping with an old size of
 * 0 maps the same pages once more: the exec view and the RW alias, as with
 * a memfd.  Nothing else holds the object, so no one can resize it (no
 * SIGBUS) or map it, and fork() shares it as it shares a memfd's views.
 * It has no contents before its first mapping, so that mapping is made
 * inaccessible and the part to commit gets read+exec by mprotect() once
 * filled through the alias: memory is never executable before it holds the
 * fill.  Where adding exec is refused (PR_SET_MDWE, a security policy), the
 * region is a memfd after all.
 */

static bool exec_refused(int rc)
{
	return rc == -EACCES || rc == -EPERM;
}

/*
 * New anonymous shared memory of size bytes, seen twice: *rw read+write at
 * a random address, *exec at want (MAP_FIXED over place()'s reservation) or
 * anywhere, inaccessible but for its first commit bytes, which are filled
 * through *rw (fill, or a copy of src) before they are read+exec.
 */
static int anon_pair(const struct ep__memfd_kind *kind, void *want, size_t size, size_t commit,
		     ep_fill_fn fill, void *fill_ctx, const void *src, void **exec_out,
		     void **rw_out)
{
	void *exec = mmap(want, size, PROT_NONE, MAP_SHARED | MAP_ANONYMOUS | (want ? MAP_FIXED : 0),
			  -1, 0);

	if (exec == MAP_FAILED) {
		int e = errno;

		if (want)
			unplace(kind, want, size); /* place()'s reservation */
		return -e;
	}
	/* the alias over a reservation at a random address, replaced in one step */
	void *res = mmap(alias_hint(kind->align), size, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	void *rw = MAP_FAILED;
	int e;

	if (res == MAP_FAILED) {
		e = errno;
		goto fail;
	}
	rw = mremap(exec, 0, size, MREMAP_MAYMOVE | MREMAP_FIXED, res);
	if (rw == MAP_FAILED) {
		e = errno;
		munmap(res, size);
		goto fail;
	}
	if (mprotect(rw, size, PROT_READ | PROT_WRITE) < 0) {
		e = errno;
		goto fail;
	}
	/* under the key before any store (src, after fork(), is the old alias:
	 * read in the same window) */
	int rc = ep__guard_alias(kind->guards, rw, size);

	if (rc) {
		e = -rc;
		goto fail;
	}
	if (src)
		ep__alias_copy(kind->guards, rw, src, commit);
	else if (fill)
		ep__alias_fill(kind->guards, fill, rw, commit, fill_ctx);
	if (commit && mprotect(exec, commit, ep__exec_prot(kind->guards)) < 0) {
		e = errno;
		goto fail;
	}
	*exec_out = exec;
	*rw_out = rw;
	return 0;
fail:
	if (rw != MAP_FAILED)
		munmap(rw, size);
	unplace(kind, exec, size); /* (and with it place()'s reservation) */
	return -e;
}

static int anon_map(const struct ep__memfd_kind *kind, size_t size, size_t commit,
		    ep_fill_fn fill, void *fill_ctx, struct ep__region *out)
{
	void *want, *exec, *rw;
	int rc = place(kind, size, &want);

	if (rc)
		return rc;
	rc = anon_pair(kind, want, size, commit, fill, fill_ctx, NULL, &exec, &rw);

	if (rc)
		return rc;
	(void)madvise(rw, size, MADV_DONTDUMP); /* the writable alias stays out of cores */
	out->exec = exec;
	out->rw = rw;
	out->size = size;
	out->committed = commit;
	out->handle = -1;
	out->guards = (unsigned char)kind->guards;
	return 0;
}

/*
 * After fork(): new memory with a copy of the committed bytes, moved over
 * both views at their addresses (mremap(MREMAP_FIXED) replaces a mapping
 * in one step, as mmap(MAP_FIXED) does; the committed part and the
 * inaccessible rest of the exec view are two mappings, moved one by one).
 * A failure half way leaves the region's generation old, and the whole
 * copy is made again before its next change.
 */
static int anon_privatize(const struct ep__memfd_kind *kind, struct ep__region *r)
{
	size_t size = r->size, c = r->committed;
	void *exec, *rw;
	int rc = anon_pair(kind, NULL, size, c, NULL, NULL, r->rw, &exec, &rw);

	if (rc)
		return rc;
	if (mremap(rw, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, r->rw) == MAP_FAILED) {
		rc = -errno;
		munmap(rw, size);
		munmap(exec, size);
		return rc;
	}
	if (mremap(exec, c, c, MREMAP_MAYMOVE | MREMAP_FIXED, r->exec) == MAP_FAILED ||
	    (c < size && mremap((unsigned char *)exec + c, size - c, size - c,
				MREMAP_MAYMOVE | MREMAP_FIXED, (unsigned char *)r->exec + c) == MAP_FAILED)) {
		/* the alias is private now, the exec view not (all of it): refuse
		 * changes rather than write code the other process runs */
		rc = -errno;
		munmap(exec, size);
		return rc;
	}
	(void)madvise(r->rw, size, MADV_DONTDUMP);
	return 0;
}

int ep__memfd_probe_anon(struct ep__memfd_kind *kind, char *why, size_t whylen)
{
	struct ep__region r;

	if (ep__under_valgrind()) {
		/* Valgrind's mremap() does not map a shared mapping twice */
		kind->anon = 0;
		ep__why(why, whylen, "%s: no second view of anonymous memory under Valgrind",
			kind->name);
		return -EOPNOTSUPP;
	}
	int rc = anon_map(kind, kind->align, kind->align, NULL, NULL, &r);

	kind->anon = rc == 0;
	if (rc == 0)
		ep__memfd_unmap(kind, &r);
	else if (rc == -EADDRNOTAVAIL)
		ep__why(why, whylen, "%s: no free range of %zu bytes within rel32 reach of %p",
			kind->name, kind->align, kind->near);
	else
		ep__why(why, whylen, "%s: anonymous shared memory cannot be made executable: %s",
			kind->name, ep__errno_text(rc));
	return rc;
}

/* ---- regions ------------------------------------------------------------------ */

int ep__memfd_map(const struct ep__memfd_kind *kind, size_t size, ep_fill_fn fill,
		  void *fill_ctx, struct ep__region *out)
{
	if (kind->anon) {
		int rc = anon_map(kind, size, size, fill, fill_ctx, out);

		if (!exec_refused(rc))
			return rc;
	}
	int fd = ep__memfd_open(kind, size, NULL, 0);

	if (fd < 0)
		return fd;
	int rc = ep__memfd_map_fd(kind, fd, size, fill, fill_ctx, out, NULL, 0);

	close(fd); /* the mappings keep the file alive */
	return rc;
}

int ep__memfd_map_part(const struct ep__memfd_kind *kind, size_t size, size_t commit,
		       ep_fill_fn fill, void *fill_ctx, struct ep__region *out)
{
	if (kind->anon) {
		int rc = anon_map(kind, size, commit, fill, fill_ctx, out);

		if (!exec_refused(rc))
			return rc;
	}
	int fd = ep__memfd_open(kind, size, NULL, 0);

	if (fd < 0)
		return fd;
	int rc = ep__memfd_map_fd_part(kind, fd, size, commit, fill, fill_ctx, out, NULL, 0);

	close(fd);
	return rc;
}

/*
 * Filled through the alias first, made executable after: the new part is
 * never executable unfilled.  mprotect() is refused where the process
 * forbids gaining exec (PR_MDWE_REFUSE_EXEC_GAIN): the caller then maps a
 * new pack instead.
 */
int ep__memfd_commit(struct ep__region *r, size_t commit, ep_fill_fn fill, void *ctx)
{
	if (commit <= r->committed)
		return 0;
	if (commit > r->size)
		return -EINVAL;
	unsigned char *x = (unsigned char *)r->exec + r->committed;
	size_t len = commit - r->committed;

	/* the pages in one call, not a fault each as the fill touches them
	 * (a grow may come in the middle of a busy pool's churn) */
	(void)madvise((unsigned char *)r->rw + r->committed, len, MADV_POPULATE_WRITE);
	ep__alias_fill(r->guards, fill, (unsigned char *)r->rw + r->committed, len, ctx);
	if (mprotect(x, len, ep__exec_prot(r->guards)) < 0)
		return -errno;
	r->committed = commit;
	return 0;
}

/*
 * Inaccessible first, then the pages go: the shared pages behind both
 * views (MADV_REMOVE punches them out of the file or shared memory), and
 * any private copy a debug view made.  A later commit fills them anew.
 */
int ep__memfd_uncommit(struct ep__region *r, size_t commit)
{
	if (commit >= r->committed)
		return 0;
	unsigned char *x = (unsigned char *)r->exec + commit;
	size_t len = r->committed - commit;

	if (mprotect(x, len, PROT_NONE) < 0)
		return -errno;
	if (madvise((unsigned char *)r->rw + commit, len, MADV_REMOVE) < 0) {
		int e = errno;

		(void)mprotect(x, len, ep__exec_prot(r->guards)); /* (still filled: as it was) */
		return -e;
	}
	(void)madvise(x, len, MADV_DONTNEED);
	r->committed = commit;
	return 0;
}

void ep__memfd_unmap(const struct ep__memfd_kind *kind, struct ep__region *r)
{
	unplace(kind, r->exec, r->size);
	munmap(r->rw, r->size);
	r->exec = r->rw = NULL;
}

int ep__memfd_write(struct ep__region *r, size_t off, const void *src, size_t len)
{
	if (off > r->size || len > r->size - off)
		return -EINVAL;
	/* (the caller makes the change visible to instruction fetch, once
	 * for the whole range: ep__code_changed(), remote.c) */
	ep__alias_copy(r->guards, (unsigned char *)r->rw + off, src, len);
	return 0;
}

int ep__memfd_fill(struct ep__region *r, size_t off, size_t len, ep_fill_fn fill, void *ctx)
{
	if (off > r->size || len > r->size - off)
		return -EINVAL;
	ep__alias_fill(r->guards, fill, (unsigned char *)r->rw + off, len, ctx);
	return 0;
}

/*
 * After fork(): copy the region into a new file and map it over both views
 * at the same addresses (MAP_FIXED replaces a mapping atomically, and the
 * bytes are the same, so code running from it does not notice).
 */
int ep__memfd_privatize(const struct ep__memfd_kind *kind, struct ep__region *r)
{
	if (kind->anon) {
		int rc = anon_privatize(kind, r);

		if (!exec_refused(rc))
			return rc;
	}
	int fd = ep__memfd_open(kind, r->size, NULL, 0);

	if (fd < 0)
		return fd;

	void *tmp = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	/* (a writable view of code like the alias, and so under the key too) */
	int krc = tmp == MAP_FAILED ? -errno : ep__guard_alias(r->guards, tmp, r->size);

	if (krc) {
		if (tmp != MAP_FAILED)
			munmap(tmp, r->size);
		close(fd);
		return krc;
	}
	/* (the rest is untouched: left sparse) */
	ep__alias_copy(r->guards, tmp, r->rw, r->committed);
	munmap(tmp, r->size);

	void *rw = mmap(r->rw, r->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
	int rc = rw == MAP_FAILED ? -errno : ep__guard_alias(r->guards, rw, r->size);

	if (rc) {
		close(fd);
		return rc;
	}
	/* the committed part and the inaccessible rest, each replaced in one
	 * step (never a moment without code where code may be running) */
	int share = kind->debug ? MAP_PRIVATE : MAP_SHARED;
	void *exec = mmap(r->exec, r->committed, ep__exec_prot(r->guards), share | MAP_FIXED, fd, 0);

	if (exec != MAP_FAILED && r->committed < r->size &&
	    mmap((unsigned char *)r->exec + r->committed, r->size - r->committed, PROT_NONE,
		 share | MAP_FIXED, fd, (off_t)r->committed) == MAP_FAILED)
		exec = MAP_FAILED;
	int e = errno;

	if (exec == MAP_FAILED) {
		close(fd);
		/* The alias is private now but the exec view is not (sealed?):
		 * refuse changes rather than write code the other process runs. */
		return -e;
	}
	if (kind->debug) {
		/* the new file is the one to map pages of again (the old is the
		 * other process's) */
		if (r->handle >= 0)
			close(r->handle);
		r->handle = fd;
	} else {
		close(fd);
	}
	(void)madvise(rw, r->size, MADV_DONTDUMP);
	return 0;
}

/* ---- views a debugger can write (EXECPACK_DEBUG=1) ----------------------------
 * A debugger plants a software breakpoint by writing it into the code
 * (ptrace, /proc/<pid>/mem), which the kernel does only in a private
 * mapping, copying the page.  So with EXECPACK_DEBUG=1 the exec view is a
 * private mapping of the memfd, read+exec as ever: a page nobody wrote to
 * is the file's own, and shows every store through the alias at once (a
 * patch of up to 8 bytes stays one store); a page a debugger wrote to is
 * the process's own copy from then on, and what the alias writes reaches
 * it here, by a write to /proc/self/mem, the way the debugger wrote, so
 * that the debugger's other breakpoints in that page stay.  No mapping of
 * the process becomes writable.  Where that write is refused
 * (proc_mem.force_override), the page is mapped from the file again: the
 * code is right, the debugger's breakpoints in that page are gone.
 */
int ep__memfd_debug_wanted(void)
{
	const char *s = secure_getenv("EXECPACK_DEBUG");

	return s && *s && strcmp(s, "0") != 0;
}

/* pagemap: present, swapped, a page of the file (or shared) */
#define PM_PRESENT ((uint64_t)1 << 63)
#define PM_SWAPPED ((uint64_t)1 << 62)
#define PM_FILE ((uint64_t)1 << 61)

struct debug_put {
	int mem;
	off_t at;
	bool done;
};

/* pwrite() reads its buffer, the alias, with the thread's rights (PKRU):
 * it runs in the key's window, as a fill that only reads */
static void debug_put(void *alias, size_t len, void *ctx)
{
	struct debug_put *p = ctx;

	p->done = pwrite(p->mem, alias, len, p->at) == (ssize_t)len;
}

/* After a store through the alias to [off, off+len) of a debug region:
 * the same bytes into the pages of the exec view that are copies. */
static void debug_sync(struct ep__region *r, size_t off, size_t len)
{
	size_t pg = ep__page_size();
	uintptr_t x = (uintptr_t)r->exec;
	int pm, mem = -1;

	if (!len)
		return;
	/* (opened for each call: after fork() an older descriptor would be
	 * the parent's memory) */
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	for (size_t p = off / pg; p <= (off + len - 1) / pg; p++) {
		uint64_t e = 0;
		/* without pagemap, every page is taken for a copy: the write
		 * makes it one, and it is kept up to date from then on */
		bool copy = pm < 0 ||
			    (pread(pm, &e, sizeof(e), (off_t)((x / pg + p) * sizeof(e))) ==
				     (ssize_t)sizeof(e) &&
			     ((e & PM_SWAPPED) || ((e & PM_PRESENT) && !(e & PM_FILE))));

		if (!copy)
			continue;
		size_t a = p * pg > off ? p * pg : off;
		size_t b = (p + 1) * pg < off + len ? (p + 1) * pg : off + len;

		if (mem < 0)
			mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
		if (mem >= 0) {
			struct debug_put put = { .mem = mem, .at = (off_t)(x + a) };

			ep__alias_fill(r->guards, debug_put, (unsigned char *)r->rw + a, b - a, &put);
			if (put.done)
				continue;
		}
		/* refused: the file's page again (read+exec: committed code) */
		if (r->handle < 0 ||
		    mmap((void *)(x + p * pg), pg, ep__exec_prot(r->guards), MAP_PRIVATE | MAP_FIXED,
			 r->handle, (off_t)(p * pg)) == MAP_FAILED) {
			/* nothing more to try: the process's copy stays stale */
		}
	}
	if (mem >= 0)
		close(mem);
	if (pm >= 0)
		close(pm);
}


/* ---- the plain memfd backend ------------------------------------------------ */

struct ep__backend {
	struct ep__memfd_kind kind;
	size_t page;
};


static void memfd_unmap(struct ep__backend *be, struct ep__region *r)
{
	ep__memfd_unmap(&be->kind, r);
	if (be->kind.debug && r->handle >= 0)
		close(r->handle);
	r->handle = -1;
}

/* Probe once at open: a pool that cannot get executable memory should fail
 * at ep_pool_create() with its reason, not at the first ep_alloc(). */
static int open_kind(const struct ep_config *cfg, struct ep__backend **out, char *why,
		     size_t whylen, int debug)
{
	struct ep__backend *be = calloc(1, sizeof(*be));

	if (!be)
		return -ENOMEM;
	be->page = ep__page_size();
	be->kind = (struct ep__memfd_kind){ .name = "memfd", .align = be->page };
	if (cfg && cfg->near) {
		be->kind.near = cfg->near;
		be->kind.margin = cfg->pack_size ? cfg->pack_size : EP__DEFAULT_PACK_SIZE;
	}

	int rc = ep__guards_open(cfg, "memfd", &be->kind.guards, &be->kind.pkey_off, why, whylen);

	if (rc) {
		free(be);
		return rc;
	}
	/* anonymous shared memory; a memfd where it cannot be made executable,
	 * or seen twice (under Valgrind), or where a debugger is to write into
	 * private views of it */
	be->kind.debug = debug;
	rc = be->kind.debug ? -EINVAL : ep__memfd_probe_anon(&be->kind, why, whylen);
	if (rc == 0 || rc == -EADDRNOTAVAIL) {
		if (rc)
			free(be);
		else
			*out = be;
		return rc;
	}
	int fd = ep__memfd_open(&be->kind, be->page, why, whylen);

	if (fd < 0) {
		free(be);
		return fd;
	}
	struct ep__region r;

	rc = ep__memfd_map_fd(&be->kind, fd, be->page, NULL, NULL, &r, why, whylen);
	close(fd);
	if (rc) {
		free(be);
		return rc;
	}
	memfd_unmap(be, &r);
	*out = be;
	return 0;
}

static int memfd_open(const struct ep_config *cfg, struct ep__backend **out, char *why,
		      size_t whylen)
{
	return open_kind(cfg, out, why, whylen, 0);
}

static void memfd_close(struct ep__backend *be)
{
	ep__crange_close(be->kind.crange);
	free(be);
}

static size_t memfd_page_size(const struct ep__backend *be)
{
	return be->page;
}

static size_t memfd_default_pack_size(const struct ep__backend *be)
{
	(void)be;
	return EP__DEFAULT_PACK_SIZE;
}

static int memfd_map(struct ep__backend *be, size_t size, ep_fill_fn fill, void *ctx,
		     struct ep__region *out)
{
	return ep__crange_rc(ep__memfd_map(&be->kind, size, fill, ctx, out));
}

static int memfd_map_part(struct ep__backend *be, size_t size, size_t commit, size_t held,
			  ep_fill_fn fill, void *ctx, struct ep__region *out)
{
	(void)held;
	return ep__crange_rc(ep__memfd_map_part(&be->kind, size, commit, fill, ctx, out));
}

static int memfd_commit(struct ep__backend *be, struct ep__region *r, size_t commit,
			ep_fill_fn fill, void *ctx)
{
	(void)be;
	return ep__memfd_commit(r, commit, fill, ctx);
}

static int memfd_uncommit(struct ep__backend *be, struct ep__region *r, size_t commit)
{
	(void)be;
	return ep__memfd_uncommit(r, commit);
}

static int memfd_write(struct ep__backend *be, struct ep__region *r, size_t off,
		       const void *src, size_t len)
{
	(void)be;
	return ep__memfd_write(r, off, src, len);
}

static int memfd_fill(struct ep__backend *be, struct ep__region *r, size_t off, size_t len,
		      ep_fill_fn fill, void *ctx)
{
	(void)be;
	return ep__memfd_fill(r, off, len, fill, ctx);
}

static int memfd_privatize(struct ep__backend *be, struct ep__region *r)
{
	return ep__memfd_privatize(&be->kind, r);
}

static unsigned memfd_guards(const struct ep__backend *be, const char **pkey_off)
{
	*pkey_off = be->kind.pkey_off;
	return be->kind.guards;
}

static void memfd_set_range(struct ep__backend *be, struct ep__crange *cr)
{
	be->kind.crange = cr;
}

const struct ep__backend_ops ep__backend_memfd = {
	.name = "memfd",
	.threadsafe = 1,
	.alias_io = 1,
	.open = memfd_open,
	.close = memfd_close,
	.page_size = memfd_page_size,
	.default_pack_size = memfd_default_pack_size,
	.map = memfd_map,
	.unmap = memfd_unmap,
	.map_part = memfd_map_part,
	.commit = memfd_commit,
	.uncommit = memfd_uncommit,
	.write = memfd_write,
	.fill = memfd_fill,
	.privatize = memfd_privatize,
	.guards = memfd_guards,
	.set_range = memfd_set_range,
};

/* ---- the same with views a debugger can write (EXECPACK_DEBUG=1) --------------
 * Its own table, which config.c picks, so that the plain backend's copies
 * and fills test nothing for it. */

static int memfd_debug_open(const struct ep_config *cfg, struct ep__backend **out, char *why,
			    size_t whylen)
{
	return open_kind(cfg, out, why, whylen, 1);
}

static int memfd_debug_commit(struct ep__backend *be, struct ep__region *r, size_t commit,
			      ep_fill_fn fill, void *ctx)
{
	size_t had = r->committed;
	int rc = ep__memfd_commit(r, commit, fill, ctx);

	(void)be;
	if (!rc && commit > had)
		debug_sync(r, had, commit - had);
	return rc;
}

static int memfd_debug_write(struct ep__backend *be, struct ep__region *r, size_t off,
			     const void *src, size_t len)
{
	int rc = ep__memfd_write(r, off, src, len);

	(void)be;
	if (!rc)
		debug_sync(r, off, len);
	return rc;
}

static int memfd_debug_fill(struct ep__backend *be, struct ep__region *r, size_t off,
			    size_t len, ep_fill_fn fill, void *ctx)
{
	int rc = ep__memfd_fill(r, off, len, fill, ctx);

	(void)be;
	if (!rc)
		debug_sync(r, off, len);
	return rc;
}

const struct ep__backend_ops ep__backend_memfd_debug = {
	.name = "memfd",
	.threadsafe = 1,
	.open = memfd_debug_open,
	.close = memfd_close,
	.page_size = memfd_page_size,
	.default_pack_size = memfd_default_pack_size,
	.map = memfd_map,
	.unmap = memfd_unmap,
	.map_part = memfd_map_part,
	.commit = memfd_debug_commit,
	.uncommit = memfd_uncommit,
	.write = memfd_debug_write,
	.fill = memfd_debug_fill,
	.privatize = memfd_privatize,
	.guards = memfd_guards,
	.set_range = memfd_set_range,
};
