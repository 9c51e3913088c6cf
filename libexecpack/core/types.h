/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * types.h - the core's structures and nothing else: a pool, its heaps,
 * their packs, ranges and allocation records.  Who may read or write each
 * shared field, and how, is said beside it; the calls on them are declared
 * in the header of the file that owns them.
 */
#ifndef EP_TYPES_H
#define EP_TYPES_H

#include <pthread.h>
#include <stdint.h>

#include "backend.h"
#include "bitmap.h"
#include "grace.h"
#include "execpack.h"
#include "lock.h"

/*
 * A heap's chunks are 1 << shift bytes (ep_config.chunk_size: 16, 32, or
 * EP_CHUNK_SIZE by default), kept in the heap and in each of its packs,
 * where lock-free readers (remote.c, lookup.h) find it; it never changes.
 */
#define CHUNK_SHIFT_DEFAULT 6 /* EP_CHUNK_SIZE */
/* Staging buffers of STASH_MIN << k bytes (k < STASH_CLASSES) are kept for reuse. */
#define STASH_MIN 64
#define STASH_CLASSES 7
#define STASH_DEPTH 8
#define SPARE_RECORDS 64

struct ep__pack;

/* A thread that allocates (thread.c); outlives it while a heap names it. */
struct ep__thread {
	_Atomic unsigned refs;
	struct ep__thread *next; /* among the spares (ep__thread_spare_lock) */
};


struct ep__alloc {
	struct ep__alloc *hnext; /* hash chain */
	uintptr_t key;           /* address of the reservation's first byte */
	void *exec;              /* what ep_alloc() returned */
	struct ep__pack *pack;   /* NULL: a large allocation */
	struct ep__region large; /* its own mapping when pack is NULL */
	size_t chunk;            /* first chunk in the pack */
	size_t reserved;         /* bytes reserved and charged */
	size_t offset;           /* exec - reservation start (EP_F_RANDOMIZE) */
	unsigned char *staging;  /* reserved bytes; NULL once finalized */
	int stash_class;         /* staging's size class, or -1 */
	int norec;               /* 1: no record, a copy on the caller's stack */
	struct ep__diag *diag;   /* diag.c: name and unwind info; NULL if none */
	struct ep__patch *patch; /* life.h: a window, kept staging; NULL if none */
	size_t info;             /* info.c: its lock-free entry + 1; 0 if none */
};

/*
 * A pack.  Its struct and maps are never freed while its heap lives (a
 * released pack waits on the heap's spares for reuse), because a thread
 * freeing into it without the heap's lock (remote.c) may still be reading
 * them.  Such a thread pins the pack before it reads the region's address,
 * and a released pack is reused for a new region only when no pin is held
 * (remote.c says why that suffices).  A pack is released only when empty,
 * so its maps are clear then and need no clearing for reuse.
 */
struct ep__pack {
	struct ep__region r; /* r.exec and r.gen: atomics (remote.c reads them) */
	struct ep__pack *next, *prev;
	struct ep__heap *heap; /* for ever */
	size_t nchunks;       /* committed chunks (atomic: remote.c reads it) */
	size_t free_chunks;
	uint64_t *used;    /* chunk is allocated */
	uint64_t *start;   /* an allocation begins here */
	struct ep__fit fit; /* longest free runs of used, for first fit */
	int cached;         /* empty and counted in the pool's empty_packs */
	/* log2 of the chunk size and the size - 1: the heap's, for ever (in
	 * what was padding: the fields around keep their cache lines) */
	unsigned char shift, cmask;
	size_t slot;        /* its place in the heap's creation order (by_slot) */

	/* read without the lock (remote.c); all atomics */
	unsigned seq;       /* odd while the owner changes used or start */
	const void *seq_writer; /* ep__self() of the last to make seq odd */
	_Atomic unsigned seq_sleepers; /* readers asleep on seq (pack-seq.h) */
	unsigned char *state; /* per chunk: the allocation's state (alloc-state.h) */
	uint64_t *done;     /* start chunks freed without the lock, refilled */
	uint64_t *done_sum; /* words of done with a bit set */
	_Atomic int queued; /* on the heap's remote list */
	_Atomic unsigned pins; /* lock-free frees between reading r.exec and done */
	struct ep__pack *rnext;
	/* holes (commit.c): pages inside the committed prefix given back,
	 * their chunks marked used with no allocation starting there; NULL
	 * until the first; with the heap's lock */
	uint64_t *holes;
	size_t hole_chunks;
};

/* One region's address range, sorted by lo, for address lookups. */
struct ep__range {
	uintptr_t lo, hi;
	struct ep__pack *pack;   /* or */
	struct ep__alloc *large;
};

/*
 * Monotonic counts of one heap, only ever raised, each with a release store
 * under the heap's lock; ep_pool_stats() reads them without any lock (see
 * pool_stats() for the order that makes its relations hold).
 */
struct ep__tally {
	uint64_t allocs, frees;             /* every allocation */
	uint64_t used_in, used_out;         /* pack chunk bytes taken, given back */
	uint64_t packs_in, packs_out;       /* packs mapped, released */
	uint64_t large_in, large_out;       /* large allocations made, freed */
	uint64_t lbytes_in, lbytes_out;     /* their mapped bytes */
	uint64_t commit_in, commit_out;     /* pack bytes committed, released */
};

/*
 * A heap: what one thread allocates from, with its own lock, packs and
 * tables.  Each thread that allocates gets one (adopting the heap of a
 * thread that has exited before making a new one), so threads JITting at
 * once never share a lock; a call on another thread's allocation finds its
 * heap through route.h and takes only that heap's lock.  First fit holds
 * within a heap.
 */
struct ep__heap {
	struct ep__lock lock;
	struct ep_pool *root;
	const struct ep__backend_ops *ops;
	struct ep__backend *be;
	ep_fill_fn fill;
	void *fill_ctx;
	ep_fill_fn user_fill; /* ep_config.fill, called through fill_guarded() */
	void *user_fill_ctx;
	unsigned flags;
	/* log2 of the chunk size (ep_config.chunk_size), the size - 1, and the
	 * bytes more reserved for EP_F_RANDOMIZE (heap.c) or 0 (in what was
	 * padding) */
	unsigned char shift, cmask, slack;
	/* EP__GUARD_DATA_RO or _RW: a pool's heap of data packs of that kind
	 * (ep_alloc_data(), made by api.c, owned by no thread); 0: code */
	unsigned char data;
	size_t limit;
	size_t pack_size;
	size_t page_size;

	struct ep__pack *head, *tail;

	/*
	 * First fit across packs: the packs in creation order (NULL where one
	 * was released) and a max tree over them, whose leaf i is never less
	 * than the longest free run of by_slot[i] (see pack_find()).
	 */
	struct ep__pack **by_slot;
	uint32_t *fits;   /* 2 * cap_slots entries, node 1 the root */
	size_t nslots;    /* slots handed out, live or not */
	size_t cap_slots; /* a power of two, or 0 */
	size_t npacks;    /* live packs */

	struct ep__range *ranges;
	size_t nranges, cap_ranges;

	struct ep__alloc **hash;
	size_t hash_mask; /* buckets - 1 */
	size_t nrecs;     /* records in the hash */

	struct ep__tally tally;
	/* frees by other threads (remote.c): atomic counts for the stats, the
	 * packs with chunks to give back, and a gate for fork(); on cache
	 * lines of their own, away from what the owner writes on every call */
	char pad0[64];
	_Atomic uint64_t remote_frees, remote_used_out;
	struct ep__pack *_Atomic remote;
	_Atomic int remote_gated;
	_Atomic int remote_gate_sleeps; /* a fork() sleeps on a pack's pins */
	char pad1[64];
	struct ep__pack *spare_packs; /* released, kept for reuse (next) */
	struct ep__grace grace; /* destroyed: freed when no lookup holds it */
	struct ep__pack *cached_pack; /* the empty pack it keeps, if any */
	/* purge (pack.c): ep_config.purge_delay_ms resolved (< 0: never), and
	 * when the kept empty packs' committed tails go (CLOCK_MONOTONIC ns;
	 * 0: nothing waits), checked every few emptied packs */
	long purge_ms;
	uint64_t purge_at;
	unsigned purge_tick;
	/* holes (commit.c): used_out at the last look for long free runs in
	 * live packs, when the next may come (ns), packs with holes */
	uint64_t hole_mark, hole_at;
	size_t hole_packs;
	/* bytes this heap's thread allocated in other heaps' packs while it
	 * had none of its own (heap.c: threads that share); atomic */
	size_t borrowed;
	uint64_t rng;
	int shares_backend; /* not the first heap: the backend is closed by that one */
	struct ep__crange *crange; /* ep_config.code_range (the backend's), or NULL */
	struct ep__thread *_Atomic owner; /* the thread it belongs to (root->heaps_lock) */
	/* 1 while no living thread owns it (none yet, or its thread exited):
	 * written by thread.c only, read by anyone without a lock (atomic;
	 * seq_cst: the exit's handshake with a lock-free free, remote.c) */
	_Atomic int orphaned;
	struct ep__heap *next_heap; /* the pool's heaps, newest first */

	void *stash[STASH_CLASSES][STASH_DEPTH];
	unsigned nstash[STASH_CLASSES];
	struct ep__alloc *spare_recs;
	size_t nspare_recs;

	struct ep__heap *gnext, *gprev; /* every heap of every pool (registry.c) */
	char reasons[512];             /* why other backends were not chosen */
};

struct ep_pool {
	struct ep__heap *first;  /* made with the pool; owns the backend */
	struct ep__heap *_Atomic heaps; /* head: every heap, newest first */
	unsigned nheaps;        /* (heaps_lock) */
	unsigned max_heaps;     /* EXECPACK_HEAPS, or 1 for a backend whose calls
				 * must not overlap; 0: one per thread */
	uint64_t id;            /* tells a reused address from this pool */
	pthread_mutex_t heaps_lock;
	size_t limit;
	_Atomic size_t charged; /* bytes reserved in all heaps (for limit) */
	_Atomic size_t empty_packs; /* empty packs kept mapped, in all heaps */
	struct ep_pool *next_root; /* every pool (registry.c) */
	/* its heaps of read-only and read-write data (ep_alloc_data()), made
	 * on first use under heaps_lock, then for ever; also on heaps */
	struct ep__heap *_Atomic data_heaps[2];
};

#endif /* EP_TYPES_H */
