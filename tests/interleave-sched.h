/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * interleave-sched.h - what check_interleave's scenario files share: the
 * scheduler (il_run() runs one schedule of a scenario's threads), the
 * model of the live allocations and the checks on it, the calls the
 * threads make, and il_each_seed(), which runs a scenario under its list of
 * seeds (interleave-sched.c).  Each interleave-*.c holds a family of
 * scenarios and adds its tests to the suite (check_interleave.c).
 */
#ifndef EP_TESTS_INTERLEAVE_SCHED_H
#define EP_TESTS_INTERLEAVE_SCHED_H

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "forkutil.h"
#include "heap.h"
#include "lock.h"
#include "remote.h"
#include "reliability.h"
#include "testutil.h"

/* ---- the scheduler ------------------------------------------------------- */

#define IL_MAX 3

extern __thread int il_me; /* the scheduled thread's index, -1 elsewhere */
extern pid_t il_pid;       /* the process whose threads are scheduled */
extern int il_failed;
extern int il_rc[IL_MAX][4]; /* what the scenario's calls returned */
extern char il_why[512];     /* the first failure */
extern unsigned long il_seed;
/* A scenario's own schedule: the thread to run next at where, or -1. */
extern int (*il_directed)(const char *where);
/* A scenario's signal: called at every preemption point, as a handler
 * that interrupted the thread there would run (never nested). */
extern void (*il_signal)(const char *where);

/* Locks held now, to see a second holder. */
struct il_held_lock {
	const void *lock;
	int holder;
};
extern struct il_held_lock il_held[64];

uint64_t il_rnd(void);
void il_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int il_alive(int i);
/* One schedule of fns[0..n-1] under seed. */
void il_run(unsigned long seed, void (**fns)(int), int n);
/* A fork child of a schedule: an alarm of its own (pthread_atfork()). */
void il_child_alarm(void);

/* ---- the model and the invariants ---------------------------------------- */

#define IL_MODEL 64

struct il_entry {
	unsigned char *exec;
	size_t size;
	int live;
	int freeing; /* an ep_free() of it has begun (its chunks may be reused
		      * before the call returns) */
	char name[16]; /* named when set */
};

extern struct ep_pool *il_pool;
extern size_t il_pack_size;
extern struct il_entry il_model[IL_MODEL];
extern unsigned char *il_freed[IL_MODEL]; /* addresses freed with a name once */
extern int il_nfreed;
/* A chunk of the trap fill. */
extern unsigned char il_trap[EP_CHUNK_SIZE];
extern int il_no_stats;          /* EP_IL_NO_STATS=1: look past a stats failure */
extern unsigned il_trap_every;   /* read the free chunks every nth step */
extern int il_steps_unchecked;   /* set: no check at each step */

void il_model_add(unsigned char *x, size_t size);
int il_model_find(const void *x);
void il_check_traps(const char *where);
void il_check_stats(const char *where);
void il_pool_begin(const struct ep_config *cfg_in);
void il_pool_adopt(struct ep_pool *p);
void il_pool_end(void);

/* ---- what the threads call ----------------------------------------------- */

extern unsigned char *il_pub[4]; /* allocations handed between threads */

unsigned char *il_await(int i);
unsigned char *il_jit(size_t n, int fin);
int il_do_free(unsigned char *x);
int il_patch_fill(unsigned char *x, size_t off, size_t len, unsigned char v, int hold);

/* ---- scenarios ----------------------------------------------------------- */

extern unsigned long il_schedules; /* per scenario (EP_IL_SCHEDULES) */

int il_each_seed(const char *name, void (*one)(unsigned long seed), unsigned long est,
		 unsigned long share);

/* The families, each adding its tests to the suite's one TCase. */
void il_add_alloc_tests(TCase *tc);
void il_add_resize_tests(TCase *tc);
void il_add_range_tests(TCase *tc);
void il_add_patch_tests(TCase *tc);
void il_add_fork_tests(TCase *tc);
void il_add_lookup_tests(TCase *tc);
void il_add_first_tests(TCase *tc);

#endif
