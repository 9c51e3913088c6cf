/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_relink.c - two small JITs of the shapes in ep_patch_begin(3),
 * written as their authors would, on the patch window:
 *
 *   publish then patch: functions are published one by one, each calling
 *     another by a direct call; later the JIT relinks a caller to a new
 *     callee by re-running its emitter over a window on the published
 *     caller (only the call's displacement changes), while another thread
 *     runs the caller: it sees the old callee or the new, never a torn call;
 *
 *   emit then copy: an eBPF-like VM emits a program into its own buffer,
 *     calls to helpers by id going to a "missing helper" stub, copies the
 *     finished code in (ep_alloc + copy + ep_finalize), and when a helper
 *     is registered later re-runs the same emitter over a window on the
 *     whole program: the calls to that helper are re-linked, nothing else
 *     is written.
 *
 * x86-64 (call rel32, its displacement kept inside one aligned 8-byte
 * word) and arm64 (bl, one word); other architectures SKIP.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execpack.h"
#include "testutil.h"

#if defined(__x86_64__) || defined(__aarch64__)

/* ---- the emitter: leaves, callers, programs ---------------------------- */

/* "return v" (testutil's), padded with no-ops to a fixed size. */
#define LEAF_LEN 16

static void emit_leaf(unsigned char *p, uint32_t v)
{
	tu_fill_nops(p, LEAF_LEN);
	tu_emit_ret_imm(p, v);
}

/* A direct call at p (running at exec) to target. */
#if defined(__x86_64__)
#define PATCH_WORD 8
#define CALL_LEN 5
static void emit_call(unsigned char *p, uintptr_t exec, uintptr_t target)
{
	int32_t rel = (int32_t)(target - (exec + CALL_LEN));

	p[0] = 0xe8; /* call rel32 */
	memcpy(p + 1, &rel, 4);
}

/* Code that calls n targets and adds their results plus k:
 *   push rbx; xor ebx, ebx; nop-pad so that each call's rel32 lies in one
 *   aligned 8-byte word; (call t; add ebx, eax) * n; lea eax, [rbx + k];
 *   pop rbx; ret */
static size_t emit_caller(unsigned char *p, uintptr_t exec, const uintptr_t *t, int n,
			  int32_t k)
{
	size_t o = 0;

	p[o++] = 0x53;                   /* push rbx (a 16-byte stack at the calls) */
	p[o++] = 0x31, p[o++] = 0xdb;    /* xor ebx, ebx */
	for (int i = 0; i < n; i++) {
		while ((o + 1) % 8 > 4) /* the rel32 at o+1..o+4: one word */
			p[o++] = 0x90;
		emit_call(p + o, exec + o, t[i]);
		o += CALL_LEN;
		p[o++] = 0x01, p[o++] = 0xc3; /* add ebx, eax */
	}
	p[o++] = 0x8d, p[o++] = 0x83;    /* lea eax, [rbx + disp32] */
	memcpy(p + o, &k, 4);
	o += 4;
	p[o++] = 0x5b;                   /* pop rbx */
	p[o++] = 0xc3;                   /* ret */
	return o;
}
#else
#define PATCH_WORD 4
static void put32(unsigned char *p, uint32_t w)
{
	memcpy(p, &w, 4);
}

static void emit_call(unsigned char *p, uintptr_t exec, uintptr_t target)
{
	int64_t rel = ((int64_t)target - (int64_t)exec) / 4;

	put32(p, 0x94000000u | ((uint32_t)rel & 0x03ffffffu)); /* bl */
}

/* stp x29, x30, [sp, #-32]!; str x19, [sp, #16]; mov w19, #0;
 * (bl t; add w19, w19, w0) * n; add w0, w19, #k; ldr x19, [sp, #16];
 * ldp x29, x30, [sp], #32; ret */
static size_t emit_caller(unsigned char *p, uintptr_t exec, const uintptr_t *t, int n,
			  int32_t k)
{
	size_t o = 0;

	put32(p + o, 0xa9be7bfdu), o += 4; /* stp x29, x30, [sp, #-32]! */
	put32(p + o, 0xf9000bf3u), o += 4; /* str x19, [sp, #16] */
	put32(p + o, 0x52800013u), o += 4; /* mov w19, #0 */
	for (int i = 0; i < n; i++) {
		emit_call(p + o, exec + o, t[i]);
		o += 4;
		put32(p + o, 0x0b000273u), o += 4; /* add w19, w19, w0 */
	}
	put32(p + o, 0x11000260u | ((uint32_t)k & 0xfff) << 10), o += 4; /* add w0, w19, #k */
	put32(p + o, 0xf9400bf3u), o += 4; /* ldr x19, [sp, #16] */
	put32(p + o, 0xa8c27bfdu), o += 4; /* ldp x29, x30, [sp], #32 */
	put32(p + o, 0xd65f03c0u), o += 4; /* ret */
	return o;
}
#endif

static struct ep_pool *make_pool(void)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
	struct ep_pool *p = NULL;

	ck_assert_int_eq(ep_pool_create(&cfg, &p), 0);
	return p;
}

static uintptr_t publish_leaf(struct ep_pool *p, uint32_t v)
{
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(p, LEAF_LEN, &img), 0);
	emit_leaf(img.rw, v);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	return (uintptr_t)img.exec;
}

/* ---- publish then patch --------------------------------------------------- */

struct runner {
	tu_fn f;
	int stop; /* atomic */
	unsigned long calls, odd;
	int odd_value;
};

static void *run(void *arg)
{
	struct runner *r = arg;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		int v = r->f();

		__atomic_store_n(&r->calls, r->calls + 1, __ATOMIC_RELEASE);
		if (v != 1 + 5 && v != 100 + 5) {
			r->odd++;
			r->odd_value = v;
		}
	}
	return NULL;
}

START_TEST(test_publish_then_patch)
{
	struct ep_pool *p = make_pool();
	uintptr_t a = publish_leaf(p, 1), b = publish_leaf(p, 100);
	struct ep_image img;
	void *rw;

	/* the caller, published calling a */
	ck_assert_int_eq(ep_alloc(p, 64, &img), 0);
	size_t len = emit_caller(img.rw, (uintptr_t)img.exec, &a, 1, 5);

	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_int_eq(ep_shrink(p, img.exec, len), 0);
	struct runner r = { .f = tu_as_fn(img.exec) };
	pthread_t t;

	ck_assert_int_eq(r.f(), 6);
	ck_assert_int_eq(pthread_create(&t, NULL, run, &r), 0);
	while (!__atomic_load_n(&r.calls, __ATOMIC_ACQUIRE))
		sched_yield(); /* (running before the first relink) */
	int n = RUNNING_ON_VALGRIND ? 100 : tu_quick() ? 1000 : 5000;

	for (int i = 0; i < n; i++) {
		uintptr_t callee = i % 2 ? a : b;
		unsigned char before[64];

		/* the JIT relinks the way it linked: its emitter over a window */
		ck_assert_int_eq(ep_patch_begin(p, img.exec, len, &rw), 0);
		memcpy(before, rw, len);
		ck_assert_uint_eq(emit_caller(rw, (uintptr_t)img.exec, &callee, 1, 5), len);
		/* only the call's displacement differs, inside one word that
		 * the commit stores whole (8 bytes on x86-64, 4 on arm64) */
		size_t first = len, last = 0;

		for (size_t o = 0; o < len; o++) {
			if (((unsigned char *)rw)[o] != before[o]) {
				first = first < o ? first : o;
				last = o;
			}
		}
		ck_assert_uint_lt(first, len);
		ck_assert_uint_eq(((uintptr_t)img.exec + first) / PATCH_WORD,
				  ((uintptr_t)img.exec + last) / PATCH_WORD);
		ck_assert_int_eq(ep_patch_commit(p, img.exec), 0);
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	ck_assert_msg(r.odd == 0, "%lu of %lu calls saw a torn call (last %d)", r.odd, r.calls,
		      r.odd_value);
	ck_assert_int_eq(r.f(), (n - 1) % 2 ? 6 : 105);
	ep_pool_destroy(p);
}
END_TEST

/* ---- emit then copy: helpers registered later ----------------------------- */

#define NHELPERS 4

struct vm {
	struct ep_pool *pool;
	uintptr_t helper[NHELPERS]; /* 0: not registered */
	uintptr_t missing;          /* what a call to an unregistered helper runs */
};

/* The VM's emitter: a program is a list of helper ids; its code calls them
 * in turn and returns the sum of their results.  exec: where it runs. */
static size_t vm_emit(const struct vm *vm, unsigned char *buf, uintptr_t exec, const int *ids,
		      int n)
{
	uintptr_t t[8];

	for (int i = 0; i < n; i++)
		t[i] = vm->helper[ids[i]] ? vm->helper[ids[i]] : vm->missing;
	return emit_caller(buf, exec, t, n, 0);
}

/* Load a program: emit into the VM's own buffer, then copy in (its
 * addresses are computed against the exec address first reserved). */
static void *vm_load(struct vm *vm, const int *ids, int n, size_t *len)
{
	unsigned char own[256];
	struct ep_image img;

	*len = vm_emit(vm, own, 0, ids, n); /* (the size: no address needed) */
	ck_assert_int_eq(ep_alloc(vm->pool, *len, &img), 0);
	ck_assert_uint_eq(vm_emit(vm, own, (uintptr_t)img.exec, ids, n), *len);
	memcpy(img.rw, own, *len);
	ck_assert_int_eq(ep_finalize(vm->pool, img.exec), 0);
	return img.exec;
}

/* Register a helper: every loaded program that calls it is re-linked by
 * re-running the emitter over a window on the whole program. */
static void vm_register(struct vm *vm, int id, uintptr_t fn, void *const *progs,
			const int (*ids)[4], const int *ns, const size_t *lens, int nprogs)
{
	vm->helper[id] = fn;
	for (int i = 0; i < nprogs; i++) {
		void *rw;

		ck_assert_int_eq(ep_patch_begin(vm->pool, progs[i], lens[i], &rw), 0);
		ck_assert_uint_eq(vm_emit(vm, rw, (uintptr_t)progs[i], ids[i], ns[i]), lens[i]);
		ck_assert_int_eq(ep_patch_commit(vm->pool, progs[i]), 0);
	}
}

START_TEST(test_emit_then_copy)
{
	struct vm vm = { .pool = make_pool() };
	static const int ids[3][4] = { { 0, 1 }, { 1, 1, 2 }, { 3, 0, 2, 1 } };
	const int ns[3] = { 2, 3, 4 };
	void *progs[3];
	size_t lens[3];

	vm.missing = publish_leaf(vm.pool, (uint32_t)-1000);
	vm.helper[0] = publish_leaf(vm.pool, 1);
	for (int i = 0; i < 3; i++)
		progs[i] = vm_load(&vm, ids[i], ns[i], &lens[i]);
	ck_assert_int_eq(tu_as_fn(progs[0])(), 1 - 1000);
	ck_assert_int_eq(tu_as_fn(progs[1])(), -3000);
	ck_assert_int_eq(tu_as_fn(progs[2])(), -3000 + 1);

	/* helpers arrive later: 10, then 100, then 1000 */
	unsigned char snap[3][256];

	for (int i = 0; i < 3; i++)
		memcpy(snap[i], progs[i], lens[i]);
	vm_register(&vm, 1, publish_leaf(vm.pool, 10), progs, ids, ns, lens, 3);
	ck_assert_int_eq(tu_as_fn(progs[0])(), 11);
	ck_assert_int_eq(tu_as_fn(progs[1])(), 20 - 1000);
	ck_assert_int_eq(tu_as_fn(progs[2])(), -2000 + 11);
	/* the calls to helper 1 were all that changed */
	for (int i = 0; i < 3; i++) {
		size_t changed = 0, calls = 0;

		for (size_t o = 0; o < lens[i]; o++)
			changed += ((unsigned char *)progs[i])[o] != snap[i][o];
		for (int c = 0; c < ns[i]; c++)
			calls += ids[i][c] == 1;
		ck_assert_uint_gt(changed, 0);
		ck_assert_uint_le(changed, 4 * calls); /* (a displacement each) */
	}
	vm_register(&vm, 2, publish_leaf(vm.pool, 100), progs, ids, ns, lens, 3);
	vm_register(&vm, 3, publish_leaf(vm.pool, 1000), progs, ids, ns, lens, 3);
	ck_assert_int_eq(tu_as_fn(progs[0])(), 11);
	ck_assert_int_eq(tu_as_fn(progs[1])(), 120);
	ck_assert_int_eq(tu_as_fn(progs[2])(), 1111);
	ep_pool_destroy(vm.pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("relink");
	TCase *tc = tcase_create("relink");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_publish_then_patch);
	tcase_add_test(tc, test_emit_then_copy);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#else
int main(void)
{
	printf("SKIP: the relinking JITs emit x86-64 and arm64 code only\n");
	return 77;
}
#endif
