/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-peers.cc - libexecpack next to asmjit's JitAllocator (Debian's
 * libasmjit-dev), in one run, on the same workloads:
 *   - one program at a time: alloc + write + make executable + call + free
 *   - churn: 10,000 live programs of random size, replace one at a time
 *   - density: memory mapped for 10,000 programs of 16-1015 bytes
 * asmjit runs twice: with dual mapping (W^X like libexecpack) and with its
 * default single RWX mapping (not W^X; shown as the speed ceiling).
 * Prints the median of several rounds and ratios against libexecpack.
 *
 * Usage: bench-peers [rounds]   (default 7)
 */
#include <asmjit/core.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "execpack.h"

using asmjit::JitAllocator;
using asmjit::JitAllocatorOptions;

static double now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	size_t n = v.size();
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static unsigned char code[4096];
static volatile int sink;

static void call(void *p)
{
	int (*f)(void);
	std::memcpy(&f, &p, sizeof(f));
	sink += f();
}

static unsigned rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

/* ---- the allocators behind one interface ---- */

struct Alloc {
	virtual ~Alloc() {}
	virtual void *put(const void *src, size_t len) = 0; /* alloc+write+finalize */
	virtual void drop(void *exec) = 0;
	virtual size_t mapped() = 0;
};

struct Execpack : Alloc {
	ep_pool *pool = nullptr;
	Execpack()
	{
		ep_config cfg = {};
		cfg.sz = sizeof(cfg);
		cfg.backend = EP_BACKEND_MEMFD;
		int rc = ep_pool_create(&cfg, &pool);
		if (rc) {
			std::fprintf(stderr, "ep_pool_create: %s\n", ep_strerror(rc));
			std::exit(1);
		}
	}
	~Execpack() override { ep_pool_destroy(pool); }
	void *put(const void *src, size_t len) override
	{
		ep_image img;
		if (ep_alloc(pool, len, &img))
			std::exit(1);
		std::memcpy(img.rw, src, len);
		ep_finalize(pool, img.exec);
		return img.exec;
	}
	void drop(void *exec) override { ep_free(pool, exec); }
	size_t mapped() override
	{
		ep_stats st;
		ep_pool_stats(pool, &st);
		return st.pack_bytes + st.large_bytes;
	}
};

struct Asmjit : Alloc {
	JitAllocator *ja;
	bool dual;
	explicit Asmjit(bool dual_mapping) : dual(dual_mapping)
	{
		JitAllocator::CreateParams params;
		params.options = dual ? JitAllocatorOptions::kUseDualMapping : JitAllocatorOptions::kNone;
		params.options = params.options | JitAllocatorOptions::kFillUnusedMemory;
		ja = new JitAllocator(&params);
	}
	~Asmjit() override { delete ja; }
	void *put(const void *src, size_t len) override
	{
		void *rx, *rw;
		if (ja->alloc(&rx, &rw, len) != asmjit::kErrorOk) {
			std::fprintf(stderr, "asmjit alloc failed\n");
			std::exit(1);
		}
		{
			asmjit::VirtMem::ProtectJitReadWriteScope scope(rx, len);
			std::memcpy(rw, src, len);
		}
		return rx;
	}
	void drop(void *exec) override { ja->release(exec); }
	size_t mapped() override { return ja->statistics().reservedSize(); }
};

static double once(Alloc &a, size_t len, int iters)
{
	double t0 = now_ns();
	for (int i = 0; i < iters; i++) {
		void *p = a.put(code + sizeof(code) - len, len);
		call(p);
		a.drop(p);
	}
	return (now_ns() - t0) / iters;
}

enum { LIVE = 10000 };

static double churn(Alloc &a, int iters, size_t *mapped)
{
	std::vector<void *> live(LIVE);
	unsigned s = 1;
	for (int i = 0; i < LIVE; i++) {
		size_t len = 16 + rnd(&s) % 1000;
		live[i] = a.put(code + sizeof(code) - len, len);
	}
	*mapped = a.mapped();
	double t0 = now_ns();
	for (int i = 0; i < iters; i++) {
		unsigned k = rnd(&s) % LIVE;
		size_t len = 16 + rnd(&s) % 1000;
		a.drop(live[k]);
		live[k] = a.put(code + sizeof(code) - len, len);
		call(live[k]);
	}
	double t = (now_ns() - t0) / iters;
	for (void *p : live)
		a.drop(p);
	return t;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
	if (rounds < 1 || rounds > 100)
		rounds = 7;
	std::memset(code, 0x90, sizeof(code));
	code[sizeof(code) - 6] = 0xb8;
	std::memset(code + sizeof(code) - 5, 0, 4);
	code[sizeof(code) - 1] = 0xc3;

	Execpack ep;
	Asmjit aj_dual(true), aj_rwx(false);
	Alloc *all[3] = { &ep, &aj_dual, &aj_rwx };
	const char *names[3] = { "execpack", "asmjit-dual", "asmjit-rwx" };

	std::printf("libexecpack %s vs asmjit JitAllocator, median of %d rounds (ns/op)\n",
		    ep_version(), rounds);
	std::printf("%-24s %11s %11s %11s %9s %9s\n", "workload", names[0], names[1], names[2],
		    "dual/ep", "rwx/ep");
	const size_t sizes[] = { 64, 256, 1024, 4096 };
	for (size_t len : sizes) {
		double m[3];
		for (int k = 0; k < 3; k++) {
			std::vector<double> v;
			for (int r = 0; r < rounds; r++)
				v.push_back(once(*all[k], len, 20000));
			m[k] = median(v);
		}
		char label[64];
		std::snprintf(label, sizeof(label), "one at a time %zuB", len);
		std::printf("%-24s %11.0f %11.0f %11.0f %8.2fx %8.2fx\n", label, m[0], m[1], m[2],
			    m[1] / m[0], m[2] / m[0]);
	}
	double m[3];
	size_t mapped[3] = { 0, 0, 0 };
	for (int k = 0; k < 3; k++) {
		std::vector<double> v;
		for (int r = 0; r < rounds; r++)
			v.push_back(churn(*all[k], 20000, &mapped[k]));
		m[k] = median(v);
	}
	std::printf("%-24s %11.0f %11.0f %11.0f %8.2fx %8.2fx\n", "churn 10k live", m[0], m[1], m[2],
		    m[1] / m[0], m[2] / m[0]);
	std::printf("%-24s %10zuK %10zuK %10zuK %8.2fx %8.2fx\n", "mapped for 10k live", mapped[0] / 1024,
		    mapped[1] / 1024, mapped[2] / 1024, double(mapped[1]) / double(mapped[0]),
		    double(mapped[2]) / double(mapped[0]));
	return 0;
}
