/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sljitConfigPre.h - sljit's executable memory in libexecpack.
 *
 * sljit (the JIT compiler under PCRE2) includes this header first when it
 * is built with SLJIT_HAVE_CONFIG_PRE=1 and this directory on the include
 * path; link with -lexecpack.  For PCRE2:
 *
 *   ./configure --enable-jit \
 *       CPPFLAGS="-DSLJIT_HAVE_CONFIG_PRE=1 -I/path/to/examples/sljit" \
 *       LIBS=-lexecpack
 *
 * sljit emits at an offset: it writes the code at the address its
 * allocator returns and computes every address against that address plus
 * SLJIT_EXEC_OFFSET().  Here the allocator returns ep_alloc()'s staging
 * buffer (img.rw), which the library aligns to the code modulo
 * EP_STAGE_ALIGN, so the labels sljit aligns on its write pointer are
 * aligned where the code runs.  Every hook finds its allocation with
 * ep_lookup_rw(): no state of its own, no thread-local "current image".
 *
 *   SLJIT_MALLOC_EXEC(size)        ep_alloc(); returns img.rw
 *   SLJIT_EXEC_OFFSET(rw)          img.exec - img.rw, by ep_lookup_rw(rw)
 *   SLJIT_UPDATE_WX_FLAGS(f, t, 1) end of sljit_generate_code() (f: exec):
 *                                  ep_finalize_size() with the used length;
 *                                  after a patch (f: rw): the patch window
 *                                  is committed
 *   SLJIT_UPDATE_WX_FLAGS(f, t, 0) sljit_set_jump_addr()/sljit_set_const()
 *                                  about to write published code at the
 *                                  writable address f: a patch window on
 *                                  [f, t), which EP_F_KEEP_STAGING opens at
 *                                  that very address
 *   SLJIT_FREE_EXEC(p)             ep_free() of the allocation holding p
 *                                  (exec, or rw on sljit's error paths)
 *
 * Which pool: sljit's exec_allocator_data (sljit_create_compiler()'s and
 * sljit_free_code()'s last argument) when the caller passes one, as a
 * struct ep_pool * (create it with EP_F_KEEP_STAGING if the code is ever
 * patched); NULL (PCRE2 passes NULL) means this header's own pool, created
 * on first use with EP_SLJIT_POOL_FLAGS.  Each translation unit that
 * includes the header has its own such pool (PCRE2: one per code unit
 * width), except with EP_SLJIT_POOL_FLAGS 0: then NULL means
 * ep_default_pool(), one pool for all of them and for every other library
 * of the process that uses it.
 *
 * EP_SLJIT_POOL_FLAGS defaults to EP_F_KEEP_STAGING: every allocation keeps
 * its writable copy, so that sljit_set_jump_addr() and sljit_set_const()
 * can write through the address sljit computed at generation time.  That
 * copy costs as much memory as the code.  A program that never calls them
 * (PCRE2 does not) builds with -DEP_SLJIT_POOL_FLAGS=0 and keeps no copy.
 *
 * sljit gives no hook for giving memory back (pcre2_jit_free_unused_memory()
 * calls sljit's own allocator only); ep_sljit_free_unused_memory() below
 * does it for the own pool: ep_pool_trim().
 *
 * No hook can fail back to sljit except SLJIT_MALLOC_EXEC (NULL: sljit
 * reports SLJIT_ERR_EX_ALLOC_FAILED, pcre2_jit_compile() PCRE2_ERROR_NOMEMORY
 * and PCRE2 matches without JIT).  The
 * others never abort: a finalize that cannot give back the tail finalizes
 * the whole allocation; a patch whose window cannot open is written word by
 * word with ep_write() when sljit is done.
 */
#ifndef EP_SLJIT_CONFIG_PRE_H
#define EP_SLJIT_CONFIG_PRE_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <execpack.h>

/* Not sljit's allocator: the hooks below. */
#define SLJIT_EXECUTABLE_ALLOCATOR 0
/*
 * sljit adds SLJIT_EXEC_OFFSET() to the addresses it hands out (labels,
 * the returned code) only under this name (SLJIT_ADD_EXEC_OFFSET in
 * sljitLir.c); with SLJIT_EXECUTABLE_ALLOCATOR 0 it compiles none of the
 * protected allocator itself.
 */
#define SLJIT_PROT_EXECUTABLE_ALLOCATOR 1

#define SLJIT_MALLOC_EXEC(size, exec_allocator_data) ep_sljit_malloc_exec((size), (exec_allocator_data))
#define SLJIT_FREE_EXEC(ptr, exec_allocator_data) ep_sljit_free_exec((ptr), (exec_allocator_data))
#define SLJIT_EXEC_OFFSET(ptr) ep_sljit_exec_offset(ptr)
#define SLJIT_UPDATE_WX_FLAGS(from, to, enable_exec) \
	ep_sljit_update_wx_flags((from), (to), (enable_exec))

#ifndef EP_SLJIT_POOL_FLAGS
#define EP_SLJIT_POOL_FLAGS EP_F_KEEP_STAGING
#endif

#if EP_SLJIT_POOL_FLAGS == 0
/* No flags: the process's default pool, one for every translation unit
 * (PCRE2's three code unit widths) and every other library that shares it.
 * NULL (no pool can be made now): this SLJIT_MALLOC_EXEC fails. */
static inline struct ep_pool *ep_sljit_pool(void)
{
	return ep_default_pool();
}
#else
static struct ep_pool *ep_sljit_own_pool;
static pthread_once_t ep_sljit_once = PTHREAD_ONCE_INIT;

static void ep_sljit_create_pool(void)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .flags = EP_SLJIT_POOL_FLAGS };

	/* On failure the pointer stays NULL: every SLJIT_MALLOC_EXEC fails. */
	if (ep_pool_create(&cfg, &ep_sljit_own_pool) < 0)
		ep_sljit_own_pool = NULL;
}

/* The pool this header allocates from when sljit passes no pool. */
static inline struct ep_pool *ep_sljit_pool(void)
{
	pthread_once(&ep_sljit_once, ep_sljit_create_pool);
	return ep_sljit_own_pool;
}
#endif

static inline void *ep_sljit_malloc_exec(size_t size, void *exec_allocator_data)
{
	struct ep_pool *pool = exec_allocator_data ? (struct ep_pool *)exec_allocator_data
						   : ep_sljit_pool();
	struct ep_image img;

	if (!pool || ep_alloc(pool, size, &img) < 0)
		return NULL;
	return img.rw;
}

static inline void ep_sljit_free_exec(void *ptr, void *exec_allocator_data)
{
	struct ep_info info;

	(void)exec_allocator_data; /* the allocation knows its pool */
	if (ep_lookup_rw(ptr, &info) == 0)
		ep_free(info.pool, info.exec);
}

/* Called once per sljit_generate_code(), on what SLJIT_MALLOC_EXEC returned. */
static inline ptrdiff_t ep_sljit_exec_offset(void *rw)
{
	struct ep_info info;

	if (ep_lookup_rw(rw, &info) < 0 || !info.rw)
		return 0;
	return (char *)info.exec - (char *)info.rw;
}

/* The exec address of a writable address in the kept staging (or window). */
static inline char *ep_sljit_exec_of(const struct ep_info *info, void *rw)
{
	return (char *)info->patch_exec + ((char *)rw - (char *)info->patch_rw);
}

/* Whether rw lies in the allocation's kept staging or open window. */
static inline int ep_sljit_in_patch(const struct ep_info *info, void *rw)
{
	return info->patch_rw && (char *)rw >= (char *)info->patch_rw &&
	       (char *)rw < (char *)info->patch_rw + info->patch_len;
}

static inline void ep_sljit_update_wx_flags(void *from, void *to, int enable_exec)
{
	struct ep_info info;
	size_t len = (size_t)((char *)to - (char *)from);
	char *exec;
	void *wrw;
	int tries, rc;

	if (!from || ep_lookup_rw(from, &info) < 0)
		return;
	if (enable_exec && !(info.flags & EP_INFO_FINALIZED)) {
		/*
		 * End of sljit_generate_code(): [from, to) is the code at its
		 * exec address (from is image.exec; ep_lookup() may report
		 * the first chunk instead, before an EP_F_RANDOMIZE
		 * allocation is finalized).
		 */
		if (len == 0 || ep_finalize_size(info.pool, from, len) < 0)
			ep_finalize(info.pool, from);
		return;
	}
	if (!ep_sljit_in_patch(&info, from) || len == 0)
		return; /* not a writable address of published code */
	exec = ep_sljit_exec_of(&info, from);
	if (!enable_exec) {
		/*
		 * One window per allocation: another thread patching the same
		 * code holds it until its commit; wait (briefly spinning, then
		 * sleeping) so that its bytes and these go out one after the
		 * other.  sljit writes nothing before this returns.
		 */
		for (tries = 0;; tries++) {
			rc = ep_patch_begin(info.pool, exec, len, &wrw);
			if (rc != -EBUSY)
				break;
			if (tries < 64) {
				sched_yield();
			} else {
				struct timespec ts = { 0, 50000 };
				nanosleep(&ts, NULL);
			}
		}
		return;
	}
	/*
	 * sljit has written [from, to).  The window opened at begin commits
	 * the changed words; if none is open (begin failed), write the range
	 * with ep_write(), whole for a word sljit patched in place.
	 */
	if (ep_patch_commit(info.pool, exec) == 0)
		return;
	ep_write(info.pool, exec, from, len);
}

/* What pcre2_jit_free_unused_memory() would do with sljit's allocator. */
static inline int ep_sljit_free_unused_memory(size_t *released)
{
	struct ep_pool *pool = ep_sljit_pool();

	return pool ? ep_pool_trim(pool, released) : -ENOMEM;
}

#endif /* EP_SLJIT_CONFIG_PRE_H */
