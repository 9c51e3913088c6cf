/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_adapter.c - make check's test of sljitConfigPre.h without sljit:
 * its hooks called in the order and with the addresses sljit passes them
 * (sljit_generate_code(), sljit_set_const(), sljit_free_code() and the
 * free on sljit's error path), on the header's own pool.  PCRE2's test
 * suites run on the adapter in build-aux/clients.sh.
 *
 * The code it runs is "load a 64-bit constant; return" for x86-64 and
 * arm64; elsewhere the hooks are checked without running anything.
 */
#include "sljitConfigPre.h"

#include <stdio.h>
#include <string.h>

static int failures;
static int generated, misaligned; /* by generate() */

static void check(int ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok" : "FAIL", what);
	if (!ok)
		failures++;
}

typedef long long (*fn0)(void);

#if defined(__x86_64__)
#define CAN_RUN 1
/* movabs rax, imm64; ret: the constant at byte 2 */
static const unsigned char code_tmpl[] = { 0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xc3 };
#define IMM_AT 2
#elif defined(__aarch64__)
#define CAN_RUN 1
/* ldr x0, [pc, #8]; ret; .quad imm64: the constant at byte 8 */
static const unsigned char code_tmpl[] = { 0x40, 0x00, 0x00, 0x58, 0xc0, 0x03, 0x5f, 0xd6,
					   0, 0, 0, 0, 0, 0, 0, 0 };
#define IMM_AT 8
#else
#define CAN_RUN 0
static const unsigned char code_tmpl[16];
#define IMM_AT 8
#endif

/* What sljit_generate_code() does with the hooks: the function's exec
 * address.  pool: sljit's exec_allocator_data (NULL: the header's pool). */
static char *generate(struct ep_pool *pool, long long value, size_t reserve)
{
	char *rw = SLJIT_MALLOC_EXEC(reserve, pool);
	ptrdiff_t off;

	if (!rw)
		return NULL;
	off = SLJIT_EXEC_OFFSET(rw);
	generated++;
	misaligned += off == 0 || off % EP_STAGE_ALIGN != 0;
	memcpy(rw, code_tmpl, sizeof(code_tmpl));
	memcpy(rw + IMM_AT, &value, sizeof(value));
	/* sljit passes the executable start and end of what it wrote */
	SLJIT_UPDATE_WX_FLAGS(rw + off, rw + off + sizeof(code_tmpl), 1);
	return rw + off;
}

static long long run(char *exec)
{
	fn0 f;

	memcpy(&f, &exec, sizeof(f));
	return CAN_RUN ? f() : 0;
}

int main(void)
{
	struct ep_info info;
	char what[160];
	char *rw, *exec;
	ptrdiff_t off;
	long long v;
	size_t released;
	int rc;

	/* generation */
	rw = SLJIT_MALLOC_EXEC(1000, NULL);
	if (!rw) {
		printf("FAIL: SLJIT_MALLOC_EXEC: the header's pool could not be made\n");
		return 1;
	}
	off = SLJIT_EXEC_OFFSET(rw);
	snprintf(what, sizeof(what), "SLJIT_EXEC_OFFSET %td is a multiple of EP_STAGE_ALIGN", off);
	check(off != 0 && off % EP_STAGE_ALIGN == 0, what);
	exec = rw + off;
	check(ep_lookup_rw(rw, &info) == 0 && info.rw == rw && info.exec == exec &&
		      !(info.flags & EP_INFO_FINALIZED),
	      "before the end of generation: staging at rw, not finalized");
	memcpy(rw, code_tmpl, sizeof(code_tmpl));
	v = 0x0102030405060708LL;
	memcpy(rw + IMM_AT, &v, sizeof(v));
	SLJIT_UPDATE_WX_FLAGS(exec, exec + sizeof(code_tmpl), 1);
	rc = ep_lookup(exec, &info);
	check(rc == 0 && (info.flags & EP_INFO_FINALIZED), "SLJIT_UPDATE_WX_FLAGS(.., 1) finalizes");
	snprintf(what, sizeof(what), "the unused tail went back (%zu bytes kept of 1000)",
		 rc == 0 ? info.size : 0);
	check(rc == 0 && info.size >= sizeof(code_tmpl) && info.size < 1000 &&
		      info.size <= EP_CHUNK_SIZE,
	      what);
	check(!CAN_RUN || run(exec) == v, "the code runs");
	check(rc == 0 && info.patch_rw == rw && info.patch_exec == exec,
	      "EP_F_KEEP_STAGING keeps the staging at rw");

	/* sljit_set_const(): writable address, window, write, commit */
	v = -42;
	SLJIT_UPDATE_WX_FLAGS(rw + IMM_AT, rw + IMM_AT + 8, 0);
	{
		void *other;

		check(ep_lookup(exec, &info) == 0 &&
			      ep_patch_begin(info.pool, exec, 8, &other) == -EBUSY,
		      "SLJIT_UPDATE_WX_FLAGS(rw, .., 0) on published code opens a window");
	}
	memcpy(rw + IMM_AT, &v, sizeof(v));
	SLJIT_UPDATE_WX_FLAGS(rw + IMM_AT, rw + IMM_AT + 8, 1);
	check(!CAN_RUN || run(exec) == -42, "the patch is live after SLJIT_UPDATE_WX_FLAGS(.., 1)");
	/* the window is closed: a second patch opens one again */
	v = 77;
	SLJIT_UPDATE_WX_FLAGS(rw + IMM_AT, rw + IMM_AT + 8, 0);
	memcpy(rw + IMM_AT, &v, sizeof(v));
	SLJIT_UPDATE_WX_FLAGS(rw + IMM_AT, rw + IMM_AT + 8, 1);
	check(!CAN_RUN || run(exec) == 77, "a second patch");

	/* sljit_free_code() gives the exec address */
	SLJIT_FREE_EXEC(exec, NULL);
	check(ep_lookup(exec, &info) == -ENOENT, "SLJIT_FREE_EXEC(exec) frees");

	/* sljit's error paths free what SLJIT_MALLOC_EXEC returned */
	rw = SLJIT_MALLOC_EXEC(300, NULL);
	exec = rw ? rw + SLJIT_EXEC_OFFSET(rw) : NULL;
	SLJIT_FREE_EXEC(rw, NULL);
	check(exec && ep_lookup(exec, &info) == -ENOENT, "SLJIT_FREE_EXEC(rw) before generation ends");

	/* addresses that are no allocation's: nothing happens */
	check(SLJIT_EXEC_OFFSET(&info) == 0, "SLJIT_EXEC_OFFSET of a foreign address: 0");
	SLJIT_UPDATE_WX_FLAGS((char *)&info, (char *)&info + 8, 0);
	SLJIT_UPDATE_WX_FLAGS((char *)&info, (char *)&info + 8, 1);
	SLJIT_FREE_EXEC(&info, NULL);
	SLJIT_FREE_EXEC(NULL, NULL);
	check(1, "foreign addresses: the hooks do nothing");

	/* many functions: each runs its own constant */
	{
		char *e[200];
		int i, ok = 1;

		for (i = 0; i < 200; i++) {
			e[i] = generate(NULL, 1000 + i, 64 + (size_t)i * 13);
			ok &= e[i] != NULL;
		}
		for (i = 0; i < 200 && ok; i++)
			ok &= !CAN_RUN || run(e[i]) == 1000 + i;
		for (i = 0; i < 200; i++)
			if (e[i])
				SLJIT_FREE_EXEC(e[i], NULL);
		check(ok, "200 functions of various reserved sizes");
	}

	/*
	 * A pool of the caller's with EP_F_RANDOMIZE: exec lies at a random
	 * offset in its first chunk, and the hooks still pair rw and exec.
	 */
	{
		struct ep_config cfg = { .sz = sizeof(cfg),
					 .flags = EP_F_RANDOMIZE | EP_F_KEEP_STAGING };
		struct ep_pool *rp;
		int i, ok = 1, offsets = 0;

		rc = ep_pool_create(&cfg, &rp);
		check(rc == 0, "a pool with EP_F_RANDOMIZE and EP_F_KEEP_STAGING");
		for (i = 0; i < 100 && rc == 0 && ok; i++) {
			char *e = generate(rp, 5000 + i, 100);

			ok &= e != NULL && (!CAN_RUN || run(e) == 5000 + i);
			if (!ok)
				break;
			offsets |= ((uintptr_t)e & (EP_CHUNK_SIZE - 1)) != 0;
			ok &= ep_lookup(e, &info) == 0 && info.exec == e && info.patch_rw;
			if (ok) {
				char *w = (char *)info.patch_rw + (e - (char *)info.patch_exec);

				v = -i;
				SLJIT_UPDATE_WX_FLAGS(w + IMM_AT, w + IMM_AT + 8, 0);
				memcpy(w + IMM_AT, &v, sizeof(v));
				SLJIT_UPDATE_WX_FLAGS(w + IMM_AT, w + IMM_AT + 8, 1);
				ok &= !CAN_RUN || run(e) == -i;
			}
			SLJIT_FREE_EXEC(e, rp);
			ok &= ep_lookup(e, &info) == -ENOENT;
		}
		check(ok, "randomized placement: generate, run, patch, free");
		check(offsets, "randomized placement: some code not at a chunk's start");
		if (rc == 0)
			ep_pool_destroy(rp);
	}

	snprintf(what, sizeof(what), "%d of %d executable offsets not a multiple of EP_STAGE_ALIGN",
		 misaligned, generated);
	check(misaligned == 0, what);

	released = 0;
	rc = ep_sljit_free_unused_memory(&released);
	snprintf(what, sizeof(what), "ep_sljit_free_unused_memory(): %s (%zu bytes)", ep_strerror(rc),
		 released);
	check(rc == 0, what);

	if (!CAN_RUN)
		printf("(no code was run: no code template for this architecture)\n");
	return failures ? 1 : 0;
}
