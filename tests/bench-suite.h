/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-suite.h - what bench-suite's files share: the helpers and
 * allocators (bench-util.h, bench-alloc.h), /proc/self/smaps, the options,
 * the output and the targets, the churn sequences of workloads 1, 3, 5, 7
 * and 10, and the workloads, one family a file (bench-*.cc).
 */
#ifndef EP_TESTS_BENCH_SUITE_H
#define EP_TESTS_BENCH_SUITE_H

#include "bench-alloc.h"

#if defined(__x86_64__)
namespace bench {

/* ---- a fresh process of this program --------------------------------- */

/*
 * Fork and exec this program (bench-suite) with flag, kind and arg (NULL:
 * none): its standard output into out (cap bytes with the terminating
 * zero).  True when it exited with status 0.  For what a fresh process
 * costs (start-up, footprint), which a fork alone would not show.
 */
inline bool run_self(const char *flag, const char *kind, const char *arg, char *out, size_t cap)
{
	int fd[2], st;
	size_t got = 0;
	ssize_t len;

	if (pipe2(fd, O_CLOEXEC))
		die("pipe: %s", std::strerror(errno));
	std::fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", std::strerror(errno));
	if (pid == 0) {
		if (dup2(fd[1], 1) < 0)
			_exit(127);
		execl("/proc/self/exe", "bench-suite", flag, kind, arg, static_cast<char *>(nullptr));
		_exit(127);
	}
	close(fd[1]);
	while (got < cap - 1 && (len = read(fd[0], out + got, cap - 1 - got)) != 0) {
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
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* ---- /proc/self/smaps ------------------------------------------------- */

struct MapEnt {
	unsigned long lo, hi;
	std::string perms;
	long pss_kb;
};

inline std::vector<MapEnt> read_smaps()
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

inline MapSet map_set(const std::vector<MapEnt> &v)
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
inline Mem mem_since(const MapSet &before, size_t n_before, Alloc &a)
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

inline int g_rounds = 7;
inline int g_div = 1; /* quick: a quarter of the operations */
enum { NW = 14 }; /* workloads */
inline bool g_only[NW + 1] = { false, true, true, true, true, true, true, true,
			       true,  true, true, true, true, true, true };

inline int ops(int n) { return std::max(n / g_div, 1); }

/* Whether a memfd pool gets the protection key here (else why not): without
 * it, execpack and execpack-nokey run the same code. */
inline bool g_pkey;
inline char g_pkey_why[256];
inline double g_wrpkru_ns = NAN; /* one WRPKRU, where the CPU has keys */

/* What one WRPKRU costs here: pairs that allow and disable a key of the
 * bench's own, timed by the clock. */
inline void time_wrpkru()
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

inline void probe_pkey()
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

inline std::vector<Kind> peers(bool with_bump)
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

inline void head(const char *title, const char *what)
{
	std::printf("\n%s\n  %s\n", title, what);
}

inline void cols(const char *unit, const char *rname, bool with_call = false)
{
	std::printf("  %-24s %11s %11s %11s  %-8s %8s", "", "median", "min", "max", unit, rname);
	if (with_call)
		std::printf(" %11s", "with call");
	std::printf("\n");
}

/* with_call: the median of the whole cycle, the untimed call included. */
inline void row(const std::string &name, const std::vector<double> &v, const char *unit,
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

inline void skip_row(const std::string &name, const std::string &why)
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
inline std::vector<Target> g_targets;

inline void target(const std::string &what, double value, double limit, bool at_most,
		   const char *unit = "x", const std::string &skip = "")
{
	g_targets.push_back(Target{ what, value, limit, at_most, skip, unit });
}

/* The cost of the key, side by side: execpack / execpack-nokey. */
inline void pkey_target(const char *what, double r)
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
inline void pkey_floor(const std::vector<double> &nokey)
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

inline void churn_setup(Alloc &a, const ChurnSeq &q, ChurnRun &run)
{
	run.live = q.init;
	for (auto &pr : run.live)
		pr.p = a.put(pr.len, pr.imm);
}

/*
 * The ops: free one at random and JIT a new one (timed, by the TSC when
 * `segments`), then call the new one (not timed when `segments`).
 */
inline void churn_ops(Alloc &a, const ChurnSeq &q, ChurnRun &run, bool segments)
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

inline void churn_finish(Alloc &a, ChurnRun &run)
{
	for (auto &pr : run.live)
		check_full(pr.p, pr.len, pr.imm, a.name);
	for (auto &pr : run.live)
		a.drop(pr.p);
	run.live.clear();
}

enum { LIVE = 10000 };

/* ---- the workloads (bench-*.cc) ------------------------------------------ */

void workload_churn();     /* 1 and 3 (bench-churn.cc) */
void workload_once();      /* 2 (bench-churn.cc) */
void workload_calls();     /* 4 (bench-calls.cc) */
void workload_threads();   /* 5 (bench-calls.cc) */
void workload_many();      /* 6 (bench-many.cc) */
void workload_fork();      /* 7 (bench-fork.cc) */
void workload_growth();    /* 8 (bench-fork.cc) */
void workload_shrink();    /* 9 (bench-shrink.cc) */
void workload_floor();     /* 10 (bench-shrink.cc) */
void workload_footprint(); /* 11 (bench-footprint.cc) */
void workload_add();       /* 12 (bench-footprint.cc) */
void workload_start();     /* 13 (bench-start.cc) */
void workload_share();     /* 14 (bench-footprint.cc) */
/* The child of workload 11 (bench-suite --footprint-child KIND COUNT). */
int footprint_child(const char *kind, int count);
int start_child(const char *kind);
int share_child(const char *kind, int threads);

} // namespace bench
#endif
#endif
