/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * guard.c - the hardware guards of code memory (guard.h): the library's
 * protection key, allocated once per process; BTI where the system has it;
 * what a pool gets of them, and why not (ep_pool_guards()).
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#if defined(__has_include)
#if __has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h> /* (glibc 2.33 and later) */
#endif
#endif
#ifdef CPU_FEATURE_PRESENT
#define EP__GLIBC_CPU_FEATURES 1
#else
#define EP__GLIBC_CPU_FEATURES 0
#endif
#endif
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "guard.h"
#include "internal.h"
#include "track.h"
#include "types.h"

#ifndef PKEY_DISABLE_ACCESS
#define PKEY_DISABLE_ACCESS 0x1
#endif

/* Set to "0", EXECPACK_PKEY turns the key off; set, EXECPACK_BTI turns
 * BTI on.  secure_getenv: a set-user-ID program's environment is not
 * trusted to weaken it. */
static const char *env(const char *name)
{
	const char *v = secure_getenv(name);

	return v && *v ? v : NULL;
}

/* ---- the protection key ---------------------------------------------------------- */

#ifdef EP__HAVE_PKEY
/* The key, -1 until a pool allocates it; read only where a region has
 * EP_GUARD_PKEY, which it has only once this is set. */
static _Atomic int lib_key = -1;
/* Windows open in this thread (a signal handler's are closed again before
 * it returns). */
static __thread unsigned window_depth __attribute__((tls_model("initial-exec")));

/* RDPKRU and WRPKRU, spelled out for assemblers that do not know them */
static inline uint32_t rdpkru(void)
{
	uint32_t eax, edx;

	__asm__ volatile(".byte 0x0f, 0x01, 0xee" : "=a"(eax), "=d"(edx) : "c"(0));
	(void)edx;
	return eax;
}

/* ("memory": no access through the alias moves across it) */
static inline void wrpkru(uint32_t pkru)
{
	__asm__ volatile(".byte 0x0f, 0x01, 0xef" : : "a"(pkru), "c"(0), "d"(0) : "memory");
}

/* Open the window: allow the key in this thread only; returns what
 * window_close() needs. */
static inline uint32_t window_open(void)
{
	uint32_t was = rdpkru();
	uint32_t bits = 3u << (2 * (unsigned)ep__load_relaxed(&lib_key));

	if (was & bits)
		wrpkru(was & ~bits);
	window_depth++;
	return was;
}

/* Put back what window_open() found, the key disabled if outermost. */
static inline void window_close(uint32_t was)
{
	unsigned shift = 2 * (unsigned)ep__load_relaxed(&lib_key);
	uint32_t now = was & ~(3u << shift);
	uint32_t want = --window_depth ? was : now | PKEY_DISABLE_ACCESS << shift;

	if (want != now)
		wrpkru(want);
}

void ep__alias_fill_keyed(ep_fill_fn fill, void *dst, size_t len, void *ctx)
{
	uint32_t was = window_open();

	fill(dst, len, ctx);
	window_close(was);
}

/*
 * The caller's fill, where dst is in the alias: it runs with the key
 * disabled, into a buffer on this stack, and the library copies what it
 * wrote into the alias with the key allowed.  So a thread that the fill
 * makes copies a disabled key (a thread copies its creator's PKRU), and
 * nothing the fill does can reach the alias.  The buffer keeps dst's place
 * in its page, and starts as the architecture's traps: a fill that writes
 * less leaves those.
 */
void ep__fill_caller(ep_fill_fn fill, void *dst, size_t len, void *ctx)
{
	if (!window_depth) {
		fill(dst, len, ctx); /* (no window: dst is not the alias) */
		return;
	}
	enum { PAGE = 4096 }; /* (x86-64's) */
	_Alignas(PAGE) unsigned char buf[PAGE];
	unsigned shift = 2 * (unsigned)ep__load_relaxed(&lib_key);
	uint32_t open = rdpkru();
	uint32_t closed = open | PKEY_DISABLE_ACCESS << shift;
	unsigned char *d = dst;

	while (len) {
		size_t at = (uintptr_t)d % PAGE, n = PAGE - at < len ? PAGE - at : len;

		wrpkru(closed);
		ep__fill_with(ep__fill_default, buf + at, n, NULL);
		fill(buf + at, n, ctx);
		wrpkru(open);
		memcpy(d, buf + at, n);
		d += n;
		len -= n;
	}
}

void ep__alias_copy_keyed(void *dst, const void *src, size_t len)
{
	uint32_t was = window_open();

	ep__copy_code(dst, src, len);
	window_close(was);
}

static pthread_once_t pkey_once = PTHREAD_ONCE_INIT;
static char pkey_why[256]; /* why there is none; set once, in key_init() */
static const char *pkey_no; /* or this, where the CPU or Valgrind says */

/* Whether the CPU has protection keys (CPUID.7.0:ECX.PKU) and the kernel
 * turned them on (OSPKE), else why not. */
static const char *pkey_cpu(void)
{
	unsigned c;
#if EP__GLIBC_CPU_FEATURES
	/* what glibc read at start-up: CPUID traps to the hypervisor in a
	 * guest, 10 us or more there, at every process's first pool */
	c = (CPU_FEATURE_PRESENT(PKU) ? 1u << 3 : 0) | (CPU_FEATURE_PRESENT(OSPKE) ? 1u << 4 : 0);
#else
	unsigned a, b, d;

	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		c = 0;
#endif
	if (!(c & (1u << 3)))
		return "the CPU has no protection keys (no pku in /proc/cpuinfo)";
	if (!(c & (1u << 4)))
		return "the kernel has not enabled protection keys (no ospke: built without "
		       "them, or booted with nopku)";
	return NULL;
}

/*
 * Allocate the key, access-disabled in this thread (the kernel sets only
 * the caller's rights).  A key whose rights this thread allowed before it
 * was allocated was used by someone in this process (or root changed the
 * kernel's init_pkru, in /sys/kernel/debug/x86), and other threads may
 * still allow it: keep it out of the way (allocated) while looking for
 * another, give it back after.
 */
static void key_init(void)
{
	const char *no = RUNNING_ON_VALGRIND ? "Valgrind does not run RDPKRU and WRPKRU"
					     : pkey_cpu();

	if (no) {
		pkey_no = no; /* (a constant: no formatting at start-up) */
		return;
	}
	uint32_t before = rdpkru();
	int used[16], nused = 0;
	static const char allowed_before[] =
		"every free protection key was allowed in this thread before (by this process, "
		"or by the kernel's init_pkru): threads made earlier could store to the alias";

	for (;;) {
		long k = syscall(SYS_pkey_alloc, 0UL, (unsigned long)PKEY_DISABLE_ACCESS);

		if (k < 0) {
			int e = errno;

			if (nused)
				ep__why(pkey_why, sizeof(pkey_why), "%s", allowed_before);
			else if (e == ENOSPC)
				ep__why(pkey_why, sizeof(pkey_why),
					"no free protection key (pkey_alloc: all in use)");
			else
				ep__why(pkey_why, sizeof(pkey_why), "pkey_alloc: %s",
					ep__errno_text(e));
			break;
		}
		/* (write-disabled is enough: only stores are the threat) */
		if (k > 0 && k < 16 && (before >> (2 * k)) & 3) {
			ep__store_release(&lib_key, (int)k);
			break;
		}
		used[nused++] = (int)k;
		if (nused == (int)(sizeof(used) / sizeof(used[0]))) {
			ep__why(pkey_why, sizeof(pkey_why), "%s", allowed_before);
			break;
		}
	}
	while (nused)
		syscall(SYS_pkey_free, (unsigned long)used[--nused]);
}

/* The key, allocated at the first call; -1 (and why) when there is none. */
static int key_get(const char **why)
{
	pthread_once(&pkey_once, key_init);
	*why = pkey_no ? pkey_no : pkey_why;
	return ep__load_acquire(&lib_key);
}
#else
/* (never called: no region has EP_GUARD_PKEY here) */
void ep__alias_fill_keyed(ep_fill_fn fill, void *dst, size_t len, void *ctx)
{
	fill(dst, len, ctx);
}

void ep__alias_copy_keyed(void *dst, const void *src, size_t len)
{
	ep__copy_code(dst, src, len);
}

void ep__fill_caller(ep_fill_fn fill, void *dst, size_t len, void *ctx)
{
	fill(dst, len, ctx);
}
#endif

int ep__guard_alias(unsigned guards, void *rw, size_t size)
{
#ifdef EP__HAVE_PKEY
	if ((guards & EP_GUARD_PKEY) &&
	    syscall(SYS_pkey_mprotect, rw, size, (unsigned long)(PROT_READ | PROT_WRITE),
		    (unsigned long)ep__load_relaxed(&lib_key)) < 0)
		return -errno;
#endif
	(void)guards;
	(void)rw;
	(void)size;
	return 0;
}

/* ---- BTI ------------------------------------------------------------------------------ */

#ifndef HWCAP2_BTI
#define HWCAP2_BTI (1UL << 17)
#endif

/* Why the exec views cannot be PROT_BTI here, or NULL when they can. */
static const char *bti_missing(void)
{
#if defined(__aarch64__)
	if (!(getauxval(AT_HWCAP2) & HWCAP2_BTI))
		return "the CPU or the kernel has no BTI (HWCAP2_BTI)";
	return NULL;
#else
	return "BTI is arm64's";
#endif
}

int ep__bti_wanted(const struct ep_config *cfg)
{
	const char *v = env("EXECPACK_BTI");

	return (cfg && (cfg->flags & EP_F_BTI)) || (v && strcmp(v, "0"));
}

/* ---- what a pool gets ------------------------------------------------------------------ */

int ep__guards_open(const struct ep_config *cfg, const char *backend, unsigned *guards,
		    const char **pkey_off, char *why, size_t whylen)
{
	unsigned flags = cfg ? cfg->flags : 0;
	const char *v;

	*guards = 0;
	*pkey_off = NULL;
	if (ep__bti_wanted(cfg)) {
		const char *no = bti_missing();

		if (no) {
			ep__why(why, whylen, "%s: BTI asked for (%s) but %s", backend,
				flags & EP_F_BTI ? "EP_F_BTI" : "EXECPACK_BTI", no);
			return -EOPNOTSUPP;
		}
		*guards |= EP_GUARD_BTI;
	}
	if (flags & EP_F_NO_PKEY) {
		*pkey_off = "turned off by EP_F_NO_PKEY";
	} else if ((v = env("EXECPACK_PKEY")) && !strcmp(v, "0")) {
		*pkey_off = "turned off by EXECPACK_PKEY=0";
	} else {
#ifdef EP__HAVE_PKEY
		if (key_get(pkey_off) >= 0) {
			*guards |= EP_GUARD_PKEY;
			*pkey_off = NULL;
		}
#else
		*pkey_off = "protection keys are used on x86-64 only";
#endif
	}
	return 0;
}

/* Append "name: reason" to why, after "; " when it holds one already. */
static void add(char *why, size_t len, const char *name, const char *reason)
{
	size_t used = strlen(why);

	if (used + 3 < len)
		snprintf(why + used, len - used, "%s%s: %s", used ? "; " : "", name, reason);
}

EP_API unsigned ep_pool_guards(const struct ep_pool *pool, char *why, size_t whylen)
{
	if (why && whylen)
		why[0] = 0;
	if (!pool)
		return 0;
	const struct ep__heap *h = pool->first;
	const char *pkey_off = NULL;
	unsigned g = h->ops->guards ? h->ops->guards(h->be, &pkey_off) : 0;

	if (!why || !whylen)
		return g;
	if (!(g & EP_GUARD_PKEY)) {
		char no_alias[64];

		if (!h->ops->guards) {
			snprintf(no_alias, sizeof(no_alias), "%s has no writable mapping to guard",
				 h->ops->name);
			pkey_off = no_alias;
		}
		add(why, whylen, "pkey", pkey_off ? pkey_off : "off");
	}
	if (!(g & EP_GUARD_BTI)) {
		const char *no = bti_missing();

		add(why, whylen, "bti", no ? no : "not asked for (EP_F_BTI, EXECPACK_BTI=1)");
	}
	return g;
}
