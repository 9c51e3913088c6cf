/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * info.c - ep_lookup(): from an address to the live allocation holding it.
 *
 * For an executable address nothing here takes a lock or allocates, so a
 * crash handler may call it: the route (route.h) names the heap and the
 * pack, the pack's state bytes (alloc-state.h) the allocation's first chunk
 * and, with the maps read as a sequence lock's reader, its extent; the
 * names table (diag-symtab.c) its name; and the entries below what no
 * state byte keeps: a large allocation's extent, a patch window or kept
 * staging, and exec for those.
 *
 * The entries: slots in segments that are allocated on demand and never
 * freed, each a sequence lock (odd while its one writer, which holds the
 * allocation's heap lock, changes it).  A reader copies a slot and keeps
 * the copy if the sequence was even and the same before and after; a slot
 * that stays odd (its writer interrupted by the very handler that reads) is
 * passed over after a bounded number of tries.  Free slots are kept on a
 * stack under a mutex that the fork handlers take too (fork.c): a pool's
 * destroy drops its records after its heaps left registry.c's list, so a
 * heap lock alone would not keep it free at fork().
 *
 * A staging buffer's address (before ep_finalize()) is looked up under the
 * heap locks, record by record: staging buffers change on every ep_alloc()
 * and ep_finalize(), which publish nothing for this rarer call.
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alloc-state.h"
#include "diag-symtab.h"
#include "diag.h"
#include "info.h"
#include "lock.h"
#include "pack.h"
#include "patch.h"
#include "registry.h"
#include "route.h"

#define SEG0 64
#define NSEG 24

struct info_slot {
	unsigned long seq; /* odd while the writer changes the slot */
	struct ep__info_entry e; /* e.hi == 0: empty (every field an atomic word) */
};

static struct info_slot *_Atomic g_seg[NSEG]; /* each set once */
static _Atomic size_t g_high;          /* slots [0, g_high) may be in use */
pthread_mutex_t ep__info_lock = PTHREAD_MUTEX_INITIALIZER; /* g_free, g_high's growth */
static size_t *g_free, g_nfree, g_capfree;

/*
 * Where a reader looks first: the slot of the entry last written for a
 * key, + 1 (0: none), in one table for allocations' first bytes and one
 * for patch buffers.  A hint is a guess that the reader checks against the
 * slot it names (another key may have taken its place since, or the entry
 * changed); a miss falls back to the scan of every slot.
 */
#define HINTS ((size_t)1 << 16)
static uint32_t *g_hints; /* atomic; 2 * HINTS, set once (ep__info_lock) */

static size_t hint_of(uintptr_t key)
{
	return (size_t)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> 48);
}

static struct info_slot *slot_at(size_t i)
{
	size_t q = i / SEG0 + 1;
	unsigned k = (unsigned)(63 - __builtin_clzl(q));
	struct info_slot *seg = ep__load_acquire(&g_seg[k]);

	return seg ? &seg[i - (size_t)SEG0 * (((size_t)1 << k) - 1)] : NULL;
}

int ep__info_claim(struct ep__alloc *a)
{
	if (a->info)
		return 0;
	int rc = 0;

	ep__mutex_lock(&ep__info_lock);
	if (g_nfree) {
		a->info = g_free[--g_nfree] + 1;
		goto out;
	}
	if (g_nfree == 0 && g_capfree == 0) {
		uint32_t *hints = calloc(2 * HINTS, sizeof(*hints));

		g_free = malloc(64 * sizeof(*g_free));
		if (!g_free || !hints) {
			free(g_free);
			free(hints);
			g_free = NULL;
			rc = -ENOMEM;
			goto out;
		}
		g_capfree = 64;
		ep__store_release(&g_hints, hints);
	}
	size_t i = ep__load_relaxed(&g_high), q = i / SEG0 + 1;
	unsigned k = (unsigned)(63 - __builtin_clzl(q));

	if (k >= NSEG) {
		rc = -ENOMEM;
		goto out;
	}
	if (!ep__load_relaxed(&g_seg[k])) {
		struct info_slot *seg = calloc((size_t)SEG0 << k, sizeof(*seg));

		if (!seg) {
			rc = -ENOMEM;
			goto out;
		}
		ep__store_release(&g_seg[k], seg);
	}
	/* every slot claimed may be given back: room on the stack for it now,
	 * so that a drop never fails */
	if (i + 1 > g_capfree) {
		size_t *nf = realloc(g_free, g_capfree * 2 * sizeof(*nf));

		if (!nf) {
			rc = -ENOMEM;
			goto out;
		}
		g_free = nf;
		g_capfree *= 2;
	}
	EP_YIELD("info high");
	ep__store_release(&g_high, i + 1);
	a->info = i + 1;
out:
	ep__mutex_unlock(&ep__info_lock);
	return rc;
}

static void slot_write(struct info_slot *s, const struct ep__info_entry *e)
{
	static const struct ep__info_entry none;
	unsigned long q = ep__load_relaxed(&s->seq);

	if (!e)
		e = &none;
	EP_YIELD("info write");
	ep__store_relaxed(&s->seq, q + 1);
	ep__fence_release();
	ep__store_relaxed(&s->e.lo, e->lo);
	ep__store_relaxed(&s->e.exec, e->exec);
	ep__store_relaxed(&s->e.plo, e->plo);
	ep__store_relaxed(&s->e.prw, e->prw);
	ep__store_relaxed(&s->e.plen, e->plen);
	ep__store_relaxed(&s->e.name, e->name);
	ep__store_relaxed(&s->e.flags, e->flags);
	ep__store_relaxed(&s->e.pool, e->pool);
	ep__store_relaxed(&s->e.hi, e->hi);
	ep__store_release(&s->seq, q + 2);
}

int ep__info_update(struct ep__heap *h, struct ep__alloc *a)
{
	const struct ep__patch *w = a->patch;

	/* (a pack allocation staged, or finalized with no record: its state
	 * byte says all there is) */
	if (a->pack && !w && (a->staging || a->norec)) {
		ep__info_drop(a);
		return 0;
	}
	int rc = ep__info_claim(a);

	if (rc)
		return rc;
	struct ep__info_entry e = {
		.lo = a->key,
		.hi = a->key + a->reserved,
		.exec = (uintptr_t)a->exec,
		.flags = (a->pack ? 0 : EP__INFO_LARGE) | (a->staging ? 0 : EP__INFO_FINALIZED),
		.pool = h->root,
		.name = ep__diag_name_slot(a->diag) + 1, /* (SIZE_MAX + 1: 0) */
	};

	if (w && w->kept) {
		/* the whole kept copy: it maps exec at one fixed offset */
		e.plo = (uintptr_t)a->exec;
		e.prw = (uintptr_t)w->kept + a->offset;
		e.plen = e.hi - e.plo;
	} else if (w && w->win) {
		e.plo = w->win;
		e.prw = (uintptr_t)w->win_rw;
		e.plen = w->win_len;
	}
	slot_write(slot_at(a->info - 1), &e);
	ep__store_relaxed(&g_hints[hint_of(e.lo)], (uint32_t)a->info);
	if (e.plen)
		ep__store_relaxed(&g_hints[HINTS + hint_of(e.prw)], (uint32_t)a->info);
	return 0;
}

void ep__info_drop(struct ep__alloc *a)
{
	if (!a->info)
		return;
	slot_write(slot_at(a->info - 1), NULL);
	ep__mutex_lock(&ep__info_lock);
	g_free[g_nfree++] = a->info - 1; /* (room was made at the claim) */
	ep__mutex_unlock(&ep__info_lock);
	a->info = 0;
}

void ep__info_hide(void)
{
	size_t high = ep__load_acquire(&g_high);

	for (size_t i = 0; i < high; i++) {
		struct info_slot *s = slot_at(i);

		if (s)
			ep__diag_hide_word(&s->e, sizeof(s->e));
	}
}

/* A consistent copy of slot s into *e: true, or false when it stayed odd. */
static bool slot_read(const struct info_slot *s, struct ep__info_entry *e)
{
	for (int tries = 0; tries < 1000; tries++) {
		unsigned long q = ep__load_acquire(&s->seq);

		if (q & 1)
			continue;
		e->lo = ep__load_relaxed(&s->e.lo);
		e->hi = ep__load_relaxed(&s->e.hi);
		e->exec = ep__load_relaxed(&s->e.exec);
		e->plo = ep__load_relaxed(&s->e.plo);
		e->prw = ep__load_relaxed(&s->e.prw);
		e->plen = ep__load_relaxed(&s->e.plen);
		e->name = ep__load_relaxed(&s->e.name);
		e->flags = ep__load_relaxed(&s->e.flags);
		e->pool = ep__load_relaxed(&s->e.pool);
		ep__fence_acquire();
		if (ep__load_relaxed(&s->seq) == q)
			return true;
	}
	return false;
}

/* Which range of an entry entry_find() matches an address against. */
enum find_by {
	BY_EXEC, /* the code */
	BY_RW,   /* its patch window's writable buffer */
};

/* The entry whose exec range (BY_RW: patch buffer) holds addr; key: the
 * allocation's first byte (BY_RW: the buffer's), for the hint, or 0. */
static bool entry_find(uintptr_t addr, enum find_by by, uintptr_t key, struct ep__info_entry *e)
{
	const bool by_rw = by == BY_RW;
	size_t high = ep__load_acquire(&g_high);
	const uint32_t *hints = ep__load_acquire(&g_hints);

	EP_YIELD("info find");
	if (key && hints) {
		size_t i = ep__load_relaxed(&hints[(by_rw ? HINTS : 0) + hint_of(key)]);
		const struct info_slot *s = i && i <= high ? slot_at(i - 1) : NULL;

		if (s && slot_read(s, e) && e->hi &&
		    (by_rw ? e->plen && addr - e->prw < e->plen : e->lo == key))
			return true;
	}
	for (size_t i = 0; i < high; i++) {
		const struct info_slot *s = slot_at(i);

		if (!s || !slot_read(s, e) || !e->hi)
			continue;
		if (by_rw ? e->plen && addr - e->prw < e->plen : addr >= e->lo && addr < e->hi)
			return true;
	}
	return false;
}

/* The end (chunk) of the allocation at chunk pos, from maps the owner may
 * be changing: a sequence lock's reader that gives up after a while (a
 * handler may have interrupted the owner), keeping its last scan. */
static size_t end_unlocked(const struct ep__pack *p, size_t pos, size_t nchunks)
{
	size_t e = nchunks;

	for (int tries = 0; tries < 1000; tries++) {
		unsigned s = ep__pack_read_begin(p);

		e = ep__pack_end_racy(p, pos, nchunks);
		if (ep__pack_read_ok(p, s))
			break;
	}
	return e;
}

static void copy_name(struct ep_info *out, const char *name)
{
	size_t n = 0;

	while (name[n] && n < EP_NAME_MAX) {
		out->name[n] = name[n];
		n++;
	}
	out->name[n] = 0;
	out->flags |= EP_INFO_NAMED;
}

/* The executable address addr of pool memory: no locks. */
static int lookup_exec(uintptr_t addr, struct ep_info *out)
{
	void *v = ep__route_get(addr);

	if (!v)
		return -ENOENT;
	struct ep__pack *p;
	struct ep__heap *h = ep__route_heap(v, &p);
	struct ep__info_entry e;
	bool have = false;
	uintptr_t lo, hi;
	char name[EP_NAME_MAX + 1];
	uintptr_t nlo;

	out->pool = h->root;
	if (!p) {
		have = entry_find(addr, BY_EXEC, 0, &e);
		if (!have || !(e.flags & EP__INFO_LARGE))
			return -ENOENT;
		lo = e.lo;
		hi = e.hi;
		out->flags |= EP_INFO_LARGE;
	} else {
		uintptr_t base = (uintptr_t)ep__load_acquire(&p->r.exec);
		size_t nch = ep__load_acquire(&p->nchunks);

		/* (the pack's chunk size, for ever: see types.h) */
		if (!base || addr < base || (addr - base) >> p->shift >= nch)
			return -ENOENT;
		size_t c = (addr - base) >> p->shift, s = c;
		unsigned char b;

		/* the allocation's first chunk: the nearest state byte before
		 * that is not NONE (a live byte is on a first chunk only) */
		EP_YIELD("lookup state");
		while (!((b = ep__st_byte(p, s)) & EP__ST_MASK)) {
			if (s == 0)
				return -ENOENT;
			s--;
		}
		unsigned st = b & EP__ST_MASK;

		if (st == EP__ST_FREEING)
			return -ENOENT;
		size_t n = ep__st_len(b) ? ep__st_len(b) : end_unlocked(p, s, nch) - s;

		if (c >= s + n)
			return -ENOENT; /* a free chunk after it */
		EP_YIELD("lookup check");
		/* the same allocation still (or one just like it) */
		if (ep__st_byte(p, s) != b ||
		    (uintptr_t)ep__load_acquire(&p->r.exec) != base)
			return -ENOENT;
		lo = base + (s << p->shift);
		hi = lo + (n << p->shift);
		if (st != EP__ST_REC) {
			/* no record: finalized, unnamed, no window, exec at lo */
			out->flags |= EP_INFO_FINALIZED;
			out->exec = (void *)lo;
			out->size = hi - lo;
			return 0;
		}
		have = entry_find(addr, BY_EXEC, base + (s << p->shift), &e);
		if (have && (e.lo != lo || e.hi > hi))
			have = false; /* an older allocation's entry */
	}
	out->exec = (void *)lo;
	if (have) {
		out->exec = (void *)e.exec;
		if (e.flags & EP__INFO_FINALIZED)
			out->flags |= EP_INFO_FINALIZED;
		if (e.plen) {
			out->patch_exec = (void *)e.plo;
			out->patch_rw = (void *)e.prw;
			out->patch_len = e.plen;
		}
	}
	/* the name, and with it exec where the record alone knows it (an
	 * offset of EP_F_RANDOMIZE, within the first chunk, of a staged one) */
	bool named = false;

	if (have && e.name) {
		/* (the entry names its slot: no scan of the table) */
		named = ep__symtab_read(e.name - 1, e.exec, name);
		nlo = e.exec;
	}
	if (!named && (!have || e.name))
		named = ep__symtab_find(have ? e.exec : addr, &nlo, name);
	size_t first = p ? (size_t)p->cmask + 1 : EP_CHUNK_SIZE; /* (a pack's chunk) */

	for (uintptr_t x = lo; !named && !have && x < lo + first && x < hi; x += 16)
		named = x != addr && ep__symtab_find(x, &nlo, name);
	if (named && nlo >= lo && nlo < hi) {
		copy_name(out, name);
		out->exec = (void *)nlo;
	}
	if (addr < (uintptr_t)out->exec)
		return -ENOENT; /* in the slack before a randomized exec */
	out->size = hi - (uintptr_t)out->exec;
	return 0;
}

struct stage_find {
	uintptr_t addr;
	struct ep_info *out;
	int found;
};

/* In h's records, under its lock: the staging buffer holding f->addr. */
static void stage_in_heap(struct ep__heap *h, void *arg)
{
	struct stage_find *f = arg;

	if (f->found)
		return;
	ep__lock(&h->lock);
	for (size_t i = 0; i <= h->hash_mask && !f->found; i++) {
		for (const struct ep__alloc *a = h->hash[i]; a; a = a->hnext) {
			if (!a->staging || f->addr - (uintptr_t)a->staging >= a->reserved)
				continue;
			struct ep_info *out = f->out;

			out->pool = h->root;
			out->exec = a->exec;
			out->size = a->key + a->reserved - (uintptr_t)a->exec;
			out->rw = a->staging + a->offset;
			out->flags = a->pack ? 0 : EP_INFO_LARGE;
			f->found = 1;
			break;
		}
	}
	ep__unlock(&h->lock);
}

EP_API int ep_lookup(const void *addr, struct ep_info *out)
{
	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));

	uintptr_t x = (uintptr_t)addr;
	int rc = lookup_exec(x, out);
	struct ep__info_entry e;

	if (rc != -ENOENT || !x)
		return rc;
	memset(out, 0, sizeof(*out));
	/* a patch window or kept staging: the allocation of its exec twin */
	if (entry_find(x, BY_RW, x, &e)) {
		rc = lookup_exec(e.plo + (x - e.prw), out);
		if (rc != -ENOENT)
			return rc;
		memset(out, 0, sizeof(*out));
	}
	struct stage_find f = { x, out, 0 };

	ep__each_heap(stage_in_heap, &f);
	if (!f.found)
		return -ENOENT;
	uintptr_t nlo;
	char name[EP_NAME_MAX + 1];

	if (ep__symtab_find((uintptr_t)out->exec, &nlo, name) && nlo == (uintptr_t)out->exec)
		copy_name(out, name);
	return 0;
}

/*
 * A child made without fork()'s handlers, every lock held (fork.c): a slot
 * whose writer vanished between its two stores of seq would be passed over
 * for ever, and what it holds is half old, half new.  It is emptied, and
 * its count made even; its allocation's next update writes it again.
 */
void ep__info_fork_reset(void)
{
	size_t high = ep__load_relaxed(&g_high);

	for (size_t i = 0; i < high; i++) {
		struct info_slot *s = slot_at(i);
		unsigned long q = s ? ep__load_relaxed(&s->seq) : 0;

		if (!(q & 1))
			continue;
		ep__store_relaxed(&s->e.hi, 0);
		ep__store_relaxed(&s->e.lo, 0);
		ep__store_relaxed(&s->e.exec, 0);
		ep__store_relaxed(&s->e.plo, 0);
		ep__store_relaxed(&s->e.prw, 0);
		ep__store_relaxed(&s->e.plen, 0);
		ep__store_relaxed(&s->e.name, 0);
		ep__store_relaxed(&s->e.flags, 0);
		ep__store_relaxed(&s->e.pool, NULL);
		ep__store_release(&s->seq, q + 1);
	}
}

#ifdef EP_TEST_HOOKS
/* tests/check_fork_torn.c: a slot's count, to leave it odd at a fork. */
unsigned long *ep__info_seq_for_test(size_t slot)
{
	struct info_slot *s = slot < ep__load_relaxed(&g_high) ? slot_at(slot) : NULL;

	return s ? &s->seq : NULL;
}
#endif
