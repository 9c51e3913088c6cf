/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * patch.c - the patch window: a private writable copy of part of a live,
 * finalized allocation that the caller's emitter rewrites, then commits
 * (only the bytes that changed since begin, an aligned word at a time) or
 * aborts; and EP_F_KEEP_STAGING, a staging buffer that outlives
 * ep_finalize() for every window to open in.
 *
 * A window is a state of the allocation's life (alloc-state.h): REC with
 * a->patch->win set, made and ended under the heap's lock like every other
 * step.  The record is what serializes it with a free from another thread:
 * a lock-free free claims PLAIN allocations only, so it takes the heap's
 * lock for one with a window, and that ep_free() closes the window: its
 * buffers and the kept staging buffer go with the allocation, at once.
 *
 * Commit rewrites the live code word by word (EP__ARCH_PATCH_WORD: 8 bytes
 * on x86-64, 4 on arm64 and riscv64), each word that holds a changed byte
 * written whole in one aligned store, as ep_write() does, built from the
 * live word and the window's changed bytes (so a byte that ep_write()
 * changed meanwhile and the window did not keeps its new value).  A thread
 * running the code sees each word old or new, never torn; the instruction
 * caches of every core are synchronised once, after the last word.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc-state.h"
#include "heap.h"
#include "info.h"
#include "life.h"
#include "lock.h"
#include "lookup.h"
#include "pack.h"
#include "patch.h"
#include "records.h"
#include "region.h"

/* The window's buffer: rw == exec (mod this), as staging buffers. */
#define WIN_ALIGN 64

/* Close the window (nothing written); a->patch goes if nothing is kept. */
static void window_close(struct ep__alloc *a)
{
	struct ep__patch *w = a->patch;

	ep__patch_buffers_free(w);
	if (!w->kept) {
		free(w);
		a->patch = NULL;
	}
}

/* Open the window on [x, x+len) of a (entered, finalized, with a record). */
static int window_open(struct ep__heap *h, struct ep__alloc *a, uintptr_t x, size_t len,
		       void **rw)
{
	struct ep__patch *w = a->patch;
	bool made = !w;

	if (made && !(w = a->patch = calloc(1, sizeof(*w))))
		return -ENOMEM;
	if (w->kept) {
		w->win_rw = w->kept + (x - a->key);
		w->snap = malloc(len);
	} else {
		size_t off = x % WIN_ALIGN, span = ep__round_up(off + len, WIN_ALIGN);

		w->own = aligned_alloc(WIN_ALIGN, span + ep__round_up(len, WIN_ALIGN));
		if (w->own) {
			w->win_rw = w->own + off;
			w->snap = w->own + span;
		}
	}
	int rc = w->snap ? ep__own_region(h, ep__alloc_region(a)) : -ENOMEM;

	if (!rc) {
		w->win = x;
		w->win_len = len;
		rc = ep__info_update(h, a);
	}
	if (rc) {
		window_close(a);
		return rc;
	}
	/* the live bytes, read through the executable view (readable on
	 * every backend; no key guards it) */
	memcpy(w->win_rw, (const void *)x, len);
	memcpy(w->snap, w->win_rw, len);
	*rw = w->win_rw;
	return 0;
}

int ep__patch_begin(struct ep__heap *h, void *exec, size_t len, void **rw)
{
	uintptr_t x = (uintptr_t)exec;
	struct ep__alloc view;
	int rc;

	ep__lock(&h->lock);
	struct ep__alloc *a = ep__alloc_containing(h, x, &view);

	if (!a || len > a->key + a->reserved - x || a->staging) {
		rc = -EINVAL; /* not live, past its end, or not finalized */
		goto out;
	}
	struct ep__pack *p = a->pack;
	size_t c = a->chunk;

	if (p && (rc = ep__st_enter(p, c)))
		goto out;
	if (a->patch && a->patch->win) {
		rc = -EBUSY;
	} else {
		struct ep__alloc *kept = ep__rec_keep(h, a);

		rc = kept ? window_open(h, kept, x, len, rw) : -ENOMEM;
		if (kept)
			a = kept;
	}
	if (p)
		ep__st_leave(p, c, ep__rec_settle(h, a)); /* (a view: PLAIN) */
out:
	ep__unlock(&h->lock);
	return rc;
}

/* Write the window's changed bytes into the live code (see the top). */
static int write_changes(struct ep__heap *h, struct ep__alloc *a)
{
	const struct ep__patch *w = a->patch;
	const size_t W = EP__ARCH_PATCH_WORD;
	struct ep__region *r = ep__alloc_region(a);
	uintptr_t lo = w->win, hi = lo + w->win_len, first = 0, last = 0;
	size_t roff = ep__alloc_region_off(a) - a->key; /* + an address: its offset in r */
	int rc = ep__own_region(h, r);

	for (uintptr_t base = lo & ~(uintptr_t)(W - 1); !rc && base < hi; base += W) {
		unsigned char word[8];
		uintptr_t b = base < lo ? lo : base, e = base + W < hi ? base + W : hi;
		bool diff = false;

		/* (the word lies inside the allocation: its chunks or pages
		 * are whole, and only lock holders write them) */
		memcpy(word, (const void *)base, W);
		for (; b < e; b++) {
			if (w->win_rw[b - lo] != w->snap[b - lo]) {
				word[b - base] = w->win_rw[b - lo];
				diff = true;
			}
		}
		if (!diff)
			continue;
		EP_YIELD("patch word");
		rc = ep__region_write(h, r, roff + base, word, W);
		if (!first)
			first = base;
		last = base + W;
	}
	if (first)
		ep__code_changed((void *)first, last - first);
	return rc;
}

enum window_end_how {
	WINDOW_COMMIT, /* the changes written into the code */
	WINDOW_ABORT,
};

/* Commit or abort the window opened at exec. */
static int window_end(struct ep__heap *h, void *exec, enum window_end_how how)
{
	struct ep__alloc view;
	int rc = 0;

	ep__lock(&h->lock);
	struct ep__alloc *a = ep__alloc_containing(h, (uintptr_t)exec, &view);

	if (!a || a->norec || !a->patch || a->patch->win != (uintptr_t)exec) {
		rc = -EINVAL; /* no window open there (a free closed it) */
		goto out;
	}
	struct ep__pack *p = a->pack;
	size_t c = a->chunk;

	if (p && (rc = ep__st_enter(p, c)))
		goto out;
	if (how == WINDOW_COMMIT)
		rc = write_changes(h, a);
	if (!rc) {
		/* (an error leaves the window open: committing again rewrites
		 * the same words, or abort drops it) */
		window_close(a);
		(void)ep__info_update(h, a); /* (claimed, or dropped: cannot fail) */
	}
	if (p)
		ep__st_leave(p, c, ep__rec_settle(h, a));
out:
	ep__unlock(&h->lock);
	return rc;
}

int ep__patch_commit(struct ep__heap *h, void *exec)
{
	return window_end(h, exec, WINDOW_COMMIT);
}

int ep__patch_abort(struct ep__heap *h, void *exec)
{
	return window_end(h, exec, WINDOW_ABORT);
}
