/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-footprint.cc - bench-suite's workloads 11 (footprint), 12
 * (finished code, ep_add()) and 14 (threads that share).
 */
#include "config.h"

#include "bench-suite.h"

#if defined(__x86_64__)
namespace bench {

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
int footprint_child(const char *kind, int count)
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
	char arg[16], out[128];
	long k;
	size_t rsv;

	std::snprintf(arg, sizeof(arg), "%d", count);
	if (!run_self("--footprint-child", kind, arg, out, sizeof(out)) ||
	    std::sscanf(out, "%ld %zu", &k, &rsv) != 2)
		return false;
	*kib = double(k);
	*reserved = double(rsv);
	return true;
}

void workload_footprint()
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
void workload_add()
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

/* ---- workload 14: threads that share ---------------------------------- */

/*
 * The child of workload 14, a fresh process: `threads` threads, all
 * started before any allocates and none gone before all are done (joined
 * before the second reading), JIT and call 1,000 64-byte programs between
 * them into one pool, all kept live; prints "KIB PACKS".  kind "own":
 * EXECPACK_HEAPS=64, so that each thread takes a pack of its own (as every
 * thread did before threads shared).
 */
int share_child(const char *kind, int threads)
{
	enum { TOTAL = 1000 };
	if (!std::strcmp(kind, "own"))
		setenv("EXECPACK_HEAPS", "64", 1);
	init_template();
	pss_kb();
	long before = pss_kb();
	if (before < 0 || threads < 1 || threads > 64)
		return 3;
	ep_config cfg{};
	cfg.sz = sizeof(cfg);
	cfg.backend = EP_BACKEND_MEMFD;
	ep_pool *pool = nullptr;
	if (ep_pool_create(&cfg, &pool))
		return 4;
	std::vector<std::thread> th;
	pthread_barrier_t all; /* (threads live at once: none adopts another's heap) */
	pthread_barrier_init(&all, nullptr, unsigned(threads));
	for (int t = 0; t < threads; t++)
		th.emplace_back([pool, t, threads, &all] {
			pthread_barrier_wait(&all);
			for (int i = t; i < TOTAL; i += threads) {
				ep_image img;
				if (int rc = ep_alloc(pool, 64, &img))
					die("ep_alloc: %s", ep_strerror(rc));
				emit(img.rw, 64, uint32_t(i) + 1);
				if (int rc = ep_finalize(pool, img.exec))
					die("ep_finalize: %s", ep_strerror(rc));
				check_call(img.exec, uint32_t(i) + 1, "execpack");
			}
			pthread_barrier_wait(&all);
		});
	for (auto &t : th)
		t.join();
	pthread_barrier_destroy(&all);
	long after = pss_kb();
	ep_stats st;
	if (ep_pool_stats(pool, &st))
		return 5;
	std::printf("%ld %zu\n", after - before, st.packs);
	return 0;
}

void workload_share()
{
	enum { ONE, FOUR, FOUR_OWN, NR };
	static const char *const kinds[NR] = { "share", "share", "own" };
	static const char *const nthreads[NR] = { "1", "4", "4" };
	static const char *const names[NR] = { "1 thread", "4 threads", "4 threads, own packs" };
	std::vector<double> kib[NR], packs[NR];
	std::string skip;

	for (int r = 0; r < g_rounds && skip.empty(); r++)
		for (int c = 0; c < NR; c++) {
			char out[128];
			long k;
			size_t n;
			if (!run_self("--share-child", kinds[c], nthreads[c], out, sizeof(out)) ||
			    std::sscanf(out, "%ld %zu", &k, &n) != 2) {
				skip = std::string(names[c]) + ": the child failed";
				break;
			}
			kib[c].push_back(double(k));
			packs[c].push_back(double(n));
		}
	head("14. threads that share",
	     "a fresh process (fork + exec) creates a memfd pool and JITs, calls and keeps\n"
	     "  1,000 64-byte programs from 1 or 4 threads (250 each); Pss growth from\n"
	     "  /proc/self/smaps_rollup (thread stacks and malloc arenas included) and the\n"
	     "  pool's packs.  \"own packs\": EXECPACK_HEAPS=64, each thread a pack of its own\n"
	     "  (as before threads shared).  ratio = this / 1 thread's.");
	if (!skip.empty()) {
		skip_row("threads that share", skip);
		target("threads that share: 4 threads' Pss / 1 thread's", NAN, 1.2, true, "x", skip);
		return;
	}
	std::printf("  %-24s %11s %11s %11s  %8s %8s\n", "", "Pss", "min", "max", "ratio", "packs");
	for (int c = 0; c < NR; c++) {
		Stats s = stats_of(kib[c]);
		std::printf("  %-24s %10.0fK %10.0fK %10.0fK  %7.2fx %8.0f\n", names[c], s.med, s.lo,
			    s.hi, ratio(kib[c], kib[ONE]), stats_of(packs[c]).med);
	}
	target("threads that share: 4 threads' Pss / 1 thread's", ratio(kib[FOUR], kib[ONE]), 1.2,
	       true);
}

} // namespace bench
#endif
