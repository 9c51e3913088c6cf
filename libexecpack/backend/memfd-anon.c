/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * memfd-anon.c - regions of anonymous shared memory, seen twice by mremap()
 * (what the memfd and hugetlb backends use for base pages where exec can be
 * added by mprotect()).
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/mman.h>

#include "backend-memfd.h"
#include "guard.h"
#include "internal.h"

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


/*
 * New anonymous shared memory of size bytes, seen twice: *rw read+write at
 * a random address, *exec at want (MAP_FIXED over ep__memfd_place()'s reservation) or
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
			ep__memfd_unplace(kind, want, size); /* ep__memfd_place()'s reservation */
		return -e;
	}
	/* the alias over a reservation at a random address, replaced in one step */
	void *res = mmap(ep__memfd_alias_hint(kind->align), size, PROT_NONE,
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
	ep__memfd_unplace(kind, exec, size); /* (and with it ep__memfd_place()'s reservation) */
	return -e;
}

int ep__memfd_anon_map(const struct ep__memfd_kind *kind, size_t size, size_t commit,
		    ep_fill_fn fill, void *fill_ctx, struct ep__region *out)
{
	void *want, *exec, *rw;
	int rc = ep__memfd_place(kind, size, &want);

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
int ep__memfd_anon_privatize(const struct ep__memfd_kind *kind, struct ep__region *r)
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

int ep__memfd_probe_anon(struct ep__memfd_kind *kind, size_t pack, char *why, size_t whylen)
{
	struct ep__region r = { 0 };

	if (ep__under_valgrind()) {
		/* Valgrind's mremap() does not map a shared mapping twice */
		kind->anon = 0;
		ep__why(why, whylen, "%s: no second view of anonymous memory under Valgrind",
			kind->name);
		return -EOPNOTSUPP;
	}
	/* the trial mapping is the first pack's (ep__memfd_spare_take()): a
	 * pool's first program then costs no second mapping.  Not near an
	 * address (its reach is tested, and is refused, at each new pack),
	 * nor for packs past the default size (a large reservation stays the
	 * first ep_alloc()'s to fail). */
	bool keep = !kind->near && pack >= kind->align && pack % kind->align == 0 &&
		    pack <= EP__DEFAULT_PACK_SIZE;
	int rc = ep__memfd_anon_map(kind, keep ? pack : kind->align, kind->align, NULL, NULL, &r);

	kind->anon = rc == 0;
	if (rc == 0 && keep) {
		kind->spare = r;
		kind->spare_gen = ep__fork_generation();
		ep__store_release(&kind->spare_held, 1);
	} else if (rc == 0) {
		ep__memfd_unmap(kind, &r);
	} else if (rc == -EADDRNOTAVAIL) {
		ep__why(why, whylen, "%s: no free range of %zu bytes within rel32 reach of %p",
			kind->name, keep ? pack : kind->align, kind->near);
	} else {
		ep__why(why, whylen, "%s: anonymous shared memory cannot be made executable: %s",
			kind->name, ep__errno_text(rc));
	}
	return rc;
}
