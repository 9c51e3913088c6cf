/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hg-symbolize.c - run by tests/helgrind-diag.sh under Valgrind's helgrind:
 * one thread names, renames and frees JIT code while another looks
 * addresses up with ep_symbolize(), which reads the table of names without
 * a lock.  The table is lock-free by design and annotated for helgrind; any
 * report is a failure (--error-exitcode).  Exit 0, or 77 without
 * executable memory.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "execpack.h"

#ifdef HAVE_VALGRIND_HELGRIND_H
#include <valgrind/helgrind.h>
#else
#define VALGRIND_HG_DISABLE_CHECKING(addr, len) ((void)0)
#endif

enum { ROUNDS = 40, LIVE = 4 };

static void *g_addr[LIVE];
static int g_stop;

static void *reader(void *arg)
{
	long hits = 0;

	(void)arg;
	while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
		for (int i = 0; i < LIVE; i++) {
			void *a = __atomic_load_n(&g_addr[i], __ATOMIC_ACQUIRE);
			char buf[EP_NAME_MAX + 1];

			if (ep_symbolize(a, buf, sizeof(buf), NULL) == 0)
				hits++;
		}
	}
	return (void *)hits;
}

int main(void)
{
	static const unsigned char ret[] = { 0xc3 };
	struct ep_pool *pool;
	pthread_t t;
	char name[32];

	/* this program's own atomics: helgrind is here for the library's */
	VALGRIND_HG_DISABLE_CHECKING(g_addr, sizeof(g_addr));
	VALGRIND_HG_DISABLE_CHECKING(&g_stop, sizeof(g_stop));
	if (ep_pool_create(NULL, &pool) != 0) {
		printf("SKIP: no executable memory\n");
		return 77;
	}
	/* the reader starts before anything is named: the table's first
	 * slots and its size are written while it reads */
	if (pthread_create(&t, NULL, reader, NULL) != 0)
		return 1;
	for (int r = 0; r < ROUNDS; r++) {
		int i = r % LIVE;
		struct ep_image img;
		void *old = __atomic_exchange_n(&g_addr[i], NULL, __ATOMIC_ACQ_REL);

		if (old && ep_free(pool, old) != 0)
			return 1;
		if (ep_alloc(pool, 16, &img) != 0)
			return 1;
		memcpy(img.rw, ret, sizeof(ret));
		snprintf(name, sizeof(name), "hg_prog_%d", r);
		if (ep_set_name(pool, img.exec, name) != 0 || ep_finalize(pool, img.exec) != 0)
			return 1;
		snprintf(name, sizeof(name), "hg_prog_%d_v2", r);
		if (ep_set_name(pool, img.exec, name) != 0)
			return 1;
		__atomic_store_n(&g_addr[i], img.exec, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
	void *hits;

	pthread_join(t, &hits);
	ep_pool_destroy(pool);
	printf("%ld lookups found a name\n", (long)(intptr_t)hits);
	return 0;
}
