/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * small.c - small blocks for the records a thread's calls make, off
 * malloc() where malloc() would cost a thread an arena.
 *
 * glibc gives each thread a malloc arena of its own at its first malloc()
 * (two pages resident, and more as it is used), which a thread that only
 * JITs through the library would pay for the library's records alone:
 * four such threads grew a process by three arenas.  The main thread's
 * arena is there anyway, so its blocks stay malloc()'s; another thread's
 * come from one reservation of the library's, carved a page at a time
 * into 64-byte classes, each given back onto its class's list (under
 * ep__meta_lock, which the fork handlers take: the lists are whole in a
 * child).  A block is the reservation's or malloc()'s by its address, so
 * any thread frees either.  Staging buffers have pages of their own.
 * Under Valgrind and the sanitizers every block is malloc()'s, as those
 * tools follow it.
 */
#include "config.h"
#include "atomic.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "lock.h"
#include "meta.h"
#include "small.h"

#define GRAIN ((size_t)64) /* (a block never shares a cache line) */
#define CLASSES (EP__SMALL_MAX / GRAIN)
#define RESERVE ((size_t)64 << 20) /* address space only: MAP_NORESERVE */

struct free_block {
	struct free_block *next;
};

/* The page being carved and the blocks given back, by class. */
struct zone {
	unsigned char *at, *end;
	struct free_block *free[CLASSES];
};

static struct zone g_records, g_staging;
/* the reservation: [lo, hi) once mapped; next, its first page not carved */
static _Atomic uintptr_t g_lo, g_hi;
static uintptr_t g_next;
static _Thread_local signed char tl_main; /* 1 the main thread, -1 not, 0 unknown */
static pthread_t g_main;                    /* the thread that loaded the library */
static bool g_main_known;

/* (the thread that loads the library: the main thread, unless a thread
 * dlopen()s it, which then keeps malloc() as the main thread would) */
__attribute__((constructor)) static void note_main_thread(void)
{
	g_main = pthread_self();
	g_main_known = true;
}

/* The sanitizers, which follow malloc() (LeakSanitizer scans its blocks
 * for pointers, not this reservation): gcc's macros, clang's features. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EP_SMALL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
	__has_feature(memory_sanitizer) || __has_feature(hwaddress_sanitizer)
#define EP_SMALL_SANITIZED 1
#endif
#endif

/* Where malloc() serves: the tools that follow it, and the main thread. */
static bool by_malloc(void)
{
#ifdef EP_SMALL_SANITIZED
	return true;
#else
	if (ep__under_valgrind())
		return true;
	if (__builtin_expect(!tl_main, 0))
		tl_main = g_main_known && pthread_equal(pthread_self(), g_main) ? 1 : -1;
	return tl_main > 0;
#endif
}

static bool in_reserve(const void *p)
{
	uintptr_t a = (uintptr_t)p;

	return a >= ep__load_relaxed(&g_lo) && a < ep__load_relaxed(&g_hi);
}

/* A page of the reservation, mapped at the first; NULL when spent.  With
 * ep__meta_lock. */
static unsigned char *page_take(void)
{
	size_t pg = ep__page_size();

	if (!ep__load_relaxed(&g_lo)) {
		void *m = mmap(NULL, RESERVE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (m == MAP_FAILED)
			return NULL;
		(void)madvise(m, RESERVE, MADV_NOHUGEPAGE); /* (as meta.c's) */
		g_next = (uintptr_t)m;
		ep__store_relaxed(&g_hi, (uintptr_t)m + RESERVE);
		ep__store_release(&g_lo, (uintptr_t)m);
	}
	if (ep__load_relaxed(&g_hi) - g_next < pg)
		return NULL;
	g_next += pg;
	return (unsigned char *)(g_next - pg);
}

/* A block of class k (len bytes) of z, NULL when the reservation is spent;
 * with ep__meta_lock.  One given back holds its old bytes. */
static void *zone_take(struct zone *z, size_t k, size_t len)
{
	void *p = z->free[k];

	if (p) {
		z->free[k] = z->free[k]->next;
		return p;
	}
	if ((size_t)(z->end - z->at) < len) {
		/* (the old page's rest goes to the lists) */
		while ((size_t)(z->end - z->at) >= GRAIN) {
			size_t j = (size_t)(z->end - z->at) / GRAIN - 1;
			struct free_block *f = (struct free_block *)z->at;

			j = j < CLASSES ? j : CLASSES - 1;
			f->next = z->free[j];
			z->free[j] = f;
			z->at += (j + 1) * GRAIN;
		}
		unsigned char *pg = page_take();

		if (!pg)
			return NULL;
		z->at = pg;
		z->end = pg + ep__page_size();
	}
	p = z->at;
	z->at += len;
	return p;
}

/* The class of a block of size bytes: it holds (class + 1) * GRAIN. */
static size_t class_of(size_t size)
{
	return size ? (size - 1) / GRAIN : 0;
}

static void *zone_get(struct zone *z, size_t size)
{
	size_t k = class_of(size);

	ep__mutex_lock(&ep__meta_lock);
	void *p = zone_take(z, k, (k + 1) * GRAIN);

	ep__mutex_unlock(&ep__meta_lock);
	return p;
}

static void zone_put(struct zone *z, void *p, size_t size)
{
	struct free_block *f = p;
	size_t k = class_of(size);

	ep__mutex_lock(&ep__meta_lock);
	f->next = z->free[k];
	z->free[k] = f;
	ep__mutex_unlock(&ep__meta_lock);
}

void *ep__small_get(size_t size)
{
	void *p = NULL;

	if (size <= EP__SMALL_MAX && !by_malloc() && (p = zone_get(&g_records, size)))
		return memset(p, 0, (class_of(size) + 1) * GRAIN);
	return calloc(1, size ? size : 1);
}

void ep__small_put(void *p, size_t size)
{
	if (p && in_reserve(p))
		zone_put(&g_records, p, size);
	else
		free(p);
}

void *ep__stage_block_get(size_t size)
{
	void *p = NULL;

	if (size <= EP__SMALL_MAX && !by_malloc() && (p = zone_get(&g_staging, size)))
		return p;
	return aligned_alloc(GRAIN, (size + GRAIN - 1) / GRAIN * GRAIN);
}

void ep__stage_block_put(void *p, size_t size)
{
	if (p && in_reserve(p))
		zone_put(&g_staging, p, size);
	else
		free(p);
}
