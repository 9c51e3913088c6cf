/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-many.cc - bench-suite's workload 6: many threads on one shared pool.
 */
#include "config.h"

#include "bench-suite.h"

#if defined(__x86_64__)
namespace bench {

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

void workload_many()
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

} // namespace bench
#endif
