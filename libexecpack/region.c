/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * region.c - what is done to a whole region (a pack's or a large
 * allocation's mapping): sealing it (EP_F_SEAL), dropping it, telling the
 * CPU and Valgrind that code in it changed, and making it this process's
 * own after fork().
 */
#include "config.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "region.h"
#include "track.h"

#ifndef SYS_mseal
#define SYS_mseal EP__ARCH_SYS_MSEAL
#endif

int ep__mseal(void *addr, size_t len)
{
#ifdef SYS_mseal
	return syscall(SYS_mseal, addr, len, 0UL) ? -errno : 0;
#else
	(void)addr;
	(void)len;
	return -ENOSYS;
#endif
}
/*
 * EP_F_SEAL: the exec view can never again be unmapped, remapped or made
 * writable.  Sealed regions are therefore never released: an empty sealed
 * pack stays cached, and a freed sealed large mapping is refilled with traps
 * and its exec view left in place until exit.
 */
int ep__region_seal(struct ep__heap *h, struct ep__region *r)
{
	if (!(h->flags & EP_F_SEAL))
		return 0;
	int rc = ep__mseal(r->exec, r->size);

	if (rc == 0)
		r->sealed = 1;
	return rc;
}
/* Drop a region; a sealed one is first refilled, as its exec view stays. */
void ep__region_drop(struct ep__heap *h, struct ep__region *r)
{
	/* (not when inherited across fork(): the other process still runs it) */
	if (r->sealed && r->gen == ep__fork_generation() &&
	    ep__region_fill(h, r, 0, r->size) == 0)
		ep__code_changed(r->exec, r->size);
	h->ops->unmap(h->be, r);
}

/* Before the first change to a region after a fork(): make it ours alone. */
int ep__own_region_slow(struct ep__heap *h, struct ep__region *r)
{
	unsigned gen = ep__fork_generation();

	if (r->gen == gen)
		return 0;
	if (r->sealed)
		return -EPERM; /* a sealed view cannot be replaced by a private copy */
	if (h->ops->privatize) {
		int rc = h->ops->privatize(h->be, r);

		if (rc)
			return rc;
	}
	r->gen = gen;
	return 0;
}
