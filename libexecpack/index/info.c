/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * info.c - ep_lookup() and ep_lookup_rw(): from an address to the live
 * allocation holding it.
 *
 * ep_lookup() takes executable addresses only and nothing there takes a
 * lock, allocates or waits for the thread it runs on, so a crash handler
 * or a profiler may call it in any thread state: the route (route.h) names
 * the heap and the pack, the used bit says whether the chunk is in an
 * allocation at all, the pack's state bytes (alloc-state.h) name the
 * allocation's first chunk and, with the maps read as a sequence lock's
 * reader, its extent; the names table (diag-symtab.c) its name; and the
 * entries below what no state byte keeps: a large allocation's extent, a
 * patch window or kept staging, and exec for those.  A read that raced a
 * change reads again; it never answers -ENOENT for live code.  The heaps
 * and packs it reads are freed only after it left (grace.h).
 *
 * The entries: slots in segments that are allocated on demand and never
 * freed, each a latch (below) whose one writer holds the allocation's heap
 * lock.  Free slots are kept on a stack under a mutex that the fork
 * handlers take too (fork.c): a pool's destroy drops its records after its
 * heaps left registry.c's list, so a heap lock alone would not keep it
 * free at fork().
 *
 * ep_lookup_rw() also finds buffers: a window's or kept staging's through
 * the entries, a staging buffer (before ep_finalize()) under the heap
 * locks, record by record: staging buffers change on every ep_alloc() and
 * ep_finalize(), which publish nothing for this rarer call.
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc-state.h"
#include "diag-symtab.h"
#include "diag.h"
#include "fork.h" /* (its mark only: no call) */
#include "grace.h"
#include "info.h"
#include "life.h"
#include "lock.h"
#include "pack-seq.h"
#include "pack.h"
#include "registry.h"
#include "route.h"

#define SEG0 64
#define NSEG 24

/*
 * A slot is a latch (two copies under one count, as the kernel's
 * seqcount_latch): the writer makes the count odd and writes copy 0, then
 * makes it even and writes copy 1; a reader reads the copy the count's
 * parity names and keeps it if the count did not move.  So a reader always
 * has a whole copy to read, old or new: one in a signal handler that
 * interrupted the writer, or in a child whose writer vanished at a fork,
 * reads the other copy and never waits.
 */
struct info_slot {
	unsigned long seq;
	struct ep__info_entry e[2]; /* e[].hi == 0: empty (every field an atomic word) */
	/* its place in the index below (writers only: the heap lock) */
	uintptr_t ikey; /* the key it is indexed under */
	size_t bucket;  /* + 1; 0: not in the index */
};

static struct info_slot *_Atomic g_seg[NSEG]; /* each set once */
static _Atomic size_t g_high;          /* slots [0, g_high) may be in use */
pthread_mutex_t ep__info_lock = PTHREAD_MUTEX_INITIALIZER; /* g_free, g_high's growth */
static size_t *g_free, g_nfree, g_capfree;

/*
 * Two tables of slot + 1 (0: none), set once, of HINTS words each.
 *
 * The first is an index of the entries by their first byte (lo): each
 * entry's slot is in one of the PROBE buckets from hint_of(lo), put there
 * with a compare-and-swap by its writer after the entry, taken out at its
 * drop.  A reader that looks at all PROBE buckets finds every indexed
 * entry, so a key found in none has no entry at all, unless some entry
 * found no free bucket (g_unindexed counts those): then the reader scans
 * every slot.  So an allocation with no entry (staged, unnamed) costs a
 * few loads, not a scan.
 *
 * The second holds hints for patch buffers (ep_lookup_rw()): the slot of
 * the entry last written for a buffer's first byte, a guess the reader
 * checks, a miss falling back to the scan.
 */
#define HINTS ((size_t)1 << 16)
#define PROBE 8
#define BUF_SHIFT 6 /* (a buffer's key: its first byte, 64-byte steps) */
static uint32_t *g_hints; /* atomic; 2 * HINTS, set once (ep__info_lock) */
static _Atomic unsigned long g_unindexed; /* live entries in no bucket */

/*
 * A key's first bucket: its offset in chunks (of 1 << shift bytes, the
 * pool's) within its 65,536 chunks of address space, turned by a hash of
 * which ones they are.  So allocations made one after the other, side by
 * side in a pack, have their entries side by side in the table and dirty a
 * page of it per thousand or so, not a page each (a hash of the whole key
 * spread 1,000 names over all 256 kB); no two allocations of one such span
 * share a first bucket.
 */
static size_t hint_of(uintptr_t key, unsigned shift)
{
	uint64_t turn = ((uint64_t)(key >> shift >> 16) * 0x9e3779b97f4a7c15ull) >> 48;

	return (size_t)(turn + (key >> shift)) & (HINTS - 1);
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

static void copy_write(struct ep__info_entry *to, const struct ep__info_entry *e)
{
	ep__store_relaxed(&to->lo, e->lo);
	ep__store_relaxed(&to->exec, e->exec);
	ep__store_relaxed(&to->plo, e->plo);
	ep__store_relaxed(&to->prw, e->prw);
	ep__store_relaxed(&to->plen, e->plen);
	ep__store_relaxed(&to->name, e->name);
	ep__store_relaxed(&to->flags, e->flags);
	ep__store_relaxed(&to->pool, e->pool);
	ep__store_relaxed(&to->hi, e->hi);
}

static void slot_write(struct info_slot *s, const struct ep__info_entry *e)
{
	static const struct ep__info_entry none;
	unsigned long q = ep__load_relaxed(&s->seq);

	if (!e)
		e = &none;
	EP_YIELD("info write");
	/* (q is even: every write leaves it so) readers to copy 1 */
	ep__store_relaxed(&s->seq, q + 1);
	ep__fence_release();
	EP_YIELD("info write 0");
	copy_write(&s->e[0], e);
	ep__store_release(&s->seq, q + 2); /* readers to copy 0, the new one */
	ep__fence_release();
	EP_YIELD("info write 1");
	copy_write(&s->e[1], e);
}

/* Slot s (its number + 1: v) out of the index. */
static void index_take(struct info_slot *s, uint32_t v)
{
	if (s->bucket) {
		uint32_t have = v;

		EP_YIELD("info index take");
		ep__cas_relaxed(&g_hints[s->bucket - 1], &have, 0);
		s->bucket = 0;
	} else if (s->ikey) {
		ep__sub_release(&g_unindexed, 1);
	}
	s->ikey = 0;
}

/* Slot s (v), just written with first byte key, into the index. */
static void index_put(struct info_slot *s, uint32_t v, uintptr_t key, unsigned shift)
{
	if (s->ikey == key)
		return; /* (there already, or counted in g_unindexed) */
	index_take(s, v);
	s->ikey = key;
	size_t h = hint_of(key, shift);

	for (size_t j = 0; j < PROBE; j++) {
		size_t b = (h + j) & (HINTS - 1);
		uint32_t zero = 0;

		EP_YIELD("info index put");
		if (ep__cas_acq_rel(&g_hints[b], &zero, v)) {
			s->bucket = b + 1;
			return;
		}
	}
	ep__add_release(&g_unindexed, 1); /* (readers scan while any is) */
}

int ep__info_update(struct ep__heap *h, struct ep__alloc *a)
{
	const struct ep__patch *w = a->patch;

	/* (a pack allocation staged and unnamed, or finalized with no record:
	 * its state byte says all there is; a named one has an entry, so that
	 * REC with none is unnamed and a lookup never searches the names) */
	if (a->pack && !w && ((a->staging && !a->diag) || a->norec)) {
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
		.flags = (a->pack ? 0 : EP__INFO_LARGE) | (a->staging ? 0 : EP__INFO_FINALIZED) |
			 (ep__diag_has_symbols(a->diag) ? EP__INFO_SYMBOLS : 0),
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
	struct info_slot *s = slot_at(a->info - 1);

	slot_write(s, &e);
	index_put(s, (uint32_t)a->info, e.lo, h->shift);
	if (e.plen)
		ep__store_relaxed(&g_hints[HINTS + hint_of(e.prw, BUF_SHIFT)], (uint32_t)a->info);
	return 0;
}

void ep__info_drop(struct ep__alloc *a)
{
	if (!a->info)
		return;
	struct info_slot *s = slot_at(a->info - 1);

	slot_write(s, NULL);
	index_take(s, (uint32_t)a->info);
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

		if (s) {
			ep__diag_hide_word(s->e, sizeof(s->e));
			ep__diag_hide_word(&s->ikey, sizeof(s->ikey)); /* (a key is an address) */
		}
	}
}

/*
 * Whether the writer that left a count odd will never end it while this
 * reader waits: it is this very thread (the reader is a signal handler
 * that interrupted it), or it is gone (a child that ran no fork handler
 * yet: fork.h's mark is not 1).  Any other writer is running, or will
 * run again, and ends its few stores.
 */
static bool writer_stuck(const void *writer)
{
	int *mark = ep__load_acquire(&ep__fork_mark);

	return writer == ep__self() || (mark && ep__load_acquire(mark) != 1);
}

/* A consistent copy of slot s into *e, old or new (never waits: the
 * latch above); a try that raced a write reads again. */
static bool slot_read(const struct info_slot *s, struct ep__info_entry *e)
{
	for (;;) {
		unsigned long q = ep__load_acquire(&s->seq);
		const struct ep__info_entry *c = &s->e[q & 1];

		e->lo = ep__load_relaxed(&c->lo);
		e->hi = ep__load_relaxed(&c->hi);
		e->exec = ep__load_relaxed(&c->exec);
		e->plo = ep__load_relaxed(&c->plo);
		e->prw = ep__load_relaxed(&c->prw);
		e->plen = ep__load_relaxed(&c->plen);
		e->name = ep__load_relaxed(&c->name);
		e->flags = ep__load_relaxed(&c->flags);
		e->pool = ep__load_relaxed(&c->pool);
		ep__fence_acquire();
		if (ep__load_relaxed(&s->seq) == q)
			return true;
	}
}

/* Which range of an entry entry_find() matches an address against. */
enum find_by {
	BY_EXEC, /* the code */
	BY_RW,   /* its patch window's writable buffer */
};

/* The entry whose exec range (BY_RW: patch buffer) holds addr; key: the
 * allocation's first byte (BY_RW: the buffer's), for the hint, or 0;
 * shift: its pool's chunks' (BY_RW: unused). */
static bool entry_find(uintptr_t addr, enum find_by by, uintptr_t key, unsigned shift,
		       struct ep__info_entry *e)
{
	const bool by_rw = by == BY_RW;
	size_t high = ep__load_acquire(&g_high);
	const uint32_t *hints = ep__load_acquire(&g_hints);

	EP_YIELD("info find");
	if (key && hints && !by_rw) {
		/* the index: every bucket the key may be in */
		size_t h = hint_of(key, shift);

		for (size_t j = 0; j < PROBE; j++) {
			size_t i = ep__load_acquire(&hints[(h + j) & (HINTS - 1)]);
			const struct info_slot *s = i && i <= high ? slot_at(i - 1) : NULL;

			if (s && slot_read(s, e) && e->hi && e->lo == key)
				return true;
		}
		if (!ep__load_acquire(&g_unindexed))
			return false;
	} else if (key && hints) {
		size_t i = ep__load_relaxed(&hints[HINTS + hint_of(key, BUF_SHIFT)]);
		const struct info_slot *s = i && i <= high ? slot_at(i - 1) : NULL;

		if (s && slot_read(s, e) && e->hi && e->plen && addr - e->prw < e->plen)
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
 * be changing: a sequence lock's reader that waits for the owner's few
 * stores (pack-seq.h), unless that owner is stuck (writer_stuck()): then
 * the maps as they are. */
static size_t end_unlocked(struct ep__pack *p, size_t pos, size_t nchunks)
{
	for (;;) {
		unsigned s = ep__pack_read_begin(p);
		size_t e = ep__pack_end_racy(p, pos, nchunks);

		if (ep__pack_read_ok(p, s))
			return e;
		if (!(s & 1))
			continue; /* moved: read again */
		if (writer_stuck(ep__load_relaxed(&p->seq_writer)))
			return e;
		ep__pack_read_wait(p, s);
	}
}

/* Whether chunk c of p is allocated, from a racing read of its word. */
static bool used_racy(const struct ep__pack *p, size_t c)
{
	return (ep__load_relaxed(&p->used[c / 64]) >> (c % 64)) & 1;
}

/* Eight state bytes read as one word (the state array is word aligned). */
typedef uint64_t __attribute__((may_alias)) st_word;
#define ST_MASK_WORD 0x0707070707070707ull /* each byte's state bits */

/* The nearest chunk at or before c whose state is not NONE, its byte in
 * *b; SIZE_MAX if none.  Whole words of NONE bytes are passed at once: a
 * long allocation is read at eight chunks a load. */
static size_t first_chunk(const struct ep__pack *p, size_t c, unsigned char *b)
{
	for (;;) {
		unsigned char x = ep__st_byte(p, c);

		if (x & EP__ST_MASK) {
			*b = x;
			return c;
		}
		if (c == 0)
			return SIZE_MAX;
		c--;
		while ((c & 7) == 7 &&
		       !(ep__load_acquire((const st_word *)(p->state + c - 7)) & ST_MASK_WORD)) {
			if (c < 8)
				return SIZE_MAX;
			c -= 8;
		}
	}
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

/* -EAGAIN: what lookup_once() read changed under it; it reads again. */
#define CHANGED (-EAGAIN)

/*
 * The executable address addr in pack p: [*lo, *hi) of the allocation
 * holding it and its first chunk's state byte (*b), read consistently:
 * 0 (*first: that chunk), -ENOENT, or CHANGED.  The byte of a live
 * allocation's first chunk is never NONE (alloc-state.h), so the nearest
 * byte that is not NONE at or before addr's chunk is its allocation's; a
 * byte, base or used bit that changed between the first read and the last
 * means another try.
 */
static int pack_extent(struct ep__pack *p, uintptr_t addr, uintptr_t *lo, uintptr_t *hi,
		       size_t *first, unsigned char *b)
{
	uintptr_t base = (uintptr_t)ep__load_acquire(&p->r.exec);
	size_t nch = ep__load_acquire(&p->nchunks);

	/* (the pack's chunk size, for ever: see types.h) */
	if (!base || addr < base || (addr - base) >> p->shift >= nch)
		return -ENOENT;
	size_t c = (addr - base) >> p->shift;

	/* a free chunk, or one given back by a free under way */
	if (!used_racy(p, c))
		return -ENOENT;
	EP_YIELD("lookup state");
	size_t s = first_chunk(p, c, b);

	if (s == SIZE_MAX)
		return -ENOENT; /* being born: not handed out yet */
	unsigned st = *b & EP__ST_MASK;

	if (st != EP__ST_REC && st != EP__ST_PLAIN && st != EP__ST_BUSY)
		return -ENOENT; /* a lock-free free owns it */
	size_t n = ep__st_len(*b) ? ep__st_len(*b) : end_unlocked(p, s, nch) - s;

	EP_YIELD("lookup check");
	if (ep__st_byte(p, s) != *b || (uintptr_t)ep__load_acquire(&p->r.exec) != base ||
	    !used_racy(p, c))
		return CHANGED;
	if (c >= s + n)
		return -ENOENT; /* taken by an allocation not born yet */
	*first = s;
	*lo = base + (s << p->shift);
	*hi = *lo + (n << p->shift);
	return 0;
}

/* One consistent look at the executable address addr: 0, -ENOENT, or
 * CHANGED (out partly filled: the caller clears it). */
static int lookup_once(uintptr_t addr, struct ep_info *out)
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
	unsigned char b = 0;

	out->pool = ep__load_relaxed(&h->root);
	if (!p) {
		have = entry_find(addr, BY_EXEC, 0, 0, &e);
		if (!have || !(e.flags & EP__INFO_LARGE))
			return -ENOENT;
		lo = e.lo;
		hi = e.hi;
		out->flags |= EP_INFO_LARGE;
	} else {
		size_t s;
		int rc = pack_extent(p, addr, &lo, &hi, &s, &b);

		if (rc)
			return rc;
		if ((b & EP__ST_MASK) != EP__ST_REC) {
			/* PLAIN, or BUSY (a call on a PLAIN one, or a record
			 * going: ep__st_settle()): finalized, unnamed, no
			 * window, exec at lo */
			out->flags |= EP_INFO_FINALIZED;
			out->exec = (void *)lo;
			out->size = hi - lo;
			return 0;
		}
		have = entry_find(addr, BY_EXEC, lo, p->shift, &e);
		if (have && (e.lo != lo || e.hi > hi))
			have = false; /* an older allocation's entry */
		/* REC with no entry is staged (a record that goes passes
		 * through BUSY first): unless the byte moved meanwhile */
		EP_YIELD("lookup entry");
		if (ep__st_byte(p, s) != b)
			return CHANGED;
	}
	out->exec = (void *)lo;
	if (have) {
		out->pool = e.pool;
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
	if (!named && have && e.name) /* (its slot reused meanwhile) */
		named = ep__symtab_find(e.exec, &nlo, name);
	if (named && nlo >= lo && nlo < hi) {
		copy_name(out, name);
		out->exec = (void *)nlo;
	}
	/* a symbol holding addr names it rather than the allocation (a scan
	 * of the names table: only for allocations that have symbols) */
	if (have && (e.flags & EP__INFO_SYMBOLS) && ep__symtab_find(addr, &nlo, name) == 2 &&
	    nlo >= (uintptr_t)out->exec && nlo < hi)
		copy_name(out, name);
	if (addr < (uintptr_t)out->exec)
		return -ENOENT; /* in the slack before a randomized exec */
	out->size = hi - (uintptr_t)out->exec;
	return 0;
}

/* The executable address addr of pool memory: no locks, no allocation; a
 * read that raced a change reads again (each try follows a writer's
 * progress, so the tries end). */
static int lookup_exec(uintptr_t addr, struct ep_info *out)
{
	for (;;) {
		int rc = lookup_once(addr, out);

		if (rc != CHANGED)
			return rc;
		memset(out, 0, sizeof(*out));
	}
}

EP_API int ep_lookup(const void *addr, struct ep_info *out)
{
	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!addr)
		return -ENOENT;
	/* the heaps and packs it reads outlive it (grace.h) */
	unsigned g = ep__grace_enter();
	int rc = lookup_exec((uintptr_t)addr, out);

	ep__grace_leave(g);
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
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

int ep__info_lookup_buffer(const void *addr, struct ep_info *out)
{
	uintptr_t x = (uintptr_t)addr;
	struct ep__info_entry e;

	/* a patch window or kept staging: the allocation of its exec twin */
	if (entry_find(x, BY_RW, x, 0, &e)) {
		int rc = ep_lookup((void *)(e.plo + (x - e.prw)), out);

		if (rc != -ENOENT)
			return rc;
	}
	memset(out, 0, sizeof(*out));
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
 * A child made without fork()'s handlers, every lock held (fork.c): a
 * writer that vanished left its slot's count odd (readers read copy 1,
 * whole) or copy 1 half written (count even: readers read copy 0).  The
 * next write in the child would start from that state, so both copies
 * become the one readers read, and the count even.
 */
void ep__info_fork_reset(void)
{
	size_t high = ep__load_relaxed(&g_high);

	for (size_t i = 0; i < high; i++) {
		struct info_slot *s = slot_at(i);

		if (!s)
			continue;
		/* the copy readers read is whole (the latch): both become it,
		 * and the count even, as every write leaves them */
		unsigned long q = ep__load_relaxed(&s->seq);
		struct ep__info_entry e;

		slot_read(s, &e);
		copy_write(&s->e[(q & 1) ^ 1], &e);
		if (q & 1)
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
