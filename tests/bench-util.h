/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-util.h - bench-suite's small helpers (die(), clocks and the TSC,
 * a random sequence, medians) and the programs every run JITs and calls.
 */
#ifndef EP_TESTS_BENCH_UTIL_H
#define EP_TESTS_BENCH_UTIL_H

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
#endif

#if defined(__x86_64__)
namespace bench {

/* ---- small helpers ---------------------------------------------------- */

[[noreturn]] __attribute__((format(printf, 1, 2))) inline void die(const char *fmt, ...)
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

inline double now_ns()
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
inline double g_ns_per_tick = 1, g_tick_cost = 0;

inline uint64_t tick()
{
	_mm_lfence();
	uint64_t t = __rdtsc();
	_mm_lfence();
	return t;
}

inline void calibrate_ticks()
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

inline double ticks_ns(uint64_t ticks, size_t segments)
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
inline size_t log_uniform_size(Rng &r)
{
	size_t len = size_t(16.0 * std::exp2(7.0 * r.unit()));
	return std::min<size_t>(std::max<size_t>(len, 16), 2048);
}

struct Stats {
	double med, lo, hi;
};

inline Stats stats_of(std::vector<double> v)
{
	if (v.empty())
		return Stats{ NAN, NAN, NAN };
	std::sort(v.begin(), v.end());
	size_t n = v.size();
	double m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	return Stats{ m, v.front(), v.back() };
}

/* Median over rounds of a[r] / b[r]: the runs of one round are side by side. */
inline double ratio(const std::vector<double> &a, const std::vector<double> &b)
{
	std::vector<double> q;
	for (size_t i = 0; i < a.size() && i < b.size(); i++)
		q.push_back(a[i] / b[i]);
	return stats_of(q).med;
}

/* ---- the programs ----------------------------------------------------- */

enum { MAX_PROG = 4096 };
inline unsigned char g_tmpl[MAX_PROG];

inline void init_template()
{
	std::memset(g_tmpl, 0x90, sizeof(g_tmpl)); /* NOP padding */
	g_tmpl[0] = 0xb8;                          /* mov eax, imm32 */
	std::memset(g_tmpl + 1, 0, 4);
	g_tmpl[5] = 0xc3; /* ret */
}

/* The code of a program of len (>= 6) bytes returning imm. */
inline void emit(void *dst, size_t len, uint32_t imm)
{
	std::memcpy(dst, g_tmpl, len);
	std::memcpy(static_cast<unsigned char *>(dst) + 1, &imm, 4);
}

typedef uint32_t (*prog_fn)(void);

inline prog_fn as_fn(void *p)
{
	prog_fn f;
	std::memcpy(&f, &p, sizeof(f));
	return f;
}

inline uint32_t call(void *p) { return as_fn(p)(); }

/* Calls checked: per thread, added up when a thread ends. */
inline thread_local uint64_t t_checked;
inline std::atomic<uint64_t> g_calls_checked(0);

inline void check_call(void *p, uint32_t imm, const char *who)
{
	uint32_t got = call(p);
	if (got != imm)
		die("%s: program at %p returned %#x, expected %#x", who, p, got, imm);
	t_checked++;
}

/* Call it and compare all its bytes with what was written. */
inline void check_full(void *p, size_t len, uint32_t imm, const char *who)
{
	unsigned char want[MAX_PROG];

	emit(want, len, imm);
	if (std::memcmp(p, want, len) != 0)
		die("%s: the %zu bytes at %p differ from the code written", who, len, p);
	check_call(p, imm, who);
}

} // namespace bench
#endif
#endif
