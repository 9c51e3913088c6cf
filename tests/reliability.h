/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * reliability.h - helpers shared by the reliability tests (fork, threads,
 * hostile environments): tiny functions, child-process checks that
 * do not depend on the Check framework, and run-size knobs.
 */
#ifndef EP_RELIABILITY_H
#define EP_RELIABILITY_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "execpack.h"
#include "testutil.h"

#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif
#if defined(HAVE_VALGRIND_VALGRIND_H) && defined(__has_include)
#if __has_include(<valgrind/helgrind.h>)
#include <valgrind/helgrind.h>
#endif
#endif
#ifndef VALGRIND_HG_DISABLE_CHECKING
#define VALGRIND_HG_DISABLE_CHECKING(addr, len) ((void)(addr), (void)(len))
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EP_TEST_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define EP_TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(EP_TEST_ASAN)
#define EP_TEST_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(EP_TEST_TSAN)
#define EP_TEST_TSAN 1
#endif

/* "return imm" (testutil.h: for the architecture the tests run on) is this long. */
#define RET_IMM_LEN TU_RET_LEN

typedef int (*rel_fn)(void);

static inline void rel_emit_ret_imm(void *dst, uint32_t v)
{
	tu_emit_ret_imm(dst, v);
}

static inline int rel_call(void *exec)
{
	rel_fn f;

	memcpy(&f, &exec, sizeof(f)); /* object to function pointer, no warning */
	return f();
}

/* Smaller runs under Valgrind or with EP_TEST_QUICK=1. */
static inline int rel_quick(void)
{
	const char *q = getenv("EP_TEST_QUICK");
	const char *san = getenv("EP_SANITIZER"); /* build-aux/sanitizers.sh */

	/* ThreadSanitizer runs the threaded suites 10-20x slower, like
	 * Valgrind: fewer rounds keep them inside their timeouts on a loaded
	 * 2-core machine */
	return RUNNING_ON_VALGRIND || (q && *q && strcmp(q, "0") != 0) ||
	       (san && !strcmp(san, "tsan"));
}

/*
 * Allocate, emit "return v" into the staging buffer, finalize.
 * Returns 0 or the failing call's negative errno.
 */
static inline int rel_jit(struct ep_pool *pool, size_t size, uint32_t v, void **exec)
{
	struct ep_image img;
	int rc = ep_alloc(pool, size, &img);

	if (rc)
		return rc;
	if (img.size < size || img.size < RET_IMM_LEN) {
		ep_free(pool, img.exec);
		return -ERANGE;
	}
	rel_emit_ret_imm(img.rw, v);
	rc = ep_finalize(pool, img.exec);
	if (rc) {
		ep_free(pool, img.exec);
		return rc;
	}
	*exec = img.exec;
	return 0;
}

/* Patch the immediate of a live "return imm" (one aligned store when only
 * the low bits change, testutil.h). */
static inline int rel_patch(struct ep_pool *pool, void *exec, uint32_t v)
{
	return tu_patch_ret_imm(pool, exec, v);
}

/*
 * Checks inside forked children, where the Check framework must not be
 * used: print where and why, then leave with a distinctive status.
 */
#define REL_CHILD_FAIL 99

static inline void rel_child_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

static inline void rel_child_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: [pid %ld] ", file, line, (long)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	_exit(REL_CHILD_FAIL);
}

#define CHILD_CHECK(cond, ...)                                                  \
	do {                                                                    \
		if (!(cond))                                                    \
			rel_child_fail(__FILE__, __LINE__, __VA_ARGS__);        \
	} while (0)

/* Write / read one byte on a pipe; the child side uses CHILD_CHECK. */
static inline int rel_send(int fd, char c)
{
	ssize_t n;

	do
		n = write(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : -1;
}

static inline int rel_recv(int fd, char *c)
{
	ssize_t n;

	do
		n = read(fd, c, 1);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : -1;
}

/*
 * A child of a parent whose other threads were inside the library leaves
 * here once its checks passed.  What those threads were building at the
 * fork (a pool half created, say) is reachable only from their registers,
 * which the child does not have: memcheck's leak check at the child's exit
 * would call that lost and fail it.  So under Valgrind the child says 'k'
 * on fd and kills itself (no leak check then); the parent takes a SIGKILL
 * after a 'k' for a clean exit.
 */
static inline void rel_child_exit_ok(int fd) __attribute__((noreturn));

static inline void rel_child_exit_ok(int fd)
{
	if (RUNNING_ON_VALGRIND && rel_send(fd, 'k') == 0)
		kill(getpid(), SIGKILL);
	_exit(0);
}

/* Wait for pid; returns its exit status, 128+signal, or -1. */
static inline int rel_wait(pid_t pid)
{
	int st;
	pid_t r;

	do
		r = waitpid(pid, &st, 0);
	while (r < 0 && errno == EINTR);
	if (r != pid)
		return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return -1;
}

#endif /* EP_RELIABILITY_H */
