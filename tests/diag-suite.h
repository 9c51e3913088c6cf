/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-suite.h - what check_diag's files share: the fixture (diag-fixture.c)
 * and each family's function that adds its tests to the suite
 * (check_diag.c).
 */
#ifndef EP_TESTS_DIAG_H
#define EP_TESTS_DIAG_H

#include <check.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_VALGRIND_MEMCHECK_H
#include <valgrind/memcheck.h>
#endif

#ifdef HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#include "execpack.h"
#include "testutil.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EP_TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(EP_TEST_TSAN)
#define EP_TEST_TSAN 1
#endif
#ifndef EP_TEST_TSAN
#define EP_TEST_TSAN 0
#endif

/* The pool each test of the suite gets (diag_setup(), diag_teardown()). */
extern struct ep_pool *diag_pool;

struct ep_pool *diag_make_pool(unsigned flags);
void diag_setup(void);
void diag_teardown(void);
/* A program returning v, finalized; the test fails if it cannot be made. */
void *diag_jit(struct ep_pool *p, size_t size, uint32_t v);
/* Whether this process's perf map has the line want. */
int diag_map_has(const char *want);

void diag_add_name_tests(TCase *tc);
void diag_add_gdb_tests(TCase *tc);
void diag_add_planted_tests(TCase *tc);
void diag_add_backtrace_tests(TCase *tc);
void diag_add_unwind_tcase(Suite *s);

#endif
