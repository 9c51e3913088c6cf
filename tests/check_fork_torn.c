/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_fork_torn.c - a child made without fork()'s handlers while a
 * thread of its parent was inside a sequence count's write: a pack's maps
 * (pack-seq.h), an info entry (info.c) or a name slot (diag-symtab.c).
 *
 * The library's own sources, so that the test can leave each count odd
 * at the moment of the fork, as a thread stopped between the two stores
 * would (the other thread that owns the allocations is parked meanwhile).
 * The child must not wait or skip for ever: its lock-free ep_free() of a
 * long allocation returns, and the slots it writes again are found.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "backend.h"
#include "diag-symtab.h"
#include "diag.h"
#include "forkutil.h"
#include "info.h"
#include "pack-seq.h"
#include "registry.h"
#include "reliability.h"

/* (EP_TEST_HOOKS: no backend wrapped here) */
const struct ep__backend_ops *ep__test_wrap_backend(const struct ep__backend_ops *ops)
{
	return ops;
}

#define CHUNK 64
#define LONG_CHUNKS 40 /* past what a state byte keeps: the maps give its end */

static struct {
	struct ep_pool *pool;
	void *flong, *flarge;
	sem_t ready, done;
} g;

/* The owner: its allocations are another thread's in the child (whose
 * frees take no lock of their heap where they can). */
static void *owner_main(void *arg)
{
	(void)arg;
	if (rel_jit(g.pool, LONG_CHUNKS * CHUNK, 0x51, &g.flong) ||
	    rel_jit(g.pool, tu_large_size(), 0x52, &g.flarge) ||
	    ep_set_name(g.pool, g.flarge, "torn"))
		g.flong = g.flarge = NULL;
	sem_post(&g.ready);
	while (sem_wait(&g.done) && errno == EINTR)
		;
	return NULL;
}

static struct ep__alloc *record_of(void *f)
{
	for (struct ep__heap *h = ep__heaps; h; h = h->gnext)
		for (size_t i = 0; i <= h->hash_mask; i++)
			for (struct ep__alloc *a = h->hash[i]; a; a = a->hnext)
				if (a->exec == f)
					return a;
	return NULL;
}

static struct ep__pack *pack_of(void *f)
{
	uintptr_t x = (uintptr_t)f;

	for (struct ep__heap *h = ep__heaps; h; h = h->gnext)
		for (struct ep__pack *p = h->head; p; p = p->next)
			if (x >= (uintptr_t)p->r.exec && x < (uintptr_t)p->r.exec + p->r.size)
				return p;
	return NULL;
}

/* In the child, its first calls: each must return, and what it writes
 * into the slots left odd must be found. */
static void child(struct ep__pack *p, unsigned long *iseq, _Atomic unsigned long *nseq)
{
	void *g2 = NULL;
	struct ep_info info;
	char name[EP_NAME_MAX + 1];
	int rc;

	signal(SIGALRM, SIG_DFL);
	alarm(10); /* (a count left odd: it would wait for ever) */
	CHILD_CHECK((rc = ep_free(g.pool, g.flong)) == 0, "ep_free of the long allocation: %s",
		    ep_strerror(rc));
	CHILD_CHECK(!(__atomic_load_n(&p->seq, __ATOMIC_ACQUIRE) & 1), "the pack's count is odd");
	/* the large allocation's slots go back to the free lists, and the
	 * next large allocation takes them again */
	CHILD_CHECK((rc = ep_free(g.pool, g.flarge)) == 0, "ep_free of the large: %s",
		    ep_strerror(rc));
	CHILD_CHECK((rc = rel_jit(g.pool, tu_large_size(), 0x53, &g2)) == 0, "a new large: %s",
		    ep_strerror(rc));
	CHILD_CHECK((rc = ep_set_name(g.pool, g2, "again")) == 0, "ep_set_name: %s",
		    ep_strerror(rc));
	CHILD_CHECK((rc = ep_lookup((char *)g2 + 1, &info)) == 0,
		    "ep_lookup of the new large allocation: %s", ep_strerror(rc));
	CHILD_CHECK(info.exec == g2 && info.size >= tu_large_size(), "ep_lookup: %p, %zu bytes",
		    info.exec, info.size);
	CHILD_CHECK(!strcmp(info.name, "again"), "ep_lookup's name: \"%s\"", info.name);
	CHILD_CHECK((rc = ep_symbolize(g2, name, sizeof(name), NULL)) == 0, "ep_symbolize: %s",
		    ep_strerror(rc));
	CHILD_CHECK(!strcmp(name, "again"), "ep_symbolize: \"%s\"", name);
	CHILD_CHECK(!(*iseq & 1), "the info slot's count is odd");
	CHILD_CHECK(!(*nseq & 1), "the name slot's count is odd");
	_exit(0);
}

START_TEST(test_raw_child_after_torn_writes)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .chunk_size = CHUNK };
	pthread_t t;

	if (RUNNING_ON_VALGRIND) {
		printf("SKIP: a raw fork under Valgrind\n");
		return;
	}
	memset(&g, 0, sizeof(g));
	sem_init(&g.ready, 0, 0);
	sem_init(&g.done, 0, 0);
	int rc = ep_pool_create(&cfg, &g.pool);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	ck_assert_int_eq(pthread_create(&t, NULL, owner_main, NULL), 0);
	while (sem_wait(&g.ready) && errno == EINTR)
		;
	ck_assert_msg(g.flong && g.flarge, "the owner's allocations");
	ck_assert_msg(record_of(g.flong) == NULL, "the long allocation has a record (its "
			"free would take the lock)");

	struct ep__pack *p = pack_of(g.flong);
	struct ep__alloc *a = record_of(g.flarge);

	ck_assert_msg(p && a && a->info && a->diag, "the pack, the large one's record and slots");
	unsigned long *iseq = ep__info_seq_for_test(a->info - 1);
	_Atomic unsigned long *nseq = ep__symtab_seq_for_test(ep__diag_name_slot(a->diag));

	ck_assert_msg(iseq && nseq, "the slots' counts");
	/* as a writer stopped between its two stores would leave them (the
	 * owner is parked: nobody else writes them meanwhile) */
	ep__pack_write_begin(p);
	__atomic_add_fetch(iseq, 1, __ATOMIC_RELEASE);
	atomic_fetch_add_explicit(nseq, 1, memory_order_release);

	pid_t pid = fu_raw_fork();

	if (pid == 0)
		child(p, iseq, nseq);
	atomic_fetch_add_explicit(nseq, 1, memory_order_release);
	__atomic_add_fetch(iseq, 1, __ATOMIC_RELEASE);
	ep__pack_write_end(p);
	ck_assert_int_ge(pid, 0);
	int st = rel_wait(pid);

	sem_post(&g.done);
	pthread_join(t, NULL);
	ck_assert_msg(st == 0, "the raw child: status %d%s", st, fu_status_text(st));
	ck_assert_int_eq(ep_free(g.pool, g.flong), 0);
	ck_assert_int_eq(ep_free(g.pool, g.flarge), 0);
	ep_pool_destroy(g.pool);
}
END_TEST

static Suite *torn_suite(void)
{
	Suite *s = suite_create("fork_torn");
	TCase *tc = tcase_create("raw");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_raw_child_after_torn_writes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	printf("backend: %s\n", tu_need_pool());
	fflush(stdout); /* before Check forks: no duplicated output */
	SRunner *sr = srunner_create(torn_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
