/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_hostile.c - the pool in hostile environments.
 *
 *   - PR_SET_MDWE(PR_MDWE_REFUSE_EXEC_GAIN): everything still works;
 *   - RLIMIT_AS exhausted: ep_alloc() gives -ENOMEM, live code is intact,
 *     and the pool works again once the limit is raised;
 *   - vm.max_map_count exhausted (by filling the mapping table in a child
 *     rather than by lowering the system-wide sysctl): -ENOMEM, intact code,
 *     usable again once mappings are released;
 *   - vm.memfd_noexec=2 set inside a new PID namespace (the sysctl is per
 *     namespace): the memfd backend still works, on anonymous shared
 *     memory; with PR_SET_MDWE as well, which keeps that from becoming
 *     executable, whatever needs a new region fails with a clear errno and
 *     text, and live code is intact.
 *
 * Every scenario runs in its own child process so the limits it sets die
 * with it.  main() probes what this machine allows and runs only those
 * tests, printing a SKIP line with the reason for each other one; with
 * nothing runnable at all it exits 77.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "reliability.h"
#include "testutil.h"

#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#define PR_GET_MDWE 66
#endif
#ifndef PR_MDWE_REFUSE_EXEC_GAIN
#define PR_MDWE_REFUSE_EXEC_GAIN (1UL << 0)
#endif

#define LARGE_SIZE tu_large_size()
#define NOEXEC_PATH "/proc/sys/vm/memfd_noexec"

#define CHILD_OK(expr)                                                        \
	do {                                                                  \
		int rc_ = (expr);                                             \
		CHILD_CHECK(rc_ == 0, "%s: %d (%s)", #expr, rc_, ep_strerror(rc_)); \
	} while (0)

#define CHILD_EXPECT_CALL(f, v)                                                      \
	do {                                                                         \
		uint32_t got_ = (uint32_t)rel_call(f);                               \
		CHILD_CHECK(got_ == (uint32_t)(v), "%s returned %#x, expected %#x", #f, \
			    got_, (uint32_t)(v));                                    \
	} while (0)

static void *child_jit(struct ep_pool *pool, size_t size, uint32_t v)
{
	void *f = NULL;
	int rc = rel_jit(pool, size, v, &f);

	CHILD_CHECK(rc == 0, "jit(%zu, %#x): %s", size, v, ep_strerror(rc));
	CHILD_EXPECT_CALL(f, v);
	return f;
}

static struct ep_pool *child_pool(enum ep_backend b)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = b };
	struct ep_pool *pool = NULL;
	int rc = ep_pool_create(&cfg, &pool);

	CHILD_CHECK(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	return pool;
}

static void child_expect_stats(struct ep_pool *pool, size_t live, size_t large)
{
	struct ep_stats st;

	CHILD_OK(ep_pool_stats(pool, &st));
	CHILD_CHECK(st.live_allocs == live && st.large_allocs == large,
		    "stats: %zu live (expected %zu), %zu large (expected %zu)", st.live_allocs,
		    live, st.large_allocs, large);
	CHILD_CHECK(st.used_bytes <= st.pack_bytes, "used %zu > pack bytes %zu", st.used_bytes,
		    st.pack_bytes);
}

/* Run fn in a child; the test fails unless it exits 0. */
static void run_in_child(void (*fn)(void), const char *what)
{
	fflush(NULL);
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		fn();
		_exit(0);
	}
	int st = rel_wait(pid);

	ck_assert_msg(st == 0, "%s: child ended with status %d%s", what, st,
		      st > 128 ? " (killed by a signal)" : "");
}

/* ---- MDWE ------------------------------------------------------------------ */

static void mdwe_child(void)
{
	/* a pool made before: its regions are anonymous shared memory, which
	 * may no longer gain exec once MDWE is on */
	struct ep_pool *early = child_pool(EP_BACKEND_MEMFD);
	void *e = child_jit(early, 64, 0x5001);

	CHILD_CHECK(prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0L, 0L, 0L) == 0,
		    "PR_SET_MDWE: %s", strerror(errno));
	int got = prctl(PR_GET_MDWE, 0L, 0L, 0L, 0L);

	CHILD_CHECK(got >= 0 && (got & (int)PR_MDWE_REFUSE_EXEC_GAIN), "PR_GET_MDWE gave %d", got);

	/* prove that MDWE is on: W+X and gaining X are both refused */
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	CHILD_CHECK(p == MAP_FAILED, "MDWE on, yet an RWX mapping was granted");
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHILD_CHECK(p != MAP_FAILED, "mmap RW: %s", strerror(errno));
	CHILD_CHECK(mprotect(p, 4096, PROT_READ | PROT_EXEC) != 0,
		    "MDWE on, yet mprotect RW -> RX was allowed");
	munmap(p, 4096);

	struct ep_pool *pool = child_pool(EP_BACKEND_AUTO);
	void *f = child_jit(pool, 64, 0x1001);
	void *l = child_jit(pool, LARGE_SIZE, 0x1002);

	CHILD_OK(rel_patch(pool, f, 0x1011));
	CHILD_EXPECT_CALL(f, 0x1011);
	CHILD_OK(rel_patch(pool, l, 0x1012));
	CHILD_EXPECT_CALL(l, 0x1012);

	/* enough allocations to need new packs */
	enum { N = 40 };
	void *v[N];

	for (int i = 0; i < N; i++)
		v[i] = child_jit(pool, 64 * 1024, 0x2000 + (uint32_t)i);
	for (int i = 0; i < N; i += 2)
		CHILD_OK(ep_free(pool, v[i]));
	for (int i = 0; i < N; i += 2)
		v[i] = child_jit(pool, 64 * 1024, 0x3000 + (uint32_t)i);
	for (int i = 0; i < N; i++)
		CHILD_EXPECT_CALL(v[i], (i % 2 ? 0x2000u : 0x3000u) + (uint32_t)i);
	struct ep_stats pst;

	/* no prefix can grow here (mprotect() may not add exec): whole packs,
	 * not one 64 KiB-committed pack per program */
	CHILD_OK(ep_pool_stats(pool, &pst));
	CHILD_CHECK(pst.packs <= 3, "%zu packs for %d programs of 64 KiB", pst.packs, N + 1);

	/* the early pool: new regions (a memfd now) and its live code */
	void *el = child_jit(early, LARGE_SIZE, 0x5002);

	CHILD_OK(rel_patch(early, e, 0x5011));
	CHILD_EXPECT_CALL(e, 0x5011);
	CHILD_EXPECT_CALL(el, 0x5002);

	/* fork under MDWE: making a region private maps it anew, exec too (the
	 * early pool's anonymous regions get a memfd copy) */
	pid_t pid = fork();

	CHILD_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		CHILD_OK(rel_patch(pool, f, 0x4001));
		CHILD_EXPECT_CALL(f, 0x4001);
		CHILD_OK(rel_patch(pool, l, 0x4002));
		CHILD_EXPECT_CALL(l, 0x4002);
		CHILD_OK(ep_free(pool, v[0]));
		CHILD_OK(rel_patch(early, e, 0x4003));
		CHILD_EXPECT_CALL(e, 0x4003);
		_exit(0);
	}
	int st = rel_wait(pid);

	CHILD_CHECK(st == 0, "grandchild under MDWE ended with %d", st);
	CHILD_EXPECT_CALL(f, 0x1011);
	CHILD_EXPECT_CALL(l, 0x1012);
	CHILD_EXPECT_CALL(v[0], 0x3000);
	CHILD_EXPECT_CALL(e, 0x5011);
	CHILD_OK(ep_free(early, e));
	CHILD_OK(ep_free(early, el));
	ep_pool_destroy(early);

	for (int i = 0; i < N; i++)
		CHILD_OK(ep_free(pool, v[i]));
	CHILD_OK(ep_free(pool, f));
	CHILD_OK(ep_free(pool, l));
	child_expect_stats(pool, 0, 0);
	ep_pool_destroy(pool);
}

START_TEST(test_mdwe)
{
	run_in_child(mdwe_child, "MDWE");
}
END_TEST

/* ---- RLIMIT_AS ------------------------------------------------------------- */

static size_t vm_size_bytes(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	size_t kb = 0;

	CHILD_CHECK(f != NULL, "/proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %zu kB", &kb) == 1)
			break;
	fclose(f);
	CHILD_CHECK(kb > 0, "no VmSize in /proc/self/status");
	return kb * 1024;
}

#define MAX_FILL 4096

/* JIT 64 KiB functions until ep_alloc fails; every failure must be
 * -ENOMEM and must not leave a half-made pack behind.  Returns how many. */
static int fill_until_enomem(struct ep_pool *pool, void **v, uint32_t tag)
{
	int n = 0;

	for (;;) {
		CHILD_CHECK(n < MAX_FILL, "no ENOMEM after %d allocations", n);
		struct ep_stats before, after;

		CHILD_OK(ep_pool_stats(pool, &before));
		int rc = rel_jit(pool, 64 * 1024, tag + (uint32_t)n, &v[n]);

		if (rc == 0) {
			n++;
			continue;
		}
		CHILD_CHECK(rc == -ENOMEM, "expected -ENOMEM, got %d (%s)", rc, ep_strerror(rc));
		CHILD_CHECK(strstr(ep_strerror(rc), "memory") != NULL, "text for -ENOMEM: %s",
			    ep_strerror(rc));
		CHILD_OK(ep_pool_stats(pool, &after));
		CHILD_CHECK(after.packs == before.packs && after.live_allocs == before.live_allocs,
			    "failed ep_alloc changed the pool: packs %zu -> %zu, live %zu -> %zu",
			    before.packs, after.packs, before.live_allocs, after.live_allocs);
		return n;
	}
}

static void check_all(void **v, int n, uint32_t tag)
{
	for (int i = 0; i < n; i++) {
		uint32_t got = (uint32_t)rel_call(v[i]);

		CHILD_CHECK(got == tag + (uint32_t)i, "function %d returned %#x, expected %#x", i,
			    got, tag + (uint32_t)i);
	}
}

static void rlimit_child(void)
{
	static void *v[MAX_FILL + 64];
	struct ep_pool *pool = child_pool(EP_BACKEND_AUTO);
	void *f = child_jit(pool, 64, 0x5001);
	void *l = child_jit(pool, LARGE_SIZE, 0x5002);
	struct rlimit old, lim;

	CHILD_CHECK(getrlimit(RLIMIT_AS, &old) == 0, "getrlimit");
	lim = old;
	lim.rlim_cur = vm_size_bytes() + ((rlim_t)1 << 20);
	CHILD_CHECK(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit: %s", strerror(errno));

	struct ep_image img;
	int rc = ep_alloc(pool, (size_t)64 << 20, &img);

	CHILD_CHECK(rc == -ENOMEM, "64 MiB under RLIMIT_AS: %d (%s)", rc, ep_strerror(rc));
	int n = fill_until_enomem(pool, v, 0x6000);

	printf("RLIMIT_AS: %d functions of 64 KiB fitted before -ENOMEM\n", n);
	/* existing code is intact and can still be patched and replaced */
	CHILD_EXPECT_CALL(f, 0x5001);
	CHILD_EXPECT_CALL(l, 0x5002);
	check_all(v, n, 0x6000);
	CHILD_OK(rel_patch(pool, f, 0x5011));
	CHILD_EXPECT_CALL(f, 0x5011);
	CHILD_OK(rel_patch(pool, l, 0x5012));
	CHILD_EXPECT_CALL(l, 0x5012);
	if (n > 0) {
		CHILD_OK(ep_free(pool, v[n - 1]));
		v[n - 1] = child_jit(pool, 64 * 1024, 0x6000 + (uint32_t)(n - 1));
	}
	child_expect_stats(pool, (size_t)n + 2, 1);

	/* limit raised again: the pool grows again */
	CHILD_CHECK(setrlimit(RLIMIT_AS, &old) == 0, "restoring RLIMIT_AS: %s", strerror(errno));
	for (int i = n; i < n + 40; i++)
		v[i] = child_jit(pool, 64 * 1024, 0x6000 + (uint32_t)i);
	void *l2 = child_jit(pool, LARGE_SIZE, 0x5003);

	check_all(v, n + 40, 0x6000);
	CHILD_EXPECT_CALL(f, 0x5011);
	CHILD_EXPECT_CALL(l, 0x5012);
	for (int i = 0; i < n + 40; i++)
		CHILD_OK(ep_free(pool, v[i]));
	CHILD_OK(ep_free(pool, l2));
	CHILD_OK(ep_free(pool, l));
	CHILD_OK(ep_free(pool, f));
	child_expect_stats(pool, 0, 0);
	ep_pool_destroy(pool);
	fflush(stdout);
}

START_TEST(test_rlimit_as)
{
	run_in_child(rlimit_child, "RLIMIT_AS");
}
END_TEST

/* ---- the mapping table full (vm.max_map_count) ------------------------------ */

static void map_count_child(void)
{
	static void *v[MAX_FILL + 64];
	long max = 0;
	FILE *mf = fopen("/proc/sys/vm/max_map_count", "re");

	CHILD_CHECK(mf && fscanf(mf, "%ld", &max) == 1, "vm.max_map_count unreadable");
	fclose(mf);

	struct ep_pool *pool = child_pool(EP_BACKEND_AUTO);
	void *f = child_jit(pool, 64, 0x7001);
	void *l = child_jit(pool, LARGE_SIZE, 0x7002);
	size_t cap = (size_t)max + 16, nfill = 0;
	void **fill = mmap(NULL, cap * sizeof(void *), PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	CHILD_CHECK(fill != MAP_FAILED, "mmap: %s", strerror(errno));
	/* one-page mappings with alternating protections never merge */
	for (;;) {
		CHILD_CHECK(nfill < cap, "%zu mappings and still no ENOMEM", nfill);
		void *p = mmap(NULL, 4096, (nfill & 1) ? PROT_READ : PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			CHILD_CHECK(errno == ENOMEM, "mmap failed with %s, not ENOMEM", strerror(errno));
			break;
		}
		fill[nfill++] = p;
	}

	struct ep_image img;
	int rc = ep_alloc(pool, LARGE_SIZE, &img);

	CHILD_CHECK(rc == -ENOMEM, "large ep_alloc with no mappings left: %d (%s)", rc,
		    ep_strerror(rc));
	int n = fill_until_enomem(pool, v, 0x8000);

	printf("max_map_count %ld: %zu filler mappings; %d functions of 64 KiB fitted\n", max,
	       nfill, n);
	CHILD_EXPECT_CALL(f, 0x7001);
	CHILD_EXPECT_CALL(l, 0x7002);
	check_all(v, n, 0x8000);
	CHILD_OK(rel_patch(pool, f, 0x7011));
	CHILD_EXPECT_CALL(f, 0x7011);
	CHILD_OK(rel_patch(pool, l, 0x7012));
	CHILD_EXPECT_CALL(l, 0x7012);

	/* a fork now: the child cannot get a private copy (that needs new
	 * mappings); it must refuse the write, never share the parent's */
	fflush(NULL);
	pid_t pid = fork();

	CHILD_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		rc = rel_patch(pool, f, 0x7021);
		if (rc == 0)
			CHILD_EXPECT_CALL(f, 0x7021);
		else
			CHILD_EXPECT_CALL(f, 0x7011);
		printf("ep_write in a child with no mappings left: %s\n", ep_strerror(rc));
		fflush(stdout);
		_exit(0);
	}
	int st = rel_wait(pid);

	CHILD_CHECK(st == 0, "grandchild ended with %d", st);
	CHILD_EXPECT_CALL(f, 0x7011);

	/* give mappings back: allocations work again */
	for (int i = 0; i < 64 && nfill > 0; i++)
		munmap(fill[--nfill], 4096);
	void *l2 = child_jit(pool, LARGE_SIZE, 0x7003);

	for (int i = n; i < n + 8; i++)
		v[i] = child_jit(pool, 64 * 1024, 0x8000 + (uint32_t)i);
	check_all(v, n + 8, 0x8000);
	CHILD_OK(ep_free(pool, l2));
	for (int i = 0; i < n + 8; i++)
		CHILD_OK(ep_free(pool, v[i]));
	while (nfill > 0)
		munmap(fill[--nfill], 4096);
	CHILD_OK(rel_patch(pool, f, 0x7031));
	CHILD_EXPECT_CALL(f, 0x7031);
	CHILD_OK(ep_free(pool, f));
	CHILD_OK(ep_free(pool, l));
	child_expect_stats(pool, 0, 0);
	ep_pool_destroy(pool);
	fflush(stdout);
}

START_TEST(test_map_count)
{
	run_in_child(map_count_child, "max_map_count");
}
END_TEST

/* ---- vm.memfd_noexec=2 in a PID namespace ----------------------------------- */

static int read_noexec(void)
{
	return (int)tu_read_long(NOEXEC_PATH);
}

static int write_noexec(int v)
{
	int fd = open(NOEXEC_PATH, O_WRONLY | O_CLOEXEC);
	char c = (char)('0' + v);

	if (fd < 0)
		return -errno;
	int rc = write(fd, &c, 1) == 1 ? 0 : -errno;

	close(fd);
	return rc;
}

/* In the new namespace (this process is its init). */
static void noexec_ns_child(void)
{
	/* a pool made before the sysctl changes */
	struct ep_pool *pool = child_pool(EP_BACKEND_MEMFD);
	void *f = child_jit(pool, 64, 0x9001);

	int rc = write_noexec(2);

	CHILD_CHECK(rc == 0, "writing 2 to %s: %s", NOEXEC_PATH, strerror(-rc));
	CHILD_CHECK(read_noexec() == 2, "%s reads %d after writing 2", NOEXEC_PATH, read_noexec());

	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *p2 = NULL;

	/* the sysctl governs memfds: the memfd backend's base-page regions are
	 * anonymous shared memory, which it does not concern */
	rc = ep_pool_create(&cfg, &p2);
	if (tu_anon_exec_ok()) {
		CHILD_CHECK(rc == 0, "memfd pool under memfd_noexec=2 alone: %d (%s)", rc,
			    ep_strerror(rc));
		void *a = child_jit(p2, 64, 0x9101);
		void *big = child_jit(p2, LARGE_SIZE, 0x9102);

		CHILD_EXPECT_CALL(a, 0x9101);
		CHILD_EXPECT_CALL(big, 0x9102);
		ep_pool_destroy(p2);
		p2 = NULL;
		printf("memfd_noexec=2: the memfd backend works on anonymous shared memory\n");
	} else if (rc == 0) {
		ep_pool_destroy(p2);
		p2 = NULL;
	}

	/* where anonymous memory may not gain exec either (PR_SET_MDWE), every
	 * new region needs an executable memfd (under Valgrind, whose own JIT
	 * cannot run under MDWE, the backend uses memfds anyway) */
	if (!RUNNING_ON_VALGRIND)
		CHILD_CHECK(prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0L, 0L, 0L) == 0,
			    "PR_SET_MDWE: %s", strerror(errno));
	rc = ep_pool_create(&cfg, &p2);
	CHILD_CHECK(rc < 0 && p2 == NULL, "memfd pool under memfd_noexec=2 and MDWE: rc %d", rc);
	const char *msg = ep_strerror(rc);

	CHILD_CHECK(msg && *msg && strcmp(msg, "Unknown error") != 0, "no text for %d", rc);
	printf("memfd_noexec=2: ep_pool_create(EP_BACKEND_MEMFD) = %d: %s\n", rc, msg);

	cfg.backend = EP_BACKEND_AUTO;
	rc = ep_pool_create(&cfg, &p2);
	if (rc == 0) {
		/* another backend that does not need an executable memfd */
		printf("memfd_noexec=2: EP_BACKEND_AUTO still works with %s\n", ep_pool_backend(p2));
		ep_pool_destroy(p2);
	} else {
		msg = ep_strerror(rc);
		CHILD_CHECK(rc < 0 && msg && *msg && strcmp(msg, "Unknown error") != 0,
			    "auto pool: %d (%s)", rc, msg ? msg : "(null)");
		printf("memfd_noexec=2: ep_pool_create(EP_BACKEND_AUTO) = %d: %s\n", rc, msg);
	}

	/* the old pool: live code runs and can be patched; what needs a new
	 * memfd fails cleanly */
	CHILD_EXPECT_CALL(f, 0x9001);
	CHILD_OK(rel_patch(pool, f, 0x9011));
	CHILD_EXPECT_CALL(f, 0x9011);
	void *g = child_jit(pool, 64, 0x9002); /* fits in the existing pack */
	void *l = NULL;

	rc = rel_jit(pool, LARGE_SIZE, 0x9003, &l);
	CHILD_CHECK(rc < 0, "large allocation under memfd_noexec=2 succeeded");
	printf("memfd_noexec=2: new mapping in an old pool: %d: %s\n", rc, ep_strerror(rc));

	/* after fork, a private copy needs a new memfd: the write must fail
	 * and the code must stay as it was, in both processes */
	fflush(NULL);
	pid_t pid = fork();

	CHILD_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		rc = rel_patch(pool, f, 0x9021);
		if (rc == 0) {
			CHILD_EXPECT_CALL(f, 0x9021);
		} else {
			CHILD_EXPECT_CALL(f, 0x9011);
			printf("memfd_noexec=2: ep_write after fork: %d: %s\n", rc, ep_strerror(rc));
		}
		fflush(stdout);
		_exit(0);
	}
	int st = rel_wait(pid);

	CHILD_CHECK(st == 0, "grandchild ended with %d", st);
	CHILD_EXPECT_CALL(f, 0x9011);
	CHILD_EXPECT_CALL(g, 0x9002);
	/*
	 * This process forked too, so its packs are shared with the (now gone)
	 * child until it gets a private copy, which needs an executable memfd.
	 * Changes may therefore fail here; if they do, with a clear errno and
	 * the allocation still live and intact (ep_free's contract).
	 */
	rc = ep_free(pool, g);
	if (rc) {
		msg = ep_strerror(rc);
		CHILD_CHECK(rc < 0 && strcmp(msg, "Unknown error") != 0, "ep_free: %d", rc);
		printf("memfd_noexec=2: ep_free in the parent after fork: %d: %s\n", rc, msg);
		CHILD_EXPECT_CALL(g, 0x9002);
		child_expect_stats(pool, 2, 0);
		rc = rel_patch(pool, f, 0x9031);
		CHILD_CHECK(rc < 0, "patch after a failed free worked");
		CHILD_EXPECT_CALL(f, 0x9011);
	} else {
		CHILD_OK(ep_free(pool, f));
		child_expect_stats(pool, 0, 0);
	}
	ep_pool_destroy(pool); /* needs no new mapping: always works */
	fflush(stdout);
}

static void noexec_child(void)
{
	int before = read_noexec();

	CHILD_CHECK(unshare(CLONE_NEWPID) == 0, "unshare(CLONE_NEWPID): %s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();

	CHILD_CHECK(pid >= 0, "fork into the new namespace: %s", strerror(errno));
	if (pid == 0) {
		noexec_ns_child();
		_exit(0);
	}
	int st = rel_wait(pid);
	int after = read_noexec();

	if (after != before) {
		/* the sysctl was not per namespace after all: put it back */
		int rc = write_noexec(before);

		fprintf(stderr, "%s changed outside the namespace (%d -> %d); restore: %s\n",
			NOEXEC_PATH, before, after, rc ? strerror(-rc) : "done");
	}
	CHILD_CHECK(after == before, "memfd_noexec leaked out of the PID namespace");
	CHILD_CHECK(st == 0, "namespace init ended with %d", st);
}

START_TEST(test_memfd_noexec)
{
	run_in_child(noexec_child, "memfd_noexec=2");
}
END_TEST

/* ---- what can run here ------------------------------------------------------ */

static int probe_mdwe(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0L, 0L, 0L) == 0 ? 0 : 1);
	return pid > 0 && rel_wait(pid) == 0;
}

/* Can this process make a PID namespace and write the sysctl inside? */
static int probe_noexec_ns(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		if (unshare(CLONE_NEWPID) != 0)
			_exit(1);
		pid_t in = fork();

		if (in == 0)
			_exit(write_noexec(read_noexec() < 0 ? 0 : read_noexec()) == 0 ? 0 : 2);
		_exit(in > 0 && rel_wait(in) == 0 ? 0 : 3);
	}
	return pid > 0 ? rel_wait(pid) : -1;
}

static int skips;

static void skip(const char *test, const char *why)
{
	printf("SKIP: %s: %s\n", test, why);
	skips++;
}

int main(void)
{
	tu_need_pool();

	Suite *s = suite_create("hostile");
	TCase *tc = tcase_create("hostile");
	int added = 0;
	bool sanitized = false;

#if defined(EP_TEST_ASAN) || defined(EP_TEST_TSAN)
	sanitized = true;
#endif
	tcase_set_timeout(tc, 60);
	if (RUNNING_ON_VALGRIND)
		skip("MDWE", "Valgrind's own JIT cannot run under MDWE");
	else if (!probe_mdwe())
		skip("MDWE", "PR_SET_MDWE not supported by this kernel (6.3+)");
	else
		tcase_add_test(tc, test_mdwe), added++;

	if (RUNNING_ON_VALGRIND)
		skip("RLIMIT_AS", "Valgrind manages the address space itself");
	else if (sanitized)
		skip("RLIMIT_AS", "sanitizer shadow memory needs terabytes of address space");
	else
		tcase_add_test(tc, test_rlimit_as), added++;

	long max = -1;
	FILE *mf = fopen("/proc/sys/vm/max_map_count", "re");

	if (mf) {
		if (fscanf(mf, "%ld", &max) != 1)
			max = -1;
		fclose(mf);
	}
	if (RUNNING_ON_VALGRIND)
		skip("max_map_count", "Valgrind keeps its own, smaller segment table");
	else if (sanitized)
		skip("max_map_count", "the sanitizer runtime aborts when its own mmap fails");
	else if (max < 0)
		skip("max_map_count", "/proc/sys/vm/max_map_count unreadable");
	else if (max > 1000000)
		skip("max_map_count", "vm.max_map_count is too large to fill quickly");
	else
		tcase_add_test(tc, test_map_count), added++;

	if (geteuid() != 0) {
		skip("memfd_noexec", "needs root (CAP_SYS_ADMIN) for a PID namespace and the sysctl");
	} else if (read_noexec() < 0) {
		skip("memfd_noexec", "no " NOEXEC_PATH " (kernel before 6.3)");
	} else if (read_noexec() == 2) {
		skip("memfd_noexec", "already 2 here: no pool can be made, nothing to contrast");
	} else {
		int p = probe_noexec_ns();

		if (p == 0)
			tcase_add_test(tc, test_memfd_noexec), added++;
		else
			skip("memfd_noexec", p == 1 ? "unshare(CLONE_NEWPID) refused here"
					     : "cannot write " NOEXEC_PATH " in a new PID namespace");
	}
	suite_add_tcase(s, tc);
	if (!added) {
		printf("SKIP: none of the %d hostile-environment tests can run here\n", skips);
		srunner_free(srunner_create(s));
		return 77;
	}

	fflush(stdout); /* before Check forks: no duplicated output */
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
