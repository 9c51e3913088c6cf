/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * execpack.h - the whole public interface of libexecpack.
 *
 * libexecpack hands out executable memory for JIT-compiled code.  Many
 * small programs share one large "pack" (2 MiB by default) carved into
 * 64-byte chunks, instead of each taking a page.  Code is never written
 * through the executable view: ep_alloc() returns a private staging buffer
 * (image.rw) whose addresses the caller computes against the final
 * executable address (image.exec); ep_finalize() copies it in.
 *
 * Conventions (libuv / libbpf style):
 *   - every int-returning call returns 0 on success or a negative errno;
 *     ep_strerror() turns it into text;
 *   - all handles are opaque; option structs carry a leading size field
 *     so that they can grow without breaking the ABI;
 *   - all calls on one pool are thread-safe.
 */
#ifndef EXECPACK_H
#define EXECPACK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(EP_BUILDING_LIBRARY) && defined(__GNUC__)
#define EP_API __attribute__((visibility("default")))
#else
#define EP_API
#endif

/* Allocation granularity inside a pack, in bytes. */
#define EP_CHUNK_SIZE 64

/* ep_alloc()'s staging buffer lines up with the code: image.rw and
 * image.exec are equal modulo this (modulo the page size for an allocation
 * bigger than a pack), so alignment computed on either holds on both. */
#define EP_STAGE_ALIGN 64

/* Library version; ep_version() returns the same at run time.  This is the
 * only place it is written: configure.ac reads it from here. */
#define EP_VERSION_MAJOR 0
#define EP_VERSION_MINOR 1
#define EP_VERSION_PATCH 0

struct ep_pool; /* opaque */

enum ep_backend {
	EP_BACKEND_AUTO = 0, /* best available; EXECPACK_BACKEND overrides */
	EP_BACKEND_MEMFD,    /* memfd dual mapping (RW alias + RX view) */
	EP_BACKEND_HUGETLB,  /* memfd/hugetlbfs on 2 MiB pages, dual-mapped */
	EP_BACKEND_KMOD,     /* /dev/execpack: no writable mapping at all */
};

/*
 * Fills [dst, dst+len) with instructions that trap when executed.  It is
 * called on the staging buffer, on every new pack before it is mapped
 * executable, and on every freed range.  It must not fail.
 */
typedef void (*ep_fill_fn)(void *dst, size_t len, void *ctx);

/*
 * Trap fills, one per architecture, all built on every architecture (a JIT
 * may emit code for another one).  A NULL ep_config.fill means the fill of
 * the architecture the library runs on: ep_fill_x86_int3 on x86-64,
 * ep_fill_arm64_brk on aarch64, ep_fill_riscv_ebreak on riscv64.  ctx is
 * ignored.  The arm64 and riscv64 fills choose each byte by its address,
 * so any part of a buffer lines up with the instructions around it.
 */
/* x86: INT3 (0xCC) in every byte. */
EP_API void ep_fill_x86_int3(void *dst, size_t len, void *ctx);
/* arm64: BRK #0x3e8 (0xd4207d00) in every aligned 32-bit word. */
EP_API void ep_fill_arm64_brk(void *dst, size_t len, void *ctx);
/* riscv64: c.ebreak (0x9002) at every 2-byte boundary. */
EP_API void ep_fill_riscv_ebreak(void *dst, size_t len, void *ctx);

/* ep_config.flags */
#define EP_F_RANDOMIZE (1u << 0) /* random 16-byte-aligned offset in slack */
#define EP_F_SEAL      (1u << 1) /* mseal() executable views (kept until exit) */
#define EP_F_PERFMAP   (1u << 2) /* write /tmp/perf-<pid>.map for named code */
#define EP_F_JITDUMP   (1u << 3) /* write perf's jitdump, jit-<pid>.dump, for named code */
#define EP_F_NO_PKEY   (1u << 4) /* no protection key on the writable alias (ep_pool_guards(3)) */
#define EP_F_BTI       (1u << 5) /* arm64: map code PROT_BTI; indirect branches must land on BTI */
/* The staging buffer outlives ep_finalize(): the allocation keeps one
 * private copy at a fixed address, every patch window of it opens there
 * (the same rw - exec offset as at ep_alloc()), and ep_lookup() maps it. */
#define EP_F_KEEP_STAGING (1u << 6)
#define EP_F_ALL       (EP_F_RANDOMIZE | EP_F_SEAL | EP_F_PERFMAP | EP_F_JITDUMP | EP_F_NO_PKEY | \
			EP_F_BTI | EP_F_KEEP_STAGING)

struct ep_config {
	size_t sz;              /* sizeof(struct ep_config), for ABI growth */
	enum ep_backend backend;
	size_t pack_size;       /* 0: backend default, 2 MiB */
	size_t limit;           /* bytes that may be handed out; 0: no limit */
	unsigned flags;         /* EP_F_* */
	ep_fill_fn fill;        /* NULL: the architecture's trap fill */
	void *fill_ctx;
	const char *path;       /* hugetlbfs mount or kmod device; NULL: default */
	/*
	 * Placement near the caller's code (a caller's sz that ends before
	 * this field leaves it NULL: anywhere).  Non-NULL: every pack and large mapping of the pool lies
	 * within 2 GiB minus the pack size of this address, so that JIT code
	 * reaches it, and the code of the program around it, with a call or
	 * jmp rel32 (x86-64).  When no free range that near can be mapped,
	 * ep_alloc() fails with -EADDRNOTAVAIL, never maps farther.  memfd and
	 * hugetlb only: kmod refuses it at ep_pool_create() (-EOPNOTSUPP).
	 */
	const void *near;
	/*
	 * One contiguous range of this many bytes (rounded up to pages),
	 * reserved at ep_pool_create() (0, or a caller's sz that ends before
	 * this field: none).  Every pack and large mapping of the pool, of all
	 * its threads, lies inside it, so any two allocations of the pool are
	 * less than code_range apart: within a rel32 call or jmp (x86-64) of
	 * each other for a range of up to 2 GiB, within BL's +-128 MiB
	 * (arm64) for one of up to 128 MiB.  With near, the whole range lies
	 * within near's reach.  A full range makes ep_alloc() fail with
	 * -ENOMEM, never map farther; freed space stays reserved for the pool.
	 * Less than one pack: -EINVAL at ep_pool_create().  Every backend.
	 */
	size_t code_range;
	/*
	 * The grain of packs (0, or a caller's sz that ends before this field:
	 * EP_CHUNK_SIZE, 64): 16 or 32 for pools of tiny code, such as 13- to
	 * 15-byte thunks, that would leave most of a 64-byte chunk unused.
	 * Allocations in packs then start on, and are rounded up to, chunk_size
	 * bytes; ep_shrink() gives back whole chunks of that size.  Any other
	 * value: -EINVAL.  With EP_F_RANDOMIZE, exec stays inside the first
	 * chunk in 16-byte steps: 16-byte chunks leave no offset to choose.
	 * The staging buffer still lines up with exec modulo EP_STAGE_ALIGN.
	 */
	size_t chunk_size;
};

/* What ep_alloc() hands out. */
struct ep_image {
	void *exec;  /* where the code runs: compute addresses against this */
	void *rw;    /* private staging buffer until ep_finalize(), then NULL use */
	size_t size; /* usable bytes at exec and rw, >= the size asked for */
};

struct ep_stats {
	size_t packs;        /* packs mapped, the empty ones kept included */
	size_t pack_bytes;   /* their committed bytes (grown as used: ep_pool_stats(3)) */
	size_t used_bytes;   /* chunks in use in packs, in bytes (any chunk_size) */
	size_t live_allocs;  /* live allocations, packed and large */
	size_t large_allocs; /* allocations bigger than a pack (own mapping) */
	size_t large_bytes;  /* their mapped size */
};

/* Pools.  cfg NULL: all defaults.  cfg->sz must be set. */
EP_API int ep_pool_create(const struct ep_config *cfg, struct ep_pool **out);
EP_API void ep_pool_destroy(struct ep_pool *pool);

/* Reserve size bytes of executable memory; see ep_alloc(3). */
EP_API int ep_alloc(struct ep_pool *pool, size_t size, struct ep_image *out);
/* The same with image.exec a multiple of align (a power of two: up to the
 * backend's page in a pack, the pack size for a large allocation); see
 * ep_alloc_aligned(3). */
EP_API int ep_alloc_aligned(struct ep_pool *pool, size_t size, size_t align,
			    struct ep_image *out);

/* ---- data beside the code (ep_alloc_data(3)) ---- */

/* ep_alloc_data() kinds */
#define EP_DATA_RO 1u /* read-only after ep_finalize(): never writable, never executable */
#define EP_DATA_RW 2u /* read-write at image.exec after ep_finalize(), never executable */

/*
 * Reserve size bytes of data (align as ep_alloc_aligned(); 0: the chunk
 * size) in the pool's data packs, which lie inside the pool's code range,
 * so that every allocation of code of the pool reaches every allocation of
 * data with a 32-bit PC-relative fixup (x86-64) or ADRP (arm64).  With
 * near alone, code and data each lie within rel32 of near (up to 4 GiB
 * apart); with neither, anywhere.  Never executable; -EOPNOTSUPP on kmod.  Staged as code is: out->rw until ep_finalize(), which
 * copies it to out->exec (the data's final address) and maps it read-only
 * (EP_DATA_RO) or leaves it writable there (EP_DATA_RW).  ep_write(),
 * ep_finalize(), ep_free(), ep_shrink(), ep_lookup() and groups take
 * out->exec as for code.  See ep_alloc_data(3).
 */
EP_API int ep_alloc_data(struct ep_pool *pool, size_t size, size_t align,
			 unsigned kind, struct ep_image *out);

/*
 * Copy len bytes to the executable address dst, which must lie with all
 * its len bytes inside one live allocation.  Before ep_finalize() this
 * writes the staging buffer; after it, it patches the live code.
 *
 * A thread running the code meanwhile sees either the old or the new
 * instruction when the patch is a single store the architecture fetches
 * whole: on x86-64 up to 8 bytes inside one aligned 8-byte word (the rel32
 * of a call or jump whose 4 bytes do not cross an 8-byte boundary); on
 * arm64 and riscv64 one aligned 32-bit instruction word (and arm64 allows
 * only B, BL, NOP, BRK, SVC, HVC, SMC and ISB to be swapped for each other
 * under a running thread).  Anything else is a plain copy that may be seen
 * half done: stop or divert the executors first.  The instruction caches of
 * every core are synchronised before ep_write() returns (ep_write(3)).
 */
EP_API int ep_write(struct ep_pool *pool, void *dst, const void *src,
		    size_t len);

/* Copy the staging buffer into place and make it executable. Once only. */
EP_API int ep_finalize(struct ep_pool *pool, void *exec);

/*
 * ep_finalize() of n allocations as one: all of them, or (on any error,
 * which is returned) none, each left staged as it was.  See
 * ep_finalize_group(3).
 */
EP_API int ep_finalize_group(struct ep_pool *pool, void *const *execs, size_t n);

/*
 * Keep this allocation's staging buffer (image.rw, its bytes as written)
 * past ep_finalize() until ep_release_staging() or ep_free(): a linker's
 * view of the code stays valid while it still reads it.  Call before
 * ep_finalize().  See ep_keep_staging(3).
 */
EP_API int ep_keep_staging(struct ep_pool *pool, void *exec);
EP_API int ep_release_staging(struct ep_pool *pool, void *exec);

/* Release an allocation (exact image.exec only); refills it with traps. */
EP_API int ep_free(struct ep_pool *pool, void *exec);

/*
 * Keep only the first size bytes (from image.exec) of a live allocation,
 * before or after ep_finalize(): the whole chunks past them go back
 * to the pool, refilled with traps, and the limit charge and statistics
 * drop by them.  A large allocation keeps its mapping (see ep_shrink(3)).
 * Never grows: -EINVAL for size 0 or more than the allocation has.
 */
EP_API int ep_shrink(struct ep_pool *pool, void *exec, size_t size);

/*
 * Copy len bytes of finished, position-independent (or already linked
 * against nothing) code into the pool and make it executable: alloc +
 * copy + finalize in one call, with no staging buffer.  *exec gets the
 * address, aligned to the pool's chunk size (64 bytes, EP_STAGE_ALIGN; 16
 * or 32 with ep_config.chunk_size) and len is rounded up to whole chunks.
 * See ep_add(3).
 */
EP_API int ep_add(struct ep_pool *pool, const void *code, size_t len, void **exec);

/*
 * ep_shrink(exec, size) then ep_finalize(exec) in one call: copies only
 * size bytes, gives back the whole chunks past them (of the pool's chunk
 * size: 64, or 16 or 32 with ep_config.chunk_size).
 */
EP_API int ep_finalize_size(struct ep_pool *pool, void *exec, size_t size);

/*
 * Give back now what the pool keeps for reuse: empty packs are unmapped,
 * the unused committed tail of packs is uncommitted, stashed staging
 * buffers freed.  *released (may be NULL): bytes given back.
 */
EP_API int ep_pool_trim(struct ep_pool *pool, size_t *released);

EP_API int ep_pool_stats(const struct ep_pool *pool, struct ep_stats *out);

/* ---- patching published code (ep_patch_begin(3)) ---- */

/*
 * Open a private writable copy of [exec, exec+len) of a live, finalized
 * allocation: *rw holds the live bytes, rw == exec (mod 64).  The caller
 * runs its emitter over it (linking against exec addresses).  One window
 * per allocation: -EBUSY if one is open.  -EINVAL before ep_finalize()
 * (write the staging buffer then), for a range not inside one live
 * allocation, len 0.
 */
EP_API int ep_patch_begin(struct ep_pool *pool, void *exec, size_t len, void **rw);
/*
 * Write the bytes of the window that differ from what begin copied: each
 * aligned word as ep_write() does (a thread running the code sees the old
 * or the new instruction, never a torn one), icache synced on every core,
 * then the window is closed.  exec: as given to begin.
 */
EP_API int ep_patch_commit(struct ep_pool *pool, void *exec);
/* Close the window without writing anything. */
EP_API int ep_patch_abort(struct ep_pool *pool, void *exec);

/* ---- from an address to its allocation (ep_lookup(3)) ---- */

/* ep_info.flags */
#define EP_INFO_FINALIZED (1u << 0) /* ep_finalize() done: the code is live */
#define EP_INFO_LARGE     (1u << 1) /* a large allocation (its own mapping) */
#define EP_INFO_NAMED     (1u << 2) /* named (ep_set_name()): name is set */

/* "memfd", "hugetlb" or "kmod"; NULL for a NULL pool. */
EP_API const char *ep_pool_backend(const struct ep_pool *pool);

/*
 * Why EP_BACKEND_AUTO passed over the backends it did not choose, as
 * "name: reason; name: reason" ("" when it took the first).  Valid while
 * the pool lives.
 */
EP_API const char *ep_pool_reasons(const struct ep_pool *pool);

/*
 * ep_pool_guards() bits: the protections of the hardware that guard a
 * pool's code memory (libexecpack(7), "Hardware guards").
 */
#define EP_GUARD_PKEY (1u << 0) /* x86-64: the writable alias of the code is under a
				   protection key that every thread has access-disabled,
				   except inside the library's own copies */
#define EP_GUARD_BTI  (1u << 1) /* arm64: the code is mapped PROT_BTI (EP_F_BTI) */

/*
 * Which EP_GUARD_* protect pool's code.  why (may be NULL) gets, for each
 * guard not in force, "name: reason" joined by "; " ("pkey: the CPU has no
 * protection keys"), or "" when all are.  0 for a NULL pool.
 */
EP_API unsigned ep_pool_guards(const struct ep_pool *pool, char *why, size_t whylen);

/*
 * Can this backend be used with cfg (NULL: defaults) here?  0 if so, else
 * -errno with a one-line reason in why ("hugetlb: no free huge pages
 * (vm.nr_hugepages=0)").  For EP_BACKEND_AUTO: the backend AUTO would pick,
 * via ep_pool_backend()-style names in why, e.g. "memfd".
 */
EP_API int ep_backend_probe(enum ep_backend backend, const struct ep_config *cfg,
			    char *why, size_t whylen);

/* ---- diagnostics: names for JIT code (ep_set_name(3), ep_symbolize(3)) ---- */

/* Longest name ep_set_name() takes, in bytes, without the NUL. */
#define EP_NAME_MAX 255

/*
 * Name the live allocation that starts at exec (its image.exec): its bytes
 * from exec, up to the size ep_shrink() was given.  The name
 * is copied; naming again renames.  Named code is found by ep_symbolize(),
 * registered with libunwind (when built with it) once finalized, and listed
 * in /tmp/perf-<pid>.map with EP_F_PERFMAP or EXECPACK_PERFMAP=1, and with
 * its code bytes in perf's jitdump with EP_F_JITDUMP or EXECPACK_JITDUMP=1.
 */
EP_API int ep_set_name(struct ep_pool *pool, void *exec, const char *name);

/*
 * The same, where the program has fewer bytes than its allocation (its
 * chunks are whole, and ep_alloc() got an upper bound): the name covers
 * [exec, exec + size), 0 < size <= what the allocation has, and no more
 * than ep_shrink() left.  ep_shrink() narrows every name to its size too.
 */
EP_API int ep_set_name_size(struct ep_pool *pool, void *exec, const char *name, size_t size);

/* One named part of an allocation (ep_set_symbols()). */
struct ep_symbol {
	size_t offset;    /* from the allocation's exec */
	size_t size;      /* > 0 */
	const char *name; /* copied; at most EP_NAME_MAX bytes kept */
};

/*
 * Names for parts of one allocation (the functions of a module): replaces
 * any earlier table of it; n == 0 removes them.  Ranges inside what the
 * allocation has (ep_shrink() narrows them), not overlapping.  A symbol
 * holding an address names it for ep_symbolize(), ep_lookup(), perf, gdb
 * and libunwind; the allocation's own name (ep_set_name()) the rest.
 */
EP_API int ep_set_symbols(struct ep_pool *pool, void *exec, const struct ep_symbol *syms, size_t n);

/* ep_set_unwind() kinds: what the unwinders are told about an allocation
 * (the DWARF kinds reach libgcc's too: C++ exceptions, backtrace()). */
#define EP_UNWIND_NAME     0 /* name only: unw_get_proc_name() names the frame;
				stepping uses the frame pointer (default) */
#define EP_UNWIND_DWARF_FP 1 /* CFI for a frame-record prologue at offset 0
				("push rbp; mov rbp, rsp" on x86-64,
				"stp x29, x30, [sp, #-16]!; mov x29, sp" on
				arm64; ep_set_unwind(3)): stepping by DWARF,
				no name from libunwind */
#define EP_UNWIND_DWARF_SP 2 /* CFI for code without a frame pointer that
				lowers sp by frame bytes in its first
				prologue bytes (on arm64 and riscv64 and
				stores the link register at the top of that
				frame, sp + frame - 8): stepping by DWARF,
				no name */

/*
 * How unwinders should unwind the allocation at exec (see ep_set_unwind(3));
 * EXECPACK_UNWIND=dwarf makes EP_UNWIND_DWARF_FP the default.  -EOPNOTSUPP
 * for the DWARF kinds when the library was built with neither libunwind nor
 * libgcc's __register_frame.
 */
EP_API int ep_set_unwind(struct ep_pool *pool, void *exec, int kind, size_t prologue,
			 size_t frame);

/*
 * The name of the named, live JIT code that contains addr, in any pool, and
 * addr's offset from its start.  Lock-free and async-signal-safe.  0, or
 * -ENOENT (not named JIT code), -ERANGE (buf too small: truncated, still
 * NUL-terminated; *offset is set).
 */
EP_API int ep_symbolize(const void *addr, char *buf, size_t len, size_t *offset);

/*
 * Write a backtrace of the calling thread to fd, JIT frames named through
 * ep_symbolize().  For crash handlers: no malloc, write(2) only.  Returns
 * the number of frames written or -errno.
 */
EP_API int ep_backtrace(int fd);

/* What ep_lookup() says of an allocation. */
struct ep_info {
	struct ep_pool *pool;
	void *exec;       /* the allocation's image.exec */
	size_t size;      /* its usable bytes from exec (what ep_shrink() left) */
	void *rw;         /* before ep_finalize(): its staging buffer (rw for exec); else NULL */
	void *patch_exec; /* an open patch window (or the kept staging of
			     EP_F_KEEP_STAGING): its first exec byte, buffer,
			     length; NULL/0 when none */
	void *patch_rw;
	size_t patch_len;
	unsigned flags;   /* EP_INFO_* */
	char name[EP_NAME_MAX + 1]; /* "" when unnamed */
	void *reserved[4];
};

/*
 * The live allocation holding the executable address addr, in any pool.
 * 0, -ENOENT (in no live allocation: any other address, hit or miss, is
 * answered so), -EINVAL (out NULL).  Lock-free and async-signal-safe for
 * every address, in any thread state: a crash handler's or profiler's
 * call; safe beside ep_pool_destroy() of any pool (ep_lookup(3) says
 * which fields it fills: rw stays NULL).
 */
EP_API int ep_lookup(const void *addr, struct ep_info *out);

/*
 * As ep_lookup(), and also for an address in an allocation's staging
 * buffer (before ep_finalize()), its open patch window's buffer or its
 * kept staging: the allocation whose buffer holds addr (rw set for a
 * staging buffer).  Takes the heaps' locks: not async-signal-safe.
 */
EP_API int ep_lookup_rw(const void *addr, struct ep_info *out);

/* Text for a negative errno returned by this library; never NULL. */
EP_API const char *ep_strerror(int err);

/* "0.1.0": the version of the library actually loaded. */
EP_API const char *ep_version(void);

#ifdef __cplusplus
}
#endif

#endif /* EXECPACK_H */
