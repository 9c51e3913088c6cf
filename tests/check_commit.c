/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_commit.c - a pack commits (fills and maps executable) only a prefix
 * and grows it as programs arrive: the rest of its exec view is PROT_NONE
 * and faults, a pool with one small program stays small in resident memory,
 * growth keeps code and first fit, fills before it maps, and the stats
 * count committed bytes; a forked child grows its own copy.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "execpack.h"
#include "forkutil.h"
#include "testutil.h"

#define PACK ((size_t)2 << 20)

static size_t page(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/* A new pack's first commit: one page (ep_pool_stats(3)). */
static size_t first_commit(void)
{
	return page();
}

static struct ep_pool *memfd_pool(ep_fill_fn fill, void *ctx)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .fill = fill, .fill_ctx = ctx };
	struct ep_pool *p = NULL;

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	return p;
}

/* The extent and permissions of the mapping holding addr (0 when none). */
static int mapping_of(const void *addr, uintptr_t *lo, uintptr_t *hi, char perms[8])
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[1024];
	int found = 0;

	ck_assert_ptr_nonnull(f);
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long l, h;
		char p[8];

		if (sscanf(line, "%lx-%lx %7s", &l, &h, p) == 3 && (uintptr_t)addr >= l &&
		    (uintptr_t)addr < h) {
			*lo = l;
			*hi = h;
			memcpy(perms, p, 8);
			found = 1;
		}
	}
	fclose(f);
	return found;
}

/* Bytes of the pack at base that are executable (its committed prefix). */
static size_t rx_bytes(const void *base)
{
	uintptr_t lo, hi;
	char perms[8];

	ck_assert(mapping_of(base, &lo, &hi, perms));
	ck_assert_str_eq(perms, "r-xs");
	ck_assert_uint_eq(lo, (uintptr_t)base);
	return hi - lo;
}

static size_t pack_bytes(struct ep_pool *p)
{
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_le(st.used_bytes, st.pack_bytes);
	return st.pack_bytes;
}

START_TEST(test_prefix_then_prot_none)
{
	struct ep_pool *p = memfd_pool(NULL, NULL);
	int rc;
	void *f = tu_jit_ret(p, 64, 7, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 7);
	ck_assert_uint_eq(rx_bytes(f), first_commit());
	uintptr_t lo, hi;
	char perms[8];

	/* the rest of the pack's exec view: reserved, inaccessible */
	ck_assert(mapping_of((char *)f + first_commit(), &lo, &hi, perms));
	ck_assert_str_eq(perms, "---s");
	ck_assert_uint_eq(lo, (uintptr_t)f + first_commit());
	ck_assert_uint_eq(hi - (uintptr_t)f, PACK);
	ck_assert_int_eq(tu_count_wx_mappings(), 0);
	ck_assert_uint_eq(pack_bytes(p), first_commit());
	/* an address past the prefix is no allocation */
	ck_assert_int_eq(ep_free(p, (char *)f + first_commit()), -EINVAL);
	ck_assert_int_eq(ep_free(p, f), 0);
	ep_pool_destroy(p);
}
END_TEST

/*
 * In a fork child: programs f[from..to) of size bytes JITted (returning
 * base + i) and called, or (done) called again and freed.  Nonzero at the
 * first that fails.
 */
static int child_jit_call_free(struct ep_pool *p, void **f, int from, int to, size_t size,
			       int base, bool done)
{
	int rc = 0;

	for (int i = from; i < to && !done && !rc; i++)
		f[i] = tu_jit_ret(p, size, (uint32_t)(base + i), &rc);
	for (int i = from; i < to && !rc; i++)
		rc = tu_as_fn(f[i])() != base + i || (done && ep_free(p, f[i]) != 0);
	return rc != 0;
}

/* A child that jumps to (jump) or reads at addr: must die of SIGSEGV. */
static void expect_fault(void *addr, int jump)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (jump)
			(void)tu_as_fn(addr)();
		else
			(void)*(volatile unsigned char *)addr;
		_exit(0);
	}
	int st = 0;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "child status %#x", st);
}

START_TEST(test_uncommitted_faults)
{
	if (RUNNING_ON_VALGRIND) {
		printf("SKIP test_uncommitted_faults: children that fault on purpose, not under Valgrind\n");
		return;
	}
	struct ep_pool *p = memfd_pool(NULL, NULL);
	int rc;
	void *f = tu_jit_ret(p, 64, 1, &rc);

	ck_assert_int_eq(rc, 0);
	char *past = (char *)f + first_commit();

	expect_fault(past, 1);
	expect_fault(past, 0);
	expect_fault((char *)f + PACK - 64, 1);
	ck_assert_int_eq(ep_free(p, f), 0);
	ep_pool_destroy(p);
}
END_TEST

/* Pss of the pool's new mappings (both views), in KiB. */
static long execpack_pss_kb(void)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[1024];
	int in = 0;
	long sum = 0, kb;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ' ') - line <= 34) {
			in = tu_pack_line(line);
			continue;
		}
		if (in && sscanf(line, "Pss: %ld kB", &kb) == 1)
			sum += kb;
	}
	fclose(f);
	return sum;
}

START_TEST(test_one_program_pss)
{
	struct ep_pool *p = memfd_pool(NULL, NULL);
	int rc;
	void *f = tu_jit_ret(p, 64, 3, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 3);
	long kb = execpack_pss_kb();

	ck_assert_msg(kb > 0 && kb <= (long)(first_commit() / 1024), "Pss of one 64-byte program: %ld KiB",
		      kb);
	ck_assert_int_eq(ep_free(p, f), 0);
	ep_pool_destroy(p);
}
END_TEST

/* Whether line is a mapping's first line in /proc/self/smaps; if so, its
 * range, permissions, inode and name (past the spaces). */
static bool smaps_mapping(const char *line, unsigned long *lo, unsigned long *hi, char perms[8],
			  unsigned long *inode, const char **name)
{
	unsigned long off;
	char dev[16];
	int n;

	if (sscanf(line, "%lx-%lx %7s %lx %15s %lu%n", lo, hi, perms, &off, dev, inode, &n) != 6)
		return false;
	*name = line + n + strspn(line + n, " ");
	return true;
}

/* Pss of the process's private writable memory that no file backs (the
 * malloc heap, anonymous mappings: where the library keeps its tables),
 * in KiB. */
static long private_pss_kb(void)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[1024], perms[8];
	int in = 0;
	long sum = 0, kb;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, inode;
		const char *name;

		if (smaps_mapping(line, &lo, &hi, perms, &inode, &name)) {
			in = !strcmp(perms, "rw-p") && inode == 0 &&
			     (*name == '\n' || !strncmp(name, "[heap]", 6));
			continue;
		}
		if (in && sscanf(line, "Pss: %ld kB", &kb) == 1)
			sum += kb;
	}
	fclose(f);
	return sum;
}

/*
 * The tables of a pool with one 64-byte program (its heap, the pack's
 * maps, the address-to-heap table) cost what they use, not what a whole
 * pack could: they were 112 KiB of cleared malloc() memory.  In a child,
 * so that no earlier test's memory is reused.
 */
START_TEST(test_one_program_tables)
{
	const char *san = getenv("EP_SANITIZER"); /* (build-aux/sanitizers.sh) */

	if (RUNNING_ON_VALGRIND) {
		printf("SKIP test_one_program_tables: Valgrind's own memory is in the same mappings\n");
		return;
	}
	if (san && (!strcmp(san, "asan") || !strcmp(san, "tsan"))) {
		printf("SKIP test_one_program_tables: %s's allocator and shadow memory are in the same mappings\n",
		       san);
		return;
	}
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		private_pss_kb(); /* (stdio's buffers, made once) */
		long before = private_pss_kb();
		struct ep_pool *p = memfd_pool(NULL, NULL);
		int rc;
		void *f = tu_jit_ret(p, 64, 3, &rc);
		long grew = private_pss_kb() - before;

		if (rc || tu_as_fn(f)() != 3)
			_exit(2);
		/* (in pages: a 16 KiB kernel's few pages are 16 KiB each) */
		long limit = 48 > 8 * (long)(page() >> 10) ? 48 : 8 * (long)(page() >> 10);

		if (grew > limit) {
			fprintf(stderr, "one 64-byte program's tables: %ld KiB (at most %ld)\n", grew,
				limit);
			_exit(1);
		}
		_exit(0);
	}
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
}
END_TEST

/*
 * The tables' stretches of anonymous memory (64 MiB of address space each,
 * the process's only private anonymous mappings of exactly that size)
 * are marked for no huge pages: where transparent huge pages are "always",
 * the first table written made 2 MiB resident (32 MiB with 16 KiB pages),
 * and one small pool grew the process 13 times as much as asmjit-dual's.
 * test_one_program_tables sees that only on such a kernel; this looks at
 * the mappings' flags, whatever the system's setting.
 */
START_TEST(test_tables_no_huge_pages)
{
	if (RUNNING_ON_VALGRIND) {
		printf("SKIP test_tables_no_huge_pages: the tables are malloc()'d under Valgrind\n");
		return;
	}
	const char *san = getenv("EP_SANITIZER"); /* (build-aux/sanitizers.sh) */

	if (san && (!strcmp(san, "asan") || !strcmp(san, "tsan"))) {
		printf("SKIP test_tables_no_huge_pages: %s's shadow memory is anonymous too\n", san);
		return;
	}
	if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK)) {
		printf("SKIP test_tables_no_huge_pages: no transparent huge pages in this kernel\n");
		return;
	}
	struct ep_pool *p = memfd_pool(NULL, NULL);
	int rc;
	void *f = tu_jit_ret(p, 64, 3, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 3);

	FILE *sm = fopen("/proc/self/smaps", "re");
	char line[1024], perms[8];
	int in = 0, stretches = 0, marked = 0;

	ck_assert_ptr_nonnull(sm);
	while (fgets(line, sizeof(line), sm)) {
		unsigned long lo, hi, inode;
		const char *name;

		if (smaps_mapping(line, &lo, &hi, perms, &inode, &name)) {
			in = !strcmp(perms, "rw-p") && inode == 0 && *name == '\n' &&
			     hi - lo == ((unsigned long)64 << 20);
			stretches += in;
			continue;
		}
		if (in && !strncmp(line, "VmFlags:", 8)) {
			marked += strstr(line, " nh") != NULL;
			in = 0;
		}
	}
	fclose(sm);
	ck_assert_int_ge(stretches, 1);
	ck_assert_int_eq(marked, stretches);
	ck_assert_int_eq(ep_free(p, f), 0);
	ep_pool_destroy(p);
}
END_TEST

/* The fill, which checks that the exec view of what it fills is not yet
 * executable, and counts the bytes. */
struct fill_watch {
	char *exec;        /* the pack's exec view, once known */
	size_t committed;  /* its committed bytes before this fill */
	size_t filled;     /* by commits (a page or more at a time) */
	int exec_seen;     /* a fill found its bytes executable already */
};

static void watch_fill(void *dst, size_t len, void *ctx)
{
	struct fill_watch *w = ctx;

	memset(dst, 0xcc, len);
	if (len < page())
		return; /* a staging buffer or a freed program's chunks */
	w->filled += len;
	if (w->exec && w->committed < PACK) {
		char perms[8];

		tu_mapping_perms(w->exec + w->committed, perms, NULL, 0);
		if (strchr(perms, 'x'))
			w->exec_seen = 1;
	}
}

START_TEST(test_growth_keeps_code_and_first_fit)
{
	struct fill_watch w = { 0 };
	struct ep_pool *p = memfd_pool(watch_fill, &w);
	enum { N = 20000 }; /* 1.25 MiB of 64-byte programs: several growths */
	void **f = calloc(N, sizeof(*f));
	size_t seen = first_commit(), grew = 0;
	int rc;

	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < N; i++) {
		f[i] = tu_jit_ret(p, 64, (uint32_t)i, &rc);
		ck_assert_int_eq(rc, 0);
		if (i == 0) {
			w.exec = f[0];
			w.committed = rx_bytes(f[0]);
		}
		/* first fit in one pack: back to back */
		ck_assert_ptr_eq(f[i], (char *)f[0] + (size_t)i * 64);
		if ((size_t)(i + 1) * 64 > seen || i == N - 1) {
			size_t rx = rx_bytes(f[0]);

			ck_assert_uint_eq(pack_bytes(p), rx);
			if (rx > seen) {
				ck_assert_uint_eq(rx % page(), 0);
				ck_assert_uint_le(rx, 2 * seen); /* in steps, never more than double */
				seen = rx;
				grew++;
			}
			w.committed = rx;
		}
	}
	ck_assert_uint_ge(grew, 4);
	ck_assert_int_eq(w.exec_seen, 0);
	/* the fill ran over the pack's tails before they became executable,
	 * each once, and never past the commit */
	ck_assert_uint_eq(w.filled, seen);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(tu_as_fn(f[i])(), i);
	/* what is committed but free is trap fill */
	const unsigned char *tail = (const unsigned char *)f[0] + (size_t)N * 64;

	for (size_t i = 0; i < seen - (size_t)N * 64; i++)
		ck_assert_uint_eq(tail[i], 0xcc);
	/* freeing the first ones: a small request goes to the lowest run */
	ck_assert_int_eq(ep_free(p, f[0]), 0);
	ck_assert_int_eq(ep_free(p, f[1]), 0);
	void *g = tu_jit_ret(p, 100, 99, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_eq(g, f[0]);
	ck_assert_int_eq(tu_as_fn(g)(), 99);
	ck_assert_int_eq(ep_free(p, g), 0);
	for (int i = 2; i < N; i++)
		ck_assert_int_eq(ep_free(p, f[i]), 0);
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ck_assert_uint_eq(st.live_allocs, 0);
	/* the empty pack is kept, cut back to its first page at once: it had
	 * more than EP_PURGE_AT_ONCE committed (ep_config.purge_delay_ms) */
	ck_assert_uint_gt(seen, EP_PURGE_AT_ONCE);
	ck_assert_uint_eq(st.packs, 1);
	ck_assert_uint_eq(st.pack_bytes, first_commit());
	free(f);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_big_first_request)
{
	struct ep_pool *p = memfd_pool(NULL, NULL);
	int rc;
	/* bigger than the first commit: the new pack commits enough at once */
	void *f = tu_jit_ret(p, 300 << 10, 5, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(f)(), 5);
	ck_assert_uint_ge(rx_bytes(f), 300 << 10);
	ck_assert_uint_eq(pack_bytes(p), rx_bytes(f));
	/* a whole-pack request in a second pack, committed whole */
	void *g = tu_jit_ret(p, PACK, 6, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tu_as_fn(g)(), 6);
	ck_assert_uint_eq(rx_bytes(g), PACK);
	ck_assert_uint_eq(pack_bytes(p), rx_bytes(f) + PACK);
	ck_assert_int_eq(ep_free(p, f), 0);
	ck_assert_int_eq(ep_free(p, g), 0);
	ep_pool_destroy(p);
}
END_TEST

/* A heap that holds a pack's worth of code still starts a pack with a
 * page: every pack commits as it fills, as the first one does. */
START_TEST(test_big_heap_packs_grow)
{
	struct ep_pool *p = memfd_pool(NULL, NULL);
	int rc;
	void *f = tu_jit_ret(p, PACK, 1, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(rx_bytes(f), PACK);
	void *g = tu_jit_ret(p, 64, 2, &rc);

	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(rx_bytes(g), tu_page());
	ck_assert_uint_eq(pack_bytes(p), PACK + tu_page());
	ck_assert_int_eq(tu_as_fn(f)(), 1);
	ck_assert_int_eq(tu_as_fn(g)(), 2);
	ck_assert_int_eq(ep_free(p, f), 0);
	ck_assert_int_eq(ep_free(p, g), 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_limit_counts_programs)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .limit = 256 << 10 };
	struct ep_pool *p = NULL;
	struct ep_image im[5000];
	int n = 0;

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	/* the limit charges what programs reserve, not what is committed */
	for (; n < 5000; n++) {
		int rc = ep_alloc(p, 64, &im[n]);

		if (rc) {
			ck_assert_int_eq(rc, -EPERM);
			break;
		}
	}
	ck_assert_int_eq(n, (256 << 10) / 64);
	struct ep_stats st;

	ck_assert_int_eq(ep_pool_stats(p, &st), 0);
	ck_assert_uint_eq(st.used_bytes, 256 << 10);
	ck_assert_uint_ge(st.pack_bytes, st.used_bytes);
	ck_assert_uint_le(st.pack_bytes, 2 * st.used_bytes);
	ck_assert_uint_eq(st.packs, 1);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(ep_free(p, im[i].exec), 0);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_sealed_commits_whole)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .flags = EP_F_SEAL };
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(&cfg, &p);

	if (rc == -EOPNOTSUPP) {
		printf("SKIP test_sealed_commits_whole: no mseal() in this kernel\n");
		return;
	}
	ck_assert_int_eq(rc, 0);
	void *f = tu_jit_ret(p, 64, 8, &rc);

	ck_assert_int_eq(rc, 0);
	/* mseal() forbids the mprotect() of a later commit */
	ck_assert_uint_eq(rx_bytes(f), PACK);
	ck_assert_uint_eq(pack_bytes(p), PACK);
	ck_assert_int_eq(tu_as_fn(f)(), 8);
	ck_assert_int_eq(ep_free(p, f), 0);
	ep_pool_destroy(p);
}
END_TEST

/* A forked child that grows the pack: its copy grows, the parent's code
 * and uncommitted part stay as they were. */
START_TEST(test_fork_child_grows_its_copy)
{
	struct ep_pool *p = memfd_pool(NULL, NULL);
	enum { N = 3000 }; /* 192 KiB: past the first commit */
	void **f = calloc(N, sizeof(*f));
	int rc;

	ck_assert_ptr_nonnull(f);
	f[0] = tu_jit_ret(p, 64, 0, &rc);
	ck_assert_int_eq(rc, 0);
	struct fu_child ch;
	pid_t pid = fu_fork(&ch, FU_FORK);

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int bad = child_jit_call_free(p, f, 1, N, 64, 1000, false);

		bad |= tu_as_fn(f[0])() != 0;
		bad |= rx_bytes(f[0]) < (size_t)N * 64;
		if (!bad)
			bad = child_jit_call_free(p, f, 1, N, 64, 1000, true);
		free(f);
		if (bad)
			_exit(1);
		/* (under Valgrind: what the parent holds is no leak of the child) */
		rel_child_exit_ok(ch.tx);
	}
	int st = fu_finish(&ch, 60);

	ck_assert_msg(st == 0, "the child saw its programs change: status %d%s", st,
		      fu_status_text(st));
	/* the parent's pack: still its first commit, and its own code */
	ck_assert_uint_eq(rx_bytes(f[0]), first_commit());
	for (int i = 1; i < N; i++) {
		f[i] = tu_jit_ret(p, 64, (uint32_t)i, &rc);
		ck_assert_int_eq(rc, 0);
	}
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(tu_as_fn(f[i])(), i);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(ep_free(p, f[i]), 0);
	free(f);
	ep_pool_destroy(p);
}
END_TEST

/* Programs filling bytes of one pack, freed together: returns the pool's
 * committed bytes before the frees. */
static size_t fill_and_free(struct ep_pool *p, size_t bytes)
{
	enum { SZ = 1024 };
	size_t n = bytes / SZ;
	void **f = calloc(n, sizeof(*f));
	int rc;

	ck_assert_ptr_nonnull(f);
	for (size_t i = 0; i < n; i++) {
		f[i] = tu_jit_ret(p, SZ, (uint32_t)i, &rc);
		ck_assert_int_eq(rc, 0);
	}
	size_t before = pack_bytes(p);

	ck_assert_uint_ge(before, bytes);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(ep_free(p, f[i]), 0);
	free(f);
	return before;
}

static struct ep_pool *purge_pool(long delay_ms)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .purge_delay_ms = delay_ms };
	struct ep_pool *p = NULL;

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	return p;
}

/* A pack that empties with more than EP_PURGE_AT_ONCE committed goes back
 * to its first page at once, with no call after the frees; EP_PURGE_NEVER
 * keeps it all, for ep_pool_trim() only. */
START_TEST(test_purge_at_once)
{
	unsetenv("EXECPACK_PURGE_DELAY_MS");
	struct ep_pool *p = purge_pool(0);

	fill_and_free(p, 2 * EP_PURGE_AT_ONCE);
	ck_assert_uint_eq(pack_bytes(p), first_commit());
	ep_pool_destroy(p);

	p = purge_pool(EP_PURGE_NEVER);
	size_t kept = fill_and_free(p, 2 * EP_PURGE_AT_ONCE);

	ck_assert_uint_eq(pack_bytes(p), kept);
	size_t released;

	ck_assert_int_eq(ep_pool_trim(p, &released), 0);
	ck_assert_uint_ge(released, kept);
	ck_assert_uint_eq(pack_bytes(p), 0);
	ep_pool_destroy(p);

	/* EXECPACK_PURGE_DELAY_MS=never for a pool that leaves it to the default */
	setenv("EXECPACK_PURGE_DELAY_MS", "never", 1);
	p = purge_pool(0);
	kept = fill_and_free(p, 2 * EP_PURGE_AT_ONCE);
	ck_assert_uint_eq(pack_bytes(p), kept);
	ep_pool_destroy(p);
	unsetenv("EXECPACK_PURGE_DELAY_MS");

	struct ep_config bad = { .sz = sizeof(bad), .purge_delay_ms = -2 };

	ck_assert_int_eq(ep_pool_create(&bad, &p), -EINVAL);
	ck_assert_ptr_null(p);
}
END_TEST

/* Less than EP_PURGE_AT_ONCE: kept through the delay (the frees only set
 * it), then cut back by a later ep_free() that empties the pack. */
START_TEST(test_purge_after_delay)
{
	struct ep_pool *p = purge_pool(5);
	size_t kept = fill_and_free(p, 64 << 10);

	ck_assert_uint_gt(kept, first_commit());
	ck_assert_uint_eq(pack_bytes(p), kept); /* (a deadline only) */
	/* churn one program until it is done: no timing asserted, only that
	 * it comes, within a bound generous enough for any loaded machine */
	int rc, rounds = 0;

	while (pack_bytes(p) != first_commit()) {
		ck_assert_msg(rounds++ < 30000, "still %zu bytes committed after %d rounds",
			      pack_bytes(p), rounds);
		void *f = tu_jit_ret(p, 64, 1, &rc);

		ck_assert_int_eq(rc, 0);
		ck_assert_int_eq(tu_as_fn(f)(), 1);
		ck_assert_int_eq(ep_free(p, f), 0);
		usleep(1000);
	}
	/* and the pack grows again for the next burst */
	fill_and_free(p, 64 << 10);
	ep_pool_destroy(p);
}
END_TEST

static void fill_5a(void *dst, size_t len, void *ctx)
{
	(void)ctx;
	memset(dst, 0x5a, len);
}

/* Long free runs inside a live pack: their whole pages go back by
 * themselves (PROT_NONE, not counted as committed) while the programs
 * around them run on; reused, they come back filled, in the same pack; a
 * fork child that allocates there gets them back in its own copy. */
START_TEST(test_holes_in_live_pack)
{
	if (RUNNING_ON_VALGRIND) {
		printf("SKIP test_holes_in_live_pack: the library makes no holes under Valgrind\n");
		return;
	}
	setenv("EXECPACK_PURGE_DELAY_MS", "0", 1); /* (a look at every 256 KiB freed) */
	enum { N = 1024, SZ = 1024 };
	struct ep_pool *p = memfd_pool(fill_5a, NULL);
	void **f = calloc(N, sizeof(*f));
	int rc;

	unsetenv("EXECPACK_PURGE_DELAY_MS");
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < N; i++) {
		f[i] = tu_jit_ret(p, SZ, (uint32_t)i, &rc);
		ck_assert_int_eq(rc, 0);
	}
	size_t before = pack_bytes(p);
	char *mid = f[100];

	for (int i = 1; i < N - 1; i++)
		ck_assert_int_eq(ep_free(p, f[i]), 0);
	ck_assert_uint_le(pack_bytes(p), before - (512 << 10));
	ck_assert_int_eq(tu_as_fn(f[0])(), 0);
	ck_assert_int_eq(tu_as_fn(f[N - 1])(), N - 1);
	uintptr_t lo, hi;
	char perms[8];

	ck_assert(mapping_of(mid, &lo, &hi, perms));
	ck_assert_str_eq(perms, "---s");
	ck_assert(mapping_of(f[0], &lo, &hi, perms));
	ck_assert_str_eq(perms, "r-xs");

	/* a fork child's copy: its programs there run, the parent's stay */
	struct fu_child ch;
	pid_t pid = fu_fork(&ch, FU_FORK);

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int bad = child_jit_call_free(p, f, 1, N - 1, SZ, 5000, false);

		if (!bad)
			bad = child_jit_call_free(p, f, 1, N - 1, SZ, 5000, true);
		free(f);
		if (bad)
			_exit(1);
		rel_child_exit_ok(ch.tx);
	}
	int st = fu_finish(&ch, 60);

	ck_assert_msg(st == 0, "the child's programs in holes: status %d%s", st, fu_status_text(st));
	ck_assert(mapping_of(mid, &lo, &hi, perms));
	ck_assert_str_eq(perms, "---s");

	/* reused here: back when first fit finds no other room, filled */
	enum { G = 16 * N };
	void **g = calloc(G, sizeof(*g));
	int ng = 0;
	char *far;

	ck_assert_ptr_nonnull(g);
	do {
		ck_assert_int_lt(ng, G);
		g[ng] = tu_jit_ret(p, 64, (uint32_t)ng, &rc);
		ck_assert_int_eq(rc, 0);
		ck_assert(mapping_of(mid, &lo, &hi, perms));
	} while (ng++, strcmp(perms, "r-xs"));
	/* (the program that brought mid's page back starts what came back) */
	far = (char *)g[ng - 1] + 256;
	ck_assert(mapping_of(far, &lo, &hi, perms));
	ck_assert_str_eq(perms, "r-xs");
	for (size_t i = 0; i < SZ; i++)
		ck_assert_uint_eq((unsigned char)far[i], 0x5a);
	for (int i = 0; i < ng; i++) {
		ck_assert_int_eq(tu_as_fn(g[i])(), i);
		ck_assert_int_eq(ep_free(p, g[i]), 0);
	}
	free(g);
	for (int i = 1; i < N - 1; i++) {
		f[i] = tu_jit_ret(p, SZ, (uint32_t)i, &rc);
		ck_assert_int_eq(rc, 0);
	}
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(tu_as_fn(f[i])(), i);
	struct ep_stats sts;

	ck_assert_int_eq(ep_pool_stats(p, &sts), 0);
	ck_assert_uint_eq(sts.packs, 1);
	ck_assert_uint_le(sts.pack_bytes, before);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(ep_free(p, f[i]), 0);
	ck_assert_uint_eq(pack_bytes(p), first_commit()); /* (emptied: cut, holes and all) */
	free(f);
	ep_pool_destroy(p);

	/* EP_PURGE_NEVER: kept */
	p = purge_pool(EP_PURGE_NEVER);
	f = calloc(N, sizeof(*f));
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < N; i++) {
		f[i] = tu_jit_ret(p, SZ, (uint32_t)i, &rc);
		ck_assert_int_eq(rc, 0);
	}
	before = pack_bytes(p);
	for (int i = 1; i < N - 1; i++)
		ck_assert_int_eq(ep_free(p, f[i]), 0);
	ck_assert_uint_eq(pack_bytes(p), before);
	ck_assert_int_eq(ep_free(p, f[0]), 0);
	ck_assert_int_eq(ep_free(p, f[N - 1]), 0);
	free(f);
	ep_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("commit");
	TCase *tc = tcase_create("commit");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_prefix_then_prot_none);
	tcase_add_test(tc, test_uncommitted_faults);
	tcase_add_test(tc, test_one_program_pss);
	tcase_add_test(tc, test_one_program_tables);
	tcase_add_test(tc, test_tables_no_huge_pages);
	tcase_add_test(tc, test_growth_keeps_code_and_first_fit);
	tcase_add_test(tc, test_big_first_request);
	tcase_add_test(tc, test_big_heap_packs_grow);
	tcase_add_test(tc, test_limit_counts_programs);
	tcase_add_test(tc, test_sealed_commits_whole);
	tcase_add_test(tc, test_fork_child_grows_its_copy);
	tcase_add_test(tc, test_purge_at_once);
	tcase_add_test(tc, test_purge_after_delay);
	tcase_add_test(tc, test_holes_in_live_pack);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
