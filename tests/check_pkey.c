/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_pkey.c - the protection key on the writable alias (x86-64;
 * libexecpack(7), "Hardware guards"), where the CPU and kernel have keys:
 *
 *   owner     a store to, and a load from, the alias of finalized code
 *             fault with SIGSEGV, si_code SEGV_PKUERR, in the thread that
 *             allocated it; the code is unchanged;
 *   threads   the same in a thread made after the pool, in one made before
 *             the process's first pool (the key did not exist yet: run in a
 *             new process; also where that thread allows a key index the
 *             process used and freed before), and in a signal handler, where the
 *             async-signal-safe calls (ep_symbolize, ep_backtrace with
 *             frame pointers, ep_strerror, ep_version, the fill) work;
 *   fork      the same in a fork child, before and after the child's first
 *             change gave it a private copy of the region (a new alias);
 *   paths     every way the memfd backend makes an alias is keyed: anonymous
 *             shared memory (the default), a memfd (under PR_SET_MDWE) and
 *             EXECPACK_DEBUG=1's private views, whose copy of a page a
 *             debugger wrote to is kept up to date through the alias; each
 *             also in a fork child after its private copy;
 *   calls     ep_write (staged and live), ep_finalize, ep_shrink, ep_free
 *             (own and from another thread), a large allocation and a
 *             growing pack work with the key on, and each alias faults;
 *   fill      a thread that the pool's fill function makes (the fill runs
 *             while the library writes the alias) has the key disabled for
 *             its whole life, and the fill's traps still land;
 *   pkru      the library's calls leave the thread's PKRU as it was (its
 *             own keys untouched); a thread that allowed the key itself has
 *             it disabled again after its first call;
 *   kernel    read(2) into the alias fails with EFAULT;
 *   off       EP_F_NO_PKEY and EXECPACK_PKEY=0 leave the alias writable and
 *             say why; ep_pool_guards() reports the key.
 *
 * SKIP (77) where the pool gets no key because the CPU or kernel has none
 * (no pku/ospke), under Valgrind or off x86-64; a CPU and kernel with keys
 * whose pool has none is a failure.  The alias is found through
 * /proc/self/maps: the writable mapping of the exec view's file.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#if defined(__x86_64__)
#include <cpuid.h>

#ifndef SEGV_PKUERR
#define SEGV_PKUERR 4
#endif
/* ThreadSanitizer runs a signal handler from its own wrapper, where a
 * fault and a siglongjmp out of it are not supported. */
#if defined(__SANITIZE_THREAD__)
#define TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN 1
#endif
#endif
#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#endif
#ifndef PR_MDWE_REFUSE_EXEC_GAIN
#define PR_MDWE_REFUSE_EXEC_GAIN (1UL << 0)
#endif
#ifndef PKEY_DISABLE_ACCESS
#define PKEY_DISABLE_ACCESS 0x1
#define PKEY_DISABLE_WRITE 0x2
#endif


static uint32_t rdpkru(void)
{
	uint32_t eax, edx;

	__asm__ volatile(".byte 0x0f, 0x01, 0xee" : "=a"(eax), "=d"(edx) : "c"(0));
	(void)edx;
	return eax;
}

static void wrpkru(uint32_t v)
{
	__asm__ volatile(".byte 0x0f, 0x01, 0xef" : : "a"(v), "c"(0), "d"(0) : "memory");
}

static bool cpu_has_pkeys(void)
{
	unsigned a, b, c, d;

	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 3)) && (c & (1u << 4));
}

/* ---- the alias of an exec address, from /proc/self/maps ------------------- */

struct map_line {
	uintptr_t lo, hi, off;
	unsigned maj, min;
	unsigned long ino;
	char perm[5];
};

static bool map_next(FILE *f, struct map_line *m)
{
	char line[512];

	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu", &m->lo, &m->hi, m->perm, &m->off,
			   &m->maj, &m->min, &m->ino) == 7)
			return true;
	return false;
}

/* The address in the writable mapping of exec's file that holds exec's
 * byte, or NULL.  (No ck_assert: also used outside a test, below.) */
static void *find_alias(const void *exec)
{
	FILE *f = fopen("/proc/self/maps", "re");
	struct map_line m, x = { 0 };
	uintptr_t a = (uintptr_t)exec, got = 0;

	if (!f)
		return NULL;
	while (map_next(f, &m))
		if (a >= m.lo && a < m.hi)
			x = m;
	uintptr_t foff = x.off + (a - x.lo);

	rewind(f);
	while (x.ino && map_next(f, &m))
		if (m.ino == x.ino && m.maj == x.maj && m.min == x.min && m.perm[1] == 'w' &&
		    foff >= m.off && foff - m.off < m.hi - m.lo)
			got = m.lo + (foff - m.off);
	fclose(f);
	return (void *)got;
}

/* Whether the maps line of the mapping holding p names name. */
static bool mapping_names(const void *p, const char *name)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	bool got = false;

	if (!f)
		return false;
	while (!got && fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;

		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo &&
		    (uintptr_t)p < hi)
			got = strstr(line, name) != NULL;
	}
	fclose(f);
	return got;
}

static void *alias_of(const void *exec)
{
	void *a = find_alias(exec);

	ck_assert_msg(a != NULL, "no writable mapping of the file behind %p", exec);
	return a;
}

/* ---- a store or load that may fault --------------------------------------- */

static __thread sigjmp_buf probe_jb;
static __thread volatile int probe_code, probe_key;

static void probe_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	probe_code = si->si_code;
	probe_key = si->si_code == SEGV_PKUERR ? (int)si->si_pkey : -1;
	siglongjmp(probe_jb, 1);
}

/*
 * Store v at p (write) or load from it: 0 when it went through, else the
 * SIGSEGV's si_code (*key: its si_pkey).  The thread's PKRU is what it was
 * before, also after a fault (the handler leaves with the kernel's initial
 * value).  -1: p is NULL.
 */
static int probe(void *p, bool write, unsigned char v, int *key)
{
	struct sigaction sa, old;
	uint32_t pkru = rdpkru();
	volatile int code = 0;

	if (!p)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = probe_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old);
	probe_code = 0;
	probe_key = -1;
	if (!sigsetjmp(probe_jb, 1)) {
		if (write)
			*(volatile unsigned char *)p = v;
		else
			(void)*(volatile unsigned char *)p;
	} else {
		code = probe_code;
	}
	wrpkru(pkru);
	sigaction(SIGSEGV, &old, NULL);
	if (key)
		*key = probe_key;
	return code;
}

/* ---- the pool and its code ------------------------------------------------- */

static struct ep_pool *pool_new(enum ep_backend b, size_t pack_size, unsigned flags)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = b, .pack_size = pack_size,
				 .flags = flags };
	struct ep_pool *pool = NULL;

	ck_assert_int_eq(ep_pool_create(&cfg, &pool), 0);
	return pool;
}

static void *jit(struct ep_pool *pool, size_t len, uint32_t imm)
{
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(pool, len, &img), 0);
	tu_emit_sized(img.rw, len, imm);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	ck_assert_uint_eq((uint32_t)tu_as_fn(tu_ret_at(img.exec, len))(), imm);
	return img.exec;
}

/* jit() without ck_assert, for children: 64 bytes returning imm */
static void *jit_or_null(struct ep_pool *pool, uint32_t imm)
{
	struct ep_image img;

	if (ep_alloc(pool, 64, &img))
		return NULL;
	tu_emit_sized(img.rw, 64, imm);
	return ep_finalize(pool, img.exec) ? NULL : img.exec;
}

static int run(void *exec, size_t len)
{
	return tu_as_fn(tu_ret_at(exec, len))();
}

/* A store to exec's alias faults with SEGV_PKUERR (and so does a load); the
 * code is unchanged after.  Returns the key the fault named. */
static int assert_guarded(void *exec, size_t len)
{
	unsigned char *alias = alias_of(exec);
	unsigned char before = *(volatile unsigned char *)exec;
	int key = -1, key2 = -1;

	ck_assert_int_eq(probe(alias, true, 0x90, &key), SEGV_PKUERR);
	ck_assert_int_eq(probe(alias, false, 0, &key2), SEGV_PKUERR);
	ck_assert_int_gt(key, 0);
	ck_assert_int_eq(key, key2);
	ck_assert_uint_eq(*(volatile unsigned char *)exec, before);
	(void)len;
	return key;
}

/* The library's key, learned from a fault. */
static int lib_key(void)
{
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, 0);
	int key = assert_guarded(jit(pool, 64, 1), 64);

	ep_pool_destroy(pool);
	return key;
}

/* ---- tests ---------------------------------------------------------------- */

START_TEST(test_guards_reported)
{
	char why[256];
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, 0);
	unsigned g = ep_pool_guards(pool, why, sizeof(why));

	ck_assert_uint_eq(g & EP_GUARD_PKEY, EP_GUARD_PKEY);
	ck_assert_msg(!strstr(why, "pkey:"), "%s", why);
	ep_pool_destroy(pool);
	ck_assert_uint_eq(ep_pool_guards(NULL, why, sizeof(why)), 0);
	ck_assert_str_eq(why, "");
}
END_TEST

START_TEST(test_owner_faults)
{
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, 0);
	void *a = jit(pool, 64, 0x1234);

	assert_guarded(a, 64);
	ck_assert_int_eq(run(a, 64), 0x1234);
	ep_pool_destroy(pool);
}
END_TEST

struct other {
	void *exec;
	int code, key;
};

static void *other_main(void *arg)
{
	struct other *o = arg;

	o->code = probe(alias_of(o->exec), true, 0x90, &o->key);
	return NULL;
}

START_TEST(test_other_thread_faults)
{
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, 0);
	struct other o = { .exec = jit(pool, 64, 7) };
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, other_main, &o), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(o.code, SEGV_PKUERR);
	ck_assert_int_eq(run(o.exec, 64), 7);
	ep_pool_destroy(pool);
}
END_TEST

/*
 * A thread that exists before the process's first pool (before the key is
 * allocated): main() runs this in a new process (exec of this program with
 * "thread-before"), prints what the thread saw and exits 0 when it faulted.
 */
static pthread_barrier_t before_go, before_done;
static void *before_exec;
static int before_code;

static void *before_main(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&before_go);
	before_code = probe(find_alias(before_exec), true, 0x90, NULL);
	pthread_barrier_wait(&before_done);
	return NULL;
}

/*
 * The same with a key index that this process used before: main allows a
 * key of its own, makes the thread (which copies that PKRU) and frees the
 * key, then makes the first pool.  The library must not take that index,
 * which the thread still allows.
 */
static int thread_before(bool reused)
{
	pthread_t t;
	uint32_t pkru0 = rdpkru();
	int used = -1;

	if (reused) {
		used = pkey_alloc(0, 0);
		if (used <= 0)
			return 5;
	}

	pthread_barrier_init(&before_go, NULL, 2);
	pthread_barrier_init(&before_done, NULL, 2);
	if (pthread_create(&t, NULL, before_main, NULL))
		return 2;
	if (reused && pkey_free(used))
		return 6;
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *pool = NULL;
	struct ep_image img;

	if (ep_pool_create(&cfg, &pool) || ep_alloc(pool, 64, &img))
		return 3;
	tu_emit_sized(img.rw, 64, 9);
	if (ep_finalize(pool, img.exec) || tu_as_fn(tu_ret_at(img.exec, 64))() != 9)
		return 4;
	before_exec = img.exec;
	pthread_barrier_wait(&before_go);
	pthread_barrier_wait(&before_done);
	pthread_join(t, NULL);
	printf("thread-before%s: PKRU at start %#x, after the pool %#x; the older thread's store: "
	       "si_code %d\n", reused ? " (a key used and freed before)" : "", pkru0, rdpkru(),
	       before_code);
	ep_pool_destroy(pool);
	return before_code == SEGV_PKUERR ? 0 : 1;
}

START_TEST(test_thread_made_before_faults)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl("/proc/self/exe", "check_pkey", _i ? "thread-before-reused" : "thread-before",
		      (char *)NULL);
		_exit(3);
	}
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "a thread made before the first pool could store to the alias (status %#x)",
		      st);
}
END_TEST

static void *sig_exec, *sig_alias;
static volatile int sig_code, sig_sym, sig_bt;
static int sig_fd = -1;

static void on_usr1(int sig)
{
	char name[32];
	size_t off;
	unsigned char buf[8];

	(void)sig;
#ifdef TSAN
	sig_code = SEGV_PKUERR; /* (not probed: see TSAN above) */
#else
	sig_code = probe(sig_alias, true, 0x90, NULL);
#endif
	/* the async-signal-safe calls work with the key on */
	sig_sym = ep_symbolize(sig_exec, name, sizeof(name), &off);
	ep_fill_x86_int3(buf, sizeof(buf), NULL);
	if (buf[7] != 0xcc || !ep_strerror(-EINVAL)[0] || !ep_version()[0])
		sig_sym = -1000;
	sig_bt = ep_backtrace(sig_fd); /* (frame pointers: EXECPACK_BACKTRACE=fp) */
}

START_TEST(test_signal_handler_faults)
{
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, 0);
	void *a = jit(pool, 64, 11);

	ck_assert_int_eq(ep_set_name(pool, a, "pkey_sig"), 0);
	sig_exec = a;
	sig_alias = alias_of(a);
	sig_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(sig_fd, 0);
	ck_assert_int_eq(setenv("EXECPACK_BACKTRACE", "fp", 1), 0);
	ck_assert_ptr_ne(signal(SIGUSR1, on_usr1), SIG_ERR);
	raise(SIGUSR1);
	ck_assert_int_eq(sig_code, SEGV_PKUERR);
	ck_assert_int_eq(sig_sym, 0);
	ck_assert_int_gt(sig_bt, 0);
	close(sig_fd);
	ck_assert_int_eq(run(a, 64), 11);
	ep_pool_destroy(pool);
}
END_TEST

/* In a fork child: guarded before and after its first change (which gives
 * it a private copy: a new alias at the same address); exit 0 if so. */
static int child_checks(struct ep_pool *pool, void *a, void *b)
{
	if (probe(find_alias(a), true, 0x90, NULL) != SEGV_PKUERR)
		return 10;
	uint32_t imm = 0x5151;
	unsigned char code[TU_RET_LEN];

	tu_emit_ret_imm(code, imm);
	if (ep_write(pool, tu_ret_at(a, 64), code, sizeof(code)))
		return 11;
	if (run(a, 64) != (int)imm)
		return 12;
	if (probe(find_alias(a), true, 0x90, NULL) != SEGV_PKUERR)
		return 13;
	if (ep_free(pool, b))
		return 14;
	struct ep_image img;

	if (ep_alloc(pool, 64, &img))
		return 15;
	tu_emit_sized(img.rw, 64, 77);
	if (ep_finalize(pool, img.exec) || run(img.exec, 64) != 77)
		return 16;
	if (probe(find_alias(img.exec), true, 0x90, NULL) != SEGV_PKUERR)
		return 17;
	return 0;
}

START_TEST(test_fork_child_faults)
{
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, 0);
	void *a = jit(pool, 64, 21), *b = jit(pool, 64, 22);
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(child_checks(pool, a, b));
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	/* the parent's code is its own and still guarded */
	ck_assert_int_eq(run(a, 64), 21);
	ck_assert_int_eq(run(b, 64), 22);
	assert_guarded(a, 64);
	ep_pool_destroy(pool);
}
END_TEST

/* (how gdb writes a breakpoint) */
static int mem_write(void *at, const void *src, size_t len)
{
	int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	ssize_t n = fd >= 0 ? pwrite(fd, src, len, (off_t)(uintptr_t)at) : -1;

	if (fd >= 0)
		close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

enum path { PATH_ANON, PATH_MEMFD_MDWE, PATH_DEBUG, NPATHS };

/* In a child of its own (MDWE cannot be undone): a pool made the path's
 * way, its alias the path's kind and keyed; the calls work, a fork child's
 * private copy is keyed too.  0 if so, else the step that failed. */
static int path_checks(enum path path)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *pool;

	if (path == PATH_MEMFD_MDWE && prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0L, 0L, 0L))
		return 77;
	if (path == PATH_DEBUG)
		setenv("EXECPACK_DEBUG", "1", 1);
	int rc = ep_pool_create(&cfg, &pool);

	unsetenv("EXECPACK_DEBUG");
	if (rc)
		return 20;
	if (!(ep_pool_guards(pool, NULL, 0) & EP_GUARD_PKEY))
		return 21;
	struct ep_image img;

	if (ep_alloc(pool, 64, &img))
		return 22;
	tu_emit_sized(img.rw, 64, 81);
	if (ep_finalize(pool, img.exec) || run(img.exec, 64) != 81)
		return 23;
	void *a = img.exec, *alias = find_alias(a);

	if (!alias)
		return 24;
	/* the path taken, seen from /proc/self/maps */
	if (!mapping_names(alias, path == PATH_ANON ? "/dev/zero (deleted)" : "/memfd:execpack"))
		return 25;
	if (probe(alias, true, 0x90, NULL) != SEGV_PKUERR ||
	    probe(alias, false, 0, NULL) != SEGV_PKUERR)
		return 26;
	if (path == PATH_DEBUG) {
		/* a debugger's byte in a's page, then code written into that
		 * page: both in the exec view's copy (the alias read in the
		 * key's window) */
		unsigned char bp = 0xa5, orig = *(volatile unsigned char *)a;

		if (mem_write(a, &bp, 1))
			return 77; /* proc_mem.force_override */
		if (ep_alloc(pool, 64, &img))
			return 27;
		tu_emit_sized(img.rw, 64, 82);
		if (ep_finalize(pool, img.exec) ||
		    ((uintptr_t)a ^ (uintptr_t)img.exec) >= (uintptr_t)tu_page())
			return 28;
		if (run(img.exec, 64) != 82 || *(volatile unsigned char *)a != bp)
			return 29;
		if (mem_write(a, &orig, 1) || run(a, 64) != 81 || ep_free(pool, img.exec) ||
		    !tu_is_trap(img.exec, 64))
			return 30;
	}
	void *b = jit_or_null(pool, 83);

	if (!b)
		return 31;
	pid_t pid = fork();

	if (pid < 0)
		return 32;
	if (pid == 0)
		_exit(child_checks(pool, a, b));
	int st;

	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 33;
	if (WEXITSTATUS(st))
		return WEXITSTATUS(st);
	if (run(a, 64) != 81 || probe(find_alias(a), true, 0x90, NULL) != SEGV_PKUERR)
		return 34;
	ep_pool_destroy(pool);
	return 0;
}

START_TEST(test_paths)
{
	static const char *const names[NPATHS] = { "anonymous shared memory", "memfd (PR_SET_MDWE)",
						   "EXECPACK_DEBUG=1" };
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(path_checks((enum path)_i));
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st), "%s: child status %#x", names[_i], st);
	if (WEXITSTATUS(st) == 77) {
		printf("check_pkey: %s not tested here\n", names[_i]);
		return;
	}
	ck_assert_msg(WEXITSTATUS(st) == 0, "%s: step %d failed", names[_i], WEXITSTATUS(st));
}
END_TEST

struct freer {
	struct ep_pool *pool;
	void *exec;
	int rc;
};

static void *freer_main(void *arg)
{
	struct freer *f = arg;

	f->rc = ep_free(f->pool, f->exec);
	return NULL;
}

/* Every call that stores through the alias, on backend b. */
static void calls_on(enum ep_backend b, size_t pack_size)
{
	struct ep_pool *pool = pool_new(b, pack_size, 0);
	struct ep_image img;
	unsigned char code[TU_RET_LEN];

	/* staged write, finalize */
	ck_assert_int_eq(ep_alloc(pool, 256, &img), 0);
	tu_emit_sized(img.rw, 256, 1);
	tu_emit_ret_imm(code, 2);
	ck_assert_int_eq(ep_write(pool, tu_ret_at(img.exec, 256), code, sizeof(code)), 0);
	ck_assert_int_eq(ep_finalize(pool, img.exec), 0);
	ck_assert_int_eq(run(img.exec, 256), 2);
	/* live patch */
	tu_emit_ret_imm(code, 3);
	ck_assert_int_eq(ep_write(pool, tu_ret_at(img.exec, 256), code, sizeof(code)), 0);
	ck_assert_int_eq(run(img.exec, 256), 3);
	assert_guarded(img.exec, 256);
	/* shrink: the chunks past 64 bytes are refilled */
	void *s = jit(pool, 256, 4);

	tu_emit_ret_imm(code, 5);
	ck_assert_int_eq(ep_write(pool, tu_ret_at(s, 64), code, sizeof(code)), 0);
	ck_assert_int_eq(ep_shrink(pool, s, 64), 0);
	ck_assert(tu_is_trap((unsigned char *)s + 64, 192));
	ck_assert_int_eq(run(s, 64), 5);
	/* own free */
	ck_assert_int_eq(ep_free(pool, s), 0);
	ck_assert(tu_is_trap(s, 64));
	/* a free from another thread (the backend's fill, no lock) */
	void *r = jit(pool, 128, 6);
	struct freer f = { .pool = pool, .exec = r };
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, freer_main, &f), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(f.rc, 0);
	ck_assert(tu_is_trap(r, 128));
	/* a large allocation (its own mapping) */
	size_t big = (pack_size ? pack_size : (size_t)2 << 20) + (64 << 10);
	void *l = jit(pool, big, 8);

	assert_guarded(l, big);
	ck_assert_int_eq(ep_free(pool, l), 0);
	/* a pack grows its committed prefix (commit's fill) or new packs come */
	void *many[64];

	for (int i = 0; i < 64; i++)
		many[i] = jit(pool, 2048, 100 + (uint32_t)i);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(run(many[i], 2048), 100 + i);
	assert_guarded(many[63], 2048);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(ep_free(pool, many[i]), 0);
	ck_assert_int_eq(ep_free(pool, img.exec), 0);
	ep_pool_destroy(pool);
}

START_TEST(test_calls_memfd)
{
	calls_on(EP_BACKEND_MEMFD, 0);
	calls_on(EP_BACKEND_MEMFD, 64 << 10);
}
END_TEST

START_TEST(test_calls_hugetlb)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_HUGETLB };
	char why[256];
	int rc = ep_backend_probe(EP_BACKEND_HUGETLB, &cfg, why, sizeof(why));

	if (rc) {
		printf("check_pkey: hugetlb not tested: %s\n", why);
		return;
	}
	calls_on(EP_BACKEND_HUGETLB, 0);
}
END_TEST

START_TEST(test_pkru_kept)
{
	int key = lib_key();
	/* a key of the program's own, write-disabled */
	int mine = pkey_alloc(0, PKEY_DISABLE_WRITE);

	ck_assert_int_gt(mine, 0);
	ck_assert_int_ne(mine, key);
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, 0);
	uint32_t before = rdpkru();

	ck_assert_uint_eq(before >> (2 * key) & 3, PKEY_DISABLE_ACCESS);
	ck_assert_uint_eq(before >> (2 * mine) & 3, PKEY_DISABLE_WRITE);
	void *a = jit(pool, 64, 31);
	unsigned char code[TU_RET_LEN];

	tu_emit_ret_imm(code, 32);
	ck_assert_int_eq(ep_write(pool, tu_ret_at(a, 64), code, sizeof(code)), 0);
	ck_assert_int_eq(ep_shrink(pool, a, 16), 0);
	ck_assert_int_eq(ep_free(pool, a), 0);
	ck_assert_uint_eq(rdpkru(), before);
	ep_pool_destroy(pool);
	pkey_free(mine);
}
END_TEST

START_TEST(test_uncovered_thread_covered_again)
{
	int key = lib_key();
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, 0);
	void *a = jit(pool, 64, 41), *b = jit(pool, 64, 42);
	unsigned char *alias = alias_of(a);
	uint32_t pkru = rdpkru();

	/* what an attacker with a WRPKRU gadget does: the key stops nothing */
	wrpkru(pkru & ~(3u << (2 * key)));
	ck_assert_int_eq(probe(alias, false, 0, NULL), 0);
	/* the thread's next copy through the library leaves the key disabled */
	ck_assert_int_eq(ep_free(pool, b), 0);
	ck_assert_uint_eq(rdpkru(), pkru);
	ck_assert_int_eq(probe(alias, true, 0x90, NULL), SEGV_PKUERR);
	ck_assert_int_eq(run(a, 64), 41);
	ep_pool_destroy(pool);
}
END_TEST

START_TEST(test_kernel_refuses)
{
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, 0);
	void *a = jit(pool, 64, 51);
	int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	errno = 0;
	ck_assert_int_eq(read(fd, alias_of(a), 8), -1);
	ck_assert_int_eq(errno, EFAULT);
	close(fd);
	ck_assert_int_eq(run(a, 64), 51);
	ep_pool_destroy(pool);
}
END_TEST

START_TEST(test_off)
{
	char why[256];
	struct ep_pool *pool = pool_new(EP_BACKEND_MEMFD, 0, EP_F_NO_PKEY);
	void *a = jit(pool, 64, 61);

	ck_assert_uint_eq(ep_pool_guards(pool, why, sizeof(why)) & EP_GUARD_PKEY, 0);
	ck_assert_msg(strstr(why, "pkey: turned off by EP_F_NO_PKEY"), "%s", why);
	/* without the key the alias is an ordinary writable mapping */
	ck_assert_int_eq(probe(alias_of(a), false, 0, NULL), 0);
	ep_pool_destroy(pool);

	ck_assert_int_eq(setenv("EXECPACK_PKEY", "0", 1), 0);
	pool = pool_new(EP_BACKEND_MEMFD, 0, 0);
	ck_assert_int_eq(unsetenv("EXECPACK_PKEY"), 0);
	a = jit(pool, 64, 62);
	ck_assert_uint_eq(ep_pool_guards(pool, why, sizeof(why)) & EP_GUARD_PKEY, 0);
	ck_assert_msg(strstr(why, "pkey: turned off by EXECPACK_PKEY=0"), "%s", why);
	ck_assert_int_eq(probe(alias_of(a), true, 0xcc, NULL), 0);
	ep_pool_destroy(pool);
}
END_TEST

/*
 * A fill function that makes a thread: the thread outlives the fill and
 * probes the alias afterwards (the fill runs as the library refills freed
 * code through the alias; a thread copies its creator's PKRU).
 */
struct spawned {
	pthread_t t;
	void *target; /* the alias to probe */
	int go, made;
	int code, key;
	uint32_t pkru; /* its PKRU at its start */
};

static struct spawned g_spawned;
static int g_spawn_armed;

static void *spawned_main(void *arg)
{
	struct spawned *s = arg;

	s->pkru = rdpkru();
	while (!__atomic_load_n(&s->go, __ATOMIC_ACQUIRE))
		usleep(1000);
	s->code = probe(s->target, true, 0x90, &s->key);
	return NULL;
}

static void spawning_fill(void *dst, size_t len, void *ctx)
{
	(void)ctx;
	if (__atomic_exchange_n(&g_spawn_armed, 0, __ATOMIC_ACQ_REL))
		g_spawned.made = pthread_create(&g_spawned.t, NULL, spawned_main, &g_spawned) == 0;
	TU_FILL(dst, len, NULL);
}

START_TEST(test_fill_thread_faults)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .fill = spawning_fill };
	struct ep_pool *pool = NULL;

	ck_assert_int_eq(ep_pool_create(&cfg, &pool), 0);
	void *keep = jit(pool, 64, 5);
	void *gone = jit(pool, 256, 6);
	int key = assert_guarded(keep, 64);

	memset(&g_spawned, 0, sizeof(g_spawned));
	g_spawned.target = alias_of(keep);
	__atomic_store_n(&g_spawn_armed, 1, __ATOMIC_RELEASE);
	ck_assert_int_eq(ep_free(pool, gone), 0); /* (the refill: the fill runs) */
	ck_assert_int_eq(g_spawn_armed, 0);
	ck_assert(g_spawned.made);
	ck_assert_msg(tu_is_trap(gone, 256), "the fill's traps are not in the freed code");
	__atomic_store_n(&g_spawned.go, 1, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_join(g_spawned.t, NULL), 0);
	ck_assert_msg((g_spawned.pkru >> (2 * key)) & 1,
		      "a thread made in the fill started with the key allowed (PKRU %#x)",
		      g_spawned.pkru);
	ck_assert_int_eq(g_spawned.code, SEGV_PKUERR);
	ck_assert_int_eq(g_spawned.key, key);
	ck_assert_int_eq(run(keep, 64), 5);
	ep_pool_destroy(pool);
}
END_TEST

static Suite *pkey_suite(void)
{
	Suite *s = suite_create("pkey");
	TCase *tc = tcase_create("pkey");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_guards_reported);
	tcase_add_test(tc, test_owner_faults);
	tcase_add_test(tc, test_other_thread_faults);
	tcase_add_loop_test(tc, test_thread_made_before_faults, 0, 2);
	tcase_add_test(tc, test_signal_handler_faults);
	tcase_add_test(tc, test_fork_child_faults);
	tcase_add_loop_test(tc, test_paths, 0, NPATHS);
	tcase_add_test(tc, test_calls_memfd);
	tcase_add_test(tc, test_calls_hugetlb);
	tcase_add_test(tc, test_fill_thread_faults);
	tcase_add_test(tc, test_pkru_kept);
	tcase_add_test(tc, test_uncovered_thread_covered_again);
	tcase_add_test(tc, test_kernel_refuses);
	tcase_add_test(tc, test_off);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "thread-before"))
		return thread_before(false);
	if (argc > 1 && !strcmp(argv[1], "thread-before-reused"))
		return thread_before(true);

	const char *env = getenv("EXECPACK_PKEY");

	if (RUNNING_ON_VALGRIND) {
		printf("SKIP: Valgrind does not run RDPKRU and WRPKRU: no protection key there\n");
		return 77;
	}
	if (env && !strcmp(env, "0")) {
		printf("SKIP: EXECPACK_PKEY=0 is set\n");
		return 77;
	}
	/* (a pool in this process before the forks of the tests: they share it) */
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *pool = NULL;
	char why[256];
	int rc = ep_pool_create(&cfg, &pool);

	if (rc) {
		printf("SKIP: no memfd pool here: %s\n", ep_strerror(rc));
		return 77;
	}
	unsigned g = ep_pool_guards(pool, why, sizeof(why));

	ep_pool_destroy(pool);
	if (!(g & EP_GUARD_PKEY)) {
		if (cpu_has_pkeys()) {
			printf("FAIL: the CPU and kernel have protection keys (pku, ospke) but a "
			       "pool has none: %s\n", why);
			return 1;
		}
		printf("SKIP: no protection key on this machine: %s\n", why);
		return 77;
	}
	SRunner *sr = srunner_create(pkey_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
#else
int main(void)
{
	printf("SKIP: protection keys are used on x86-64 only\n");
	return 77;
}
#endif
