/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-fork.cc - bench-suite's workloads 7 (fork) and 8 (growth).
 */
#include "config.h"

#include "bench-suite.h"

#if defined(__x86_64__)
namespace bench {

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

void workload_fork()
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


/* ---- workload 8: growth ---------------------------------------------- */

/*
 * Workload 1's churn as the live set grows: a cost that follows the number
 * of packs (a walk over them) shows here and not at 10,000 live.  The
 * execpack-64k column has 32 times as many packs (64 KiB each), so such a
 * cost shows there first.
 */
void workload_growth()
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

} // namespace bench
#endif
