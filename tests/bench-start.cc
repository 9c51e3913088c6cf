/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-start.cc - bench-suite's workload 13: the first program of a fresh
 * process (issue 42).
 */
#include "config.h"

#include "bench-suite.h"

#if defined(__x86_64__)
namespace bench {

/* ---- workload 13: start-up -------------------------------------------- */

/*
 * The child of workload 13, a fresh process: the wall time, in ns, of its
 * first program, printed alone.  "mmap": one page mapped RW, written,
 * mprotect()ed RX and called; "auto" and "memfd": a pool of that backend
 * created, one program allocated, written, finalized and called.  Nothing
 * is torn down: the exit does that.
 */
int start_child(const char *kind)
{
	const uint32_t imm = 0x2a2a;
	unsigned char code[64];

	init_template();
	emit(code, sizeof(code), imm);
	bool page = !std::strcmp(kind, "mmap");
	enum ep_backend b = !std::strcmp(kind, "memfd") ? EP_BACKEND_MEMFD : EP_BACKEND_AUTO;
	struct timespec t0, t1;
	void *exec;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (page) {
		void *m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return 3;
		std::memcpy(m, code, sizeof(code));
		if (mprotect(m, 4096, PROT_READ | PROT_EXEC))
			return 3;
		exec = m;
	} else {
		struct ep_config cfg = {};
		struct ep_pool *pool;
		struct ep_image img;
		cfg.sz = sizeof(cfg);
		cfg.backend = b;
		if (ep_pool_create(&cfg, &pool) || ep_alloc(pool, sizeof(code), &img))
			return 3;
		std::memcpy(img.rw, code, sizeof(code));
		if (ep_finalize(pool, img.exec))
			return 3;
		exec = img.exec;
	}
	uint32_t got = reinterpret_cast<uint32_t (*)()>(exec)();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (got != imm)
		return 4;
	std::printf("%lld\n", (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL +
				      (t1.tv_nsec - t0.tv_nsec));
	return 0;
}

/* Fork and exec this program as a start-up child; false if it failed. */
static bool start_run(const char *kind, double *ns)
{
	char out[64];
	long long v;

	if (!run_self("--start-child", kind, nullptr, out, sizeof(out)) ||
	    std::sscanf(out, "%lld", &v) != 1)
		return false;
	*ns = double(v);
	return true;
}

void workload_start()
{
	enum { PAGE, AUTO, MEMFD, NR };
	static const char *const kinds[NR] = { "mmap", "auto", "memfd" };
	static const char *const names[NR] = { "mmap + mprotect, a page", "execpack, AUTO",
					       "execpack, memfd" };
	const int procs = std::max(100 / g_div, 9);
	std::vector<double> us[NR];
	std::string skip;

	/* the kinds take turns, process by process */
	for (int i = 0; i < procs && skip.empty(); i++)
		for (int c = 0; c < NR; c++) {
			double ns;
			if (!start_run(kinds[c], &ns)) {
				skip = std::string(names[c]) + ": the child failed";
				break;
			}
			us[c].push_back(ns / 1000);
		}

	head("13. start-up: the first program of a fresh process",
	     "each measurement a fresh process (fork + exec), timed inside it from before the\n"
	     "  first call to after the program returned: pool created, one 64-byte program\n"
	     "  allocated, written, finalized, called (the library's first calls: lazy binding\n"
	     "  and first touches included); the floor maps one page RW, writes it, mprotect()s\n"
	     "  it RX and calls it.  ratio = the median of this / the floor's median.");
	if (!skip.empty()) {
		skip_row("start-up", skip);
		target("start-up: AUTO / mmap + mprotect, first program", NAN, 3, true, "x", skip);
		target("start-up: memfd / mmap + mprotect, first program", NAN, 3, true, "x", skip);
		return;
	}
	std::printf("  %-24s %11s %11s %11s  %-8s %8s\n", "", "median", "min", "max", "us",
		    "ratio");
	double floor = stats_of(us[PAGE]).med;
	for (int c = 0; c < NR; c++)
		row(names[c], us[c], "us", stats_of(us[c]).med / floor);
	target("start-up: AUTO / mmap + mprotect, first program", stats_of(us[AUTO]).med / floor, 3,
	       true);
	target("start-up: memfd / mmap + mprotect, first program", stats_of(us[MEMFD]).med / floor, 3,
	       true);
}

} /* namespace bench */
#endif
