/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * smc-probe.c - does this machine run code changed under a running thread?
 * No libexecpack: a memfd mapped twice (RW and RX), a thread calling the
 * RX copy in a loop, and this thread changing the instruction through the
 * RW copy, then __builtin___clear_cache() and membarrier SYNC_CORE, then
 * calling it: the call must return the new value, every time.
 *
 * The arm64 stage runs it beside the suites: qemu's multi-threaded TCG
 * misses some of these changes (a stale translation stays in use), where
 * single-threaded TCG and hardware do not.  Named smc-probe it says SKIP
 * (exit 77) on a machine that misses them; named smc-probe-strict it
 * fails (exit 1).  Any other architecture: exit 77.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__aarch64__)
static int (*volatile g_fn)(void);
static volatile int g_stop;

static void *runner(void *arg)
{
	unsigned long *calls = arg;

	while (!g_stop) {
		g_fn();
		++*calls;
	}
	return NULL;
}

/* movz w0, #lo; movk w0, #hi, lsl 16: the word that changes */
static void emit(uint32_t w[2], uint32_t v)
{
	w[0] = 0x52800000u | ((v & 0xffffu) << 5);
	w[1] = 0x72a00000u | ((v >> 16) << 5);
}

int main(int argc, char **argv)
{
	const char *me = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	int strict = strstr(me, "strict") != NULL;
	/* (strict runs on single-threaded TCG: a change there costs ms) */
	int flips = argc > 1 ? atoi(argv[1]) : strict ? 2000 : 20000;
	size_t len = (size_t)sysconf(_SC_PAGESIZE);
	int fd = memfd_create("smc-probe", MFD_CLOEXEC);
	char *rw, *rx;
	unsigned long calls = 0;
	pthread_t t;
	int stale = 0;

	if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
		printf("SKIP: smc-probe: memfd: %s\n", strerror(errno));
		return 77;
	}
	rw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	rx = mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
	if (rw == MAP_FAILED || rx == MAP_FAILED ||
	    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0)) {
		printf("SKIP: smc-probe: mmap or membarrier: %s\n", strerror(errno));
		return 77;
	}
	uint32_t code[3];

	emit(code, 0x1111);
	code[2] = 0xd65f03c0u; /* ret */
	memcpy(rw, code, sizeof(code));
	__builtin___clear_cache(rx, rx + sizeof(code));
	g_fn = (int (*)(void))(void *)rx;
	if (pthread_create(&t, NULL, runner, &calls) != 0)
		return 1;
	for (int i = 0; i < flips; i++) {
		uint32_t v = i & 1 ? 0x1111 : 0x2222;

		emit(code, v);
		memcpy(rw, code, 8); /* (one aligned 8-byte store) */
		__builtin___clear_cache(rx, rx + 8);
		syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
		if (g_fn() != (int)v)
			stale++;
	}
	g_stop = 1;
	pthread_join(t, NULL);
	printf("smc-probe: %d of %d code changes not seen by the changing thread's next call "
	       "(the other thread made %lu calls meanwhile)\n",
	       stale, flips, calls);
	if (!stale)
		return 0;
	if (strict)
		return 1;
	printf("SKIP: smc-probe: this machine runs stale code after a change made beside a "
	       "running thread (qemu's multi-threaded TCG); the suites that patch running "
	       "code run with single-threaded TCG instead\n");
	return 77;
}
#else
int main(void)
{
	printf("SKIP: smc-probe: written for aarch64\n");
	return 77;
}
#endif
