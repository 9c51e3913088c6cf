/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * jitdump-prog.c - run by tests/jitdump-perf.sh under `perf record -k 1`:
 * JITs one hot loop named "ep_jd_hot_loop" into a pool with EP_F_JITDUMP
 * and runs it for about the time given in milliseconds (default 300), so
 * that perf's samples land in it.  With "perfmap" after the time
 * (tests/perfmap-perf.sh), the loop is "ep_pm_hot_loop" in a pool with
 * EP_F_PERFMAP instead, of the default backend like the other.  The loop is
 *
 *	xor eax, eax; mov ecx, imm32; 1: add eax, ecx; imul eax, eax, 3;
 *	dec ecx; jnz 1b; ret
 *
 * and the script looks for those instructions in `perf annotate`.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "execpack.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const unsigned char code[] = {
		0x31, 0xc0,                   /* xor eax, eax */
		0xb9, 0x00, 0x00, 0x10, 0x00, /* mov ecx, 0x100000 */
		0x01, 0xc8,                   /* 1: add eax, ecx */
		0x6b, 0xc0, 0x03,             /* imul eax, eax, 3 */
		0xff, 0xc9,                   /* dec ecx */
		0x75, 0xf7,                   /* jnz 1b */
		0xc3,                         /* ret */
	};
	int perfmap = argc > 2 && !strcmp(argv[2], "perfmap");
	struct ep_config cfg = { .sz = sizeof(cfg),
				 .flags = perfmap ? EP_F_PERFMAP : EP_F_JITDUMP };
	struct ep_pool *pool;
	struct ep_image img;
	double ms = argc > 1 ? atof(argv[1]) : 300;
	int rc = ep_pool_create(&cfg, &pool);

	if (rc == 0)
		rc = ep_alloc(pool, sizeof(code), &img);
	if (rc == 0) {
		memcpy(img.rw, code, sizeof(code));
		rc = ep_set_name(pool, img.exec, perfmap ? "ep_pm_hot_loop" : "ep_jd_hot_loop");
	}
	if (rc == 0)
		rc = ep_finalize(pool, img.exec);
	if (rc != 0) {
		fprintf(stderr, "jitdump-prog: %s\n", ep_strerror(rc));
		return 1;
	}
	unsigned sum = 0, calls = 0;
	double end = now() + ms / 1000;

	while (now() < end) {
		sum += (unsigned)((int (*)(void))img.exec)();
		calls++;
	}
	printf("jitdump-prog: %u calls at %p (%u), pid %ld, backend %s\n", calls, img.exec, sum,
	       (long)getpid(), ep_pool_backend(pool));
	ep_pool_destroy(pool);
	return 0;
}
