/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * grace.c - retired objects and their reclaim (grace.h has the rule).
 * The list of retired objects is a lock-free stack: a retire pushes, a
 * reclaim takes the whole stack, frees what it may and pushes the rest
 * back, so two reclaims never see the same node and neither takes a lock
 * that a fork could leave held.
 */
#include "config.h"

#include <stddef.h>

#include "arch.h"
#include "grace.h"

_Atomic unsigned long ep__grace_epoch;
_Atomic long ep__grace_readers[2];
static struct ep__grace *_Atomic g_retired;

static void push(struct ep__grace *first, struct ep__grace *last)
{
	struct ep__grace *head = ep__load_relaxed(&g_retired);

	do
		last->next = head;
	while (!ep__cas_weak_release(&g_retired, &head, first));
}

/* Marks what each counter at zero now clears; true if both were. */
static unsigned zero_now(void)
{
	unsigned z = 0;

	for (unsigned i = 0; i < 2; i++)
		if (ep__load_seq_cst(&ep__grace_readers[i]) == 0)
			z |= 1u << i;
	return z;
}

void ep__grace_reclaim(unsigned spin_max)
{
	/* (after the caller's route clears: the fence of the Dekker pair) */
	ep__fence_seq_cst();
	struct ep__grace *list = ep__xchg_acquire(&g_retired, NULL);

	if (!list)
		return;
	for (unsigned spins = 0;; spins++) {
		/* new readers to the other counter: the old one drains */
		ep__add_seq_cst(&ep__grace_epoch, 1);
		unsigned z = zero_now();
		struct ep__grace *keep = NULL, *last = NULL, *n, *next;

		EP_YIELD("grace reclaim");
		for (n = list; n; n = next) {
			next = n->next;
			n->seen |= z;
			if (n->seen == 3) {
				n->free(n);
				continue;
			}
			n->next = keep;
			if (!keep)
				last = n;
			keep = n;
		}
		list = keep;
		if (!list)
			return;
		if (spins >= spin_max) {
			push(list, last);
			return;
		}
		ep__cpu_relax();
	}
}

void ep__grace_retire(struct ep__grace *n, void (*free_fn)(struct ep__grace *))
{
	n->free = free_fn;
	n->seen = 0;
	push(n, n);
	/* lookups take microseconds: a short wait frees most at once */
	ep__grace_reclaim(1024);
}
