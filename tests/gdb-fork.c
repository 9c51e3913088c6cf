/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gdb-fork.c - a program that forks, for tests/gdb-fork.sh: run under gdb
 * with detach-on-fork off, gdb holds the new child stopped; the parent's
 * fork() must return and the parent go on changing its code.  The child,
 * once gdb lets it run, must still run the code of the fork.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "reliability.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
	struct ep_pool *pool = NULL;
	void *f = NULL, *g = NULL;
	int rc = ep_pool_create(NULL, &pool);

	if (rc) {
		printf("SKIP: ep_pool_create: %s\n", ep_strerror(rc));
		return 77;
	}
	if ((rc = rel_jit(pool, 64, 0x1111, &f))) {
		printf("FAIL: jit: %s\n", ep_strerror(rc));
		return 1;
	}
	alarm(30); /* (a fork() that waits for the held child: killed) */
	fflush(stdout);
	double t0 = now_s();
	pid_t pid = fork();

	if (pid == 0) {
		int v = rel_call(f);

		printf("CHILD %s: %#x\n", v == 0x1111 ? "OK" : "FAIL", (unsigned)v);
		fflush(stdout);
		_exit(v == 0x1111 ? 0 : 3);
	}
	double took = now_s() - t0;

	if (pid < 0) {
		perror("fork");
		return 1;
	}
	/* the child is held: the parent changes the code it shares */
	if ((rc = rel_patch(pool, f, 0x2222)) || rel_call(f) != 0x2222 ||
	    (rc = rel_jit(pool, 64, 0x3333, &g)) || rel_call(g) != 0x3333 ||
	    (rc = ep_free(pool, g))) {
		printf("FAIL: the parent's changes after fork(): %s\n", ep_strerror(rc));
		return 1;
	}
	printf("PARENT OK: fork() returned in %.3f s\n", took);
	ep_pool_destroy(pool);
	return 0;
}
