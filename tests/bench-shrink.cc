/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-shrink.cc - bench-suite's workloads 9 (shrink after emit) and 10
 * (churn against the floor).
 */
#include "config.h"

#include "bench-suite.h"

#if defined(__x86_64__)
namespace bench {

/* ---- workload 9: shrink after emit ------------------------------------ */

/*
 * An assembler knows a program's size only after its address is fixed, so
 * a JIT allocates an upper bound (here 4 times the size: the bound is the
 * caller's guess) and gives the rest back once it has emitted.  Memory of
 * 10,000 live programs allocated at the bound and kept so, shrunk to their
 * size after ep_finalize() (ep_shrink), and allocated at their exact size
 * (the floor); asmjit-dual with JitAllocator::shrink() beside it.
 */
void workload_shrink()
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

void workload_floor()
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

} // namespace bench
#endif
