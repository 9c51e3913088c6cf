/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * memfd-map.c - a region's two views of one file: mapping the RW alias and
 * the exec view (at the place memfd-place.c picks), growing and shrinking
 * the committed prefix, writes and fills through the alias, the private
 * copy after fork(), and the probe's mapping kept as the first pack.
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend-memfd.h"
#include "code-range.h"
#include "guard.h"
#include "internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels say EINVAL */
#endif

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
	int prc = ep__memfd_place(kind, size, &want);

	if (prc) {
		if (prc == EP__CRANGE_FULL)
			ep__why(why, whylen, "%s: no free %zu bytes left in the code range",
				kind->name, size);
		else
			ep__why(why, whylen, "%s: no free range of %zu bytes within rel32 reach of %p",
				kind->name, size, kind->near);
		return prc;
	}
	void *rw = mmap(ep__memfd_alias_hint(kind->align), size, PROT_READ | PROT_WRITE, MAP_SHARED,
			fd, 0);

	if (rw == MAP_FAILED) {
		int e = errno;

		ep__why(why, whylen, "%s: cannot map the writable alias: %s", kind->name, ep__errno_text(e));
		if (want)
			ep__memfd_unplace(kind, want, size);
		return -e;
	}
	int rc = ep__guard_alias(kind->guards, rw, size); /* (under the key before any store) */

	if (rc) {
		ep__why(why, whylen, "%s: cannot put the alias under the protection key: %s",
			kind->name, ep__errno_text(rc));
		munmap(rw, size);
		if (want)
			ep__memfd_unplace(kind, want, size);
		return rc;
	}
	/* fill before any executable view exists: never map unset memory exec */
	if (fill)
		ep__alias_fill(kind->guards, fill, rw, commit, fill_ctx);
	int xprot = ep__exec_prot(kind->guards);
	/* (over the reservation ep__memfd_place() made, replacing it in one step) */
	int share = kind->debug ? MAP_PRIVATE : MAP_SHARED;
	void *exec = mmap(want, size, commit < size ? PROT_NONE : xprot,
			  share | (want ? MAP_FIXED : 0), fd, 0);

	if (exec != MAP_FAILED && commit < size &&
	    mmap(exec, commit, xprot, share | MAP_FIXED, fd, 0) == MAP_FAILED) {
		int e = errno;

		ep__memfd_unplace(kind, exec, size);
		want = NULL;
		exec = MAP_FAILED;
		errno = e;
	}

	if (exec == MAP_FAILED) {
		int e = errno;

		if (want)
			ep__memfd_unplace(kind, want, size);
		if (e == EPERM || e == EACCES)
			ep__why(why, whylen, "%s: exec mapping refused (vm.memfd_noexec=%d, or a noexec "
				"mount or security policy)", kind->name,
				ep__memfd_noexec_sysctl());
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

/* ---- regions ------------------------------------------------------------------ */

/*
 * The kind a region with guards is mapped as: kind itself for code; for a
 * data region (backend.h) a copy of it whose views are read-only or
 * read-write and never PROT_BTI, and shared even with EXECPACK_DEBUG (a
 * private view of read-write data would part from what the alias writes).
 */
static const struct ep__memfd_kind *kind_for(const struct ep__memfd_kind *kind, unsigned guards,
					     struct ep__memfd_kind *tmp)
{
	if (!(guards & EP__GUARD_DATA))
		return kind;
	*tmp = *kind;
	tmp->guards = (kind->guards & ~(unsigned)EP_GUARD_BTI) | (guards & EP__GUARD_DATA);
	tmp->debug = 0;
	return tmp;
}

int ep__memfd_map(const struct ep__memfd_kind *kind, size_t size, ep_fill_fn fill,
		  void *fill_ctx, struct ep__region *out)
{
	struct ep__memfd_kind tmp;

	kind = kind_for(kind, out->guards, &tmp);
	if (kind->anon) {
		int rc = ep__memfd_anon_map(kind, size, size, fill, fill_ctx, out);

		if (!ep__memfd_exec_refused(rc))
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
	struct ep__memfd_kind tmp;

	kind = kind_for(kind, out->guards, &tmp);
	if (kind->anon) {
		int rc = ep__memfd_anon_map(kind, size, commit, fill, fill_ctx, out);

		if (!ep__memfd_exec_refused(rc))
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

/* As ep__memfd_uncommit(), for pages inside the committed part. */
int ep__memfd_hole(struct ep__region *r, size_t off, size_t len)
{
	if (off > r->committed || len > r->committed - off)
		return -EINVAL;
	unsigned char *x = (unsigned char *)r->exec + off;

	if (mprotect(x, len, PROT_NONE) < 0)
		return -errno;
	if (madvise((unsigned char *)r->rw + off, len, MADV_REMOVE) < 0) {
		int e = errno;

		(void)mprotect(x, len, ep__exec_prot(r->guards)); /* (still filled) */
		return -e;
	}
	(void)madvise(x, len, MADV_DONTNEED);
	return 0;
}

/* As ep__memfd_commit(): the fill first, never unset memory executable. */
int ep__memfd_unhole(struct ep__region *r, size_t off, size_t len, ep_fill_fn fill, void *ctx)
{
	if (off > r->committed || len > r->committed - off)
		return -EINVAL;
	(void)madvise((unsigned char *)r->rw + off, len, MADV_POPULATE_WRITE);
	ep__alias_fill(r->guards, fill, (unsigned char *)r->rw + off, len, ctx);
	if (mprotect((unsigned char *)r->exec + off, len, ep__exec_prot(r->guards)) < 0)
		return -errno;
	return 0;
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
	struct ep__memfd_kind dk;

	kind = kind_for(kind, r->guards, &dk);
	if (kind->anon) {
		int rc = ep__memfd_anon_privatize(kind, r);

		if (!ep__memfd_exec_refused(rc))
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

/*
 * The probe's mapping kept for the first pack (ep__memfd_probe_anon()):
 * here, above the anonymous views, as it fills and commits the pack.
 */
int ep__memfd_spare_take(struct ep__memfd_kind *kind, size_t size, size_t commit,
			 ep_fill_fn fill, void *ctx, struct ep__region *out)
{
	if (!ep__load_acquire(&kind->spare_held) || (out->guards & EP__GUARD_DATA) ||
	    size != kind->spare.size || commit < kind->spare.committed || kind->crange ||
	    !ep__xchg_acquire(&kind->spare_held, 0))
		return 0;
	struct ep__region r = kind->spare;

	if (kind->spare_gen != ep__fork_generation()) {
		/* made before a fork(): the other process maps the same pages;
		 * the views here are this process's own to unmap */
		ep__memfd_unmap(kind, &r);
		return 0;
	}
	/* the probe left its page zero: the pack's fill before it is used (no
	 * one runs it yet), then the rest of the first commit */
	int rc = ep__memfd_fill(&r, 0, r.committed, fill, ctx);

	if (rc == 0)
		rc = ep__memfd_commit(&r, commit, fill, ctx);
	if (rc) {
		ep__memfd_unmap(kind, &r);
		return 0;
	}
	__builtin___clear_cache((char *)r.exec, (char *)r.exec + r.committed);
	/* what ep__memfd_anon_map() sets; the caller's own fields stay */
	out->exec = r.exec;
	out->rw = r.rw;
	out->size = r.size;
	out->committed = r.committed;
	out->handle = r.handle;
	out->guards = r.guards;
	return 1;
}

void ep__memfd_spare_drop(struct ep__memfd_kind *kind)
{
	if (ep__load_relaxed(&kind->spare_held) && ep__xchg_acquire(&kind->spare_held, 0))
		ep__memfd_unmap(kind, &kind->spare);
}
