/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sljit-patch.c - sljit itself through sljitConfigPre.h: code generated at
 * an offset, then patched after it is published.
 *
 * Build with sljit's sources (sljit_src/, or PCRE2's src/sljit/) and this
 * directory on the include path, e.g.:
 *
 *   cc -O2 -I<sljit_src> -DSLJIT_HAVE_CONFIG_PRE=1 -I<examples/sljit> \
 *       -o sljit-patch sljit-patch.c -lexecpack -lpthread
 *
 * It checks, on a pool of its own with EP_F_KEEP_STAGING and on the
 * header's own pool:
 *   - the executable offset is a multiple of EP_STAGE_ALIGN, so sljit's
 *     alignment of its write pointer holds where the code runs;
 *   - ep_finalize_size() gave back the tail sljit did not use;
 *   - sljit_set_const() and sljit_set_jump_addr() on published code (a
 *     patch window at the address sljit computed at generation time),
 *     from one thread and from several at once;
 *   - sljit_free_code() frees the allocation;
 *   - a pool too small for the code: sljit_generate_code() fails with
 *     SLJIT_ERR_EX_ALLOC_FAILED, nothing else happens;
 *   - no mapping of the process is writable and executable.
 * Prints one line per check; exit 0 when all pass.
 */
#define SLJIT_CONFIG_AUTO 1
#define SLJIT_CONFIG_STATIC 1
#define SLJIT_VERBOSE 0
#define SLJIT_DEBUG 0
#include "sljitLir.c"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef sljit_sw (SLJIT_FUNC *fn0)(void);

static int failures;

static void check(int ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok" : "FAIL", what);
	if (!ok)
		failures++;
}

struct const_fn {
	fn0 code;
	sljit_uw const_addr;
	sljit_sw offset;
	sljit_uw size;
};

/* A function that returns a constant sljit_set_const() can change. */
static int make_const_fn(void *pool, sljit_sw init, struct const_fn *out)
{
	struct sljit_compiler *c = sljit_create_compiler(NULL, pool);
	struct sljit_const *k;

	if (!c)
		return -1;
	sljit_emit_enter(c, 0, SLJIT_ARGS0(W), 1, 0, 0, 0, 0);
	k = sljit_emit_const(c, SLJIT_R0, 0, init);
	sljit_emit_return(c, SLJIT_MOV, SLJIT_R0, 0);
	out->code = (fn0)sljit_generate_code(c);
	out->const_addr = k ? sljit_get_const_addr(k) : 0;
	out->offset = sljit_get_executable_offset(c);
	out->size = sljit_get_generated_code_size(c);
	sljit_free_compiler(c);
	return out->code ? 0 : -1;
}

static size_t live(struct ep_pool *pool)
{
	struct ep_stats st;

	return ep_pool_stats(pool, &st) == 0 ? st.live_allocs : (size_t)-1;
}

struct patcher {
	struct const_fn *fn;
	sljit_sw base;
	sljit_sw last;
};

static void *patch_many(void *arg)
{
	struct patcher *p = arg;
	sljit_sw i;

	for (i = 0; i < 2000; i++) {
		p->last = p->base + i;
		sljit_set_const(p->fn->const_addr, p->last, p->fn->offset);
	}
	return NULL;
}

static int no_wx_mapping(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], perms[8];
	int ok = 1;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %7s", perms) == 1 && perms[1] == 'w' && perms[2] == 'x') {
			fputs(line, stdout);
			ok = 0;
		}
	fclose(f);
	return ok;
}

int main(void)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .flags = EP_F_KEEP_STAGING };
	struct ep_pool *pool;
	struct const_fn f, g;
	struct ep_info info;
	char what[160];
	int rc;

	rc = ep_pool_create(&cfg, &pool);
	if (rc < 0) {
		printf("FAIL: ep_pool_create: %s\n", ep_strerror(rc));
		return 1;
	}
	printf("sljit %d.%d (%s) on libexecpack %s, backend %s\n", SLJIT_MAJOR_VERSION,
	       SLJIT_MINOR_VERSION, sljit_get_platform_name(), ep_version(), ep_pool_backend(pool));

	check(make_const_fn(pool, 7, &f) == 0 && f.code() == 7, "generated code runs");
	snprintf(what, sizeof(what), "executable offset %ld is a multiple of EP_STAGE_ALIGN",
		 (long)f.offset);
	check(f.offset != 0 && f.offset % EP_STAGE_ALIGN == 0, what);
	rc = ep_lookup((void *)f.code, &info);
	snprintf(what, sizeof(what), "finalized with the used length (%zu of %zu bytes kept)",
		 (size_t)f.size, rc == 0 ? info.size : 0);
	check(rc == 0 && (info.flags & EP_INFO_FINALIZED) && info.size >= f.size &&
		      info.size < f.size + EP_CHUNK_SIZE,
	      what);
	check(rc == 0 && info.patch_rw &&
		      (char *)info.patch_rw - (char *)info.patch_exec == -f.offset,
	      "the kept staging is where sljit wrote the code");

	sljit_set_const(f.const_addr, 0x1234567890abcdefLL, f.offset);
	check(f.code() == 0x1234567890abcdefLL, "sljit_set_const() on published code");
	sljit_set_const(f.const_addr, -5, f.offset);
	check(f.code() == -5, "sljit_set_const() again");

	/* A rewritable jump to a, moved to b. */
	{
		struct sljit_compiler *c = sljit_create_compiler(NULL, pool);
		struct sljit_jump *j;
		struct sljit_label *a, *b;
		sljit_uw jaddr, baddr;
		sljit_sw off;
		fn0 code;

		sljit_emit_enter(c, 0, SLJIT_ARGS0(W), 1, 0, 0, 0, 0);
		j = sljit_emit_jump(c, SLJIT_JUMP | SLJIT_REWRITABLE_JUMP);
		a = sljit_emit_label(c);
		sljit_emit_return(c, SLJIT_MOV, SLJIT_IMM, 1);
		b = sljit_emit_label(c);
		sljit_emit_return(c, SLJIT_MOV, SLJIT_IMM, 2);
		sljit_set_label(j, a);
		code = (fn0)sljit_generate_code(c);
		jaddr = sljit_get_jump_addr(j);
		baddr = sljit_get_label_addr(b);
		off = sljit_get_executable_offset(c);
		sljit_free_compiler(c);
		check(code && code() == 1, "a rewritable jump runs to its first target");
		check(code && baddr > (sljit_uw)code && baddr < (sljit_uw)code + 64 * 1024,
		      "label addresses are executable addresses");
		if (code) {
			sljit_set_jump_addr(jaddr, baddr, off);
			check(code() == 2, "sljit_set_jump_addr() on published code");
			sljit_free_code((void *)code, pool);
		}
	}

	/* Three threads patch two functions, two of them the same one. */
	check(make_const_fn(pool, 0, &g) == 0, "a second function");
	{
		struct patcher p[3] = { { &f, 1000000, 0 }, { &f, 2000000, 0 }, { &g, 3000000, 0 } };
		pthread_t t[3];
		int i, started = 0;
		sljit_sw v;

		for (i = 0; i < 3; i++)
			started += pthread_create(&t[i], NULL, patch_many, &p[i]) == 0;
		check(started == 3, "patching threads started");
		for (i = 0; i < started; i++)
			pthread_join(t[i], NULL);
		v = f.code();
		snprintf(what, sizeof(what), "concurrent sljit_set_const(): %ld is one thread's last",
			 (long)v);
		check(started == 3 && (v == p[0].last || v == p[1].last), what);
		check(g.code() == p[2].last, "the other function has its thread's last");
	}

	sljit_free_code((void *)f.code, pool);
	sljit_free_code((void *)g.code, pool);
	snprintf(what, sizeof(what), "sljit_free_code() frees the allocations (%zu live)", live(pool));
	check(live(pool) == 0, what);

	/* The header's own pool: sljit given no exec_allocator_data (PCRE2). */
	{
		size_t released = 0;

		check(make_const_fn(NULL, 99, &f) == 0 && f.code() == 99, "the header's own pool");
		sljit_set_const(f.const_addr, 100, f.offset);
		check(f.code() == 100, "sljit_set_const() in the header's own pool");
		sljit_free_code((void *)f.code, NULL);
		check(ep_lookup((void *)f.code, &info) == -ENOENT, "freed: ep_lookup() finds nothing");
		rc = ep_sljit_free_unused_memory(&released);
		snprintf(what, sizeof(what), "ep_sljit_free_unused_memory(): %s, %zu bytes given back",
			 ep_strerror(rc), released);
		check(rc == 0, what);
	}

	/* A pool whose limit is smaller than the code: sljit says so. */
	{
		struct ep_config small = { .sz = sizeof(small), .limit = EP_CHUNK_SIZE };
		struct ep_pool *sp;
		struct sljit_compiler *c;
		void *code;
		int i;

		check(ep_pool_create(&small, &sp) == 0, "a pool with a 64-byte limit");
		c = sljit_create_compiler(NULL, sp);
		sljit_emit_enter(c, 0, SLJIT_ARGS0(W), 1, 0, 0, 0, 0);
		for (i = 0; i < 64; i++)
			sljit_emit_op2(c, SLJIT_ADD, SLJIT_R0, 0, SLJIT_R0, 0, SLJIT_IMM, 0x12345678 + i);
		sljit_emit_return(c, SLJIT_MOV, SLJIT_R0, 0);
		code = sljit_generate_code(c);
		check(!code && sljit_get_compiler_error(c) == SLJIT_ERR_EX_ALLOC_FAILED,
		      "a full pool: SLJIT_ERR_EX_ALLOC_FAILED");
		sljit_free_compiler(c);
		ep_pool_destroy(sp);
	}

	check(no_wx_mapping(), "no mapping is writable and executable");
	ep_pool_destroy(pool);
	printf("%s\n", failures ? "FAILED" : "all passed");
	return failures ? 1 : 0;
}
