/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * manycores-fork.c - check_manycores' fork tests: children made by fork(),
 * _Fork() and syscall(SYS_fork) re-JIT without changing the parent's code
 * and the other way round, children that exec copy no pack, and fork()
 * while other threads are inside every call or destroy pools with names.
 */
#include "config.h"

#include "manycores.h"

/* ---- fork: fork(), _Fork(), syscall(SYS_fork) ------------------------- */

#define CHILD_CODE(f, v)                                                                 \
	CHILD_CHECK(mc_runs_as((f), (v)), "%s at %p: code for %#x expected, reads %#x", #f, (f), \
		    (uint32_t)(v), mc_code_imm(f))

#define CHILD_OK(expr)                                                                \
	do {                                                                          \
		int rc_ = (expr);                                                     \
		CHILD_CHECK(rc_ == 0, "%s: %d (%s)", #expr, rc_, ep_strerror(rc_));   \
	} while (0)

static void *jit_ok(struct ep_pool *pool, size_t size, uint32_t v)
{
	void *f = NULL;
	int rc = rel_jit(pool, size, v, &f);

	ck_assert_msg(rc == 0, "jit(%zu, %#x): %s", size, v, ep_strerror(rc));
	ck_assert_msg(mc_runs_as(f, v), "new function does not return %#x", v);
	return f;
}

/* After a child came and went: the parent's pool works as before. */
static void parent_pool_usable(struct ep_pool *pool, void *f, uint32_t v)
{
	ck_assert_msg(mc_runs_as(f, v), "the parent's function at %p reads %#x, expected %#x", f,
		      mc_code_imm(f), v);
	void *g = jit_ok(pool, 64, 0x5151);
	void *h = jit_ok(pool, 1000, 0x5252);

	ck_assert_int_eq(rel_patch(pool, g, 0x5353), 0);
	ck_assert(mc_runs_as(g, 0x5353));
	ck_assert_int_eq(ep_free(pool, g), 0);
	ck_assert_int_eq(ep_free(pool, h), 0);
	ck_assert_int_eq(ep_free(pool, f), 0);

	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(pool, &st), 0);
	ck_assert_uint_eq(st.live_allocs, 0);
}

/*
 * The child frees the parent's function (returning 42) and JITs one that
 * returns 7 (into the same slot, first fit); the parent's keeps returning
 * 42, and the parent's pool stays usable.
 */
START_TEST(test_fork_child_rejits)
{
	enum fu_kind kind = (enum fu_kind)_i;
	const char *why = fu_unavailable(kind);

	if (why) {
		printf("SKIP: %s child: %s\n", fu_kind_names[kind], why);
		return;
	}
	struct ep_pool *pool = mc_new_pool(EP_BACKEND_AUTO, 0);
	void *f = jit_ok(pool, 64, 42);
	void *n = jit_ok(pool, 320, 43); /* a neighbour, patched by the child */
	struct fu_child c;
	pid_t pid = fu_fork(&c, kind);

	ck_assert_msg(pid >= 0, "%s: %s", fu_kind_names[kind], strerror(errno));
	if (pid == 0) {
		CHILD_CODE(f, 42);
		CHILD_OK(ep_free(pool, f));
		void *g = NULL;

		CHILD_OK(rel_jit(pool, 64, 7, &g));
		CHILD_CODE(g, 7);
		CHILD_OK(rel_patch(pool, n, 8));
		CHILD_CODE(n, 8);
		CHILD_CHECK(fu_send(&c, 'c') == 0, "send");
		FU_CHILD_EXPECT(&c, 'p');
		CHILD_CODE(g, 7);
		CHILD_OK(ep_free(pool, g));
		CHILD_OK(ep_free(pool, n));
		_exit(0);
	}
	char m = 0;
	int got = fu_recv(&c, &m, mc_child_timeout());
	/* the child changed "the same" code: ours is untouched */
	bool f_ok = mc_runs_as(f, 42), n_ok = mc_runs_as(n, 43);
	uint32_t f_now = mc_code_imm(f), n_now = mc_code_imm(n);

	fu_send(&c, 'p');
	int st = fu_finish(&c, mc_child_timeout());

	ck_assert_msg(got == 0 && m == 'c', "the %s child did not get to its changes",
		      fu_kind_names[kind]);
	ck_assert_msg(f_ok, "%s child: the parent's function now reads %#x, not 42",
		      fu_kind_names[kind], f_now);
	ck_assert_msg(n_ok, "%s child: the parent's neighbour now reads %#x, not 43",
		      fu_kind_names[kind], n_now);
	ck_assert_msg(st == 0, "%s child ended with status %d%s", fu_kind_names[kind], st,
		      fu_status_text(st));
	ck_assert_int_eq(ep_free(pool, n), 0);
	parent_pool_usable(pool, f, 42);
	ep_pool_destroy(pool);
}
END_TEST

/*
 * The other way round: the parent frees its function and JITs one that
 * returns 7, and patches a neighbour, while the child (still alive) keeps
 * calling its copies: they must still return 42 and 43.
 */
START_TEST(test_fork_parent_rejits)
{
	enum fu_kind kind = (enum fu_kind)_i;
	const char *why = fu_unavailable(kind);

	if (why) {
		printf("SKIP: %s child: %s\n", fu_kind_names[kind], why);
		return;
	}
	struct ep_pool *pool = mc_new_pool(EP_BACKEND_AUTO, 0);
	void *f = jit_ok(pool, 64, 42);
	void *n = jit_ok(pool, 320, 43);
	struct fu_child c;
	pid_t pid = fu_fork(&c, kind);

	ck_assert_msg(pid >= 0, "%s: %s", fu_kind_names[kind], strerror(errno));
	if (pid == 0) {
		CHILD_CODE(f, 42);
		if (kind != FU_FORK) {
			/* libexecpack(7): a child made without fork()'s handlers
			 * shares the pages until its first call, which makes its
			 * copies (a stats call is enough) */
			struct ep_stats st;

			CHILD_OK(ep_pool_stats(pool, &st));
		}
		CHILD_CHECK(fu_send(&c, 'r') == 0, "send");
		FU_CHILD_EXPECT(&c, 'p');
		/* the parent has freed f, JITted 7 and patched n meanwhile */
		CHILD_CODE(f, 42);
		CHILD_CODE(n, 43);
		/* and the child may change its own */
		CHILD_OK(ep_free(pool, f));
		void *g = NULL;

		CHILD_OK(rel_jit(pool, 64, 9, &g));
		CHILD_CODE(g, 9);
		CHILD_OK(ep_free(pool, g));
		CHILD_OK(ep_free(pool, n));
		CHILD_CHECK(fu_send(&c, 'd') == 0, "send");
		_exit(0);
	}
	char m = 0;

	if (fu_recv(&c, &m, mc_child_timeout()) != 0 || m != 'r') {
		int st = fu_finish(&c, 0);

		ck_abort_msg("the %s child did not start: status %d%s", fu_kind_names[kind], st,
			     fu_status_text(st));
	}
	ck_assert_int_eq(ep_free(pool, f), 0);
	void *g = jit_ok(pool, 64, 7);

	ck_assert_int_eq(rel_patch(pool, n, 44), 0);
	ck_assert(mc_runs_as(n, 44));
	ck_assert_int_eq(fu_send(&c, 'p'), 0);
	int got = fu_recv(&c, &m, mc_child_timeout());
	int st = fu_finish(&c, mc_child_timeout());

	ck_assert_msg(st == 0, "%s child ended with status %d%s", fu_kind_names[kind], st,
		      fu_status_text(st));
	ck_assert_msg(got == 0 && m == 'd', "the child did not finish");
	/* nothing the child did reached the parent either */
	ck_assert_msg(mc_runs_as(g, 7), "the parent's new function reads %#x, not 7", mc_code_imm(g));
	ck_assert_msg(mc_runs_as(n, 44), "the parent's patched function reads %#x, not 44",
		      mc_code_imm(n));
	ck_assert_int_eq(ep_free(pool, n), 0);
	parent_pool_usable(pool, g, 7);
	ep_pool_destroy(pool);
}
END_TEST

/* ---- children that exec: vfork(), posix_spawn(), fork()+exec ---------- */

enum spawn_kind { SK_VFORK, SK_SPAWN, SK_FORK_EXEC, SK_KINDS };

static const char *const spawn_names[] = { "vfork()+exec", "posix_spawn()", "fork()+exec" };

#define TRUE_PATH "/bin/true"

static pid_t spawn_vfork(void)
{
	char *const argv[] = { (char *)TRUE_PATH, NULL };
	pid_t pid = vfork();

	if (pid == 0) {
		execve(TRUE_PATH, argv, environ);
		_exit(127);
	}
	return pid;
}

static pid_t spawn_true(enum spawn_kind k)
{
	char *const argv[] = { (char *)TRUE_PATH, NULL };
	pid_t pid;

	switch (k) {
	case SK_VFORK:
		return spawn_vfork();
	case SK_SPAWN:
		errno = posix_spawn(&pid, TRUE_PATH, NULL, NULL, argv, environ);
		return errno ? -1 : pid;
	default:
		pid = fork();
		if (pid == 0) {
			execve(TRUE_PATH, argv, environ);
			_exit(127);
		}
		return pid;
	}
}

/* "dev inode" of the mapping holding addr in /proc/self/maps, or "". */
static void mapping_id(const void *addr, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[1024];

	out[0] = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char dev[32], ino[32];

		if (sscanf(line, "%lx-%lx %*s %*s %31s %31s", &lo, &hi, dev, ino) == 4 &&
		    (uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
			snprintf(out, len, "%s %s", dev, ino);
			break;
		}
	}
	fclose(f);
}

/*
 * A child that execs /bin/true comes and goes; the parent's code is intact
 * and the parent goes on changing its pack (free, re-JIT, patch) in place:
 * the pack is still the same file (memfd backend), the parent copied
 * nothing because a child was forked.
 */
START_TEST(test_spawn_exec)
{
	enum spawn_kind kind = (enum spawn_kind)_i;

	if (access(TRUE_PATH, X_OK) != 0) {
		printf("SKIP: %s: no %s to run\n", spawn_names[kind], TRUE_PATH);
		return;
	}
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *pool = NULL;
	int rc = ep_pool_create(&cfg, &pool);

	if (rc) {
		/* (the check of the pack's file needs the memfd backend) */
		printf("SKIP: %s: no memfd pool here: %s\n", spawn_names[kind], ep_strerror(rc));
		return;
	}
	void *f = jit_ok(pool, 64, 42);
	void *n = jit_ok(pool, 320, 43);
	char before[80], after[80];

	mapping_id(f, before, sizeof(before));
	fflush(stdout);
	fflush(stderr);
	for (int round = 0; round < 3; round++) {
		pid_t pid = spawn_true(kind);

		ck_assert_msg(pid > 0, "%s: %s", spawn_names[kind], strerror(errno));
		struct fu_child sc = { .pid = pid, .tx = -1, .rx = -1 };
		int st = fu_finish(&sc, mc_child_timeout());

		ck_assert_msg(st == 0, "%s child ended with status %d%s", spawn_names[kind], st,
			      fu_status_text(st));
		ck_assert_msg(mc_runs_as(f, 42), "after a %s child: the function reads %#x, not 42",
			      spawn_names[kind], mc_code_imm(f));
		ck_assert_int_eq(ep_free(pool, n), 0);
		n = jit_ok(pool, 320, 44 + (uint32_t)round);
		ck_assert_int_eq(rel_patch(pool, f, 42), 0);
		ck_assert(mc_runs_as(f, 42));
	}
	mapping_id(f, after, sizeof(after));
	ck_assert_msg(before[0] != 0, "no mapping for %p in /proc/self/maps", f);
	ck_assert_msg(strcmp(before, after) == 0,
		      "after %s children the parent's pack was replaced by a copy "
		      "(mapping %s, now %s)",
		      spawn_names[kind], before, after);
	ck_assert_int_eq(ep_free(pool, n), 0);
	parent_pool_usable(pool, f, 42);
	ep_pool_destroy(pool);
}
END_TEST

/* ---- fork while other threads are inside every call ------------------- */

#define BUSY_THREADS 4

struct busy_worker {
	pthread_t th;
	struct ep_pool *pool;
	void *shared; /* a function every worker patches */
	int idx;
	unsigned long ops; /* atomic */
};

static void busy_run(struct busy_worker *w)
{
	uint64_t seed = 0x2545f4914f6cdd1dull * (uint64_t)(w->idx + 1);

	while (!mc_stopping()) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		size_t size = ((size_t)16 << (seed % 8)) + (size_t)(seed >> 8) % 32;
		uint32_t v = 0x40000000u | ((uint32_t)w->idx << 20) | (uint32_t)(seed >> 40 & 0xfffff);
		struct ep_image im;
		unsigned char code[RET_IMM_LEN];
		struct ep_stats st;
		int rc = ep_alloc(w->pool, size, &im);

		TCHECK(rc == 0, "ep_alloc(%zu): %s", size, ep_strerror(rc));
		rel_emit_ret_imm(code, v);
		rc = ep_write(w->pool, im.exec, code, sizeof(code));
		TCHECK(rc == 0, "ep_write (staging): %s", ep_strerror(rc));
		rc = ep_set_name(w->pool, im.exec, (seed & 1) ? "busy_even" : "busy_odd");
		TCHECK(rc == 0, "ep_set_name: %s", ep_strerror(rc));
		rc = ep_finalize(w->pool, im.exec);
		TCHECK(rc == 0, "ep_finalize: %s", ep_strerror(rc));
		TCHECK(mc_runs_as(im.exec, v), "new function does not return %#x", v);
		rc = rel_patch(w->pool, w->shared, v);
		TCHECK(rc == 0, "ep_write (live): %s", ep_strerror(rc));
		rc = ep_pool_stats(w->pool, &st);
		TCHECK(rc == 0, "ep_pool_stats: %s", ep_strerror(rc));
		rc = ep_free(w->pool, im.exec);
		TCHECK(rc == 0, "ep_free: %s", ep_strerror(rc));
		__atomic_add_fetch(&w->ops, 1, __ATOMIC_RELEASE);
	}
}

static void *busy_main(void *arg)
{
	busy_run(arg);
	return NULL;
}

/* In a child: the whole cycle on pool, with a name. */
static void child_cycle(struct ep_pool *pool, uint32_t v)
{
	struct ep_image im;

	CHILD_OK(ep_alloc(pool, 200, &im));
	CHILD_OK(ep_set_name(pool, im.exec, "child_fn"));
	rel_emit_ret_imm(im.rw, v);
	CHILD_OK(ep_finalize(pool, im.exec));
	CHILD_CODE(im.exec, v);
	CHILD_OK(rel_patch(pool, im.exec, v + 1));
	CHILD_CODE(im.exec, v + 1);
	CHILD_OK(ep_free(pool, im.exec));
}

static unsigned long busy_ops(struct busy_worker *w)
{
	unsigned long n = 0;

	for (int i = 0; i < BUSY_THREADS; i++)
		n += __atomic_load_n(&w[i].ops, __ATOMIC_ACQUIRE);
	return n;
}

START_TEST(test_fork_busy_threads)
{
	struct ep_pool *pool = mc_new_pool(EP_BACKEND_AUTO, 0);
	struct busy_worker w[BUSY_THREADS];
	void *shared = jit_ok(pool, 64, 0x40000000u);
	int forks = rel_quick() ? 4 : 16, st = 0, k;

	mc_fail_reset();
	mc_stop_reset();
	memset(w, 0, sizeof(w));
	for (int i = 0; i < BUSY_THREADS; i++) {
		w[i].pool = pool;
		w[i].shared = shared;
		w[i].idx = i;
		VALGRIND_HG_DISABLE_CHECKING(&w[i].ops, sizeof(w[i].ops));
		ck_assert_int_eq(pthread_create(&w[i].th, NULL, busy_main, &w[i]), 0);
	}
	for (k = 0; k < forks && !mc_failed(); k++) {
		/* the workers are in the middle of their calls */
		unsigned long ops = busy_ops(w);
		double end = mc_now_s() + 5;

		while (busy_ops(w) < ops + 3 && mc_now_s() < end && !mc_failed())
			sched_yield();
		struct fu_child c;
		pid_t pid = fu_fork(&c, FU_FORK);

		if (pid < 0) {
			st = -errno;
			break;
		}
		if (pid == 0) {
			uint32_t s = mc_code_imm(shared);

			CHILD_CHECK((s & 0xff000000u) == 0x40000000u, "shared function reads %#x", s);
			CHILD_CHECK(mc_runs_as(shared, s), "shared function does not run as it reads");
			child_cycle(pool, 0x0c000000u | (uint32_t)k);
			struct ep_stats sst;

			CHILD_OK(ep_pool_stats(pool, &sst));
			rel_child_exit_ok(c.tx);
		}
		st = fu_finish(&c, mc_child_timeout());
		if (st != 0)
			break;
	}
	mc_stop_all();
	for (int i = 0; i < BUSY_THREADS; i++)
		ck_assert_int_eq(pthread_join(w[i].th, NULL), 0);
	ck_assert_msg(st == 0, "child %d (forked while %d threads were inside the library) ended "
		      "with status %d%s", k, BUSY_THREADS, st, fu_status_text(st));
	mc_assert_no_failure();
	ck_assert_uint_gt(busy_ops(w), 0);
	ck_assert_int_eq(ep_free(pool, shared), 0);
	ep_pool_destroy(pool);
}
END_TEST

/*
 * A thread creates pools, names code in them and destroys them (which
 * drops the names), while the main thread forks: each child names code in
 * a pool of its own and must not hang.
 */
/* A pool that is quick to create: memfd with small packs where it can be
 * had (a 2 MiB pack takes milliseconds to fill), else the default. */
static int small_pool(struct ep_pool **out)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .pack_size = 64 << 10 };

	return ep_pool_create(&cfg, out) == 0 ? 0 : ep_pool_create(NULL, out);
}

static void namer_run(void)
{
	for (unsigned long i = 0; !mc_stopping(); i++) {
		struct ep_pool *p = NULL;
		int rc = small_pool(&p);

		TCHECK(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
		/* many names: dropping them at destroy takes a while */
		for (int j = 0; j < 256; j++) {
			struct ep_image im;

			rc = ep_alloc(p, 64, &im);
			TCHECK(rc == 0, "ep_alloc: %s", ep_strerror(rc));
			rc = ep_set_name(p, im.exec, "doomed");
			TCHECK(rc == 0, "ep_set_name: %s", ep_strerror(rc));
			rel_emit_ret_imm(im.rw, 5);
			if (j % 8)
				TCHECK(ep_finalize(p, im.exec) == 0, "ep_finalize");
		}
		ep_pool_destroy(p); /* with named code alive */
	}
}

static void *namer_main(void *arg)
{
	(void)arg;
	namer_run();
	return NULL;
}

START_TEST(test_fork_naming_thread)
{
	pthread_t th;
	int forks = rel_quick() ? 5 : 60, st = 0, k;
	double end = mc_now_s() + 2 * mc_run_budget();

	mc_fail_reset();
	mc_stop_reset();
	ck_assert_int_eq(pthread_create(&th, NULL, namer_main, NULL), 0);
	for (k = 0; k < forks && (k < 10 || mc_now_s() < end) && !mc_failed(); k++) {
		struct fu_child c;
		pid_t pid = fu_fork(&c, FU_FORK);

		if (pid < 0) {
			st = -errno;
			break;
		}
		if (pid == 0) {
			struct ep_pool *p = NULL;

			CHILD_OK(small_pool(&p));
			child_cycle(p, 0x0d000000u | (uint32_t)k);
			ep_pool_destroy(p);
			rel_child_exit_ok(c.tx);
		}
		st = fu_finish(&c, mc_child_timeout());
		if (st != 0)
			break;
		mc_pause_us(500); /* let the thread get back into its calls */
	}
	mc_stop_all();
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(st == 0, "child %d (forked while a thread named and destroyed code) ended "
		      "with status %d%s", k, st, fu_status_text(st));
	mc_assert_no_failure();
}
END_TEST

/* (in the order main() runs them) */
void mc_add_fork_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_fork_child_rejits, 0, FU_KINDS);
	tcase_add_loop_test(tc, test_fork_parent_rejits, 0, FU_KINDS);
	tcase_add_loop_test(tc, test_spawn_exec, 0, SK_KINDS);
}

void mc_add_fork_thread_tests(TCase *tc)
{
	tcase_add_test(tc, test_fork_busy_threads);
	tcase_add_test(tc, test_fork_naming_thread);
}
