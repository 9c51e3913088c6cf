/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-suite.cc - the benchmark suite of doc/performance.md (`make bench`).
 *
 * Fourteen workloads, each run for libexecpack and, in the same process and
 * interleaved round by round, for its peers (workload 7, fork, for
 * libexecpack and a floor with no allocator to speak of, struct Slots;
 * workload 8, growth, against asmjit-dual, with a second execpack column
 * of 64 KiB packs and the same floor; workload 9, shrink after emit,
 * against asmjit-dual's shrink(); workload 10, churn against a leaner
 * floor, struct FloorT; workload 11, the footprint of a small pool against
 * asmjit-dual's, each measured in a fresh child process; workload 12,
 * ep_add() against ep_alloc() + memcpy + ep_finalize(); workload 13, the
 * first program of a fresh process against one mmap()ed page; workload 14,
 * the Pss of 4 threads JITting against one thread's, each in a fresh child):
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
 * Usage: bench-suite [quick] [ROUNDS] [only=1,2,...,14]
 *   quick: 3 rounds and a quarter of the operations (workload 6: a
 *   quarter of the time); ROUNDS: 1-99 (7).
 *   EP_BENCH_MAX_THREADS: the largest thread count of workload 6
 *   (default twice the online CPUs, 16 at least).
 *   EP_BENCH_HUGETLB_NOTE (set by tests/bench.sh) is added to a hugetlb SKIP.
 *
 * The files: bench-util.h, bench-alloc.h and bench-suite.h, what the
 * workloads share (helpers, programs, allocators, output, targets);
 * bench-churn.cc (1-3), bench-calls.cc (4, 5), bench-many.cc (6),
 * bench-fork.cc (7, 8), bench-shrink.cc (9, 10), bench-footprint.cc (11, 12,
 * 14), bench-start.cc (13).
 */
#include "config.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench-suite.h"

#if defined(__x86_64__)
using namespace bench;

/* ---- main ------------------------------------------------------------- */

int main(int argc, char **argv)
{
	if (argc == 4 && !std::strcmp(argv[1], "--footprint-child"))
		return footprint_child(argv[2], std::atoi(argv[3]));
	if (argc == 3 && !std::strcmp(argv[1], "--start-child"))
		return start_child(argv[2]);
	if (argc == 4 && !std::strcmp(argv[1], "--share-child"))
		return share_child(argv[2], std::atoi(argv[3]));
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
			std::fprintf(stderr, "usage: %s [quick] [ROUNDS] [only=1,2,...,14]\n", argv[0]);
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
	if (g_only[13])
		workload_start();
	if (g_only[14])
		workload_share();

	std::printf("\ntargets (issues 8, 14, 17, 18, 26, 27 and 42)%*s %9s %10s\n", 4, "", "measured",
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
