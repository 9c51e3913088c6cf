/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-alloc.h - bench-suite's allocators behind one interface: libexecpack,
 * asmjit, mmap per program, the floors (Bump, Slots, FloorT) and FirstFit.
 */
#ifndef EP_TESTS_BENCH_ALLOC_H
#define EP_TESTS_BENCH_ALLOC_H

#include "bench-util.h"

#if defined(__x86_64__)
namespace bench {

/* ---- the allocators behind one interface ------------------------------ */

struct Alloc {
	const char *name;
	explicit Alloc(const char *n) : name(n) {}
	virtual ~Alloc() {}
	/* alloc + write the code + make it executable; nullptr + err on failure */
	virtual void *try_put(size_t len, uint32_t imm, int *err) = 0;
	virtual void drop(void *exec) = 0;
	/* the same, told the size asked for (one allocator shared by threads
	   may need no table of its own then) */
	virtual void drop_len(void *exec, size_t len) { drop(exec); }
	virtual size_t reserved() = 0; /* bytes of code memory mapped (one view) */
	virtual size_t packs() = 0;    /* blocks/packs/mappings behind it */
	void *put(size_t len, uint32_t imm)
	{
		int err = 0;
		void *p = try_put(len, imm, &err);
		if (!p)
			die("%s: allocating %zu bytes failed: %s", name, len, std::strerror(-err));
		return p;
	}
};

struct Execpack : Alloc {
	ep_pool *pool = nullptr;
	Execpack(const char *n, enum ep_backend backend, size_t pack_size = 0, unsigned flags = 0)
		: Alloc(n)
	{
		ep_config cfg = {};
		cfg.sz = sizeof(cfg);
		cfg.backend = backend;
		cfg.pack_size = pack_size;
		cfg.flags = flags;
		int rc = ep_pool_create(&cfg, &pool);
		if (rc)
			die("%s: ep_pool_create: %s", name, ep_strerror(rc));
	}
	~Execpack() override { ep_pool_destroy(pool); }
	void *try_put(size_t len, uint32_t imm, int *err) override
	{
		ep_image img;
		int rc = ep_alloc(pool, len, &img);
		if (rc) {
			*err = rc;
			return nullptr;
		}
		emit(img.rw, len, imm);
		rc = ep_finalize(pool, img.exec);
		if (rc)
			die("%s: ep_finalize: %s", name, ep_strerror(rc));
		return img.exec;
	}
	void drop(void *exec) override
	{
		int rc = ep_free(pool, exec);
		if (rc)
			die("%s: ep_free: %s", name, ep_strerror(rc));
	}
	size_t reserved() override
	{
		ep_stats st;
		ep_pool_stats(pool, &st);
		return st.pack_bytes + st.large_bytes;
	}
	size_t packs() override
	{
		ep_stats st;
		ep_pool_stats(pool, &st);
		return st.packs + st.large_allocs;
	}
};

#ifdef HAVE_ASMJIT
struct Asmjit : Alloc {
	asmjit::JitAllocator *ja;
	Asmjit(const char *n, bool dual) : Alloc(n)
	{
		if (dual) {
			asmjit::JitAllocator::CreateParams params;
			params.options = asmjit::JitAllocatorOptions::kUseDualMapping |
					 asmjit::JitAllocatorOptions::kFillUnusedMemory;
			ja = new asmjit::JitAllocator(&params);
		} else {
			ja = new asmjit::JitAllocator();
		}
	}
	~Asmjit() override { delete ja; }
	void *try_put(size_t len, uint32_t imm, int *err) override
	{
		void *rx, *rw;
		if (ja->alloc(&rx, &rw, len) != asmjit::kErrorOk) {
			*err = -ENOMEM;
			return nullptr;
		}
		{
			asmjit::VirtMem::ProtectJitReadWriteScope scope(rx, len);
			emit(rw, len, imm);
		}
		return rx;
	}
	void drop(void *exec) override
	{
		if (ja->release(exec) != asmjit::kErrorOk)
			die("%s: release failed", name);
	}
	size_t reserved() override { return ja->statistics().reservedSize(); }
	size_t packs() override { return ja->statistics().blockCount(); }
};
#endif

/*
 * untracked: no table of mappings, so threads may share it; programs are
 * then freed with drop_len() only, the size rounded up as at mmap().
 */
struct Mmap : Alloc {
	size_t page = size_t(sysconf(_SC_PAGESIZE));
	std::unordered_map<void *, size_t> sizes;
	size_t bytes = 0;
	bool untracked;
	explicit Mmap(bool no_table = false) : Alloc("mmap"), untracked(no_table) {}
	~Mmap() override
	{
		for (auto &e : sizes)
			munmap(e.first, e.second);
	}
	void *try_put(size_t len, uint32_t imm, int *err) override
	{
		size_t sz = (len + page - 1) / page * page;
		void *p = mmap(nullptr, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			*err = -errno;
			return nullptr;
		}
		emit(p, len, imm);
		if (mprotect(p, sz, PROT_READ | PROT_EXEC))
			die("mmap: mprotect: %s", std::strerror(errno));
		if (untracked)
			return p;
		sizes.emplace(p, sz);
		bytes += sz;
		return p;
	}
	void drop(void *exec) override
	{
		auto it = sizes.find(exec);
		if (it == sizes.end())
			die("mmap: unknown program %p", exec);
		munmap(exec, it->second);
		bytes -= it->second;
		sizes.erase(it);
	}
	void drop_len(void *exec, size_t len) override
	{
		if (!untracked) {
			drop(exec);
			return;
		}
		if (munmap(exec, (len + page - 1) / page * page))
			die("mmap: munmap: %s", std::strerror(errno));
	}
	size_t reserved() override { return bytes; }
	size_t packs() override { return sizes.size(); }
};

/*
 * The floor: bump an offset in one 2 MiB memfd mapped RW and RX.  With
 * `reuse`, every program goes to offset 0 instead, as it does in an
 * allocator that hands the address just freed straight back (first fit in
 * an empty pool): writing code where code was just called costs more than
 * writing it anywhere else, and this one-slot bump measures that alone.
 */
struct Bump : Alloc {
	enum { SIZE = 2 << 20 };
	unsigned char *rw, *rx;
	size_t off = 0;
	bool reuse;
	explicit Bump(bool one_slot = false) : Alloc(one_slot ? "bump-reuse" : "bump"), reuse(one_slot)
	{
		int fd = memfd_create("bench-bump", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, SIZE))
			die("bump: memfd: %s", std::strerror(errno));
		/* populated: no page faults in the timed loop */
		void *w = mmap(nullptr, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
		void *x = mmap(nullptr, SIZE, PROT_READ | PROT_EXEC, MAP_SHARED | MAP_POPULATE, fd, 0);
		if (w == MAP_FAILED || x == MAP_FAILED)
			die("bump: mmap: %s", std::strerror(errno));
		close(fd);
		rw = static_cast<unsigned char *>(w);
		rx = static_cast<unsigned char *>(x);
		std::memset(rw, 0xcc, SIZE);
	}
	~Bump() override
	{
		munmap(rw, SIZE);
		munmap(rx, SIZE);
	}
	void *try_put(size_t len, uint32_t imm, int *) override
	{
		size_t step = (len + EP_CHUNK_SIZE - 1) & ~size_t(EP_CHUNK_SIZE - 1);
		if (reuse || off + step > SIZE)
			off = 0;
		emit(rw + off, len, imm);
		void *p = rx + off;
		off += step;
		return p;
	}
	void drop(void *) override {}
	size_t reserved() override { return SIZE; }
	size_t packs() override { return 1; }
};

/*
 * The floor of workloads 7 and 8: the churn with next to no allocator.  Each size
 * (64-byte steps) has its own stretch of one sparse memfd mapped RW and RX
 * and a last-in-first-out list of its free slots, so a free finds its
 * size from the address and nothing else.  A free still refills the
 * program with traps and a put still writes the code, so what grows with
 * the live set here is the workload's own memory traffic (the freed
 * program, the new one's place, its call), which no allocator avoids.
 */
struct Slots : Alloc {
	enum : size_t { CLASSES = 2048 / EP_CHUNK_SIZE, STRETCH = size_t(64) << 20 };
	unsigned char *rw, *rx;
	size_t top[CLASSES] = {};
	std::vector<uint32_t> free_[CLASSES]; /* slot offsets within the stretch */
	Slots() : Alloc("slots")
	{
		int fd = memfd_create("bench-slots", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, off_t(CLASSES * STRETCH)))
			die("slots: memfd: %s", std::strerror(errno));
		void *w = mmap(nullptr, CLASSES * STRETCH, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		void *x = mmap(nullptr, CLASSES * STRETCH, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
		if (w == MAP_FAILED || x == MAP_FAILED)
			die("slots: mmap: %s", std::strerror(errno));
		close(fd);
		rw = static_cast<unsigned char *>(w);
		rx = static_cast<unsigned char *>(x);
	}
	~Slots() override
	{
		munmap(rw, CLASSES * STRETCH);
		munmap(rx, CLASSES * STRETCH);
	}
	void *try_put(size_t len, uint32_t imm, int *err) override
	{
		size_t c = (len + EP_CHUNK_SIZE - 1) / EP_CHUNK_SIZE - 1, step = (c + 1) * EP_CHUNK_SIZE;
		size_t off;
		if (c >= CLASSES) {
			*err = -EINVAL;
			return nullptr;
		}
		if (!free_[c].empty()) {
			off = free_[c].back();
			free_[c].pop_back();
		} else {
			if (top[c] + step > STRETCH) {
				*err = -ENOMEM;
				return nullptr;
			}
			off = top[c];
			top[c] += step;
			std::memset(rw + c * STRETCH + off, 0xcc, step); /* a new slot: traps */
		}
		unsigned char *at = rw + c * STRETCH + off;
		emit(at, len, imm);
		return rx + (at - rw);
	}
	void drop(void *exec) override
	{
		size_t at = size_t(static_cast<unsigned char *>(exec) - rx), c = at / STRETCH;
		std::memset(rw + at, 0xcc, (c + 1) * EP_CHUNK_SIZE);
		free_[c].push_back(uint32_t(at % STRETCH));
	}
	size_t reserved() override
	{
		size_t n = 0;
		for (size_t t : top)
			n += t;
		return n;
	}
	size_t packs() override { return CLASSES; }
};

/*
 * The floor of workload 10: the churn with no search state at all.  One
 * sparse memfd mapped RW and RX once; a new slot is carved by bumping an
 * offset (64-byte steps) and a freed one goes on a last-in-first-out list
 * of its size class (64-byte steps), from which the next put of that class
 * takes it.  A free is given the address alone, as ep_free() is, so one
 * byte per 64-byte chunk keeps the class of the slot that starts there.
 * A put writes the code through the RW view and a free refills the slot
 * with traps (a new slot's tail gets them when it is carved): the
 * guarantees libexecpack keeps, and nothing else.  Unlike Slots, all
 * classes share one stretch, so the live programs are as dense as first
 * fit packs them and the floor pays no extra TLB misses for spreading
 * them out.
 */
template <bool Staged> struct FloorT : Alloc {
	/* 300,000 live programs take about 140 MiB here; the rest is headroom
	   for the churn (address space only: the memfd is sparse) */
	enum : size_t { CLASSES = 2048 / EP_CHUNK_SIZE, SIZE = size_t(1) << 30 };
	unsigned char *rw, *rx;
	uint8_t *cls;
	size_t top = 0;
	std::vector<uint32_t> free_[CLASSES]; /* chunk indices */
	/* Staged: what ep_alloc()'s contract adds, and nothing else: the code
	   is written into a private buffer filled with traps, then the slot's
	   bytes are copied through the RW view (one buffer, reused).  A
	   template argument, so that the plain floor carries no test of it. */
	unsigned char stage[2048];
	FloorT() : Alloc(Staged ? "floor-staged" : "floor")
	{
		int fd = memfd_create("bench-floor", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, off_t(SIZE)))
			die("floor: memfd: %s", std::strerror(errno));
		void *w = mmap(nullptr, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		void *x = mmap(nullptr, SIZE, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
		void *c = mmap(nullptr, SIZE / EP_CHUNK_SIZE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (w == MAP_FAILED || x == MAP_FAILED || c == MAP_FAILED)
			die("floor: mmap: %s", std::strerror(errno));
		close(fd);
		rw = static_cast<unsigned char *>(w);
		rx = static_cast<unsigned char *>(x);
		cls = static_cast<uint8_t *>(c);
	}
	~FloorT() override
	{
		munmap(rw, SIZE);
		munmap(rx, SIZE);
		munmap(cls, SIZE / EP_CHUNK_SIZE);
	}
	void *try_put(size_t len, uint32_t imm, int *err) override
	{
		size_t c = (len + EP_CHUNK_SIZE - 1) / EP_CHUNK_SIZE - 1;
		unsigned char *at;
		if (c >= CLASSES) {
			*err = -EINVAL;
			return nullptr;
		}
		if (!free_[c].empty()) {
			at = rw + size_t(free_[c].back()) * EP_CHUNK_SIZE;
			free_[c].pop_back();
		} else {
			size_t step = (c + 1) * EP_CHUNK_SIZE;
			if (top + step > SIZE) {
				*err = -ENOMEM;
				return nullptr;
			}
			at = rw + top;
			cls[top / EP_CHUNK_SIZE] = uint8_t(c);
			top += step;
			if (!Staged)
				std::memset(at + len, 0xcc, step - len);
		}
		if (Staged) {
			size_t step = (c + 1) * EP_CHUNK_SIZE;
			std::memset(stage, 0xcc, step);
			emit(stage, len, imm);
			std::memcpy(at, stage, step);
		} else {
			emit(at, len, imm);
		}
		return rx + (at - rw);
	}
	void drop(void *exec) override
	{
		size_t k = size_t(static_cast<unsigned char *>(exec) - rx) / EP_CHUNK_SIZE, c = cls[k];
		std::memset(rw + k * EP_CHUNK_SIZE, 0xcc, (c + 1) * EP_CHUNK_SIZE);
		free_[c].push_back(uint32_t(k));
	}
	size_t reserved() override { return top; }
	size_t packs() override { return 1; }
};

/*
 * The first-fit floor of workload 10 (bench-firstfit.h): FloorT<true>'s
 * work with first fit over one chunk bitmap, the library's own summary,
 * in place of the free lists.  What first fit costs by itself: no packs
 * to choose between, no lock, no state, no records, no counts.
 */
struct FirstFit : Alloc {
	enum : size_t { SIZE = size_t(1) << 30 };
	bench_ff f;
	FirstFit() : Alloc("first-fit")
	{
		int rc = bench_ff_init(&f, SIZE);
		if (rc)
			die("first-fit floor: %s", std::strerror(-rc));
	}
	~FirstFit() override { bench_ff_destroy(&f); }
	void *try_put(size_t len, uint32_t imm, int *err) override
	{
		if (len == 0 || len > BENCH_FF_MAX) {
			*err = -EINVAL;
			return nullptr;
		}
		size_t pos = bench_ff_take(&f, len);
		if (pos == SIZE_MAX) {
			*err = -ENOMEM;
			return nullptr;
		}
		emit(f.stage, len, imm);
		return bench_ff_commit(&f, pos);
	}
	void drop(void *exec) override { bench_ff_drop(&f, exec); }
	size_t reserved() override
	{
		/* the end of the highest slot: what first fit has packed into */
		size_t n = f.nchunks;
		while (n && !ep__bitmap_test(f.used, n - 1))
			n--;
		return n * EP_CHUNK_SIZE;
	}
	size_t packs() override { return 1; }
};

enum Kind { K_EP, K_AJ_DUAL, K_AJ_DEF, K_MMAP, K_BUMP, K_BUMP_REUSE, K_EP_NOKEY, K_N };
static const char *const kind_name[K_N] = { "execpack", "asmjit-dual", "asmjit-default", "mmap",
					    "bump", "bump-reuse", "execpack-nokey" };
#ifdef HAVE_ASMJIT
static const bool have_asmjit = true;
#else
static const bool have_asmjit = false;
#endif

inline Alloc *make(Kind k)
{
	switch (k) {
	case K_EP:
		return new Execpack("execpack", EP_BACKEND_MEMFD);
	case K_EP_NOKEY:
		return new Execpack("execpack-nokey", EP_BACKEND_MEMFD, 0, EP_F_NO_PKEY);
#ifdef HAVE_ASMJIT
	case K_AJ_DUAL:
		return new Asmjit("asmjit-dual", true);
	case K_AJ_DEF:
		return new Asmjit("asmjit-default", false);
#endif
	case K_MMAP:
		return new Mmap();
	case K_BUMP:
		return new Bump();
	case K_BUMP_REUSE:
		return new Bump(true);
	default:
		die("allocator %d not built in", int(k));
	}
}

} // namespace bench
#endif
#endif
