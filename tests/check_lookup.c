/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_lookup.c - ep_lookup(): executable addresses (any byte of plain,
 * named, staged, shrunk, large and randomized allocations, of any pool),
 * staging buffers, patch windows and kept staging; addresses in no
 * allocation; a crash handler that names the faulting JIT code from its
 * SIGSEGV (and SIGTRAP) handler; lookups racing frees on other threads.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "execpack.h"
#include "testutil.h"

static struct ep_pool *make_pool(unsigned flags, size_t pack_size)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .flags = flags, .pack_size = pack_size };
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(&cfg, &p);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	return p;
}

static void *publish(struct ep_pool *p, size_t size, const char *name)
{
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(p, size, &img), 0);
	tu_emit_sized(img.rw, size, 5);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	if (name)
		ck_assert_int_eq(ep_set_name(p, img.exec, name), 0);
	return img.exec;
}

/* Every byte of [exec, exec+size) looks up to exactly that allocation. */
static void assert_whole(struct ep_pool *p, void *exec, size_t size, unsigned flags,
			 const char *name)
{
	struct ep_info in;

	for (size_t off = 0; off < size; off += off < 256 ? 1 : 61) {
		int rc = ep_lookup((char *)exec + off, &in);

		ck_assert_msg(rc == 0, "+%zu: %s", off, ep_strerror(rc));
		ck_assert_ptr_eq(in.pool, p);
		ck_assert_ptr_eq(in.exec, exec);
		ck_assert_uint_eq(in.size, size);
		ck_assert_uint_eq(in.flags, flags);
		ck_assert_str_eq(in.name, name ? name : "");
		ck_assert_ptr_null(in.rw);
	}
}

START_TEST(test_exec_addresses)
{
	struct ep_pool *p = make_pool(0, 0), *q = make_pool(0, 64 * 1024);
	void *plain = publish(p, 100, NULL), *named = publish(p, 3000, "jit_named");
	void *other = publish(q, 64, "in_q"), *large = publish(q, 200 * 1024, NULL);
	void *shrunk = publish(p, 1000, NULL);
	struct ep_info in;

	assert_whole(p, plain, 128, EP_INFO_FINALIZED, NULL);
	assert_whole(p, named, 3008, EP_INFO_FINALIZED | EP_INFO_NAMED, "jit_named");
	assert_whole(q, other, 64, EP_INFO_FINALIZED | EP_INFO_NAMED, "in_q");
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	/* a large one: its whole pages (200 KiB is 13 of 16 KiB) */
	assert_whole(q, large, (200 * 1024 + pg - 1) / pg * pg, EP_INFO_FINALIZED | EP_INFO_LARGE,
		     NULL);
	ck_assert_int_eq(ep_shrink(p, shrunk, 100), 0);
	assert_whole(p, shrunk, 128, EP_INFO_FINALIZED, NULL);
	/* past the shrunk end, past an end, in no pool */
	ck_assert_int_eq(ep_lookup((char *)shrunk + 128, &in), -ENOENT);
	ck_assert_int_eq(ep_lookup(&in, &in), -ENOENT);
	ck_assert_int_eq(ep_lookup(NULL, &in), -ENOENT);
	ck_assert_int_eq(ep_lookup((void *)test_exec_addresses, &in), -ENOENT);
	ck_assert_int_eq(ep_lookup(plain, NULL), -EINVAL);
	/* freed: gone */
	ck_assert_int_eq(ep_free(p, plain), 0);
	ck_assert_int_eq(ep_lookup(plain, &in), -ENOENT);
	ck_assert_int_eq(ep_lookup((char *)plain + 127, &in), -ENOENT);
	ck_assert_int_eq(ep_free(q, large), 0);
	ck_assert_int_eq(ep_lookup(large, &in), -ENOENT);
	ep_pool_destroy(q);
	ck_assert_int_eq(ep_lookup(other, &in), -ENOENT);
	ep_pool_destroy(p);
}
END_TEST

/* Before ep_finalize(): the staging buffer maps to the allocation, and
 * the executable address says it is not finalized. */
START_TEST(test_staging)
{
	struct ep_pool *p = make_pool(0, 0);
	struct ep_image img, big;
	struct ep_info in;

	ck_assert_int_eq(ep_alloc(p, 500, &img), 0);
	ck_assert_int_eq(ep_alloc(p, 4 << 20, &big), 0);
	for (size_t off = 0; off < img.size; off += 37) {
		ck_assert_int_eq(ep_lookup_rw((char *)img.rw + off, &in), 0);
		ck_assert_ptr_eq(in.pool, p);
		ck_assert_ptr_eq(in.exec, img.exec);
		ck_assert_ptr_eq(in.rw, img.rw);
		ck_assert_uint_eq(in.size, img.size);
		ck_assert_uint_eq(in.flags, 0);
	}
	/* ep_lookup() takes executable addresses only: a buffer is a miss */
	ck_assert_int_eq(ep_lookup(img.rw, &in), -ENOENT);
	ck_assert_ptr_null(in.exec);
	ck_assert_int_eq(ep_lookup_rw((char *)big.rw + (3 << 20), &in), 0);
	ck_assert_ptr_eq(in.exec, big.exec);
	ck_assert_ptr_eq(in.rw, big.rw);
	ck_assert_uint_eq(in.flags, EP_INFO_LARGE);
	/* a staged large one, named: its name from the executable side too */
	ck_assert_int_eq(ep_set_name(p, big.exec, "big-staged"), 0);
	ck_assert_int_eq(ep_lookup((char *)big.exec + (3 << 20), &in), 0);
	ck_assert_ptr_eq(in.exec, big.exec);
	ck_assert_str_eq(in.name, "big-staged");
	ck_assert_uint_eq(in.flags, EP_INFO_LARGE | EP_INFO_NAMED);
	ck_assert_int_eq(ep_lookup((char *)img.exec + 10, &in), 0);
	ck_assert_ptr_eq(in.exec, img.exec);
	ck_assert_uint_eq(in.flags & EP_INFO_FINALIZED, 0);
	ck_assert_int_eq(ep_set_name(p, img.exec, "staged"), 0);
	ck_assert_int_eq(ep_lookup_rw(img.rw, &in), 0);
	ck_assert_str_eq(in.name, "staged");
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(ep_lookup_rw(img.rw, &in), -ENOENT); /* given back */
	ck_assert_int_eq(ep_lookup((char *)img.exec + 10, &in), 0);
	ck_assert_uint_eq(in.flags, EP_INFO_FINALIZED | EP_INFO_NAMED);
	ck_assert_int_eq(ep_free(p, big.exec), 0);
	ep_pool_destroy(p);
}
END_TEST

/* Randomized placement: exec is known where the allocation is named or has
 * a window (the record alone knows its offset otherwise: ep_lookup(3)). */
START_TEST(test_randomized)
{
	struct ep_pool *p = make_pool(EP_F_RANDOMIZE, 0);

	for (int i = 0; i < 50; i++) {
		char name[16];
		struct ep_info in;
		void *rw;

		snprintf(name, sizeof(name), "r%d", i);
		void *x = publish(p, 100, name);
		uintptr_t key = (uintptr_t)x & ~(uintptr_t)63;

		ck_assert_int_eq(ep_lookup((char *)x + 99, &in), 0);
		ck_assert_ptr_eq(in.exec, x);
		ck_assert_uint_eq(in.size, key + 192 - (uintptr_t)x);
		ck_assert_str_eq(in.name, name);
		ck_assert_int_eq(ep_patch_begin(p, (char *)x + 8, 8, &rw), 0);
		ck_assert_int_eq(ep_lookup_rw(rw, &in), 0);
		ck_assert_ptr_eq(in.exec, x);
		ck_assert_ptr_eq(in.patch_exec, (char *)x + 8);
		ck_assert_ptr_eq(in.patch_rw, rw);
		ck_assert_uint_eq(in.patch_len, 8);
		ck_assert_int_eq(ep_lookup_rw((char *)rw + 8, &in), -ENOENT);
		ck_assert_int_eq(ep_patch_abort(p, (char *)x + 8), 0);
		ck_assert_int_eq(ep_lookup_rw(rw, &in), -ENOENT);
	}
	ep_pool_destroy(p);
}
END_TEST

/* ---- a crash handler --------------------------------------------------- */

static sigjmp_buf g_jmp;
static volatile sig_atomic_t g_rc = 1;
static struct ep_info g_info;
static void *volatile g_pc;

static uintptr_t pc_of(const ucontext_t *uc)
{
#if defined(__x86_64__)
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	return (uintptr_t)uc->uc_mcontext.pc;
#else
	return (uintptr_t)uc->uc_mcontext.__gregs[REG_PC];
#endif
}

static void on_fault(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
	g_pc = (void *)pc_of(ctx);
	g_rc = ep_lookup(g_pc, &g_info); /* async-signal-safe for code */
	siglongjmp(g_jmp, 1);
}

/* A load from address 0, then "return". */
static size_t emit_crash(unsigned char *p)
{
#if defined(__x86_64__)
	static const unsigned char c[] = { 0x8b, 0x04, 0x25, 0, 0, 0, 0, 0xc3 }; /* mov eax,[0] */

	memcpy(p, c, sizeof(c));
	return sizeof(c);
#elif defined(__aarch64__)
	tu_put32(p, 0xd2800000u);     /* mov x0, #0 */
	tu_put32(p + 4, 0xb9400000u); /* ldr w0, [x0] */
	tu_put32(p + 8, 0xd65f03c0u); /* ret */
	return 12;
#else
	tu_put32(p, 0x00002503u);     /* lw a0, 0(zero) */
	tu_put32(p + 4, 0x00008067u); /* ret */
	return 8;
#endif
}

/* A crash handler names the JIT function that faulted: _i 0, a load from
 * address 0 (SIGSEGV); _i 1, a run into the trap fill (SIGTRAP). */
START_TEST(test_from_fault_handler)
{
	int sig = _i == 0 ? SIGSEGV : SIGTRAP;

	if (sig == SIGSEGV && RUNNING_ON_VALGRIND) {
		/* (memcheck reports the deliberate load as an error) */
		printf("SKIP SIGSEGV under valgrind: the fault is a memcheck error\n");
		return;
	}
	struct ep_pool *p = make_pool(0, 0);
	struct ep_image img;
	struct sigaction sa = { 0 }, old;

	/* a few neighbours, so the lookup has to find the right one */
	publish(p, 64, "before");
	ck_assert_int_eq(ep_alloc(p, 256, &img), 0);
	tu_fill_nops(img.rw, 128);
	if (sig == SIGSEGV)
		emit_crash((unsigned char *)img.rw + 128); /* (else the trap fill is there) */
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(ep_set_name(p, img.exec, "crashing_jit_fn"), 0);
	publish(p, 64, "after");

	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	g_pc = NULL;
	ck_assert_int_eq(sigaction(sig, &sa, &old), 0);
	if (!sigsetjmp(g_jmp, 1))
		tu_as_fn(img.exec)();
	sigaction(sig, &old, NULL);
	/* (x86's INT3 reports the address after it) */
	ck_assert((char *)g_pc >= (char *)img.exec + 128 && (char *)g_pc < (char *)img.exec + 136);
	ck_assert_int_eq(g_rc, 0);
	ck_assert_ptr_eq(g_info.exec, img.exec);
	ck_assert_ptr_eq(g_info.pool, p);
	ck_assert_uint_eq(g_info.size, 256);
	ck_assert_str_eq(g_info.name, "crashing_jit_fn");
	ck_assert_uint_eq(g_info.flags, EP_INFO_FINALIZED | EP_INFO_NAMED);
	ep_pool_destroy(p);
}
END_TEST

/* ---- lookups racing frees ------------------------------------------------ */

#define SLOTS 64

struct race {
	struct ep_pool *p;
	void *live[SLOTS]; /* atomics: what the churner published */
	int stop; /* atomic */
	unsigned long found, missing, rounds;
};

static void *churn(void *arg)
{
	struct race *r = arg;
	unsigned seed = 1;

	for (unsigned long i = 0; !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE); i++) {
		size_t k = (size_t)rand_r(&seed) % SLOTS;
		void *old = __atomic_exchange_n(&r->live[k], NULL, __ATOMIC_ACQ_REL);

		if (old)
			ck_assert_int_eq(ep_free(r->p, old), 0);
		struct ep_image img;
		size_t size = 64 * (1 + (size_t)rand_r(&seed) % 8);

		ck_assert_int_eq(ep_alloc(r->p, size, &img), 0);
		tu_emit_sized(img.rw, size, 1);
		ck_assert_int_eq(ep_finalize(r->p, img.exec), 0);
		if (i & 1)
			ck_assert_int_eq(ep_set_name(r->p, img.exec, "churned"), 0);
		__atomic_store_n(&r->live[k], img.exec, __ATOMIC_RELEASE);
	}
	return NULL;
}

START_TEST(test_races_frees)
{
	struct race r = { .p = make_pool(0, 0) };
	pthread_t t;
	unsigned seed = 7;
	int rounds = RUNNING_ON_VALGRIND ? 2000 : tu_quick() ? 20000 : 200000;

	/* made here, freed there: frees from another thread, without the lock */
	for (int k = 0; k < SLOTS; k++)
		r.live[k] = publish(r.p, 64 * (1 + (size_t)k % 8), k & 1 ? "churned" : NULL);
	ck_assert_int_eq(pthread_create(&t, NULL, churn, &r), 0);
	for (int i = 0; i < rounds; i++) {
		void *x = __atomic_load_n(&r.live[rand_r(&seed) % SLOTS], __ATOMIC_ACQUIRE);
		struct ep_info in;

		if (!x)
			continue;
		size_t off = (size_t)rand_r(&seed) % 512;
		int rc = ep_lookup((char *)x + off, &in);

		/* found: a whole allocation of the pool around the address, as
		 * it was at some moment (perhaps one made since at the place) */
		if (rc == 0) {
			ck_assert_ptr_eq(in.pool, r.p);
			ck_assert((char *)in.exec <= (char *)x + off);
			ck_assert((char *)x + off < (char *)in.exec + in.size);
			ck_assert_uint_eq((uintptr_t)in.exec % 64, 0);
			ck_assert(in.size >= 64 && in.size <= 512 && in.size % 64 == 0);
			ck_assert(in.name[0] == 0 || strcmp(in.name, "churned") == 0);
			r.found++;
		} else {
			ck_assert_int_eq(rc, -ENOENT);
			r.missing++;
		}
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	ck_assert_uint_gt(r.found, 0);
	ep_pool_destroy(r.p);
}
END_TEST

/* ---- the promises of a lock-free lookup ---------------------------------- */

static struct {
	struct ep_pool *p;
	void *code, *staged_rw, *libc_pc;
	int rc[4];
	void *exec;
} g_sig;

/* In a SIGSEGV raised inside ep_write()'s copy from a bad source, with
 * the heap's lock held by this very thread (biased on x86): every kind of
 * address answers, none waits. */
static void on_segv_in_write(int sig, siginfo_t *si, void *ctx)
{
	struct ep_info in;

	(void)sig, (void)si, (void)ctx;
	g_sig.rc[0] = ep_lookup(g_sig.libc_pc, &in);               /* a miss in libc */
	g_sig.rc[1] = ep_lookup((char *)g_sig.code + 3, &in);      /* a hit */
	g_sig.exec = in.exec;
	g_sig.rc[2] = ep_lookup(g_sig.staged_rw, &in);             /* a staging buffer */
	g_sig.rc[3] = ep_lookup((char *)g_sig.code + 4096 * 8, &in); /* a free chunk */
	int ok = g_sig.rc[0] == -ENOENT && g_sig.rc[1] == 0 && g_sig.exec == g_sig.code &&
		 g_sig.rc[2] == -ENOENT && g_sig.rc[3] == -ENOENT;

	_exit(ok ? 0 : 10);
}

/* A crash handler that interrupted the library in its own thread, inside
 * a locked call: ep_lookup() answers hits and misses alike (it waited for
 * itself for ever when a miss took the heaps' locks). */
START_TEST(test_lookup_in_handler_of_locked_call)
{
	if (RUNNING_ON_VALGRIND) {
		/* (memcheck reports the copy's deliberate fault as an error) */
		printf("SKIP a SIGSEGV in ep_write() under valgrind: the fault is a memcheck error\n");
		return;
	}
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct ep_image img;
		struct sigaction sa = { .sa_sigaction = on_segv_in_write, .sa_flags = SA_SIGINFO };

		alarm(20); /* a deadlock ends in SIGALRM */
		g_sig.p = make_pool(0, 0);
		g_sig.code = publish(g_sig.p, 100, NULL);
		if (ep_alloc(g_sig.p, 300, &img))
			_exit(11);
		g_sig.staged_rw = (char *)img.rw + 7;
		g_sig.libc_pc = (void *)&write;
		sigaction(SIGSEGV, &sa, NULL);
		/* a source that faults: the copy runs with the heap's lock */
		void *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		(void)ep_write(g_sig.p, g_sig.code, bad, 16);
		_exit(12); /* (the copy did not fault) */
	}
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st), "the handler did not return: signal %d",
		      WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	ck_assert_msg(WEXITSTATUS(st) == 0, "lookups in the handler: exit %d (rc %d %d %d %d)",
		      WEXITSTATUS(st), g_sig.rc[0], g_sig.rc[1], g_sig.rc[2], g_sig.rc[3]);
}
END_TEST

struct flip {
	struct ep_pool *p;
	void *lng, *shrt;
	size_t lsize, ssize;
	int stop;
	unsigned long writes, windows;
};

/* The owner changes the state bytes of both programs (ep_write: PLAIN ->
 * BUSY -> PLAIN; a window: -> REC -> PLAIN) and the pack's maps around
 * them (neighbours born and freed). */
static void *flipper(void *arg)
{
	struct flip *f = arg;
	uint32_t v = 0;

	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		struct ep_image img;
		void *rw;

		ck_assert_int_eq(ep_write(f->p, (char *)f->lng + 64, &v, sizeof(v)), 0);
		ck_assert_int_eq(ep_write(f->p, (char *)f->shrt + 8, &v, sizeof(v)), 0);
		ck_assert_int_eq(ep_patch_begin(f->p, (char *)f->lng + 128, 16, &rw), 0);
		ck_assert_int_eq(ep_patch_commit(f->p, (char *)f->lng + 128), 0);
		ck_assert_int_eq(ep_patch_begin(f->p, f->shrt, 8, &rw), 0);
		ck_assert_int_eq(ep_patch_abort(f->p, f->shrt), 0);
		if (ep_alloc(f->p, 700, &img) == 0)
			ck_assert_int_eq(ep_free(f->p, img.exec), 0);
		__atomic_add_fetch(&f->writes, 2, __ATOMIC_RELEASE);
		f->windows += 2;
		v++;
	}
	return NULL;
}

/* Live code is never missing: lookups of a long program (its length in
 * the maps) and a short one (in its state byte) while the owner writes,
 * opens and closes windows on them and allocates beside them. */
START_TEST(test_live_never_missing)
{
	struct flip f = { .p = make_pool(0, 0) };
	pthread_t t;
	unsigned long n = tu_quick() ? 20000 : 100000, bad = 0;

	f.lsize = 64 * 40; /* > 31 chunks: not in the byte */
	f.ssize = 192;
	f.lng = publish(f.p, f.lsize, NULL);
	f.shrt = publish(f.p, f.ssize, NULL);
	ck_assert_int_eq(pthread_create(&t, NULL, flipper, &f), 0);
	/* n lookups at least, and as many as it takes to overlap 100 of the
	 * owner's changes (a loaded machine may run the owner late) */
	for (unsigned long i = 0; i < n || __atomic_load_n(&f.writes, __ATOMIC_ACQUIRE) < 100; i++) {
		struct ep_info in;
		int big = i & 1;
		void *x = big ? f.lng : f.shrt;
		size_t size = big ? f.lsize : f.ssize;
		int rc = ep_lookup((char *)x + (i * 61) % size, &in);

		if (rc != 0 || in.exec != x || in.size != size || !(in.flags & EP_INFO_FINALIZED))
			bad++;
	}
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	ck_assert_msg(bad == 0, "%lu of %lu or more lookups of live code were wrong (%lu writes, %lu windows)",
		      bad, n, f.writes, f.windows);
	ck_assert_uint_ge(f.writes, 100);
	ep_pool_destroy(f.p);
}
END_TEST

struct churn_pools {
	void *code; /* (plain: the __atomic builtins; clang takes no _Atomic) */
	int stop;
	unsigned long hits, misses, batches;
};

static void *looker(void *arg)
{
	struct churn_pools *c = arg;

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		char *x = __atomic_load_n(&c->code, __ATOMIC_ACQUIRE);
		struct ep_info in;

		if (!x)
			continue;
		for (int k = 0; k < 8; k++) {
			int rc = ep_lookup(x + k * 13, &in);

			if (rc == 0)
				c->hits++;
			else if (rc == -ENOENT)
				c->misses++;
			else
				ck_abort_msg("ep_lookup: %d", rc);
		}
		__atomic_add_fetch(&c->batches, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* Pools destroyed under a thread that looks their code up: no lookup
 * reads what the destroy freed (AddressSanitizer, in the sanitizers
 * stage, sees any such read), and each answers hit or miss. */
START_TEST(test_lookup_vs_destroy)
{
	struct churn_pools c = { 0 };
	pthread_t t;
	int rounds = tu_quick() ? 40 : 150;

	ck_assert_int_eq(pthread_create(&t, NULL, looker, &c), 0);
	for (int r = 0; r < rounds; r++) {
		struct ep_pool *p = make_pool(0, r & 1 ? 64 << 10 : 0);
		void *x = publish(p, 100 + (size_t)r % 300, r & 2 ? "doomed" : NULL);
		struct ep_image big;

		ck_assert_int_eq(ep_alloc(p, 3 << 20, &big), 0); /* a large one too */
		__atomic_store_n(&c.code, x, __ATOMIC_RELEASE);
		/* the looker at work on this pool's code (two batches: one began
		 * after the store), then the destroy races its next ones */
		unsigned long b = __atomic_load_n(&c.batches, __ATOMIC_ACQUIRE);

		while (__atomic_load_n(&c.batches, __ATOMIC_ACQUIRE) < b + 2)
			sched_yield();
		ep_pool_destroy(p);
		__atomic_store_n(&c.code, NULL, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	ck_assert_uint_gt(c.hits, 0); /* (each round waited for lookups of live code) */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lookup");
	TCase *tc = tcase_create("lookup");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_exec_addresses);
	tcase_add_test(tc, test_staging);
	tcase_add_test(tc, test_randomized);
	tcase_add_loop_test(tc, test_from_fault_handler, 0, 2);
	tcase_add_test(tc, test_races_frees);
	tcase_add_test(tc, test_lookup_in_handler_of_locked_call);
	tcase_add_test(tc, test_live_never_missing);
	tcase_add_test(tc, test_lookup_vs_destroy);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
