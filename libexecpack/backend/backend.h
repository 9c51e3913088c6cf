/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * backend.h - the small interface between the pool and a memory backend.
 *
 * A backend maps "regions": a pack, or the private mapping of one large
 * allocation.  The pool never learns how a region is made executable or
 * how bytes reach it; it only calls these ops.  Every region is filled
 * with the pool's trap fill before it is ever executable.
 */
#ifndef EP_BACKEND_H
#define EP_BACKEND_H

#include <stddef.h>

#include "execpack.h"

struct ep__backend; /* a backend's per-pool state, owned by the backend */
struct ep__crange;  /* code-range.h */

struct ep__region {
	void *exec;   /* executable view (what callers see) */
	void *rw;     /* writable alias inside the library, or NULL (kmod) */
	size_t size;  /* mapped bytes, a multiple of the backend's page size */
	size_t committed; /* the first bytes, filled and executable; the rest of
			   * the exec view is PROT_NONE (commit.c) */
	int handle;   /* backend-specific (a pack id for kmod), else -1 */
	unsigned gen; /* fork generation the mapping was last made private in */
	unsigned char sealed; /* pool: exec view mseal()ed (EP_F_SEAL) */
	unsigned char guards; /* EP_GUARD_* of this region: its alias under the
			       * library's key, its exec view PROT_BTI (guard.h);
			       * EP__GUARD_DATA_*: a data region (below) */
	unsigned char pack;   /* pool: a pack's (struct ep__pack's r), whose
			       * free chunks a late copy refills (region.c) */
};

/*
 * A data region (ep_alloc_data(3)): its "exec" view is read-only
 * (EP__GUARD_DATA_RO) or read-write (EP__GUARD_DATA_RW), never executable,
 * placed as code regions are (code range, near).  The caller of map and
 * map_part asks for one by setting the bit in out->guards beforehand (0
 * there: code); the backend keeps it in the region's guards, where every
 * later call on the region reads it (ep__exec_prot(), guard.h).
 */
#define EP__GUARD_DATA_RO (1u << 6)
#define EP__GUARD_DATA_RW (1u << 7)
#define EP__GUARD_DATA (EP__GUARD_DATA_RO | EP__GUARD_DATA_RW)

struct ep__backend_ops {
	const char *name; /* "memfd", "hugetlb", "kmod" */
	/* 1: calls on different regions (and write/fill on different bytes of
	 * one region) may run at the same time; 0: the pool has one heap, so
	 * one lock serialises them (thread.c) */
	int threadsafe;
	/* 1: write and fill are a copy and a fill through the region's RW
	 * alias and nothing more, which the pool then does inline
	 * (region.h): one of each runs in every ep_finalize() and ep_free() */
	int alias_io;
	/* 1: map and map_part make data regions (EP__GUARD_DATA_*); 0:
	 * ep_alloc_data() says -EOPNOTSUPP */
	int data;

	/*
	 * Set up per-pool state.  On failure returns -errno and writes a one-line
	 * human reason ("memfd: exec mapping refused (vm.memfd_noexec=2)") into
	 * why, which the pool reports for EP_BACKEND_AUTO and ep_pool_create().
	 */
	int (*open)(const struct ep_config *cfg, struct ep__backend **out,
		    char *why, size_t whylen);
	void (*close)(struct ep__backend *be);

	/* Granularity of region sizes and the default pack size. */
	size_t (*page_size)(const struct ep__backend *be);
	size_t (*default_pack_size)(const struct ep__backend *be);

	/*
	 * Map a new region of size bytes (a multiple of page_size), filled
	 * entirely by fill(ctx) before it is mapped executable.
	 */
	int (*map)(struct ep__backend *be, size_t size, ep_fill_fn fill,
		   void *fill_ctx, struct ep__region *out);
	void (*unmap)(struct ep__backend *be, struct ep__region *r);

	/*
	 * Optional (NULL: regions are committed whole, as map does).  Map like
	 * map, but fill and make executable only the first commit bytes (a
	 * multiple of page_size); the rest of the exec view is inaccessible,
	 * and the file behind it takes no memory until commit() grows the
	 * prefix.  A backend may commit more than asked (out->committed).
	 * held: the bytes the heap's packs have committed already (hugetlb
	 * under AUTO spends a huge page only from pack_size on).
	 */
	int (*map_part)(struct ep__backend *be, size_t size, size_t commit, size_t held,
			ep_fill_fn fill, void *fill_ctx, struct ep__region *out);
	/* Grow r's committed prefix to commit bytes: fill the new part through
	 * the alias, then make it executable. */
	int (*commit)(struct ep__backend *be, struct ep__region *r, size_t commit,
		      ep_fill_fn fill, void *fill_ctx);
	/* Optional (NULL: never).  Shrink r's committed prefix to commit
	 * bytes (a multiple of page_size, no code past it): the part past it
	 * inaccessible again and its memory given back. */
	int (*uncommit)(struct ep__backend *be, struct ep__region *r, size_t commit);
	/* Optional (NULL: never).  Inside the committed prefix, [off,
	 * off+len) (pages, no code there) inaccessible and its memory given
	 * back (a hole: commit.c); unhole fills it again, then makes it
	 * executable. */
	int (*hole)(struct ep__backend *be, struct ep__region *r, size_t off, size_t len);
	int (*unhole)(struct ep__backend *be, struct ep__region *r, size_t off, size_t len,
		      ep_fill_fn fill, void *fill_ctx);

	/*
	 * Copy len bytes to offset off of the region.  Must not be torn for
	 * an aligned store of up to 8 bytes that does not cross an 8-byte
	 * boundary.  The caller, not the backend, then makes the change
	 * visible to instruction fetch (ep__code_changed(), region.h).
	 */
	int (*write)(struct ep__backend *be, struct ep__region *r, size_t off,
		     const void *src, size_t len);

	/* Refill [off, off+len) of the region with the trap fill. */
	int (*fill)(struct ep__backend *be, struct ep__region *r, size_t off,
		    size_t len, ep_fill_fn fill, void *fill_ctx);

	/*
	 * Optional (NULL: nothing to do).  In a child of fork() only, give it
	 * a private copy of a region still shared with the parent, keeping
	 * both addresses: for every region inside fork() (fork.c), or, where
	 * that failed or no fork handler ran, before the first change to the
	 * region (region.c).
	 */
	int (*privatize)(struct ep__backend *be, struct ep__region *r);

	/* Optional (NULL: none).  The EP_GUARD_* that the pool's regions get
	 * (guard.h), decided at open, the same for every region; *pkey_off:
	 * why not EP_GUARD_PKEY (a string that lives as long as be). */
	unsigned (*guards)(const struct ep__backend *be, const char **pkey_off);

	/* Optional (NULL: ep_config.code_range is refused, -EOPNOTSUPP).  From
	 * now on every region is placed inside cr (code-range.h), which the
	 * backend owns from here and closes with itself.  A full range makes
	 * map and map_part fail with -ENOMEM. */
	void (*set_range)(struct ep__backend *be, struct ep__crange *cr);
};

extern const struct ep__backend_ops ep__backend_memfd;
/* the memfd backend with EXECPACK_DEBUG=1: exec views a debugger can write */
extern const struct ep__backend_ops ep__backend_memfd_debug;
extern const struct ep__backend_ops ep__backend_hugetlb;
extern const struct ep__backend_ops ep__backend_kmod;

#ifdef EP_TEST_HOOKS
/* Test builds only: wrap a pool's backend (failure injection). */
const struct ep__backend_ops *ep__test_wrap_backend(const struct ep__backend_ops *ops);
#endif

#endif /* EP_BACKEND_H */
