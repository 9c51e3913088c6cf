/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * manycores.h - what check_manycores' files share: the helpers of
 * manycores-util.c and each family's function that adds its tests to its
 * TCase (check_manycores.c).
 */
#ifndef EP_TESTS_MANYCORES_H
#define EP_TESTS_MANYCORES_H

#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <time.h>

#include "forkutil.h"
#include "reliability.h"

extern char **environ;

/* ---- helpers (manycores-util.c) --------------------------------------- */

double mc_now_s(void);
void mc_pause_us(long us);
/* How long a loop may run: short, it is the count of events that matters,
 * and under Valgrind or EP_TEST_QUICK=1 shorter still. */
double mc_run_budget(void);
/* How long a child may take before it counts as hung. */
double mc_child_timeout(void);
size_t mc_chunks_of(size_t size);

/* The first failure seen by any thread of a test. */
void mc_fail_reset(void);
void mc_fail_record(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool mc_failed(void);
void mc_assert_no_failure(void);

/* In a thread: record the failure and leave the (void) function. */
#define TCHECK(cond, ...)                                      \
	do {                                                   \
		if (!(cond)) {                                 \
			mc_fail_record(__LINE__, __VA_ARGS__);    \
			return;                                \
		}                                              \
	} while (0)

/* The stop flag of the threads of a test. */
void mc_stop_reset(void);
bool mc_stopping(void);
void mc_stop_all(void);

struct ep_pool *mc_new_pool(enum ep_backend b, size_t limit);
/* Does the code at f read `mov eax, v; ret`? */
bool mc_code_is(const void *f, uint32_t v);
uint32_t mc_code_imm(const void *f);
bool mc_runs_as(void *f, uint32_t v);

/* A monitoring thread: ep_pool_stats() over and over, with a pause between
 * calls when pause_us > 0 (calls that come and go leave the pool quiet in
 * between); with check set, every snapshot is checked against the bounds. */
struct monitor {
	pthread_t th;
	struct ep_pool *pool;
	long pause_us;
	bool check;
	size_t max_live;  /* allocations alive at any moment, at most */
	size_t max_used;  /* bytes of chunks in packs in use at any moment, at most */
	size_t max_large; /* large allocations alive at any moment, at most */
	unsigned long calls;
};

/* A monitor's thread (pthread_create()), and one started on pool. */
void *mc_monitor_main(void *arg);
void mc_monitor_start(struct monitor *m, struct ep_pool *pool, long pause);

/* The sizes the ring's turns (and the rounds) allocate, and the ring's
 * limit: its largest program. */
extern const size_t mc_ring_sizes[8];
#define RING_LIMIT 2048

/* Runs a ring of n threads on pool for about budget seconds; the monitors
 * run alongside.  The turns taken. */
unsigned long mc_ring_run(struct ep_pool *pool, int n, bool exact, bool cross, double budget,
			  struct monitor *mons, int nmons);

/* ---- the families ------------------------------------------------------- */

void mc_add_limit_tests(TCase *tc);
void mc_add_heap_tests(TCase *tc);
void mc_add_stats_tests(TCase *tc);
void mc_add_fork_tests(TCase *tc);
void mc_add_fork_thread_tests(TCase *tc);

#endif
