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
 *
 * A slot's name lies in a block of its own, sized to it (16 to 256 bytes),
 * not in the slot: a slot with room for any name (EP_NAME_MAX) was 288
 * bytes for names that are mostly a few dozen, and the scan read them all.
 * Blocks are never freed, only passed from slot to slot (a slot that needs
 * a bigger one gives its old one back to its size's free list), so a
 * reader that read a slot's block pointer, and checked the count after it,
 * may read the block even while a writer reuses it: what it copies is kept
 * only if the slot's count did not move, and a slot's count moves before
 * its block goes anywhere else.
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
#define NCLASS 5 /* blocks of 2, 4, ... NAME_WORDS words */

struct sym_slot {
	_Atomic unsigned long seq; /* odd while a writer is changing the slot */
	_Atomic uintptr_t lo, hi;  /* hi == 0: empty */
	_Atomic unsigned inner;    /* a symbol inside a named allocation */
	_Atomic unsigned words;    /* the name block's size (0: none yet) */
	_Atomic uint64_t *_Atomic name; /* NUL-terminated, zero-padded to a word */
};

/* Free name blocks by size (2 << class words), linked through their first
 * word.  Writers only, under diag's lock. */
static _Atomic uint64_t *g_blocks[NCLASS];

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

/* The size class of a block for a name of len bytes. */
static unsigned class_of(size_t len)
{
	size_t words = (len + 1 + 7) / 8;
	unsigned c = 0;

	while (c + 1 < NCLASS && ((size_t)2 << c) < words)
		c++;
	return c;
}

/* A block of class c: a free one, or a new one (NULL without memory). */
static _Atomic uint64_t *block_get(unsigned c)
{
	_Atomic uint64_t *b = g_blocks[c];

	if (b) {
		g_blocks[c] = (_Atomic uint64_t *)(uintptr_t)ep__load_relaxed(&b[0]);
		return b;
	}
	b = calloc((size_t)2 << c, sizeof(*b));
	if (b) /* (read without locks, as the slots) */
		VALGRIND_HG_DISABLE_CHECKING(b, ((size_t)2 << c) * sizeof(*b));
	return b;
}

static void block_put(_Atomic uint64_t *b, unsigned words)
{
	unsigned c = class_of((size_t)words * 8 - 1);

	ep__store_relaxed(&b[0], (uint64_t)(uintptr_t)g_blocks[c]);
	g_blocks[c] = b;
}

/* Make slot i's block hold a name of len bytes: 0, or -ENOMEM (the slot
 * as it was).  diag's lock held. */
static int slot_fit(size_t i, size_t len)
{
	struct sym_slot *s = slot_at(i);
	unsigned have = ep__load_relaxed(&s->words);
	unsigned c = class_of(len);

	if (len > EP_NAME_MAX)
		len = EP_NAME_MAX;
	if ((size_t)have * 8 >= len + 1)
		return 0;
	_Atomic uint64_t *b = block_get(c), *old = ep__load_relaxed(&s->name);

	if (!b)
		return -ENOMEM;
	/* the name it holds goes with it (a rename publishes the new one after) */
	for (unsigned j = 0; j < have; j++)
		ep__store_relaxed(&b[j], ep__load_relaxed(&old[j]));
	unsigned long q = ep__load_relaxed(&s->seq);

	ep__store_relaxed(&s->seq, q + 1);
	ep__fence_release();
	ep__store_relaxed(&s->name, b);
	ep__store_relaxed(&s->words, 2u << c);
	ep__store_release(&s->seq, q + 2);
	if (old)
		block_put(old, have); /* (after the count moved: above) */
	return 0;
}

int ep__symtab_fit(size_t slot, size_t len)
{
	return slot_fit(slot, len);
}

/* A free slot index with room for a name of len bytes, or SIZE_MAX
 * without memory.  diag's lock held. */
size_t ep__symtab_get(size_t len)
{
	if (g_nfree) {
		if (slot_fit(g_free_slots[g_nfree - 1], len))
			return SIZE_MAX;
		return g_free_slots[--g_nfree];
	}

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
	/* (a slot at g_high or above is read by no one yet) */
	if (slot_fit(i, len))
		return SIZE_MAX;
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
	_Atomic uint64_t *b = ep__load_relaxed(&s->name);
	size_t room = (size_t)ep__load_relaxed(&s->words) * 8;
	size_t n = name && b ? strlen(name) : 0, nw;
	uint64_t w[NAME_WORDS];

	if (n + 1 > room) /* (never: ep__symtab_get() and _fit() made room) */
		n = room ? room - 1 : 0;
	nw = name && b ? (n + 8) / 8 : 0;
	if (nw) {
		w[nw - 1] = 0;
		memcpy(w, name, n);
	}
	ep__store_relaxed(&s->seq, q + 1);
	ep__fence_release();
	ep__store_relaxed(&s->lo, name ? lo : 0);
	ep__store_relaxed(&s->hi, name ? hi : 0);
	ep__store_relaxed(&s->inner, inner);
	for (size_t j = 0; j < nw; j++)
		ep__store_relaxed(&b[j], w[j]);
	ep__store_release(&s->seq, q + 2);
}

/* Whether word w has a zero byte (the name's end). */
static bool has_zero(uint64_t w)
{
	return ((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull) != 0;
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

		if (in) {
			const _Atomic uint64_t *b = ep__load_relaxed(&s->name);
			size_t words = ep__load_relaxed(&s->words), j = 0;

			/* the block only once the count says b and words
			 * were the slot's together (b is then never freed) */
			ep__fence_acquire();
			if (ep__load_relaxed(&s->seq) != q1)
				continue;
			if (words > NAME_WORDS)
				words = NAME_WORDS;
			while (b && j < words) {
				uint64_t w = ep__load_relaxed(&b[j]);

				name[j++] = w;
				if (has_zero(w))
					break;
			}
			if (j < NAME_WORDS)
				name[j] = 0; /* (name_copy() stops at the last byte) */
		}
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
