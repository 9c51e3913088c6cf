/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * config.c - a caller's struct ep_config, copied and checked once (for
 * ep_pool_create() and ep_backend_probe() alike), EXECPACK_BACKEND, and the
 * backends by name and in AUTO's order.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-memfd.h"
#include "code-range.h"
#include "config-open.h"
#include "region.h"

static const struct ep__backend_ops *backend_ops(enum ep_backend b)
{
	switch (b) {
	case EP_BACKEND_MEMFD:
		return ep__memfd_debug_wanted() ? &ep__backend_memfd_debug : &ep__backend_memfd;
	case EP_BACKEND_HUGETLB: return &ep__backend_hugetlb;
	case EP_BACKEND_KMOD: return &ep__backend_kmod;
	default: return NULL;
	}
}

static void add_reason(struct ep__heap *heap, const char *why)
{
	size_t used = strlen(heap->reasons);

	if (!why[0] || used + 3 >= sizeof(heap->reasons))
		return;
	snprintf(heap->reasons + used, sizeof(heap->reasons) - used, "%s%s",
		 used ? "; " : "", why);
}

/* Copy a caller's config of any known-compatible size (libbpf opts rules:
 * fields past the caller's sz are zero; bytes past ours must be zero). */
static int config_copy(const struct ep_config *in, struct ep_config *out)
{
	memset(out, 0, sizeof(*out));
	if (!in)
		return 0;
	if (in->sz < offsetof(struct ep_config, backend) + sizeof(in->backend))
		return -EINVAL;
	if (in->sz > sizeof(*out)) {
		const unsigned char *tail = (const unsigned char *)in + sizeof(*out);

		for (size_t i = 0; i < in->sz - sizeof(*out); i++)
			if (tail[i])
				return -E2BIG;
		memcpy(out, in, sizeof(*out));
	} else {
		memcpy(out, in, in->sz);
	}
	out->sz = sizeof(*out);
	return 0;
}

static int open_backend(struct ep__heap *heap, const struct ep_config *cfg)
{
	char why[256];
	enum ep_backend want = cfg->backend;
	const char *env = secure_getenv("EXECPACK_BACKEND");

	if (want == EP_BACKEND_AUTO && env && *env) {
		if (!strcmp(env, "memfd"))
			want = EP_BACKEND_MEMFD;
		else if (!strcmp(env, "hugetlb"))
			want = EP_BACKEND_HUGETLB;
		else if (!strcmp(env, "kmod"))
			want = EP_BACKEND_KMOD;
		else if (strcmp(env, "auto")) {
			/* say which setting is wrong: every pool fails with it */
			char val[68];
			size_t n = 0;

			for (; env[n] && n < 64; n++) /* no control characters */
				val[n] = (unsigned char)env[n] < 0x20 || env[n] == 0x7f ? '?' : env[n];
			snprintf(val + n, sizeof(val) - n, "%s", env[n] ? "..." : "");
			snprintf(why, sizeof(why),
				 "EXECPACK_BACKEND=%s: not a backend (memfd, hugetlb, kmod or auto)",
				 val);
			add_reason(heap, why);
			return -EINVAL;
		}
	}
	if (want != EP_BACKEND_AUTO) {
		const struct ep__backend_ops *ops = backend_ops(want);
		/* EXECPACK_BACKEND=name means what the explicit backend means
		 * (no fallback the backend keeps for AUTO) */
		struct ep_config named = *cfg;

		if (!ops)
			return (unsigned)want > EP_BACKEND_KMOD ? -EINVAL : -ENODEV;
		named.backend = want;
		why[0] = 0;
		int rc = ops->open(&named, &heap->be, why, sizeof(why));

		if (rc) {
			add_reason(heap, why);
			return rc;
		}
		heap->ops = ops;
		return 0;
	}

	static const enum ep_backend order[] = { EP_BACKEND_HUGETLB, EP_BACKEND_MEMFD,
						 EP_BACKEND_KMOD };
	int first = -ENODEV;

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		const struct ep__backend_ops *ops = backend_ops(order[i]);

		if (!ops)
			continue;
		why[0] = 0;
		int rc = ops->open(cfg, &heap->be, why, sizeof(why));

		/* a pack size the backend's pages do not divide (1 MiB on 2 MiB
		 * huge pages) is a reason to pass it over, not to fail the pool */
		if (rc == 0 && cfg->pack_size && cfg->pack_size % ops->page_size(heap->be)) {
			snprintf(why, sizeof(why), "%s: pack_size %zu is not a multiple of its %zu-byte pages",
				 ops->name, cfg->pack_size, ops->page_size(heap->be));
			ops->close(heap->be);
			heap->be = NULL;
			rc = -EINVAL;
		}
		if (rc == 0) {
			heap->ops = ops;
			return 0;
		}
		/* (hugetlb's "no huge page" is ep_pool_create(3)'s error only for
		 * a pool that asked for hugetlb: AUTO says why the others failed) */
		if (first == -ENODEV && !(rc == -ENOSPC && order[i] == EP_BACKEND_HUGETLB))
			first = rc;
		add_reason(heap, why);
	}
	return first;
}

/* ep_config.code_range: the reservation every region of the pool goes in
 * (code-range.c), handed to the backend, which closes it with itself. */
static int open_range(struct ep__heap *heap, const struct ep_config *cfg, size_t page,
		      size_t pack)
{
	char why[160];
	size_t size = cfg->code_range;
	struct ep__crange *cr;

	if (size < pack || size > SIZE_MAX - page) {
		if (size < pack)
			snprintf(why, sizeof(why), "code range: %zu bytes, less than one pack (%zu)",
				 size, pack);
		else
			snprintf(why, sizeof(why),
				 "code range: %zu bytes, more than the address space holds", size);
		add_reason(heap, why);
		return -EINVAL;
	}
	if (!heap->ops->set_range) {
		snprintf(why, sizeof(why), "%s: no code range (ep_config.code_range)",
			 heap->ops->name);
		add_reason(heap, why);
		return -EOPNOTSUPP;
	}
	size = (size + page - 1) / page * page;
	int rc = ep__crange_open(size, cfg->near, pack, page, &cr);

	if (rc) {
		snprintf(why, sizeof(why), "code range: cannot reserve %zu bytes%s", size,
			 cfg->near ? " within rel32 reach of ep_config.near" : "");
		add_reason(heap, why);
		return rc;
	}
	heap->ops->set_range(heap->be, cr);
	heap->crange = cr;
	return 0;
}

/*
 * The one validation of a config, for ep_pool_create() and
 * ep_backend_probe() alike: copied and checked, the backend (backend, or
 * cfg's own when negative) opened, and what depends on the backend checked.
 * On success heap->ops and heap->be are open and *cfg holds the copy.
 */
int ep__config_open(const struct ep_config *cfg_in, int backend, struct ep_config *cfg,
			struct ep__heap *heap)
{
	int rc = config_copy(cfg_in, cfg);

	if (rc)
		return rc;
	if (backend >= 0)
		cfg->backend = (enum ep_backend)backend;
	if ((cfg->flags & ~EP_F_ALL) || (unsigned)cfg->backend > EP_BACKEND_KMOD)
		return -EINVAL;
	if (cfg->chunk_size && cfg->chunk_size != 16 && cfg->chunk_size != 32 &&
	    cfg->chunk_size != EP_CHUNK_SIZE)
		return -EINVAL;
	if (cfg->purge_delay_ms < 0 && cfg->purge_delay_ms != EP_PURGE_NEVER)
		return -EINVAL;
	if (cfg->pack_size % ep__page_size()) {
		/* no backend's pages divide it: a bad config whatever backend
		 * could open now */
		char why[96];

		snprintf(why, sizeof(why), "pack_size %zu: not a multiple of the page size (%zu)",
			 cfg->pack_size, ep__page_size());
		add_reason(heap, why);
		return -EINVAL;
	}
	rc = open_backend(heap, cfg);
	if (rc)
		return rc;
	if ((cfg->flags & EP_F_SEAL) && ep__mseal(NULL, 0) == -ENOSYS) {
		/* mseal(addr, 0) is a no-op where the call exists (Linux 6.10+) */
		add_reason(heap, "seal: mseal() not supported by this kernel");
		rc = -EOPNOTSUPP;
	} else {
		size_t page = heap->ops->page_size(heap->be);
		size_t pack = cfg->pack_size ? cfg->pack_size : heap->ops->default_pack_size(heap->be);

		if (pack % page || pack > EP__MAX_PACK_SIZE)
			rc = -EINVAL;
		else if (cfg->code_range)
			rc = open_range(heap, cfg, page, pack);
	}
	if (rc) {
		heap->ops->close(heap->be);
		heap->ops = NULL;
		heap->be = NULL;
		heap->crange = NULL;
	}
	return rc;
}


int ep__backend_probe(enum ep_backend backend, const struct ep_config *cfg_in, char *why,
		      size_t whylen)
{
	struct ep_config cfg;
	struct ep__heap probe;
	int rc;

	if (why && whylen)
		why[0] = 0;
	if ((unsigned)backend > EP_BACKEND_KMOD)
		return -EINVAL;
	memset(&probe, 0, sizeof(probe));
	rc = ep__config_open(cfg_in, (int)backend, &cfg, &probe);
	if (rc) {
		ep__why(why, whylen, "%s", probe.reasons);
		return rc;
	}
	if (backend == EP_BACKEND_AUTO)
		ep__why(why, whylen, "%s", probe.ops->name);
	probe.ops->close(probe.be);
	return 0;
}


/* ep_config.purge_delay_ms, checked: 0 takes EXECPACK_PURGE_DELAY_MS (a
 * count of milliseconds, or "never"; anything else is ignored) or the
 * default.  < 0: never. */
long ep__purge_delay(long cfg_ms)
{
	if (cfg_ms)
		return cfg_ms < 0 ? -1 : cfg_ms;

	const char *env = secure_getenv("EXECPACK_PURGE_DELAY_MS");

	if (env && *env) {
		char *end;
		long v;

		if (!strcmp(env, "never"))
			return -1;
		errno = 0;
		v = strtol(env, &end, 10);
		if (!*end && !errno && v >= 0)
			return v;
	}
	return EP__PURGE_DELAY_MS;
}
