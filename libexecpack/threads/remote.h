/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * remote.h - ep_free() from a thread that does not own the heap, and the
 * owner's taking back of what such frees left (remote.c).
 */
#ifndef EP_REMOTE_H
#define EP_REMOTE_H

#include "atomic.h"
#include "interleave.h"
#include "types.h"

/* 0: freed; -EINVAL (not live); 1: take the heap's lock and free there
 * instead.  Never disturbs another allocation, even for an instant. */
int ep__remote_free(struct ep__pack *p, void *exec);
/* fork(): no remote free is under way once this returns; and after. */
void ep__remote_gate(struct ep__heap *h);
void ep__remote_ungate(struct ep__heap *h);
/* A child that ran no fork handler (every lock its own): no free is under
 * way, no allocation BUSY. */
void ep__remote_reset(struct ep__heap *h);
/* Give back what other threads freed; with the heap's lock. */
void ep__remote_drain(struct ep__heap *h);

static inline void ep__remote_drain_check(struct ep__heap *h)
{
	EP_YIELD("remote list");
	if (__builtin_expect(ep__load_relaxed(&h->remote) != NULL, 0))
		ep__remote_drain(h);
}

#endif /* EP_REMOTE_H */
