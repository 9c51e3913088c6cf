/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * backend-kmod.c - packs from the execpack kernel module (/dev/execpack).
 *
 * Strict W^X: the process never holds a writable mapping of its code.  The
 * module maps packs read+exec only (and refuses PROT_WRITE, now and through
 * mprotect later); bytes reach a pack only through the COPY and FILL ioctls,
 * which write through the kernel's own mapping.  So region->rw is NULL.
 *
 * The module keeps one fill pattern per pack (1..64 bytes repeated, or one
 * page).  The pattern is found by running the pool's fill function on one
 * page of scratch memory; a fill that does not repeat within 64 bytes is
 * applied exactly instead, through a scratch buffer and the COPY ioctl.
 *
 * fork(): the child shares the parent's open file, hence its packs.  On its
 * first change it opens the device again (a context of its own, freed when
 * it exits) and copies each region it changes into a new pack mapped at the
 * same address; packs it inherited are never destroyed through it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "code-range.h"
#include "guard.h"
#include "internal.h"
#include "kmod/execpack_uapi.h"

/* What the module knows of one region; region->handle indexes these. */
struct kmod_pack {
	bool used;
	uint32_t id;          /* pack id in context gen */
	unsigned gen;         /* context the id belongs to */
	ep_fill_fn fill;      /* what the pack was created with */
	void *fill_ctx;
};

struct ep__backend {
	char *path;
	int fd;
	pid_t pid;            /* the process whose context fd is */
	unsigned gen;         /* bumped each time a child opens its own context */
	size_t page;

	/* pattern of the fill function seen last */
	ep_fill_fn pat_fill;
	void *pat_ctx;
	unsigned char *pat;   /* one page */
	uint32_t pat_len;     /* period <= EXECPACK_PATTERN_MAX, or page */

	struct kmod_pack *packs;
	size_t npacks;
	struct ep__crange *crange; /* ep_config.code_range, or NULL */
};

static int kmod_ioctl(struct ep__backend *be, unsigned long cmd, void *arg)
{
	return ioctl(be->fd, cmd, arg) < 0 ? -errno : 0;
}

/* The device's ABI must be the one compiled in. */
static int kmod_check(struct ep__backend *be, char *why, size_t whylen)
{
	struct execpack_info info = { .size = sizeof(info) };
	int rc = kmod_ioctl(be, EXECPACK_IOC_INFO, &info);

	if (rc) {
		ep__why(why, whylen, "kmod: %s: not an execpack device (%s)", be->path,
			ep__errno_text(-rc));
		return rc == -ENOTTY || rc == -EINVAL ? -ENOTTY : rc;
	}
	if (info.abi_version != EXECPACK_ABI_VERSION) {
		ep__why(why, whylen, "kmod: %s: module ABI version %u, library needs %u",
			be->path, (unsigned)info.abi_version, (unsigned)EXECPACK_ABI_VERSION);
		return -EPROTO;
	}
	if (info.page_size != be->page) {
		ep__why(why, whylen, "kmod: %s: module page size %llu, process has %zu",
			be->path, (unsigned long long)info.page_size, be->page);
		return -EPROTO;
	}
	return 0;
}

static int kmod_open_dev(const char *path, char *why, size_t whylen)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		int e = errno;

		if (e == ENOENT || e == ENODEV || e == ENXIO)
			ep__why(why, whylen, "kmod: %s: %s (module not loaded?)", path,
				ep__errno_text(e));
		else
			ep__why(why, whylen, "kmod: %s: %s", path, ep__errno_text(e));
		return -e;
	}
	return fd;
}

static int kmod_open(const struct ep_config *cfg, struct ep__backend **out, char *why,
		     size_t whylen)
{
	if (cfg && cfg->near) {
		/* the module places packs; placement near an address is not
		 * implemented for it (ep_pool_create(3)) */
		ep__why(why, whylen, "kmod: placement near an address (ep_config.near) not supported");
		return -EOPNOTSUPP;
	}
	if (ep__bti_wanted(cfg)) {
		ep__why(why, whylen, "kmod: BTI (EP_F_BTI, EXECPACK_BTI) not supported");
		return -EOPNOTSUPP;
	}
	struct ep__backend *be = calloc(1, sizeof(*be));
	int rc = -ENOMEM;

	if (!be)
		return -ENOMEM;
	be->fd = -1;
	be->page = ep__page_size();
	be->path = strdup(cfg && cfg->path ? cfg->path : EXECPACK_DEVICE);
	/* (page-aligned: a fill by address learnt in phase with a pack) */
	be->pat = aligned_alloc(be->page, be->page);
	if (!be->path || !be->pat) {
		ep__why(why, whylen, "kmod: out of memory");
		goto fail;
	}
	rc = be->fd = kmod_open_dev(be->path, why, whylen);
	if (rc < 0)
		goto fail;
	be->pid = getpid();
	rc = kmod_check(be, why, whylen);
	if (rc)
		goto fail;
	*out = be;
	return 0;
fail:
	if (be->fd >= 0)
		close(be->fd);
	free(be->pat);
	free(be->path);
	free(be);
	return rc;
}

static void kmod_close(struct ep__backend *be)
{
	/* Closing the file frees every pack the regions have not unmapped. */
	close(be->fd);
	ep__crange_close(be->crange);
	free(be->packs);
	free(be->pat);
	free(be->path);
	free(be);
}

static size_t kmod_page_size(const struct ep__backend *be)
{
	return be->page;
}

static size_t kmod_default_pack_size(const struct ep__backend *be)
{
	(void)be;
	return EP__DEFAULT_PACK_SIZE;
}

/* In a forked child, get a context of our own before changing anything. */
static int kmod_own_context(struct ep__backend *be)
{
	pid_t me = getpid();

	if (be->pid == me)
		return 0;
	int fd = kmod_open_dev(be->path, NULL, 0);

	if (fd < 0)
		return fd;
	close(be->fd); /* the parent's copy keeps its context alive */
	be->fd = fd;
	be->pid = me;
	be->gen++;
	return 0;
}

/* Learn the period of fill's output over one page (cached per fill/ctx). */
static void kmod_pattern(struct ep__backend *be, ep_fill_fn fill, void *ctx)
{
	if (be->pat_len && be->pat_fill == fill && be->pat_ctx == ctx)
		return;
	fill(be->pat, be->page, ctx);
	be->pat_fill = fill;
	be->pat_ctx = ctx;
	be->pat_len = (uint32_t)be->page;
	for (uint32_t p = 1; p <= EXECPACK_PATTERN_MAX; p++) {
		size_t i = p;

		while (i < be->page && be->pat[i] == be->pat[i - p])
			i++;
		if (i == be->page) {
			be->pat_len = p;
			break;
		}
	}
}

/*
 * fill's output for [off, off+len) of a pack, run as the memfd backend runs
 * it: on a buffer at the same address modulo a page as those bytes, so
 * that a fill by address (arm64, riscv64) and one by offset from its start
 * both give what they give there.  *mem: to free; NULL when out of memory.
 */
static unsigned char *kmod_fill_buf(const struct ep__backend *be, ep_fill_fn fill, void *ctx,
				    size_t off, size_t len, unsigned char **mem)
{
	*mem = malloc(len + 2 * be->page);
	if (!*mem)
		return NULL;
	uintptr_t a = ((uintptr_t)*mem + be->page - 1) & ~(uintptr_t)(be->page - 1);
	unsigned char *buf = (unsigned char *)a + off % be->page;

	fill(buf, len, ctx);
	return buf;
}

static bool kmod_pattern_exact(const struct ep__backend *be)
{
	return be->pat_len <= EXECPACK_PATTERN_MAX;
}

static int kmod_copy(struct ep__backend *be, uint32_t id, size_t off, const void *src,
		     size_t len)
{
	struct execpack_copy c = {
		.size = sizeof(c),
		.id = id,
		.off = off,
		.src = (uintptr_t)src,
		.len = len,
	};

	return kmod_ioctl(be, EXECPACK_IOC_COPY, &c);
}

static void kmod_destroy(struct ep__backend *be, uint32_t id)
{
	struct execpack_destroy d = { .size = sizeof(d), .id = id };

	(void)kmod_ioctl(be, EXECPACK_IOC_DESTROY, &d);
}

/* A pack of size bytes holding fill's output, mapped RX at addr (or anywhere). */
static int kmod_new_pack(struct ep__backend *be, size_t size, ep_fill_fn fill, void *ctx,
			 const void *contents, void *addr, uint32_t *id_out, void **exec_out)
{
	kmod_pattern(be, fill, ctx);

	struct execpack_create c = {
		.size = sizeof(c),
		.len = size,
		.pattern = (uintptr_t)be->pat,
		.pattern_len = be->pat_len,
	};
	int rc = kmod_ioctl(be, EXECPACK_IOC_CREATE, &c);

	if (rc)
		return rc;
	if (contents) {
		rc = kmod_copy(be, c.id, 0, contents, size);
	} else if (!kmod_pattern_exact(be)) {
		unsigned char *mem, *buf = kmod_fill_buf(be, fill, ctx, 0, size, &mem);

		rc = buf ? kmod_copy(be, c.id, 0, buf, size) : -ENOMEM;
		free(mem);
	}
	if (rc)
		goto fail;

	void *exec = mmap(addr, size, PROT_READ | PROT_EXEC, MAP_SHARED | (addr ? MAP_FIXED : 0),
			  be->fd, (off_t)c.cookie);

	if (exec == MAP_FAILED) {
		rc = -errno;
		goto fail;
	}
	*id_out = c.id;
	*exec_out = exec;
	return 0;
fail:
	kmod_destroy(be, c.id);
	return rc;
}

static int kmod_slot(struct ep__backend *be)
{
	for (size_t i = 0; i < be->npacks; i++)
		if (!be->packs[i].used)
			return (int)i;
	if (be->npacks >= (size_t)INT32_MAX)
		return -ENOMEM;

	size_t n = be->npacks ? be->npacks * 2 : 8;
	struct kmod_pack *p = realloc(be->packs, n * sizeof(*p));

	if (!p)
		return -ENOMEM;
	size_t first = be->npacks;

	memset(p + first, 0, (n - first) * sizeof(*p));
	be->packs = p;
	be->npacks = n;
	return (int)first;
}

static struct kmod_pack *kmod_rec(struct ep__backend *be, const struct ep__region *r)
{
	if (r->handle < 0 || (size_t)r->handle >= be->npacks || !be->packs[r->handle].used)
		return NULL;
	return &be->packs[r->handle];
}

static int kmod_map(struct ep__backend *be, size_t size, ep_fill_fn fill, void *ctx,
		    struct ep__region *out)
{
	int rc = kmod_own_context(be);

	if (rc)
		return rc;
	int slot = kmod_slot(be);

	if (slot < 0)
		return slot;

	uint32_t id;
	void *exec, *at = NULL;

	/* (the device maps a pack wherever its vma is: MAP_FIXED into the range) */
	if (be->crange && (rc = ep__crange_take(be->crange, size, be->page, &at)))
		return ep__crange_rc(rc);
	rc = kmod_new_pack(be, size, fill, ctx, NULL, at, &id, &exec);
	if (rc) {
		if (at)
			ep__crange_give(be->crange, at, size);
		return rc;
	}
	be->packs[slot] = (struct kmod_pack){
		.used = true, .id = id, .gen = be->gen, .fill = fill, .fill_ctx = ctx,
	};
	out->exec = exec;
	out->rw = NULL;
	out->size = size;
	out->handle = slot;
	return 0;
}

static void kmod_unmap(struct ep__backend *be, struct ep__region *r)
{
	struct kmod_pack *p = kmod_rec(be, r);

	if (!ep__crange_give(be->crange, r->exec, r->size))
		munmap(r->exec, r->size);
	/* A pack inherited over fork() is the parent's to destroy. */
	if (p && p->gen == be->gen && be->pid == getpid())
		kmod_destroy(be, p->id);
	if (p)
		p->used = false;
	r->exec = NULL;
	r->handle = -1;
}

static int kmod_write(struct ep__backend *be, struct ep__region *r, size_t off, const void *src,
		      size_t len)
{
	struct kmod_pack *p = kmod_rec(be, r);

	if (!p || off > r->size || len > r->size - off)
		return -EINVAL;
	if (p->gen != be->gen || be->pid != getpid())
		return -EBADF; /* privatize was not called after fork() */
	return kmod_copy(be, p->id, off, src, len);
}

static int kmod_fill(struct ep__backend *be, struct ep__region *r, size_t off, size_t len,
		     ep_fill_fn fill, void *ctx)
{
	struct kmod_pack *p = kmod_rec(be, r);

	if (!p || off > r->size || len > r->size - off)
		return -EINVAL;
	if (p->gen != be->gen || be->pid != getpid())
		return -EBADF;
	kmod_pattern(be, fill, ctx);
	/* The module starts the pattern again at off: what the fill gives
	 * there, by address or by offset, where off is a whole number of
	 * periods (a 64-byte chunk is of every period up to 64; a 16- or
	 * 32-byte one need not be). */
	if (p->fill == fill && p->fill_ctx == ctx && kmod_pattern_exact(be) &&
	    off % be->pat_len == 0) {
		struct execpack_fill f = { .size = sizeof(f), .id = p->id, .off = off, .len = len };

		return kmod_ioctl(be, EXECPACK_IOC_FILL, &f);
	}
	/* Not the pack's own pattern, or not in phase: the fill's bytes,
	 * copied in. */
	unsigned char *mem, *buf = kmod_fill_buf(be, fill, ctx, off, len, &mem);
	int rc = buf ? kmod_copy(be, p->id, off, buf, len) : -ENOMEM;

	free(mem);
	return rc;
}

/*
 * After fork(): a new pack in this process's context with the region's
 * current bytes (read through the exec view), mapped over it with MAP_FIXED,
 * which swaps the pages atomically; code running there does not notice.
 */
static int kmod_privatize(struct ep__backend *be, struct ep__region *r)
{
	struct kmod_pack *p = kmod_rec(be, r);

	if (!p)
		return -EINVAL;
	int rc = kmod_own_context(be);

	if (rc)
		return rc;

	uint32_t id;
	void *exec;

	rc = kmod_new_pack(be, r->size, p->fill, p->fill_ctx, r->exec, r->exec, &id, &exec);
	if (rc)
		return rc;
	if (p->gen == be->gen)
		kmod_destroy(be, p->id); /* the other process's mapping keeps its pages */
	p->id = id;
	p->gen = be->gen;
	return 0;
}

static void kmod_set_range(struct ep__backend *be, struct ep__crange *cr)
{
	be->crange = cr;
}

const struct ep__backend_ops ep__backend_kmod = {
	.name = "kmod",
	.threadsafe = 0,
	.open = kmod_open,
	.close = kmod_close,
	.page_size = kmod_page_size,
	.default_pack_size = kmod_default_pack_size,
	.map = kmod_map,
	.unmap = kmod_unmap,
	.write = kmod_write,
	.fill = kmod_fill,
	.privatize = kmod_privatize,
	.set_range = kmod_set_range,
};
