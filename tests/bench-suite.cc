/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-suite.cc - the benchmark suite of doc/performance.md (`make bench`).
 *
 * Twelve workloads, each run for libexecpack and, in the same process and
 * interleaved round by round, for its peers (workload 7, fork, for
 * libexecpack and a floor with no allocator to speak of, struct Slots;
 * workload 8, growth, against asmjit-dual, with a second execpack column
 * of 64 KiB packs and the same floor; workload 9, shrink after emit,
 * against asmjit-dual's shrink(); workload 10, churn against a leaner
 * floor, struct FloorT; workload 11, the footprint of a small pool against
 * asmjit-dual's, each measured in a fresh child process; workload 12,
 * ep_add() against ep_alloc() + memcpy + ep_finalize()):
 *   execpack       libexecpack, memfd backend (W^X: RW alias + RX view)
 *   execpack-nokey the same with EP_F_NO_PKEY (workloads 1 and 2): the cost
 *                  of the protection key's WRPKRUs, where the CPU has keys
 *   asmjit-dual    asmjit JitAllocator, kUseDualMapping | kFillUnusedMemory
 *                  (W^X, freed memory refilled: the same guarantees)
 *   asmjit-default asmjit JitAllocator with its defaults (one RWX mapping)
 *   mmap           one mmap(RW) + mprotect(RX) + munmap per program
 * The asmjit columns exist only when configure found libasmjit-dev.
 *
 * Every program is real x86-64 code ("mov eax, imm32; ret", then NOP
 * padding up to its size) with its own imm32, and every program a run JITs
 * is called and must return its imm32; live programs are also compared
 * byte for byte at the end of each round.  A mismatch aborts the run.
 *
 * Usage: bench-suite [quick] [ROUNDS] [only=1,2,...,12]
 *   quick: 3 rounds and a quarter of the operations (workload 6: a
 *   quarter of the time); ROUNDS: 1-99 (7).
 *   EP_BENCH_MAX_THREADS: the largest thread count of workload 6
 *   (default twice the online CPUs, 16 at least).
 *   EP_BENCH_HUGETLB_NOTE (set by tests/bench.sh) is added to a hugetlb SKIP.
 */
#include "config.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef HAVE_ASMJIT
#include <asmjit/core.h>
#endif

#include "execpack.h"
#include "bench-firstfit.h"

#if defined(__x86_64__)
#include <x86intrin.h>

/* ---- small helpers ---------------------------------------------------- */

[[noreturn]] __attribute__((format(printf, 1, 2))) static void die(const char *fmt, ...)
{
	va_list ap;

	std::fflush(stdout);
	std::fprintf(stderr, "bench-suite: ");
	va_start(ap, fmt);
	std::vfprintf(stderr, fmt, ap);
	va_end(ap);
	std::fprintf(stderr, "\n");
	std::exit(1);
}

static double now_ns()
{
	timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

/*
 * Segments inside one operation are timed with the TSC (lfence; rdtsc;
 * lfence), calibrated against CLOCK_MONOTONIC; the cost of an empty
 * segment is measured once and taken off every segment.
 */
static double g_ns_per_tick = 1, g_tick_cost = 0;

static inline uint64_t tick()
{
	_mm_lfence();
	uint64_t t = __rdtsc();
	_mm_lfence();
	return t;
}

static void calibrate_ticks()
{
	double t0 = now_ns();
	uint64_t c0 = tick();
	while (now_ns() - t0 < 50e6)
		;
	g_ns_per_tick = (now_ns() - t0) / double(tick() - c0);
	std::vector<uint64_t> d;
	for (int i = 0; i < 10001; i++) {
		uint64_t a = tick();
		d.push_back(tick() - a);
	}
	std::sort(d.begin(), d.end());
	g_tick_cost = double(d[d.size() / 2]);
}

static inline double ticks_ns(uint64_t ticks, size_t segments)
{
	return (double(ticks) - g_tick_cost * double(segments)) * g_ns_per_tick;
}

struct Rng {
	uint64_t s;
	explicit Rng(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ull + 1) {}
	uint64_t next()
	{
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		return s;
	}
	uint32_t below(uint32_t n) { return uint32_t((next() >> 32) * n >> 32); }
	double unit() { return double(next() >> 11) / 9007199254740992.0; }
};

/* Sizes log-uniform in [16, 2048] bytes. */
static size_t log_uniform_size(Rng &r)
{
	size_t len = size_t(16.0 * std::exp2(7.0 * r.unit()));
	return std::min<size_t>(std::max<size_t>(len, 16), 2048);
}

struct Stats {
	double med, lo, hi;
};

static Stats stats_of(std::vector<double> v)
{
	if (v.empty())
		return Stats{ NAN, NAN, NAN };
	std::sort(v.begin(), v.end());
	size_t n = v.size();
	double m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	return Stats{ m, v.front(), v.back() };
}

/* Median over rounds of a[r] / b[r]: the runs of one round are side by side. */
static double ratio(const std::vector<double> &a, const std::vector<double> &b)
{
	std::vector<double> q;
	for (size_t i = 0; i < a.size() && i < b.size(); i++)
		q.push_back(a[i] / b[i]);
	return stats_of(q).med;
}

/* ---- the programs ----------------------------------------------------- */

enum { MAX_PROG = 4096 };
static unsigned char g_tmpl[MAX_PROG];

static void init_template()
{
	std::memset(g_tmpl, 0x90, sizeof(g_tmpl)); /* NOP padding */
	g_tmpl[0] = 0xb8;                          /* mov eax, imm32 */
	std::memset(g_tmpl + 1, 0, 4);
	g_tmpl[5] = 0xc3; /* ret */
}

/* The code of a program of len (>= 6) bytes returning imm. */
static inline void emit(void *dst, size_t len, uint32_t imm)
{
	std::memcpy(dst, g_tmpl, len);
	std::memcpy(static_cast<unsigned char *>(dst) + 1, &imm, 4);
}

typedef uint32_t (*prog_fn)(void);

static inline prog_fn as_fn(void *p)
{
	prog_fn f;
	std::memcpy(&f, &p, sizeof(f));
	return f;
}

static inline uint32_t call(void *p) { return as_fn(p)(); }

/* Calls checked: per thread, added up when a thread ends. */
static thread_local uint64_t t_checked;
static std::atomic<uint64_t> g_calls_checked(0);

static inline void check_call(void *p, uint32_t imm, const char *who)
{
	uint32_t got = call(p);
	if (got != imm)
		die("%s: program at %p returned %#x, expected %#x", who, p, got, imm);
	t_checked++;
}

/* Call it and compare all its bytes with what was written. */
static void check_full(void *p, size_t len, uint32_t imm, const char *who)
{
	unsigned char want[MAX_PROG];

	emit(want, len, imm);
	if (std::memcmp(p, want, len) != 0)
		die("%s: the %zu bytes at %p differ from the code written", who, len, p);
	check_call(p, imm, who);
}

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

static Alloc *make(Kind k)
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

/* ---- /proc/self/smaps ------------------------------------------------- */

struct MapEnt {
	unsigned long lo, hi;
	std::string perms;
	long pss_kb;
};

static std::vector<MapEnt> read_smaps()
{
	std::vector<MapEnt> v;
	FILE *f = std::fopen("/proc/self/smaps", "r");
	char line[1024];

	if (!f)
		die("/proc/self/smaps: %s", std::strerror(errno));
	while (std::fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];
		long kb;
		if (std::sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3)
			v.push_back(MapEnt{ lo, hi, perms, 0 });
		else if (!v.empty() && std::sscanf(line, "Pss: %ld kB", &kb) == 1)
			v.back().pss_kb = kb;
		/* a line longer than the buffer: skip its tail */
		while (!std::strchr(line, '\n') && std::fgets(line, sizeof(line), f))
			;
	}
	std::fclose(f);
	return v;
}

struct Mem {
	double reserved, mapped, pss, vmas, packs;
};

typedef std::set<std::tuple<unsigned long, unsigned long, std::string>> MapSet;

static MapSet map_set(const std::vector<MapEnt> &v)
{
	MapSet s;
	for (auto &e : v)
		s.emplace(e.lo, e.hi, e.perms);
	return s;
}

/*
 * What an allocator added since `before`: mappings that are new and either
 * executable or shared (RX views, memfd RW aliases); anonymous private RW
 * mappings (malloc arenas, staging buffers) are left out of mapped and Pss
 * but not of the VMA count.
 */
static Mem mem_since(const MapSet &before, size_t n_before, Alloc &a)
{
	std::vector<MapEnt> now = read_smaps();
	Mem m = { double(a.reserved()), 0, 0, double(now.size()) - double(n_before),
		  double(a.packs()) };

	for (auto &e : now) {
		if (before.count(std::make_tuple(e.lo, e.hi, e.perms)))
			continue;
		if (e.perms.size() >= 4 && (e.perms[2] == 'x' || e.perms[3] == 's')) {
			m.mapped += double(e.hi - e.lo);
			m.pss += double(e.pss_kb) * 1024;
		}
	}
	return m;
}

/* ---- options ---------------------------------------------------------- */

static int g_rounds = 7;
static int g_div = 1; /* quick: a quarter of the operations */
enum { NW = 12 }; /* workloads */
static bool g_only[NW + 1] = { false, true, true, true, true, true, true,
			       true,  true, true, true, true, true };

static int ops(int n) { return std::max(n / g_div, 1); }

/* Whether a memfd pool gets the protection key here (else why not): without
 * it, execpack and execpack-nokey run the same code. */
static bool g_pkey;
static char g_pkey_why[256];
static double g_wrpkru_ns = NAN; /* one WRPKRU, where the CPU has keys */

/* What one WRPKRU costs here: pairs that allow and disable a key of the
 * bench's own, timed by the clock. */
static void time_wrpkru()
{
	int key = pkey_alloc(0, PKEY_DISABLE_ACCESS);
	if (key < 0)
		return;
	uint32_t v, d;
	__asm__ volatile(".byte 0x0f, 0x01, 0xee" : "=a"(v), "=d"(d) : "c"(0));
	const uint32_t off = v & ~(3u << (2 * key)), on = off | 1u << (2 * key);
	const int n = 1000000;
	double t0 = now_ns();
	for (int i = 0; i < n; i++) {
		__asm__ volatile(".byte 0x0f, 0x01, 0xef" : : "a"(off), "c"(0), "d"(0) : "memory");
		__asm__ volatile(".byte 0x0f, 0x01, 0xef" : : "a"(on), "c"(0), "d"(0) : "memory");
	}
	g_wrpkru_ns = (now_ns() - t0) / (2.0 * n);
	__asm__ volatile(".byte 0x0f, 0x01, 0xef" : : "a"(v), "c"(0), "d"(0) : "memory");
	pkey_free(key);
}

static void probe_pkey()
{
	ep_config cfg = {};
	cfg.sz = sizeof(cfg);
	cfg.backend = EP_BACKEND_MEMFD;
	ep_pool *pool;
	if (ep_pool_create(&cfg, &pool))
		return;
	char why[512];
	g_pkey = ep_pool_guards(pool, why, sizeof(why)) & EP_GUARD_PKEY;
	const char *p = std::strstr(why, "pkey: ");
	if (p)
		std::snprintf(g_pkey_why, sizeof(g_pkey_why), "%.*s", int(std::strcspn(p + 6, ";")),
			      p + 6);
	ep_pool_destroy(pool);
	if (g_pkey)
		time_wrpkru();
}

static std::vector<Kind> peers(bool with_bump)
{
	std::vector<Kind> v = { K_EP, K_EP_NOKEY };
	if (have_asmjit) {
		v.push_back(K_AJ_DUAL);
		v.push_back(K_AJ_DEF);
	}
	v.push_back(K_MMAP);
	if (with_bump) {
		v.push_back(K_BUMP);
		v.push_back(K_BUMP_REUSE);
	}
	return v;
}

/* ---- output ----------------------------------------------------------- */

static void head(const char *title, const char *what)
{
	std::printf("\n%s\n  %s\n", title, what);
}

static void cols(const char *unit, const char *rname, bool with_call = false)
{
	std::printf("  %-24s %11s %11s %11s  %-8s %8s", "", "median", "min", "max", unit, rname);
	if (with_call)
		std::printf(" %11s", "with call");
	std::printf("\n");
}

/* with_call: the median of the whole cycle, the untimed call included. */
static void row(const std::string &name, const std::vector<double> &v, const char *unit,
		double r, int prec = 1, const std::vector<double> &with_call = {})
{
	Stats s = stats_of(v);
	char rs[32] = "";
	if (!std::isnan(r))
		std::snprintf(rs, sizeof(rs), "%.2fx", r);
	std::printf("  %-24s %11.*f %11.*f %11.*f  %-8s %8s", name.c_str(), prec, s.med, prec, s.lo,
		    prec, s.hi, unit, rs);
	if (!with_call.empty())
		std::printf(" %11.*f", prec, stats_of(with_call).med);
	std::printf("\n");
}

static void skip_row(const std::string &name, const std::string &why)
{
	std::printf("  %-24s SKIP: %s\n", name.c_str(), why.c_str());
}

/* ---- targets ---------------------------------------------------------- */

struct Target {
	std::string what;
	double value;
	double limit;
	bool at_most; /* value <= limit; else value >= limit */
	std::string skip;
	const char *unit;
};
static std::vector<Target> g_targets;

static void target(const std::string &what, double value, double limit, bool at_most,
		   const char *unit = "x", const std::string &skip = "")
{
	g_targets.push_back(Target{ what, value, limit, at_most, skip, unit });
}

/* The cost of the key, side by side: execpack / execpack-nokey. */
static void pkey_target(const char *what, double r)
{
	if (g_pkey)
		target(what, r, 1.03, true);
	else
		target(what, NAN, 1.03, true, "x",
		       std::string("no protection key here (") + g_pkey_why + ")");
}

/* The least the key can cost, beside its measured cost: an op opens two
 * windows (the free's refill, the finalize's copy), each at least a bare
 * WRPKRU pair. */
static void pkey_floor(const std::vector<double> &nokey)
{
	if (!g_pkey || std::isnan(g_wrpkru_ns) || nokey.empty())
		return;
	double m = stats_of(nokey).med, f = 4 * g_wrpkru_ns;
	std::printf("  the key's floor: 2 windows per op, a bare WRPKRU pair each: %.1f ns, "
		    "%.2fx execpack-nokey\n", f, (m + f) / m);
}

/* ---- workload 1 (and 3, 5): churn ------------------------------------- */

struct Prog {
	void *p;
	uint32_t imm;
	uint32_t len;
};

/* One churn sequence: the initial programs, then (victim, size, imm) ops. */
struct ChurnSeq {
	std::vector<Prog> init;
	std::vector<uint32_t> victim, len, imm;
	ChurnSeq(uint64_t seed, int live, int n)
	{
		Rng r(seed);
		for (int i = 0; i < live; i++)
			init.push_back(Prog{ nullptr, uint32_t(r.next()), uint32_t(log_uniform_size(r)) });
		for (int i = 0; i < n; i++) {
			victim.push_back(r.below(uint32_t(live)));
			len.push_back(uint32_t(log_uniform_size(r)));
			imm.push_back(uint32_t(r.next()));
		}
	}
};

struct ChurnRun {
	std::vector<Prog> live;
	double t0 = 0, t1 = 0; /* wall clock around all ops, calls included */
	uint64_t ticks = 0;    /* TSC ticks in free + alloc + write + finalize */
};

static void churn_setup(Alloc &a, const ChurnSeq &q, ChurnRun &run)
{
	run.live = q.init;
	for (auto &pr : run.live)
		pr.p = a.put(pr.len, pr.imm);
}

/*
 * The ops: free one at random and JIT a new one (timed, by the TSC when
 * `segments`), then call the new one (not timed when `segments`).
 */
static void churn_ops(Alloc &a, const ChurnSeq &q, ChurnRun &run, bool segments)
{
	size_t n = q.victim.size();
	Prog *live = run.live.data();
	uint64_t acc = 0;

	run.t0 = now_ns();
	for (size_t i = 0; i < n; i++) {
		Prog &pr = live[q.victim[i]];
		uint64_t c0 = segments ? tick() : 0;
		a.drop(pr.p);
		pr.len = q.len[i];
		pr.imm = q.imm[i];
		pr.p = a.put(pr.len, pr.imm);
		if (segments)
			acc += tick() - c0;
		check_call(pr.p, pr.imm, a.name);
	}
	run.t1 = now_ns();
	run.ticks = acc;
}

static void churn_finish(Alloc &a, ChurnRun &run)
{
	for (auto &pr : run.live)
		check_full(pr.p, pr.len, pr.imm, a.name);
	for (auto &pr : run.live)
		a.drop(pr.p);
	run.live.clear();
}

enum { LIVE = 10000 };

static void workload_churn()
{
	const std::vector<Kind> ks = peers(false);
	const int n = ops(20000);
	std::vector<double> t[K_N], wc[K_N];
	std::vector<Mem> mem[K_N];

	for (int r = 0; r < g_rounds; r++) {
		ChurnSeq q(1000 + uint64_t(r), LIVE, n);
		for (Kind k : ks) {
			ChurnRun run;
			run.live.reserve(LIVE);
			std::vector<MapEnt> b = read_smaps();
			MapSet before = map_set(b);
			Alloc *a = make(k);
			churn_setup(*a, q, run);
			churn_ops(*a, q, run, true);
			mem[k].push_back(mem_since(before, b.size(), *a));
			churn_finish(*a, run);
			delete a;
			t[k].push_back(ticks_ns(run.ticks, size_t(n)) / n);
			wc[k].push_back((run.t1 - run.t0) / n);
		}
	}

	if (g_only[1]) {
		head("1. churn",
		     "10,000 live programs, sizes log-uniform 16-2048 B; one op = free a random one,\n"
		     "  then alloc + write + finalize a new one (timed), then call it (not timed;\n"
		     "  \"with call\" is the whole cycle).  ratio = peer / execpack.");
		std::printf("  %d ops per round\n", n);
		cols("ns/op", "ratio", true);
		for (Kind k : ks)
			row(kind_name[k], t[k], "ns/op", ratio(t[k], t[K_EP]), 1, wc[k]);
		pkey_target("churn: execpack / execpack-nokey (the key's cost)",
			    ratio(t[K_EP], t[K_EP_NOKEY]));
		pkey_floor(t[K_EP_NOKEY]);
		/* (issue 8 asked for 0.5; issue 14 for 0.45, its single-thread bound) */
		if (have_asmjit)
			target("churn: execpack / asmjit-dual", ratio(t[K_EP], t[K_AJ_DUAL]), 0.45, true);
		else
			target("churn: execpack / asmjit-dual", NAN, 0.45, true, "x",
			       "built without asmjit");
	}
	if (g_only[3]) {
		head("3. memory with the 10,000 live programs of workload 1 (after its churn)",
		     "reserved: the allocator's own count of code memory (one view); mapped and Pss:\n"
		     "  new executable or shared mappings in /proc/self/smaps (a dual-mapped page is\n"
		     "  mapped twice but counted once by Pss); VMAs: lines added to /proc/self/maps;\n"
		     "  packs: packs / blocks / mappings.  ratio = peer reserved / execpack reserved.");
		std::printf("  %-24s %11s %11s %11s %7s %7s %9s %8s\n", "", "reserved", "mapped", "Pss",
			    "VMAs", "packs", "VMAs/pack", "ratio");
		double ep_res = 0, ep_vpp = 0;
		for (Kind k : ks) {
			std::vector<double> res, map, pss, vm, pk, vpp;
			for (auto &m : mem[k]) {
				res.push_back(m.reserved);
				map.push_back(m.mapped);
				pss.push_back(m.pss);
				vm.push_back(m.vmas);
				pk.push_back(m.packs);
				vpp.push_back(m.packs > 0 ? m.vmas / m.packs : NAN);
			}
			std::vector<double> rr;
			for (size_t i = 0; i < mem[k].size(); i++)
				rr.push_back(mem[k][i].reserved / mem[K_EP][i].reserved);
			double v = stats_of(vpp).med;
			std::printf("  %-24s %10.0fK %10.0fK %10.0fK %7.0f %7.0f %9.2f %7.2fx\n",
				    kind_name[k], stats_of(res).med / 1024, stats_of(map).med / 1024,
				    stats_of(pss).med / 1024, stats_of(vm).med, stats_of(pk).med, v,
				    stats_of(rr).med);
			if (k == K_EP) {
				ep_res = stats_of(res).med;
				ep_vpp = v;
			}
			if (k == K_AJ_DUAL)
				target("memory: execpack reserved / asmjit-dual", ep_res / stats_of(res).med,
				       1.0, true);
		}
		if (!have_asmjit)
			target("memory: execpack reserved / asmjit-dual", NAN, 1.0, true, "x",
			       "built without asmjit");
		target("memory: execpack VMAs per pack", ep_vpp, 2.0, true, "");
	}
}

/* ---- workload 2: one at a time ---------------------------------------- */

/*
 * One op: free the previous program, alloc + write + finalize the next
 * (timed by the TSC), call it (not timed).  At most one program is live.
 * *with_call: the whole cycle by the wall clock.
 */
static double once(Alloc &a, size_t len, int n, uint32_t salt, double *with_call)
{
	void *p = nullptr;
	for (int i = 0; i < 64; i++) { /* warm: the first pack is mapped here */
		if (p)
			a.drop(p);
		p = a.put(len, salt - uint32_t(i));
		check_call(p, salt - uint32_t(i), a.name);
	}
	uint64_t acc = 0;
	double t0 = now_ns();
	for (int i = 0; i < n; i++) {
		uint32_t imm = salt ^ uint32_t(i);
		uint64_t c0 = tick();
		a.drop(p);
		p = a.put(len, imm);
		acc += tick() - c0;
		check_call(p, imm, a.name);
	}
	*with_call = (now_ns() - t0) / n;
	a.drop(p);
	return ticks_ns(acc, size_t(n)) / n;
}

static void workload_once()
{
	const std::vector<Kind> ks = peers(true);
	const size_t sizes[] = { 64, 256, 1024, 4096 };

	head("2. one at a time in an empty pool",
	     "one op = free the previous program, alloc + write + finalize the next (timed),\n"
	     "  then call it (not timed; \"with call\" is the whole cycle).\n"
	     "  bump: bump an offset in one 2 MiB memfd mapped RW and RX, memcpy into the RW view,\n"
	     "  nothing to finalize or free (the practical floor).  bump-reuse: the same, always\n"
	     "  at offset 0, where the last program ran (as first fit places it in an empty pool).\n"
	     "  ratio = peer / execpack; vs bump = execpack / bump, timed segment and whole cycle.");
	for (size_t len : sizes) {
		std::vector<double> t[K_N], wc[K_N];
		for (int r = 0; r < g_rounds; r++) {
			for (Kind k : ks) {
				Alloc *a = make(k);
				int n = ops(k == K_MMAP ? 4000 : 40000);
				double w;
				t[k].push_back(once(*a, len, n, uint32_t(len * 7919 + unsigned(r)), &w));
				wc[k].push_back(w);
				delete a;
			}
		}
		std::printf("  %zu B\n", len);
		cols("ns/op", "ratio", true);
		for (Kind k : ks)
			row(std::string("  ") + kind_name[k], t[k], "ns/op", ratio(t[k], t[K_EP]), 1,
			    wc[k]);
		double vb = ratio(t[K_EP], t[K_BUMP]);
		for (Kind b : { K_BUMP, K_BUMP_REUSE })
			std::printf("  %-24s %11s %11s %11s  %-8s %7.2fx %10.2fx\n",
				    (std::string("  execpack / ") + kind_name[b]).c_str(), "", "", "", "",
				    ratio(t[K_EP], t[b]), ratio(wc[K_EP], wc[b]));
		if (len == 64 || len == 256)
			pkey_target(len == 64 ? "one at a time 64 B: execpack / execpack-nokey"
					      : "one at a time 256 B: execpack / execpack-nokey",
				    ratio(t[K_EP], t[K_EP_NOKEY]));
		if (len == 64 || len == 256)
			pkey_floor(t[K_EP_NOKEY]);
		if (len == 256) {
			target("one at a time 256 B: execpack / bump", vb, 3.0, true);
			target("  the same, whole cycle (the call included)", ratio(wc[K_EP], wc[K_BUMP]),
			       3.0, true);
		}
	}
}

/* ---- workload 4: calls ------------------------------------------------ */

struct CallSet {
	std::string name;
	std::string skip;
	Alloc *a = nullptr;
	std::vector<Prog> progs;
	std::vector<prog_fn> order; /* shuffled */
	uint64_t sum = 0;
	std::vector<double> t;
};

static std::string file_line(const char *path)
{
	char buf[256] = "";
	FILE *f = std::fopen(path, "r");
	if (f) {
		if (!std::fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		std::fclose(f);
	}
	std::string s(buf);
	while (!s.empty() && (s.back() == '\n'))
		s.pop_back();
	return s;
}

static long meminfo(const char *key)
{
	FILE *f = std::fopen("/proc/meminfo", "r");
	char line[256];
	long v = -1;
	size_t kl = std::strlen(key);
	if (!f)
		return -1;
	while (std::fgets(line, sizeof(line), f))
		if (!std::strncmp(line, key, kl) && line[kl] == ':')
			v = std::atol(line + kl + 1);
	std::fclose(f);
	return v;
}

static std::string hugetlb_note()
{
	const char *n = std::getenv("EP_BENCH_HUGETLB_NOTE");
	return n && *n ? std::string(" (") + n + ")" : std::string();
}

/* Why the hugetlb backend cannot take `pages` more 2 MiB pages, or "". */
static std::string hugetlb_unavailable(long pages)
{
	ep_config cfg = {};
	char why[256] = "";
	cfg.sz = sizeof(cfg);
	cfg.backend = EP_BACKEND_HUGETLB;
	if (ep_backend_probe(EP_BACKEND_HUGETLB, &cfg, why, sizeof(why)) != 0)
		return std::string(why) + hugetlb_note();
	long fr = meminfo("HugePages_Free");
	if (fr < pages) {
		char b[160];
		std::snprintf(b, sizeof(b), "needs %ld free 2 MiB huge pages, %ld free", pages, fr);
		return b + hugetlb_note();
	}
	return "";
}

enum { NCALL = 20000 };

static void call_setup(CallSet &c, Alloc *a, size_t len, uint64_t seed)
{
	Rng r(seed);
	c.a = a;
	for (int i = 0; i < NCALL; i++) {
		int err = 0;
		uint32_t imm = uint32_t(r.next());
		void *p = a->try_put(len, imm, &err);
		if (!p) {
			char b[160];
			std::snprintf(b, sizeof(b), "allocation %d of %zu B failed: %s", i + 1, len,
				      std::strerror(-err));
			c.skip = b + (len > 64 ? hugetlb_note() : std::string());
			for (auto &pr : c.progs)
				a->drop(pr.p);
			c.progs.clear();
			delete a;
			c.a = nullptr;
			return;
		}
		c.progs.push_back(Prog{ p, imm, uint32_t(len) });
		c.sum += imm;
	}
	for (auto &pr : c.progs) {
		check_full(pr.p, pr.len, pr.imm, a->name);
		c.order.push_back(as_fn(pr.p));
	}
	for (size_t i = c.order.size() - 1; i > 0; i--) /* Fisher-Yates */
		std::swap(c.order[i], c.order[r.below(uint32_t(i + 1))]);
}

static double call_round(CallSet &c, int passes)
{
	const prog_fn *o = c.order.data();
	size_t n = c.order.size();
	uint64_t sum = 0;
	double t0 = now_ns();
	for (int p = 0; p < passes; p++)
		for (size_t i = 0; i < n; i++)
			sum += o[i]();
	double t = (now_ns() - t0) / (double(passes) * double(n));
	if (sum != c.sum * uint64_t(passes))
		die("calls %s: the programs returned a sum of %#llx, expected %#llx", c.name.c_str(),
		    (unsigned long long)sum, (unsigned long long)(c.sum * uint64_t(passes)));
	t_checked += uint64_t(passes) * n;
	return t;
}

static void call_teardown(CallSet &c)
{
	if (!c.a)
		return;
	for (auto &pr : c.progs)
		c.a->drop(pr.p);
	delete c.a;
	c.a = nullptr;
}

/* One table of workload 4; ratios against the set's first row. */
static void call_rows(const char *title, const std::vector<CallSet> &sets)
{
	std::printf("  %s\n", title);
	cols("ns/call", "ratio");
	for (auto &c : sets) {
		if (c.a)
			row(c.name, c.t, "ns/call", ratio(c.t, sets[0].t), 2);
		else
			skip_row(c.name, c.skip);
	}
}

static void workload_calls()
{
	/* 20,000 x 1 KiB is 10 packs of 2 MiB; one more for the small set,
	   one spare per sub-pool. */
	const long large_pages = long(NCALL) * 1024 / (2 << 20) + 1 + 4;
	std::string no_huge_small = hugetlb_unavailable(1);
	std::string no_huge_large = hugetlb_unavailable(large_pages + 1);
	std::vector<CallSet> small(4), large(2);
	const int passes = std::max(25 / g_div, 2);

	small[0].name = "execpack memfd";
	small[1].name = "execpack hugetlb";
	small[2].name = "asmjit-dual";
	small[3].name = "mmap (1 per 4 KiB page)";
	large[0].name = "execpack memfd (4 KiB)";
	large[1].name = "execpack hugetlb (2 MiB)";

	call_setup(small[0], new Execpack("execpack memfd", EP_BACKEND_MEMFD), 6, 41);
	if (no_huge_small.empty())
		call_setup(small[1], new Execpack("execpack hugetlb", EP_BACKEND_HUGETLB), 6, 41);
	else
		small[1].skip = no_huge_small;
#ifdef HAVE_ASMJIT
	call_setup(small[2], new Asmjit("asmjit-dual", true), 6, 41);
#else
	small[2].skip = "built without asmjit";
#endif
	call_setup(small[3], new Mmap(), 6, 41);
	call_setup(large[0], new Execpack("execpack memfd", EP_BACKEND_MEMFD), 1024, 43);
	if (no_huge_large.empty())
		call_setup(large[1], new Execpack("execpack hugetlb", EP_BACKEND_HUGETLB), 1024, 43);
	else
		large[1].skip = no_huge_large;

	for (int r = 0; r < g_rounds; r++) {
		for (auto &c : small)
			if (c.a)
				c.t.push_back(call_round(c, passes));
		for (auto &c : large)
			if (c.a)
				c.t.push_back(call_round(c, passes));
	}

	head("4. calls",
	     "20,000 programs (mov eax, imm32; ret) called through a pointer array in shuffled\n"
	     "  order, every return value summed and checked.  ratio = this / execpack memfd.");
	std::string thp = file_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
	std::printf("  %d calls per round; shmem transparent huge pages: %s\n", passes * NCALL,
		    thp.empty() ? "unknown" : thp.c_str());
	call_rows("tiny: one 6-byte program each", small);
	call_rows("large footprint: each program takes 1 KiB (~20 MB of code)", large);
	target("calls: mmap per page / execpack memfd", ratio(small[3].t, small[0].t), 3.0, false);
	if (large[1].a)
		target("calls 20 MB: hugetlb / memfd", ratio(large[1].t, large[0].t), 0.9, true);
	else
		target("calls 20 MB: hugetlb / memfd", NAN, 0.9, true, "x", large[1].skip);
	for (auto &c : small)
		call_teardown(c);
	for (auto &c : large)
		call_teardown(c);
}

/* ---- workload 5: two threads on one pool ------------------------------ */

static double threaded(Alloc &a, int nthreads, int total_ops, uint64_t seed)
{
	std::vector<ChurnSeq> qs;
	std::vector<ChurnRun> runs{ size_t(nthreads) };
	std::atomic<int> ready(0);
	std::atomic<bool> go(false);
	std::vector<std::thread> th;

	for (int i = 0; i < nthreads; i++)
		qs.emplace_back(seed * 16 + uint64_t(i), LIVE / nthreads, total_ops / nthreads);
	for (int i = 0; i < nthreads; i++)
		th.emplace_back([&, i] {
			churn_setup(a, qs[size_t(i)], runs[size_t(i)]);
			ready++;
			while (!go.load(std::memory_order_acquire))
				;
			churn_ops(a, qs[size_t(i)], runs[size_t(i)], false);
			g_calls_checked += t_checked;
		});
	while (ready.load() < nthreads)
		std::this_thread::yield();
	go.store(true, std::memory_order_release);
	for (auto &t : th)
		t.join();
	double t0 = runs[0].t0, t1 = runs[0].t1;
	for (auto &run : runs) {
		t0 = std::min(t0, run.t0);
		t1 = std::max(t1, run.t1);
		churn_finish(a, run);
	}
	return double(total_ops / nthreads * nthreads) / ((t1 - t0) / 1e9);
}

static void workload_threads()
{
	std::vector<Kind> ks = { K_EP };
	if (have_asmjit)
		ks.push_back(K_AJ_DUAL);
	const int n = ops(80000);
	std::vector<double> one[K_N], two[K_N];

	for (int r = 0; r < g_rounds; r++) {
		for (Kind k : ks) {
			Alloc *a = make(k);
			one[k].push_back(threaded(*a, 1, n, 2000 + uint64_t(r)));
			delete a;
			a = make(k);
			two[k].push_back(threaded(*a, 2, n, 3000 + uint64_t(r)));
			delete a;
		}
	}
	head("5. two threads on one shared pool",
	     "workload 1 with 10,000 live programs in one thread, then split over two threads\n"
	     "  (5,000 live each) sharing one pool / one JitAllocator; ops per second by the\n"
	     "  wall clock, the call of each new program included.  ratio = 2 threads / 1.");
	std::printf("  %d ops per round in total; %ld CPUs online\n", n, sysconf(_SC_NPROCESSORS_ONLN));
	cols("Mops/s", "ratio");
	for (Kind k : ks) {
		std::vector<double> a1, a2;
		for (double v : one[k])
			a1.push_back(v / 1e6);
		for (double v : two[k])
			a2.push_back(v / 1e6);
		row(std::string(kind_name[k]) + " 1 thread", a1, "Mops/s", NAN, 3);
		row(std::string(kind_name[k]) + " 2 threads", a2, "Mops/s", ratio(two[k], one[k]), 3);
	}
	target("2 threads / 1 thread (execpack)", ratio(two[K_EP], one[K_EP]), 1.6, false);
}

/* ---- workload 6: many threads on one shared pool ---------------------- */

/*
 * mmap keeps a tenth: its cost is in each call, whatever the number of
 * mappings, and setting up 16,000 of them would take most of the run.
 */
enum { MT_LIVE = 1000, MT_LIVE_MMAP = 100 };

/*
 * Hand-off: thread i passes each program it JITs to thread i + 1 through
 * this ring (one producer, one consumer, no lock).  It is small, so that
 * few programs are in transit and nearly every op frees one.
 */
struct HandRing {
	enum { CAP = 64 };
	alignas(64) std::atomic<uint32_t> head{ 0 }; /* the consumer's */
	alignas(64) std::atomic<uint32_t> tail{ 0 }; /* the producer's */
	alignas(64) Prog buf[CAP];
	bool push(const Prog &pr)
	{
		uint32_t t = tail.load(std::memory_order_relaxed);
		if (t - head.load(std::memory_order_acquire) == CAP)
			return false;
		buf[t % CAP] = pr;
		tail.store(t + 1, std::memory_order_release);
		return true;
	}
	bool pop(Prog *pr)
	{
		uint32_t h = head.load(std::memory_order_relaxed);
		if (h == tail.load(std::memory_order_acquire))
			return false;
		*pr = buf[h % CAP];
		head.store(h + 1, std::memory_order_release);
		return true;
	}
};

struct alignas(64) MtWorker {
	std::vector<Prog> live;
	std::vector<Prog> spare;	 /* JITted when the run stopped, not handed on */
	std::atomic<uint64_t> done{ 0 }; /* ops, read by the main thread */
};

struct MtRun {
	Alloc &a;
	int n;
	bool handoff;
	int live; /* programs per thread */
	std::vector<MtWorker> w;
	std::vector<HandRing> rings;
	std::atomic<int> ready{ 0 }, finished{ 0 };
	std::atomic<bool> go{ false }, stop{ false }, release{ false };
	MtRun(Alloc &al, int nthreads, bool hand, int nlive)
		: a(al), n(nthreads), handoff(hand), live(nlive), w(size_t(nthreads)),
		  rings(hand ? size_t(nthreads) : 0)
	{
	}
};

static Prog mt_jit(Alloc &a, Rng &r)
{
	Prog pr{ nullptr, uint32_t(r.next()), uint32_t(log_uniform_size(r)) };
	pr.p = a.put(pr.len, pr.imm);
	check_call(pr.p, pr.imm, a.name);
	return pr;
}

/* Free a random one of `live` and put q in its place. */
static inline void mt_replace(Alloc &a, std::vector<Prog> &live, Rng &r, const Prog &q)
{
	Prog &v = live[r.below(uint32_t(live.size()))];
	a.drop_len(v.p, v.len);
	v = q;
}

static void mt_thread(MtRun &run, int i, uint64_t seed)
{
	Alloc &a = run.a;
	MtWorker &me = run.w[size_t(i)];
	Rng r(seed);
	uint64_t done = 0;

	me.live.reserve(size_t(run.live));
	for (int k = 0; k < run.live; k++)
		me.live.push_back(mt_jit(a, r));
	run.ready++;
	/* with more threads than CPUs, spinning would keep the others out */
	while (!run.go.load(std::memory_order_acquire))
		std::this_thread::yield();
	if (!run.handoff) {
		while (!run.stop.load(std::memory_order_relaxed)) {
			Prog &v = me.live[r.below(uint32_t(run.live))];
			a.drop_len(v.p, v.len);
			v = mt_jit(a, r);
			me.done.store(++done, std::memory_order_relaxed);
		}
	} else {
		HandRing &in = run.rings[size_t((i + run.n - 1) % run.n)];
		HandRing &out = run.rings[size_t(i)];
		Prog q;
		while (!run.stop.load(std::memory_order_relaxed)) {
			if (in.pop(&q))
				mt_replace(a, me.live, r, q);
			Prog pr = mt_jit(a, r);
			/*
			 * The next thread is behind: take from the previous one
			 * meanwhile, so that a ring of full rings still drains.
			 */
			while (!out.push(pr)) {
				if (in.pop(&q))
					mt_replace(a, me.live, r, q);
				else if (run.stop.load(std::memory_order_relaxed)) {
					me.spare.push_back(pr);
					break;
				} else
					std::this_thread::yield();
			}
			me.done.store(++done, std::memory_order_relaxed);
		}
	}
	run.finished++;
	/* the main thread reads the pool's stats with all programs live */
	while (!run.release.load(std::memory_order_acquire))
		std::this_thread::yield();
	for (auto *v : { &me.live, &me.spare }) {
		for (auto &pr : *v)
			check_full(pr.p, pr.len, pr.imm, a.name);
		for (auto &pr : *v)
			a.drop_len(pr.p, pr.len);
		v->clear();
	}
	g_calls_checked += t_checked;
}

/*
 * Ops per second of n threads, each with `live` programs, for dur_ns on
 * the shared allocator a.  With
 * `pool`, *mid gets its stats once the threads have stopped (every program
 * still live) and *end once they have freed everything and exited.
 */
static double many_threads(Alloc &a, int n, bool handoff, int live, uint64_t seed,
			   double dur_ns, ep_pool *pool, ep_stats *mid, ep_stats *end)
{
	MtRun run(a, n, handoff, live);
	std::vector<std::thread> th;

	for (int i = 0; i < n; i++)
		th.emplace_back(mt_thread, std::ref(run), i, seed * 1024 + uint64_t(i));
	while (run.ready.load() < n)
		std::this_thread::yield();
	/* hand-off: from the first op on, a thread frees what the previous one JITted */
	if (handoff)
		for (int i = n - 1; i > 0; i--)
			std::swap(run.w[size_t(i)].live, run.w[size_t(i - 1)].live);
	double t0 = now_ns();
	run.go.store(true, std::memory_order_release);
	for (double t = 0; t < dur_ns; t = now_ns() - t0) {
		timespec ts = { 0, long(std::min(dur_ns - t, 1e8)) };
		nanosleep(&ts, nullptr);
	}
	/* ops done by now; the few in flight are not counted */
	uint64_t total = 0;
	for (auto &w : run.w)
		total += w.done.load(std::memory_order_relaxed);
	double t1 = now_ns();
	run.stop.store(true);
	while (run.finished.load() < n)
		std::this_thread::yield();
	if (pool)
		ep_pool_stats(pool, mid);
	run.release.store(true, std::memory_order_release);
	for (auto &t : th)
		t.join();
	Prog pr;
	for (auto &ring : run.rings)
		while (ring.pop(&pr)) {
			check_full(pr.p, pr.len, pr.imm, a.name);
			a.drop_len(pr.p, pr.len);
		}
	if (pool)
		ep_pool_stats(pool, end);
	return double(total) / ((t1 - t0) / 1e9);
}

/* 1, 2, 4, ... up to EP_BENCH_MAX_THREADS, by default 2 x CPUs but 16 at least. */
static std::vector<int> thread_counts()
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	long mx = std::max(2 * cpus, 16L);
	const char *e = std::getenv("EP_BENCH_MAX_THREADS");
	if (e && *e) {
		char *end;
		mx = std::strtol(e, &end, 10);
		if (*end || mx < 1 || mx > 1024)
			die("EP_BENCH_MAX_THREADS=%s: give a thread count from 1 to 1024", e);
	}
	std::vector<int> v;
	for (long c = 1; c < mx; c *= 2)
		v.push_back(int(c));
	v.push_back(int(mx));
	return v;
}

static void workload_many()
{
	const std::vector<int> counts = thread_counts();
	const size_t nc = counts.size();
	const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	const double dur = 160e6 / g_div;
	std::vector<Kind> kinds[2] = { { K_EP }, { K_EP } };
	if (have_asmjit)
		for (auto &v : kinds)
			v.push_back(K_AJ_DUAL);
	kinds[0].push_back(K_MMAP); /* a free is a munmap: no hand-off variant */
	/* tp[variant][count][kind]: Mops/s by round */
	std::vector<std::vector<double>> tp[2][K_N];
	std::vector<double> mem_ratio, mem_left, mem_res, mem_used;
	int at16 = -1;

	for (auto &v : tp)
		for (auto &k : v)
			k.resize(nc);
	for (size_t ci = 0; ci < nc; ci++)
		if (counts[ci] == 16)
			at16 = int(ci);
	for (int r = 0; r < g_rounds; r++) {
		for (size_t ci = 0; ci < nc; ci++) {
			for (int v = 0; v < 2; v++) {
				for (Kind k : kinds[v]) {
					Alloc *a = k == K_MMAP ? new Mmap(true) : make(k);
					bool mem = k == K_EP && v == 0 && int(ci) == at16;
					ep_stats mid = {}, end = {};
					ep_pool *pool = mem ? static_cast<Execpack *>(a)->pool : nullptr;
					double ops_s = many_threads(
						*a, counts[ci], v == 1,
						k == K_MMAP ? MT_LIVE_MMAP : MT_LIVE,
						6000 + uint64_t(r) * 64 + ci, dur, pool, &mid, &end);
					tp[v][k][ci].push_back(ops_s / 1e6);
					delete a;
					if (!mem)
						continue;
					double pk = mid.packs ? double(mid.pack_bytes) / double(mid.packs) : 0;
					mem_res.push_back(double(mid.pack_bytes));
					mem_used.push_back(double(mid.used_bytes));
					mem_ratio.push_back(double(mid.pack_bytes) /
							    (1.5 * double(mid.used_bytes) + 16 * pk));
					mem_left.push_back(double(end.packs));
				}
			}
		}
	}

	head("6. many threads on one shared pool",
	     "1, 2, 4, ... threads (up to 2 x CPUs, 16 at least; EP_BENCH_MAX_THREADS sets the\n"
	     "  largest), each with 1,000 live programs (16-2048 B, log-uniform) in one pool /\n"
	     "  one JitAllocator; one op = free one of the thread's programs, JIT a new one, call\n"
	     "  it.  hand-off: the threads form a ring; each passes the programs it JITs to the\n"
	     "  next and frees those the previous one JITted.  Mops/s by the wall clock over a\n"
	     "  fixed time per run; scaling = N threads / 1 thread; vs asmjit = this / asmjit-dual.\n"
	     "  mmap: 100 live programs per thread (its cost is per call, not per mapping).");
	std::printf("  %.0f ms per run; %ld CPUs online\n", dur / 1e6, cpus);
	for (int v = 0; v < 2; v++) {
		std::printf("  %s\n", v ? "hand-off: each thread frees programs the previous one JITted"
				    : "own: each thread frees its own programs");
		std::printf("  %8s %-16s %9s %9s %9s  %-7s %8s %9s\n", "threads", "", "median", "min",
			    "max", "", "scaling", "vs asmjit");
		for (size_t ci = 0; ci < nc; ci++) {
			for (Kind k : kinds[v]) {
				Stats s = stats_of(tp[v][k][ci]);
				char sc[32], va[32] = "";
				std::snprintf(sc, sizeof(sc), "%.2fx", ratio(tp[v][k][ci], tp[v][k][0]));
				if (have_asmjit && k != K_AJ_DUAL)
					std::snprintf(va, sizeof(va), "%.2fx",
						      ratio(tp[v][k][ci], tp[v][K_AJ_DUAL][ci]));
				char th[16] = "";
				if (k == K_EP)
					std::snprintf(th, sizeof(th), "%d", counts[ci]);
				std::printf("  %8s %-16s %9.3f %9.3f %9.3f  %-7s %8s %9s\n", th,
					    kind_name[k], s.med, s.lo, s.hi, "Mops/s", sc, va);
			}
		}
	}
	if (at16 >= 0)
		std::printf("  memory, execpack with 16 threads x 1,000 live: %.1f MiB in packs for %.1f MiB\n"
			    "  of live chunks (medians); packs left once all is freed: %.0f (max over rounds)\n",
			    stats_of(mem_res).med / 1048576, stats_of(mem_used).med / 1048576,
			    stats_of(mem_left).hi);

	/* the targets of issue 14 for the machine at hand */
	const std::vector<std::vector<double>> &ep = tp[0][K_EP], &eph = tp[1][K_EP];
	std::string no16 = "no run with 16 threads (EP_BENCH_MAX_THREADS)";
	auto scaled = [&](const std::vector<std::vector<double>> &t, int ci) {
		return ci >= 0 ? ratio(t[size_t(ci)], t[0]) : NAN;
	};
	if (cpus >= 16) {
		target("many threads: 16 / 1 thread (execpack)", scaled(ep, at16), 12, false, "x",
		       at16 < 0 ? no16 : "");
		if (have_asmjit)
			target("many threads: execpack / asmjit-dual at 16",
			       at16 < 0 ? NAN : ratio(ep[size_t(at16)], tp[0][K_AJ_DUAL][size_t(at16)]),
			       30, false, "x", at16 < 0 ? no16 : "");
		else
			target("many threads: execpack / asmjit-dual at 16", NAN, 30, false, "x",
			       "built without asmjit");
		target("many threads, hand-off: 16 / 1 thread", scaled(eph, at16), 8, false, "x",
		       at16 < 0 ? no16 : "");
	} else if (cpus == 2) {
		target("many threads (2 CPUs): 16 / 1 thread (execpack)", scaled(ep, at16), 1.8, false,
		       "x", at16 < 0 ? no16 : "");
		target("many threads (2 CPUs): 2 / 1 thread (execpack)", scaled(ep, 1), 1.7, false);
	}
	if (cpus >= 4) {
		/* every doubling up to the CPU count adds throughput */
		double gain = INFINITY;
		for (size_t ci = 1; ci < nc && counts[ci] <= cpus; ci++)
			gain = std::min(gain, ratio(ep[ci], ep[ci - 1]));
		target("many threads: least gain per doubling up to CPUs", gain, 1.0, false);
	}
	if (at16 >= 0) {
		target("16 threads: packs / (1.5 x used + 16 packs)", stats_of(mem_ratio).hi,
		       1.0, true);
		target("16 threads, all freed: packs left", stats_of(mem_left).hi, 1.0, true, "");
	}
}

/* ---- workload 7: fork ------------------------------------------------- */

/* Add the inodes of the memfds this process maps or holds open now to s. */
static void memfd_inodes(std::set<unsigned long> &s)
{
	FILE *f = std::fopen("/proc/self/maps", "r");
	char line[1024];

	if (!f)
		die("/proc/self/maps: %s", std::strerror(errno));
	while (std::fgets(line, sizeof(line), f)) {
		unsigned long ino;
		int off = 0;
		if (std::sscanf(line, "%*x-%*x %*s %*x %*x:%*x %lu %n", &ino, &off) == 1 && off > 0 &&
		    !std::strncmp(line + off, "/memfd:", 7))
			s.insert(ino);
		while (!std::strchr(line, '\n') && std::fgets(line, sizeof(line), f))
			;
	}
	std::fclose(f);
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		die("/proc/self/fd: %s", std::strerror(errno));
	while (dirent *de = readdir(d)) {
		char path[300], link[256];
		struct stat st;
		if (de->d_name[0] == '.')
			continue;
		std::snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = 0;
		if (!std::strncmp(link, "/memfd:", 7) && stat(path, &st) == 0)
			s.insert((unsigned long)st.st_ino);
	}
	closedir(d);
}

/* ns for ops [from, to) of q on live: free, JIT, call, as in workload 1. */
static double churn_slice(Alloc &a, const ChurnSeq &q, std::vector<Prog> &live, size_t from,
			  size_t to)
{
	double t0 = now_ns();
	for (size_t i = from; i < to; i++) {
		Prog &pr = live[q.victim[i]];
		a.drop(pr.p);
		pr.len = q.len[i];
		pr.imm = q.imm[i];
		pr.p = a.put(pr.len, pr.imm);
		check_call(pr.p, pr.imm, a.name);
	}
	return now_ns() - t0;
}

/* fork(), exec `path` in the child, wait for it; it must exit 0. */
static void spawn(const char *path)
{
	int st;
	pid_t pid = fork();

	if (pid < 0)
		die("fork: %s", std::strerror(errno));
	if (pid == 0) {
		execl(path, path, static_cast<char *>(nullptr));
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", std::strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("%s in a forked child: wait status %#x", path, unsigned(st));
}

enum { CHILDREN = 100 };

static void workload_fork()
{
	const char *prog = access("/bin/true", X_OK) == 0 ? "/bin/true" : "/usr/bin/true";
	const size_t per = size_t(std::max(ops(20000) / CHILDREN, 1)); /* ops per slice */
	const size_t n = per * CHILDREN;			       /* ops per phase */
	enum { EP, SL, NA };
	static const char *const names[NA] = { "execpack", "slots" };
	std::vector<double> before[NA], among[NA], after[NA], mf_before, mf_among;
	/* where each fork taxes the parent, a round takes many seconds */
	const double t_start = now_ns(), t_cap = 30e9;
	int rounds = 0;

	for (; rounds < g_rounds && (rounds == 0 || now_ns() - t_start < t_cap); rounds++) {
		const int r = rounds;
		/* a phase's worth of warm-up: slots' first frees fill its lists, and
		 * until they do its puts touch new pages */
		ChurnSeq q(7000 + uint64_t(r), LIVE, int(4 * n));

		for (int k = 0; k < NA; k++) {
			Alloc *a = k == SL ? static_cast<Alloc *>(new Slots())
					   : new Execpack("execpack", EP_BACKEND_MEMFD);
			std::vector<Prog> live = q.init;
			std::set<unsigned long> seen;
			size_t at = n;
			double t[3] = { 0, 0, 0 };
			size_t known[3];

			for (auto &pr : live)
				pr.p = a->put(pr.len, pr.imm);
			churn_slice(*a, q, live, 0, at); /* warm up, not timed */
			memfd_inodes(seen);
			/* before: without children; among: a child before each slice; after */
			for (int phase = 0; phase < 3; phase++) {
				known[phase] = seen.size();
				for (int c = 0; c < CHILDREN; c++, at += per) {
					if (phase == 1) {
						spawn(prog);
						memfd_inodes(seen);
					}
					t[phase] += churn_slice(*a, q, live, at, at + per);
					memfd_inodes(seen);
				}
			}
			before[k].push_back(double(n) / t[0] * 1e3);
			among[k].push_back(double(n) / t[1] * 1e3);
			after[k].push_back(double(n) / t[2] * 1e3);
			if (k == EP) {
				mf_before.push_back(double(known[1] - known[0]));
				mf_among.push_back(double(seen.size() - known[1]));
			}
			for (auto &pr : live)
				check_full(pr.p, pr.len, pr.imm, a->name);
			for (auto &pr : live)
				a->drop(pr.p);
			delete a;
		}
	}

	head("7. fork(): a parent churning 10,000 live programs",
	     "workload 1's churn on one execpack pool, by the wall clock (the call included), in\n"
	     "  slices: 100 without children (before); 100 each after a child, fork() + exec +\n"
	     "  waitpid() (among; the child itself not timed); 100 more (after).  slots: the\n"
	     "  same against workload 8's floor, an allocator with no state to speak of, for\n"
	     "  what fork() and the children cost any process here.  memfds: new memfd\n"
	     "  inodes in /proc/self/maps and /proc/self/fd, looked at after each child and\n"
	     "  each slice.\n"
	     "  ratio = this / before.");
	std::printf("  %zu ops per slice; the children run %s", per, prog);
	if (rounds < g_rounds)
		std::printf("; %d rounds (no new round after %.0f s)", rounds, t_cap / 1e9);
	std::printf("\n");
	cols("Mops/s", "ratio");
	for (int k = 0; k < NA; k++) {
		const std::string nm = names[k];
		row(nm + " before", before[k], "Mops/s", NAN, 3);
		row(nm + " among", among[k], "Mops/s", ratio(among[k], before[k]), 3);
		row(nm + " after", after[k], "Mops/s", ratio(after[k], before[k]), 3);
	}
	std::printf("  memfds the parent created: %.0f among and after the children, %.0f before\n"
		    "  them (the most in a round)\n",
		    stats_of(mf_among).hi, stats_of(mf_before).hi);
	target("fork: after 100 fork()+exec() / before", ratio(after[EP], before[EP]), 0.9, false);
	target("  the same for the floor (slots)", ratio(after[SL], before[SL]), 0.9, false);
	target("fork: among 100 fork()+exec() / before", ratio(among[EP], before[EP]), 0.9, false);
	target("  the same for the floor (slots)", ratio(among[SL], before[SL]), 0.9, false);
	target("fork: memfds the parent created with children", stats_of(mf_among).hi, 0, true, "");
}

/* ---- main ------------------------------------------------------------- */

/* ---- workload 8: growth ---------------------------------------------- */

/*
 * Workload 1's churn as the live set grows: a cost that follows the number
 * of packs (a walk over them) shows here and not at 10,000 live.  The
 * execpack-64k column has 32 times as many packs (64 KiB each), so such a
 * cost shows there first.
 */
static void workload_growth()
{
	static const int lives[] = { 1000, 10000, 100000, 300000 };
	enum { NL = sizeof(lives) / sizeof(lives[0]), EP = 0, EP64 = 1, SL = 2, AJ = 3, NC = 4 };
	static const char *const names[NC] = { "execpack", "execpack-64k", "slots", "asmjit-dual" };
	const int nc = have_asmjit ? NC : NC - 1;
	const int n = ops(20000);
	std::vector<double> t[NL][NC], res[NL][NC];

	for (int r = 0; r < g_rounds; r++) {
		for (int l = 0; l < NL; l++) {
			ChurnSeq q(8000 + uint64_t(r) * NL + uint64_t(l), lives[l], n);
			for (int c = 0; c < nc; c++) {
				ChurnRun run;
				run.live.reserve(size_t(lives[l]));
				Alloc *a = c == AJ    ? make(K_AJ_DUAL)
					   : c == EP64 ? new Execpack(names[c], EP_BACKEND_MEMFD, 65536)
					   : c == SL   ? new Slots()
						       : make(K_EP);
				churn_setup(*a, q, run);
				churn_ops(*a, q, run, true);
				res[l][c].push_back(double(a->reserved()));
				churn_finish(*a, run);
				delete a;
				t[l][c].push_back(ticks_ns(run.ticks, size_t(n)) / n);
			}
		}
	}

	head("8. growth",
	     "workload 1's churn (free a random program, then alloc + write + finalize a new\n"
	     "  one: timed) with 1,000 to 300,000 live programs; execpack-64k: 64 KiB packs;\n"
	     "  slots: the floor, a free list per size and no other bookkeeping (refill and\n"
	     "  copy included); reserved: code memory (one view) after the churn.\n"
	     "  ratio = peer / execpack.");
	std::printf("  %d ops per round and live count\n", n);
	std::printf("  %-24s %8s %11s %11s %11s  %8s %11s %8s\n", "", "live", "median", "min", "max",
		    "ratio", "reserved", "ratio");
	for (int l = 0; l < NL; l++) {
		for (int c = 0; c < nc; c++) {
			Stats s = stats_of(t[l][c]);
			std::vector<double> rr;
			for (size_t i = 0; i < res[l][c].size(); i++)
				rr.push_back(res[l][c][i] / res[l][EP][i]);
			std::printf("  %-24s %8d %11.1f %11.1f %11.1f  %7.2fx %10.2fM %7.2fx\n", names[c],
				    lives[l], s.med, s.lo, s.hi, ratio(t[l][c], t[l][EP]),
				    stats_of(res[l][c]).med / 1048576, stats_of(rr).med);
		}
	}

	/* one pool, one 64-byte program: what a process that JITs a little pays */
	std::printf("  growth 300,000 / 10,000 live:");
	for (int c = 0; c < nc; c++)
		std::printf(" %s %.2fx%s", names[c], stats_of(t[3][c]).med / stats_of(t[1][c]).med,
			    c + 1 < nc ? "," : "\n");

	std::vector<double> pss[NC], mapped[NC], rsv[NC];
	for (int r = 0; r < g_rounds; r++) {
		for (int c = 0; c < nc; c++) {
			if (c == EP64 || c == SL)
				continue;
			std::vector<MapEnt> b = read_smaps();
			MapSet before = map_set(b);
			Alloc *a = c == AJ ? make(K_AJ_DUAL) : make(K_EP);
			void *p = a->put(64, 42);
			Mem m = mem_since(before, b.size(), *a);
			pss[c].push_back(m.pss);
			mapped[c].push_back(m.mapped);
			rsv[c].push_back(m.reserved);
			a->drop(p);
			delete a;
		}
	}
	std::printf("\n  one pool with one 64-byte program: resident code memory (Pss of the new\n"
		    "  mappings in /proc/self/smaps, both views), mapped address space, reserved\n");
	std::printf("  %-24s %11s %11s %11s\n", "", "Pss", "mapped", "reserved");
	for (int c = 0; c < nc; c++) {
		if (c == EP64 || c == SL)
			continue;
		std::printf("  %-24s %10.0fK %10.0fK %10.0fK\n", names[c], stats_of(pss[c]).med / 1024,
			    stats_of(mapped[c]).med / 1024, stats_of(rsv[c]).med / 1024);
	}
	target("small: execpack Pss of one 64-byte program, KiB", stats_of(pss[EP]).med / 1024, 64,
	       true, "K");
	target("growth: execpack reserved at 1,000 live, MiB", stats_of(res[0][EP]).med / 1048576,
	       0.9, true, "M");
	for (int l = 1; l < NL; l++) {
		char what[96];
		std::snprintf(what, sizeof(what), "growth: execpack / asmjit-dual reserved at %d live",
			      lives[l]);
		if (have_asmjit)
			target(what, stats_of(res[l][EP]).med / stats_of(res[l][AJ]).med, 0.8, true);
		else
			target(what, NAN, 0.8, true, "x", "built without asmjit");
	}
	target("growth: execpack 300,000 live / 10,000 live",
	       stats_of(t[3][EP]).med / stats_of(t[1][EP]).med, 1.5, true);
	if (have_asmjit)
		target("growth: execpack / asmjit-dual at 300,000 live", ratio(t[3][EP], t[3][AJ]), 0.1,
		       true);
	else
		target("growth: execpack / asmjit-dual at 300,000 live", NAN, 0.1, true, "x",
		       "built without asmjit");
}

/* ---- workload 9: shrink after emit ------------------------------------ */

/*
 * An assembler knows a program's size only after its address is fixed, so
 * a JIT allocates an upper bound (here 4 times the size: the bound is the
 * caller's guess) and gives the rest back once it has emitted.  Memory of
 * 10,000 live programs allocated at the bound and kept so, shrunk to their
 * size after ep_finalize() (ep_shrink), and allocated at their exact size
 * (the floor); asmjit-dual with JitAllocator::shrink() beside it.
 */
static void workload_shrink()
{
	enum { BOUND, SHRUNK, EXACT, AJ, NC };
	static const char *const names[NC] = { "execpack bound", "execpack shrunk",
					       "execpack exact", "asmjit-dual shrunk" };
	const int nc = have_asmjit ? NC : NC - 1;
	const int n = ops(10000);
	std::vector<double> used[NC], res[NC], t[NC];

	for (int r = 0; r < g_rounds; r++) {
		Rng rng(9000 + uint64_t(r));
		std::vector<uint32_t> lens(static_cast<size_t>(n));
		for (auto &l : lens)
			l = uint32_t(std::max<size_t>(log_uniform_size(rng), 6));
		for (int c = 0; c < nc; c++) {
			std::vector<Prog> live;
			live.reserve(lens.size());
			double u = 0, rv = 0;
			uint64_t ticks = 0;
			if (c == AJ) {
#ifdef HAVE_ASMJIT
				Asmjit a("asmjit-dual", true);
				for (int i = 0; i < n; i++) {
					void *rx, *rw;
					uint64_t t0 = tick();
					if (a.ja->alloc(&rx, &rw, 4 * lens[size_t(i)]) != asmjit::kErrorOk)
						die("asmjit-dual: alloc failed");
					{
						asmjit::VirtMem::ProtectJitReadWriteScope scope(rx, lens[size_t(i)]);
						emit(rw, lens[size_t(i)], uint32_t(i));
					}
					if (a.ja->shrink(rx, lens[size_t(i)]) != asmjit::kErrorOk)
						die("asmjit-dual: shrink failed");
					ticks += tick() - t0;
					live.push_back(Prog{ rx, uint32_t(i), lens[size_t(i)] });
				}
				for (auto &q : live)
					check_full(q.p, q.len, q.imm, "asmjit-dual");
				u = double(a.ja->statistics().usedSize());
				rv = double(a.reserved());
				for (auto &q : live)
					a.drop(q.p);
#endif
			} else {
				Execpack e(names[c], EP_BACKEND_MEMFD);
				for (int i = 0; i < n; i++) {
					size_t len = lens[size_t(i)], ask = c == EXACT ? len : 4 * len;
					ep_image img;
					uint64_t t0 = tick();
					int rc = ep_alloc(e.pool, ask, &img);
					if (rc)
						die("%s: ep_alloc: %s", names[c], ep_strerror(rc));
					emit(img.rw, len, uint32_t(i));
					if ((rc = ep_finalize(e.pool, img.exec)))
						die("%s: ep_finalize: %s", names[c], ep_strerror(rc));
					if (c == SHRUNK && (rc = ep_shrink(e.pool, img.exec, len)))
						die("%s: ep_shrink: %s", names[c], ep_strerror(rc));
					ticks += tick() - t0;
					live.push_back(Prog{ img.exec, uint32_t(i), uint32_t(len) });
				}
				for (auto &q : live)
					check_full(q.p, q.len, q.imm, names[c]);
				ep_stats st;
				ep_pool_stats(e.pool, &st);
				u = double(st.used_bytes);
				rv = double(e.reserved());
				for (auto &q : live)
					e.drop(q.p);
			}
			used[c].push_back(u);
			res[c].push_back(rv);
			t[c].push_back(ticks_ns(ticks, size_t(n)) / n);
		}
	}

	head("9. shrink after emit",
	     "10,000 programs (16-2048 bytes) allocated at 4x their size: kept so (bound),\n"
	     "  given back with ep_shrink() after ep_finalize() (shrunk), or allocated at their\n"
	     "  size (exact); used and reserved: code memory with all of them live; ns: alloc +\n"
	     "  write + finalize (+ shrink) per program.  ratio = this / execpack exact.");
	std::printf("  %d programs per round\n", n);
	std::printf("  %-24s %11s %8s %11s %8s %11s\n", "", "used", "ratio", "reserved", "ratio",
		    "ns/op");
	for (int c = 0; c < nc; c++)
		std::printf("  %-24s %10.2fM %7.2fx %10.2fM %7.2fx %11.1f\n", names[c],
			    stats_of(used[c]).med / 1048576, ratio(used[c], used[EXACT]),
			    stats_of(res[c]).med / 1048576, ratio(res[c], res[EXACT]),
			    stats_of(t[c]).med);
	target("shrink: execpack used, shrunk / exact", ratio(used[SHRUNK], used[EXACT]), 1.0, true);
	target("shrink: execpack reserved, shrunk / bound", ratio(res[SHRUNK], res[BOUND]), 0.5, true);
}

/* ---- workload 10: churn against the floor ----------------------------- */

/*
 * Ops from..to of q on live: with `segments`, the TSC time of the free and
 * the JIT alone (the call is made, not timed); else the wall clock of the
 * whole cycle, the call included.  In ns.
 */
static double churn_range(Alloc &a, const ChurnSeq &q, std::vector<Prog> &live, size_t from,
			  size_t to, bool segments)
{
	Prog *lv = live.data();
	uint64_t acc = 0;
	double t0 = now_ns();

	for (size_t i = from; i < to; i++) {
		Prog &pr = lv[q.victim[i]];
		uint64_t c0 = segments ? tick() : 0;
		a.drop(pr.p);
		pr.len = q.len[i];
		pr.imm = q.imm[i];
		pr.p = a.put(pr.len, pr.imm);
		if (segments)
			acc += tick() - c0;
		check_call(pr.p, pr.imm, a.name);
	}
	return segments ? ticks_ns(acc, to - from) : now_ns() - t0;
}

static long minor_faults()
{
	rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static void workload_floor()
{
	static const int lives[] = { 10000, 300000 };
	enum { NL = 2, EP = 0, FL = 1, ST = 2, FF = 3, NA = 4 };
	static const char *const names[NA] = { "execpack", "floor", "staged", "first-fit" };
	const int n = ops(20000);
	std::vector<double> t[NL][NA], wc[NL][NA], flt[NL][NA];

	for (int r = 0; r < g_rounds; r++) {
		for (int l = 0; l < NL; l++) {
			/* warm-up, TSC-timed ops, ops timed with their calls */
			ChurnSeq q(10000 + uint64_t(r) * NL + uint64_t(l), lives[l], 3 * n);
			for (int i = 0; i < NA; i++) {
				/* who goes first alternates from round to round */
				int k = (i + r) % NA;
				Alloc *a = k == EP   ? make(K_EP)
					   : k == ST ? static_cast<Alloc *>(new FloorT<true>())
					   : k == FF ? static_cast<Alloc *>(new FirstFit())
						     : static_cast<Alloc *>(new FloorT<false>());
				std::vector<Prog> live = q.init;
				for (auto &pr : live)
					pr.p = a->put(pr.len, pr.imm);
				churn_range(*a, q, live, 0, size_t(n), false);
				long f0 = minor_faults();
				t[l][k].push_back(churn_range(*a, q, live, size_t(n), size_t(2 * n), true) /
						  n);
				wc[l][k].push_back(
					churn_range(*a, q, live, size_t(2 * n), size_t(3 * n), false) / n);
				flt[l][k].push_back(double(minor_faults() - f0) / (2 * n));
				for (auto &pr : live)
					check_full(pr.p, pr.len, pr.imm, a->name);
				for (auto &pr : live)
					a->drop(pr.p);
				delete a;
			}
		}
	}

	head("10. churn against the floor",
	     "workload 1's churn (free a random live program, then alloc + write + finalize a\n"
	     "  new one, 16-2048 B log-uniform) at 10,000 and 300,000 live.  floor: one sparse\n"
	     "  memfd mapped RW and RX; new slots bumped, freed ones on a LIFO list per 64-byte\n"
	     "  class, a class byte per chunk; the code written through the RW view, a freed\n"
	     "  slot refilled with traps.  staged: the floor plus what ep_alloc()'s contract\n"
	     "  adds to it, the code written into a private buffer of traps and then copied\n"
	     "  through the RW view: no allocator with that contract does less.  first-fit:\n"
	     "  staged with first fit over one chunk bitmap (the library's summary) in place\n"
	     "  of the free lists: what the seed's placement costs by itself, with no packs,\n"
	     "  lock, state, records or counts.\n"
	     "  Each run: setup, then an untimed warm-up of as many\n"
	     "  ops as are timed (free lists and pages settle; neither side is populated\n"
	     "  beforehand), then the ops timed by the TSC (free + JIT; each new program\n"
	     "  called, not timed), then as many again by the wall clock with their calls\n"
	     "  (\"with call\").  ratio = execpack / floor; faults: minor page faults per op\n"
	     "  in the two timed passes.");
	std::printf("  %d ops per pass\n", n);
	std::printf("  %-10s %7s %11s %11s %11s  %8s %11s %8s %7s\n", "", "live", "median", "min",
		    "max", "ratio", "with call", "ratio", "faults");
	for (int l = 0; l < NL; l++)
		for (int k = 0; k < NA; k++) {
			Stats s = stats_of(t[l][k]);
			std::printf("  %-10s %7d %11.1f %11.1f %11.1f  %7.2fx %11.1f %7.2fx %7.3f\n",
				    names[k], lives[l], s.med, s.lo, s.hi, ratio(t[l][k], t[l][FL]),
				    stats_of(wc[l][k]).med, ratio(wc[l][k], wc[l][FL]),
				    stats_of(flt[l][k]).med);
		}
	for (int l = 0; l < NL; l++) {
		std::printf("  %7d live: execpack / staged %.2fx, with call %.2fx\n", lives[l],
			    ratio(t[l][EP], t[l][ST]), ratio(wc[l][EP], wc[l][ST]));
		std::printf("  %7d live: first-fit / floor %.2fx, with call %.2fx; execpack / "
			    "first-fit %.2fx, with call %.2fx\n",
			    lives[l], ratio(t[l][FF], t[l][FL]), ratio(wc[l][FF], wc[l][FL]),
			    ratio(t[l][EP], t[l][FF]), ratio(wc[l][EP], wc[l][FF]));
	}
	target("floor: execpack / floor at 10,000 live", ratio(t[0][EP], t[0][FL]), 1.6, true);
	target("floor: execpack / floor at 300,000 live", ratio(t[1][EP], t[1][FL]), 1.6, true);
	target("  the same, with a call of each new program", ratio(wc[1][EP], wc[1][FL]), 1.25,
	       true);
}

/* ---- workload 11: footprint ------------------------------------------- */

/* Pss of this process in KiB from /proc/self/smaps_rollup; -1 if unknown.
   No stdio: a buffer malloc'd here would count. */
static long pss_kb()
{
	char buf[4096];
	int fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
	ssize_t len;

	if (fd < 0)
		return -1;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = 0;
	const char *p = std::strstr(buf, "\nPss:");
	return p ? std::atol(p + 5) : -1;
}

/*
 * The child of workload 11, a fresh process: its Pss growth from creating
 * the allocator and JITting (and calling) `count` 64-byte programs, printed
 * as "KIB RESERVED".  Nothing is torn down: the exit does that.
 */
static int footprint_child(const char *kind, int count)
{
	Kind k = !std::strcmp(kind, "asmjit-dual") ? K_AJ_DUAL : K_EP;
	if (k == K_AJ_DUAL && !have_asmjit)
		return 2;
	init_template();
	pss_kb(); /* the first read faults in what reading takes */
	long before = pss_kb();
	if (before < 0)
		return 3;
	Alloc *a = make(k);
	for (int i = 0; i < count; i++) {
		void *p = a->put(64, uint32_t(i) + 1);
		check_call(p, uint32_t(i) + 1, a->name);
	}
	long after = pss_kb();
	std::printf("%ld %zu\n", after - before, a->reserved());
	return 0;
}

/*
 * Fork and exec this program as a footprint child; false if it failed.
 * Exec, not only fork: a forked child's first write to each page it
 * shares with this process would add half a page to its Pss.
 */
static bool footprint_run(const char *kind, int count, double *kib, double *reserved)
{
	int fd[2], st;
	char arg[16], out[128];
	size_t got = 0;
	ssize_t len;

	std::snprintf(arg, sizeof(arg), "%d", count);
	if (pipe2(fd, O_CLOEXEC))
		die("pipe: %s", std::strerror(errno));
	std::fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", std::strerror(errno));
	if (pid == 0) {
		if (dup2(fd[1], 1) < 0)
			_exit(127);
		execl("/proc/self/exe", "bench-suite", "--footprint-child", kind, arg,
		      static_cast<char *>(nullptr));
		_exit(127);
	}
	close(fd[1]);
	while (got < sizeof(out) - 1 && (len = read(fd[0], out + got, sizeof(out) - 1 - got)) != 0) {
		if (len < 0 && errno == EINTR)
			continue;
		if (len < 0)
			break;
		got += size_t(len);
	}
	out[got] = 0;
	close(fd[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", std::strerror(errno));
	long k;
	size_t rsv;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || std::sscanf(out, "%ld %zu", &k, &rsv) != 2)
		return false;
	*kib = double(k);
	*reserved = double(rsv);
	return true;
}

static void workload_footprint()
{
	enum { EP1, AJ1, EP1000, NR };
	static const char *const kinds[NR] = { "execpack", "asmjit-dual", "execpack" };
	static const int counts[NR] = { 1, 1, 1000 };
	static const char *const names[NR] = { "execpack, 1 program", "asmjit-dual, 1 program",
					       "execpack, 1,000" };
	std::vector<double> kib[NR], rsv[NR];
	std::string skip;

	for (int r = 0; r < g_rounds && skip.empty(); r++)
		for (int c = 0; c < NR; c++) {
			double k, v;
			if (c == AJ1 && !have_asmjit)
				continue;
			if (!footprint_run(kinds[c], counts[c], &k, &v)) {
				skip = std::string(names[c]) +
				       ": the child failed (no /proc/self/smaps_rollup?)";
				break;
			}
			kib[c].push_back(k);
			rsv[c].push_back(v);
		}

	head("11. footprint",
	     "what a fresh process (started, fork + exec, for each measurement) grows by when it\n"
	     "  creates one pool / one JitAllocator and JITs and calls 64-byte programs: Pss\n"
	     "  from /proc/self/smaps_rollup (every mapping, malloc'd metadata included), before\n"
	     "  and after; reserved: the allocator's own count of code memory (one view).\n"
	     "  ratio = this / asmjit-dual's one program.");
	if (!skip.empty()) {
		skip_row("footprint", skip);
		target("footprint: execpack / asmjit-dual Pss, 1 program", NAN, 0.75, true, "x", skip);
		target("footprint: execpack reserved, 1,000 x 64 B, MiB", NAN, 0.6, true, "M", skip);
		return;
	}
	std::printf("  %-24s %11s %11s %11s  %8s %11s\n", "", "Pss", "min", "max", "ratio",
		    "reserved");
	for (int c = 0; c < NR; c++) {
		if (c == AJ1 && !have_asmjit) {
			skip_row(names[c], "built without asmjit");
			continue;
		}
		Stats s = stats_of(kib[c]);
		char rs[32] = "";
		if (have_asmjit)
			std::snprintf(rs, sizeof(rs), "%.2fx", ratio(kib[c], kib[AJ1]));
		std::printf("  %-24s %10.0fK %10.0fK %10.0fK  %8s %10.0fK\n", names[c], s.med, s.lo,
			    s.hi, rs, stats_of(rsv[c]).med / 1024);
	}
	if (have_asmjit)
		target("footprint: execpack / asmjit-dual Pss, 1 program", ratio(kib[EP1], kib[AJ1]),
		       0.75, true);
	else
		target("footprint: execpack / asmjit-dual Pss, 1 program", NAN, 0.75, true, "x",
		       "built without asmjit");
	target("footprint: execpack reserved, 1,000 x 64 B, MiB", stats_of(rsv[EP1000]).med / 1048576,
	       0.6, true, "M");
}

/* ---- workload 12: finished code, ep_add() ------------------------------ */

/*
 * Code that is finished before it has an address (position-independent)
 * sits in the caller's buffer: ep_add() puts it in place in one call, the
 * three calls stage it (ep_alloc(): a buffer and its fill), copy it there
 * and copy it again (ep_finalize()).  A round puts a batch of programs
 * (timed) one way, then the other, alternating which goes first, each into
 * a warm pool of its own; then every program is called and freed (not
 * timed).
 */
static void workload_add()
{
	const size_t sizes[] = { 64, 128, 256, 512 };
	const int batch = 1000, rounds = 3 * g_rounds;
	double least = INFINITY;

	head("12. finished code: ep_add() against ep_alloc() + memcpy + ep_finalize()",
	     "the code is in the caller's buffer already; one op = put one program in place\n"
	     "  (timed), 1,000 a batch, then all called and freed (not timed); both ways take\n"
	     "  turns, each in a warm pool of its own.  ratio = the three calls / ep_add():\n"
	     "  ep_add()'s throughput over theirs.");
	for (size_t len : sizes) {
		std::vector<unsigned char> code(size_t(batch) * len);
		std::vector<void *> p(batch);
		std::vector<double> t3, t1;
		Execpack three("execpack", EP_BACKEND_MEMFD), one("execpack-add", EP_BACKEND_MEMFD);

		for (int i = 0; i < batch; i++)
			emit(&code[size_t(i) * len], len, uint32_t(len * 7919 + unsigned(i)));
		for (int r = 0; r < rounds + 1; r++) { /* (round 0 warms both pools) */
			for (int k = 0; k < 2; k++) {
				bool add = ((r + k) & 1) != 0;
				uint64_t c0 = tick();
				if (add) {
					for (int i = 0; i < batch; i++)
						if (int rc = ep_add(one.pool, &code[size_t(i) * len], len, &p[i]))
							die("ep_add: %s", ep_strerror(rc));
				} else {
					for (int i = 0; i < batch; i++) {
						ep_image img;
						if (int rc = ep_alloc(three.pool, len, &img))
							die("ep_alloc: %s", ep_strerror(rc));
						std::memcpy(img.rw, &code[size_t(i) * len], len);
						if (int rc = ep_finalize(three.pool, img.exec))
							die("ep_finalize: %s", ep_strerror(rc));
						p[i] = img.exec;
					}
				}
				double ns = ticks_ns(tick() - c0, 1) / batch;
				Execpack &a = add ? one : three;
				for (int i = 0; i < batch; i++) {
					check_call(p[i], uint32_t(len * 7919 + unsigned(i)), a.name);
					a.drop(p[i]);
				}
				if (r > 0)
					(add ? t1 : t3).push_back(ns);
			}
		}
		double q = ratio(t3, t1);
		std::printf("  %zu B\n", len);
		cols("ns/op", "ratio");
		row("  alloc+memcpy+finalize", t3, "ns/op", q);
		row("  ep_add", t1, "ns/op", 1.0);
		least = std::min(least, q);
	}
	target("ep_add: its throughput over the three calls, 64-512 B (least)", least, 1.3, false);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !std::strcmp(argv[1], "--footprint-child"))
		return footprint_child(argv[2], std::atoi(argv[3]));
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		if (!std::strcmp(s, "quick")) {
			g_rounds = 3;
			g_div = 4;
		} else if (!std::strncmp(s, "only=", 5)) {
			char *end;
			for (int w = 1; w <= NW; w++)
				g_only[w] = false;
			for (const char *c = s + 5; *c; c = *end ? end + 1 : end) {
				long w = std::strtol(c, &end, 10);
				if (end == c || w < 1 || w > NW || (*end && *end != ',')) {
					std::fprintf(stderr, "%s: only=%s: give workloads 1-%d, "
						     "separated by commas\n", argv[0], s + 5, NW);
					return 2;
				}
				g_only[w] = true;
			}
		} else if (std::atoi(s) >= 1 && std::atoi(s) <= 99) {
			g_rounds = std::atoi(s);
		} else {
			std::fprintf(stderr, "usage: %s [quick] [ROUNDS] [only=1,2,...,12]\n", argv[0]);
			return 2;
		}
	}
	init_template();
	calibrate_ticks();
	probe_pkey();
	setvbuf(stdout, nullptr, _IOLBF, 0);

	double t0 = now_ns();
	std::printf("libexecpack %s benchmark suite: %d rounds, %s operations; median, min and max\n"
		    "over rounds; the allocators run interleaved, round by round, in this process.\n"
		    "A ratio is the median over rounds of that round's ratio.\n",
		    ep_version(), g_rounds, g_div > 1 ? "a quarter of the" : "all");
	std::printf("  execpack       libexecpack, memfd backend: RW alias + RX view (W^X)\n");
	std::printf("  execpack-nokey the same with EP_F_NO_PKEY (workloads 1 and 2); the key is %s\n",
		    g_pkey ? "on in execpack" : "off in both here");
	if (!g_pkey)
		std::printf("                 (%s)\n", g_pkey_why);
	else
		std::printf("                 (a copy opens and closes a window: RDPKRU, 2 WRPKRU;\n"
			    "                 one WRPKRU takes %.1f ns here)\n", g_wrpkru_ns);
	if (have_asmjit) {
		std::printf("  asmjit-dual    asmjit JitAllocator, kUseDualMapping | kFillUnusedMemory "
			    "(W^X)\n");
		std::printf("  asmjit-default asmjit JitAllocator, default options (RWX mapping)\n");
	} else {
		std::printf("  (asmjit columns left out: built without libasmjit-dev)\n");
	}
	std::printf("  mmap           mmap RW + write + mprotect RX per program, munmap to free\n");

	if (g_only[1] || g_only[3])
		workload_churn();
	if (g_only[2])
		workload_once();
	if (g_only[4])
		workload_calls();
	if (g_only[5])
		workload_threads();
	if (g_only[6])
		workload_many();
	if (g_only[7])
		workload_fork();
	if (g_only[8])
		workload_growth();
	if (g_only[9])
		workload_shrink();
	if (g_only[10])
		workload_floor();
	if (g_only[11])
		workload_footprint();
	if (g_only[12])
		workload_add();

	std::printf("\ntargets (issues 8, 14, 17, 18, 26 and 27)%*s %9s %10s\n", 11, "", "measured",
		    "target");
	for (auto &t : g_targets) {
		char m[32], l[32];
		if (!t.skip.empty() || std::isnan(t.value)) {
			std::printf("  %-52s %9s %10s  SKIP: %s\n", t.what.c_str(), "-", "",
				    t.skip.empty() ? "not measured" : t.skip.c_str());
			continue;
		}
		std::snprintf(m, sizeof(m), "%.2f%s", t.value, t.unit);
		std::snprintf(l, sizeof(l), "%s %.2f%s", t.at_most ? "<=" : ">=", t.limit, t.unit);
		bool met = t.at_most ? t.value <= t.limit : t.value >= t.limit;
		std::printf("  %-52s %9s %10s  %s\n", t.what.c_str(), m, l, met ? "met" : "NOT MET");
	}
	g_calls_checked += t_checked;
	std::printf("\nall %llu calls returned the right value; %.0f s\n",
		    (unsigned long long)g_calls_checked.load(), (now_ns() - t0) / 1e9);
	return 0;
}
#else
/* The programs are x86-64 machine code. */
int main()
{
	std::puts("bench-suite: SKIP: the benchmark programs are x86-64 code");
	return 0;
}
#endif
