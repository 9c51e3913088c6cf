/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-calls.cc - bench-suite's workloads 4 (calls into many programs, huge
 * pages included) and 5 (two threads on one pool).
 */
#include "config.h"

#include "bench-suite.h"

#if defined(__x86_64__)
namespace bench {

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

void workload_calls()
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

void workload_threads()
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

} // namespace bench
#endif
