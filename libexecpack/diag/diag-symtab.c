/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-symtab.c - the process-wide table of named ranges that
 * ep_symbolize() reads without locks or allocation (usable from a signal
 * handler).
 *
 * Slots live in segments that are allocated on demand and never freed
 * (segment k holds SEG0 << k slots), so a reader can walk them at any
 * time.  Each slot is a sequence lock: a writer (always holding diag's
 * lock, diag.c) makes the sequence odd, stores the range and name with
 * relaxed atomic stores, and makes it even again; a reader copies the slot
 * and keeps the copy only if it saw the same even sequence before and
 * after.  A reader never waits for a writer for long: a slot that stays
 * odd (its writer was interrupted by the very signal handler that is
 * reading) is skipped after a few tries.
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diag-symtab.h"
#include "diag-valgrind.h"
#include "diag.h"
#include "execpack.h"

#define NAME_WORDS ((EP_NAME_MAX + 1) / 8)
#define SEG0 64
#define NSEG 26

struct sym_slot {
	_Atomic unsigned long seq; /* odd while a writer is changing the slot */
	_Atomic uintptr_t lo, hi;  /* hi == 0: empty */
	_Atomic unsigned inner;    /* a symbol inside a named allocation */
	_Atomic uint64_t name[NAME_WORDS];
};

static struct sym_slot *_Atomic g_seg[NSEG]; /* set once each */
static _Atomic size_t g_high;        /* slots [0, g_high) may be in use */
/* Set once a symbol (ep_set_symbols()) was ever published: until then the
 * first range holding an address is the only one. */
static _Atomic int g_inner;

/* Writers only, under diag's lock. */
static size_t *g_free_slots, g_nfree, g_capfree;

static size_t seg_start(unsigned k)
{
	return (size_t)SEG0 * (((size_t)1 << k) - 1);
}

static struct sym_slot *slot_at(size_t i)
{
	size_t q = i / SEG0 + 1;
	unsigned k = (unsigned)(63 - __builtin_clzl(q));
	struct sym_slot *seg = ep__load_acquire(&g_seg[k]);

	return seg ? &seg[i - seg_start(k)] : NULL;
}

/* A free slot index, or SIZE_MAX without memory.  diag's lock held. */
size_t ep__symtab_get(void)
{
	if (g_nfree)
		return g_free_slots[--g_nfree];

	size_t i = ep__load_relaxed(&g_high);
	size_t q = i / SEG0 + 1;
	unsigned k = (unsigned)(63 - __builtin_clzl(q));

	if (k >= NSEG)
		return SIZE_MAX;
	if (i == 0) {
		/* before the first store: ep_symbolize() reads these without
		 * diag's lock, like the slots, and helgrind does not see the
		 * acquire/release pairing of these atomics */
		VALGRIND_HG_DISABLE_CHECKING(&g_high, sizeof(g_high));
		VALGRIND_HG_DISABLE_CHECKING(g_seg, sizeof(g_seg));
		VALGRIND_HG_DISABLE_CHECKING(&g_inner, sizeof(g_inner));
	}
	if (!ep__load_relaxed(&g_seg[k])) {
		size_t n = (size_t)SEG0 << k;
		struct sym_slot *seg = calloc(n, sizeof(*seg));

		if (!seg)
			return SIZE_MAX;
		/* lock-free by design (sequence locks): not for helgrind to judge */
		VALGRIND_HG_DISABLE_CHECKING(seg, n * sizeof(*seg));
		ep__store_release(&g_seg[k], seg);
	}
	ep__store_release(&g_high, i + 1);
	return i;
}

static int slot_put(size_t i)
{
	if (g_nfree == g_capfree) {
		size_t nc = g_capfree ? g_capfree * 2 : 64;
		size_t *nf = realloc(g_free_slots, nc * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		g_free_slots = nf;
		g_capfree = nc;
	}
	g_free_slots[g_nfree++] = i;
	return 0;
}

/* Publish [lo, hi) with name (NULL: empty the slot).  diag's lock held. */
static void slot_write(struct sym_slot *s, uintptr_t lo, uintptr_t hi, const char *name,
		       unsigned inner)
{
	unsigned long q = ep__load_relaxed(&s->seq);
	uint64_t w[NAME_WORDS];

	memset(w, 0, sizeof(w));
	if (name)
		memcpy(w, name, strlen(name));
	ep__store_relaxed(&s->seq, q + 1);
	ep__fence_release();
	ep__store_relaxed(&s->lo, name ? lo : 0);
	ep__store_relaxed(&s->hi, name ? hi : 0);
	ep__store_relaxed(&s->inner, inner);
	for (size_t j = 0; j < NAME_WORDS; j++)
		ep__store_relaxed(&s->name[j], w[j]);
	ep__store_release(&s->seq, q + 2);
}

/*
 * Look addr up in slot s: 1 and a copy of the name when it is there, 0 when
 * not (or when its writer does not finish in time).  No locks, no calls.
 */
static int slot_read(const struct sym_slot *s, uintptr_t addr, uintptr_t *lo_out,
		     uint64_t name[NAME_WORDS], unsigned *inner)
{
	for (int tries = 0; tries < 1000; tries++) {
		unsigned long q1 = ep__load_acquire(&s->seq);

		if (q1 & 1)
			continue;
		uintptr_t lo = ep__load_relaxed(&s->lo);
		uintptr_t hi = ep__load_relaxed(&s->hi);
		bool in = addr >= lo && addr < hi;
		unsigned i = ep__load_relaxed(&s->inner);

		if (in)
			for (size_t j = 0; j < NAME_WORDS; j++)
				name[j] = ep__load_relaxed(&s->name[j]);
		ep__fence_acquire();
		if (ep__load_relaxed(&s->seq) != q1)
			continue;
		*lo_out = lo;
		*inner = i;
		return in;
	}
	return 0;
}

static void name_copy(char *out, const uint64_t name[NAME_WORDS])
{
	const char *n = (const char *)name;
	size_t nl = 0;

	while (nl < NAME_WORDS * 8 - 1 && n[nl])
		nl++;
	memcpy(out, n, nl);
	out[nl] = 0;
}

/* The named range holding addr: 2 for a symbol inside an allocation, 1
 * for an allocation's own name, with its start and its name (NUL
 * terminated in EP_NAME_MAX + 1 bytes), 0 if none.  A symbol wins over the
 * name of the allocation around it.  No locks, no calls: ep_symbolize()
 * and ep_lookup() (info.c). */
int ep__symtab_find(uintptr_t addr, uintptr_t *lo, char *name_out)
{
	uint64_t name[NAME_WORDS];
	size_t high = ep__load_acquire(&g_high);
	bool inner_any = ep__load_acquire(&g_inner);
	int found = 0;

	for (size_t i = 0; i < high; i++) {
		const struct sym_slot *s = slot_at(i);
		uintptr_t l;
		unsigned inner;

		if (!s || !slot_read(s, addr, &l, name, &inner))
			continue;
		if (inner || !found) {
			*lo = l;
			name_copy(name_out, name);
			found = inner ? 2 : 1;
		}
		/* (the allocation's name may hide a symbol further on) */
		if (inner || !inner_any)
			return found;
	}
	return found;
}

int ep__symtab_read(size_t slot, uintptr_t addr, char *name_out)
{
	uint64_t name[NAME_WORDS];
	uintptr_t lo;
	unsigned inner;
	const struct sym_slot *s = slot < ep__load_acquire(&g_high)
					   ? slot_at(slot) : NULL;

	if (!s || !slot_read(s, addr, &lo, name, &inner) || lo != addr)
		return 0;
	name_copy(name_out, name);
	return 1;
}

EP_API int ep_symbolize(const void *addr, char *buf, size_t len, size_t *offset)
{
	uintptr_t a = (uintptr_t)addr, lo = 0;
	char n[EP_NAME_MAX + 1];

	if (ep__symtab_find(a, &lo, n)) {
		size_t nl = 0;

		while (n[nl])
			nl++;
		if (offset)
			*offset = (size_t)(a - lo);
		if (!buf || len == 0)
			return -ERANGE;
		if (nl >= len) {
			memcpy(buf, n, len - 1);
			buf[len - 1] = 0;
			return -ERANGE;
		}
		memcpy(buf, n, nl);
		buf[nl] = 0;
		return 0;
	}
	return -ENOENT;
}

void ep__symtab_put(size_t slot)
{
	slot_write(slot_at(slot), 0, 0, NULL, 0);
	if (slot_put(slot) != 0) {
		/* no memory for the free list: the empty slot is lost, harmless */
	}
}

void ep__symtab_set(size_t slot, uintptr_t lo, uintptr_t hi, const char *name)
{
	slot_write(slot_at(slot), lo, hi, name, 0);
}

void ep__symtab_set_inner(size_t slot, uintptr_t lo, uintptr_t hi, const char *name)
{
	if (!ep__load_relaxed(&g_inner))
		ep__store_release(&g_inner, 1);
	slot_write(slot_at(slot), lo, hi, name, 1);
}

void ep__symtab_hide(void)
{
	size_t high = ep__load_relaxed(&g_high);

	for (size_t i = 0; i < high; i++) {
		struct sym_slot *s = slot_at(i);

		ep__diag_hide_word(&s->lo, 2 * sizeof(uintptr_t));
	}
}

/*
 * A child made without fork()'s handlers, diag's lock held (fork.c): a
 * slot whose writer vanished between its two stores of seq would be
 * skipped for ever, half old, half new.  It is emptied and its count made
 * even; its owner's next ep__symtab_set() or ep__symtab_put() writes it.
 */
void ep__symtab_fork_reset(void)
{
	size_t high = ep__load_relaxed(&g_high);

	for (size_t i = 0; i < high; i++) {
		struct sym_slot *s = slot_at(i);
		unsigned long q = s ? ep__load_relaxed(&s->seq) : 0;

		if (!(q & 1))
			continue;
		ep__store_relaxed(&s->hi, 0);
		ep__store_relaxed(&s->lo, 0);
		ep__store_relaxed(&s->inner, 0);
		for (size_t j = 0; j < NAME_WORDS; j++)
			ep__store_relaxed(&s->name[j], 0);
		ep__store_release(&s->seq, q + 1);
	}
}

#ifdef EP_TEST_HOOKS
/* tests/check_fork_torn.c: a slot's count, to leave it odd at a fork. */
_Atomic unsigned long *ep__symtab_seq_for_test(size_t slot)
{
	struct sym_slot *s = slot < ep__load_relaxed(&g_high) ? slot_at(slot) : NULL;

	return s ? &s->seq : NULL;
}
#endif
