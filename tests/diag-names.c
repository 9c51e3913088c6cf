/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-names.c - check_diag's tests of ep_set_name() and its errors,
 * ep_symbolize() (offsets, truncation, all pools, freed code, readers racing
 * frees), code reuse through ep_free()/ep_write(), and the perf map.
 */
#include "config.h"

#include "diag-suite.h"

/* ---- ep_set_name / ep_symbolize ---------------------------------------- */

START_TEST(test_name_errors)
{
	struct ep_image img;
	char longname[EP_NAME_MAX + 2];

	ck_assert_int_eq(ep_alloc(diag_pool, 100, &img), 0);
	ck_assert_int_eq(ep_set_name(NULL, img.exec, "x"), -EINVAL);
	ck_assert_int_eq(ep_set_name(diag_pool, NULL, "x"), -EINVAL);
	ck_assert_int_eq(ep_set_name(diag_pool, img.exec, NULL), -EINVAL);
	ck_assert_int_eq(ep_set_name(diag_pool, img.exec, ""), -EINVAL);
	ck_assert_int_eq(ep_set_name(diag_pool, img.exec, "two\nlines"), -EINVAL);
	/* interior address, an address in no allocation */
	ck_assert_int_eq(ep_set_name(diag_pool, (char *)img.exec + 1, "x"), -EINVAL);
	ck_assert_int_eq(ep_set_name(diag_pool, (char *)img.exec + 4096, "x"), -EINVAL);
	int on_stack;

	ck_assert_int_eq(ep_set_name(diag_pool, &on_stack, "x"), -EINVAL);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	ck_assert_int_eq(ep_set_name(diag_pool, img.exec, longname), -ENAMETOOLONG);
	longname[EP_NAME_MAX] = 0; /* exactly EP_NAME_MAX is fine */
	ck_assert_int_eq(ep_set_name(diag_pool, img.exec, longname), 0);
	/* freed: no longer live */
	ck_assert_int_eq(ep_free(diag_pool, img.exec), 0);
	ck_assert_int_eq(ep_set_name(diag_pool, img.exec, "x"), -EINVAL);
	ck_assert_int_eq(ep_symbolize(img.exec, NULL, 0, NULL), -ENOENT);
}
END_TEST

START_TEST(test_symbolize)
{
	void *a = diag_jit(diag_pool, 100, 1), *b = diag_jit(diag_pool, 10, 2);
	char buf[64];
	size_t off = 99;
	char tmp[64];

	/* unnamed code and non-JIT addresses: -ENOENT */
	ck_assert_int_eq(ep_symbolize(a, buf, sizeof(buf), &off), -ENOENT);
	ck_assert_int_eq(ep_symbolize(tmp, buf, sizeof(buf), &off), -ENOENT);
	ck_assert_int_eq(ep_symbolize(NULL, buf, sizeof(buf), &off), -ENOENT);

	ck_assert_int_eq(ep_set_name(diag_pool, a, "prog_a"), 0);
	ck_assert_int_eq(ep_set_name(diag_pool, b, "prog_b"), 0);
	ck_assert_int_eq(ep_symbolize(a, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "prog_a");
	ck_assert_uint_eq(off, 0);
	ck_assert_int_eq(ep_symbolize((char *)a + 77, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "prog_a");
	ck_assert_uint_eq(off, 77);
	ck_assert_int_eq(ep_symbolize((char *)b + 5, buf, sizeof(buf), NULL), 0);
	ck_assert_str_eq(buf, "prog_b");
	/* the whole handed-out size counts, the trap fill after the code too */
	ck_assert_int_eq(ep_symbolize((char *)b + 63, buf, sizeof(buf), &off), 0);
	ck_assert_uint_eq(off, 63);

	/* rename */
	ck_assert_int_eq(ep_set_name(diag_pool, a, "prog_a_v2"), 0);
	ck_assert_int_eq(ep_symbolize((char *)a + 1, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "prog_a_v2");

	/* too small: truncated, NUL-terminated, offset still reported */
	char small[5];

	off = 0;
	ck_assert_int_eq(ep_symbolize((char *)a + 3, small, sizeof(small), &off), -ERANGE);
	ck_assert_str_eq(small, "prog");
	ck_assert_uint_eq(off, 3);
	ck_assert_int_eq(ep_symbolize((char *)a + 3, NULL, 0, &off), -ERANGE);
	/* exactly fitting */
	char fit[10];

	ck_assert_int_eq(ep_symbolize(a, fit, sizeof(fit), NULL), 0);
	ck_assert_str_eq(fit, "prog_a_v2");

	/* the code still runs; freed code is gone from the table */
	ck_assert_int_eq(tu_as_fn(a)(), 1);
	ck_assert_int_eq(ep_free(diag_pool, a), 0);
	ck_assert_int_eq(ep_symbolize(a, buf, sizeof(buf), &off), -ENOENT);
	ck_assert_int_eq(ep_symbolize(b, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "prog_b");
}
END_TEST

START_TEST(test_symbolize_many_pools)
{
	enum { NPOOLS = 3, PER = 300 };
	struct ep_pool *pools[NPOOLS];
	void *code[NPOOLS][PER];
	char name[32], buf[32];

	for (int p = 0; p < NPOOLS; p++) {
		pools[p] = diag_make_pool(0);
		for (int i = 0; i < PER; i++) {
			code[p][i] = diag_jit(pools[p], 1 + (size_t)i % 200, (uint32_t)i);
			snprintf(name, sizeof(name), "p%d_f%d", p, i);
			ck_assert_int_eq(ep_set_name(pools[p], code[p][i], name), 0);
		}
	}
	/* free every other one, then look everything up */
	for (int p = 0; p < NPOOLS; p++)
		for (int i = 0; i < PER; i += 2)
			ck_assert_int_eq(ep_free(pools[p], code[p][i]), 0);
	for (int p = 0; p < NPOOLS; p++) {
		for (int i = 0; i < PER; i++) {
			size_t off = 0;
			int rc = ep_symbolize((char *)code[p][i] + 2, buf, sizeof(buf), &off);

			if (i % 2 == 0) {
				ck_assert_int_eq(rc, -ENOENT);
				continue;
			}
			snprintf(name, sizeof(name), "p%d_f%d", p, i);
			ck_assert_int_eq(rc, 0);
			ck_assert_str_eq(buf, name);
			ck_assert_uint_eq(off, 2);
		}
	}
	/* a destroyed pool's names go with it */
	ep_pool_destroy(pools[1]);
	ck_assert_int_eq(ep_symbolize(code[1][1], buf, sizeof(buf), NULL), -ENOENT);
	ck_assert_int_eq(ep_symbolize(code[2][1], buf, sizeof(buf), NULL), 0);
	ep_pool_destroy(pools[0]);
	ep_pool_destroy(pools[2]);
}
END_TEST

START_TEST(test_name_before_finalize)
{
	struct ep_image img;
	char buf[32];

	ck_assert_int_eq(ep_alloc(diag_pool, 20, &img), 0);
	ck_assert_int_eq(ep_set_name(diag_pool, img.exec, "early"), 0);
	ck_assert_int_eq(ep_symbolize(img.exec, buf, sizeof(buf), NULL), 0);
	ck_assert_str_eq(buf, "early");
	tu_emit_ret_imm(img.rw, 7);
	ck_assert_int_eq(ep_finalize(diag_pool, img.exec), 0);
	ck_assert_int_eq(tu_as_fn(img.exec)(), 7);
	ck_assert_int_eq(ep_symbolize(img.exec, buf, sizeof(buf), NULL), 0);
	ck_assert_str_eq(buf, "early");
	/* freed before finalize: the name goes too */
	ck_assert_int_eq(ep_alloc(diag_pool, 20, &img), 0);
	ck_assert_int_eq(ep_set_name(diag_pool, img.exec, "never_run"), 0);
	ck_assert_int_eq(ep_free(diag_pool, img.exec), 0);
	ck_assert_int_eq(ep_symbolize(img.exec, buf, sizeof(buf), NULL), -ENOENT);
}
END_TEST

/* Readers never see a torn entry while another thread names, renames and
 * frees code at the same addresses. */
static void *g_race_addr[4];
static int g_race_stop;

static void *symbolize_reader(void *arg)
{
	long bad = 0, hits = 0;

	(void)arg;
	while (!__atomic_load_n(&g_race_stop, __ATOMIC_ACQUIRE)) {
		for (int i = 0; i < 4; i++) {
			void *a = __atomic_load_n(&g_race_addr[i], __ATOMIC_ACQUIRE);
			char buf[EP_NAME_MAX + 1];
			size_t off = 12345;

			if (!a)
				continue;
			int rc = ep_symbolize((char *)a + 3, buf, sizeof(buf), &off);

			if (rc == -ENOENT)
				continue;
			hits++;
			/* names are "race_<n>_" followed by 'x' * (n * 37 % 200) */
			if (rc != 0 || off != 3 || strncmp(buf, "race_", 5) != 0) {
				bad++;
				continue;
			}
			int n = atoi(buf + 5);
			const char *tail = strchr(buf + 5, '_');
			size_t want = (size_t)(n * 37 % 200);

			if (!tail || strspn(tail + 1, "x") != want || tail[1 + want] != 0)
				bad++;
		}
	}
	return (void *)(bad ? -1 : hits);
}

START_TEST(test_symbolize_concurrent)
{
	pthread_t th;
	int rounds = getenv("EP_TEST_QUICK") ? 300 : 3000;
	char name[EP_NAME_MAX + 1];

	__atomic_store_n(&g_race_stop, 0, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_create(&th, NULL, symbolize_reader, NULL), 0);
	for (int r = 0; r < rounds; r++) {
		int i = r % 4;
		void *a = __atomic_load_n(&g_race_addr[i], __ATOMIC_ACQUIRE);

		if (a) {
			__atomic_store_n(&g_race_addr[i], NULL, __ATOMIC_RELEASE);
			ck_assert_int_eq(ep_free(diag_pool, a), 0);
		}
		a = diag_jit(diag_pool, 40, (uint32_t)r);
		int n = snprintf(name, sizeof(name), "race_%d_", r);

		memset(name + n, 'x', (size_t)(r * 37 % 200));
		name[n + r * 37 % 200] = 0;
		ck_assert_int_eq(ep_set_name(diag_pool, a, name), 0);
		__atomic_store_n(&g_race_addr[i], a, __ATOMIC_RELEASE);
		/* rename in place: readers see the old or the new name */
		snprintf(name, sizeof(name), "race_%d_", r + 4000);
		n = (int)strlen(name);
		memset(name + n, 'x', (size_t)((r + 4000) * 37 % 200));
		name[n + (r + 4000) * 37 % 200] = 0;
		ck_assert_int_eq(ep_set_name(diag_pool, a, name), 0);
	}
	__atomic_store_n(&g_race_stop, 1, __ATOMIC_RELEASE);
	void *res;

	ck_assert_int_eq(pthread_join(th, &res), 0);
	ck_assert_msg((long)res >= 0, "a reader saw a torn or wrong name");
	for (int i = 0; i < 4; i++) {
		if (g_race_addr[i])
			ck_assert_int_eq(ep_free(diag_pool, g_race_addr[i]), 0);
		g_race_addr[i] = NULL;
	}
}
END_TEST

/* Names of every size class's edges, each name's slot grown and shrunk in
 * turn by renames, and as symbols: each read back whole by ep_symbolize()
 * and ep_lookup(). */
START_TEST(test_name_lengths)
{
	static const size_t lens[] = { 1, 7, 8, 15, 16, 17, 31, 32, 63, 64, 127, 128,
				       EP_NAME_MAX - 1, EP_NAME_MAX, 3 };
	const size_t nl = sizeof(lens) / sizeof(lens[0]);
	char name[EP_NAME_MAX + 1], buf[EP_NAME_MAX + 1];
	struct ep_symbol syms[2];
	struct ep_info info;
	size_t off;
	void *a = diag_jit(diag_pool, 64, 1), *b = diag_jit(diag_pool, 64, 2);

	for (size_t i = 0; i < nl; i++) {
		memset(name, 'a' + (int)(i % 26), lens[i]);
		name[lens[i]] = 0;
		name[0] = 'N';
		ck_assert_int_eq(ep_set_name(diag_pool, a, name), 0);
		ck_assert_int_eq(ep_symbolize((char *)a + 5, buf, sizeof(buf), &off), 0);
		ck_assert_str_eq(buf, name);
		ck_assert_int_eq(ep_lookup(a, &info), 0);
		ck_assert_str_eq(info.name, name);
		/* two symbols, the second of the next length */
		char other[EP_NAME_MAX + 1];
		size_t ol = lens[(i + 1) % nl];

		memset(other, 'z', ol);
		other[ol] = 0;
		syms[0] = (struct ep_symbol){ 0, 16, name };
		syms[1] = (struct ep_symbol){ 16, 16, other };
		ck_assert_int_eq(ep_set_symbols(diag_pool, b, syms, 2), 0);
		ck_assert_int_eq(ep_symbolize((char *)b + 3, buf, sizeof(buf), &off), 0);
		ck_assert_str_eq(buf, name);
		ck_assert_int_eq(ep_symbolize((char *)b + 20, buf, sizeof(buf), &off), 0);
		ck_assert_str_eq(buf, other);
		ck_assert_uint_eq(off, 4);
	}
	ck_assert_int_eq(ep_free(diag_pool, a), 0);
	ck_assert_int_eq(ep_free(diag_pool, b), 0);
	ck_assert_int_eq(ep_symbolize((char *)a + 5, buf, sizeof(buf), &off), -ENOENT);
}
END_TEST

/* Valgrind caches translations by address: a reused address and patched
 * code must run the new bytes.  Run under memcheck by make check-valgrind. */
START_TEST(test_reuse_runs_new_code)
{
	void *a = diag_jit(diag_pool, 6, 1);

	ck_assert_int_eq(tu_as_fn(a)(), 1);
	ck_assert_int_eq(ep_free(diag_pool, a), 0);
	void *b = diag_jit(diag_pool, 6, 2);

	ck_assert_ptr_eq(a, b); /* first fit: the same chunk */
	ck_assert_int_eq(tu_as_fn(b)(), 2);

	unsigned char patch[TU_RET_LEN];

	tu_emit_ret_imm(patch, 3);
	ck_assert_int_eq(ep_write(diag_pool, b, patch, sizeof(patch)), 0);
	ck_assert_int_eq(tu_as_fn(b)(), 3);
	ck_assert_int_eq(tu_patch_ret_imm(diag_pool, b, 4), 0);
	ck_assert_int_eq(tu_as_fn(b)(), 4);
}
END_TEST

/* ---- perf map --------------------------------------------------------- */

START_TEST(test_perfmap)
{
	struct ep_pool *p = diag_make_pool(EP_F_PERFMAP);
	char path[64], want[128];
	struct ep_image img;

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	unlink(path);
	/* named after finalize */
	void *a = diag_jit(p, 30, 1);

	ck_assert_int_eq(ep_set_name(p, a, "perf_a"), 0);
	snprintf(want, sizeof(want), "%lx %x perf_a\n", (unsigned long)(uintptr_t)a, 64);
	ck_assert_msg(diag_map_has(want), "no line '%s' in %s", want, path);
	/* named before finalize: listed at finalize, not before */
	ck_assert_int_eq(ep_alloc(p, 200, &img), 0);
	ck_assert_int_eq(ep_set_name(p, img.exec, "perf_b"), 0);
	snprintf(want, sizeof(want), "%lx %zx perf_b\n", (unsigned long)(uintptr_t)img.exec,
		 img.size);
	ck_assert(!diag_map_has(want));
	tu_emit_ret_imm(img.rw, 2);
	ck_assert_int_eq(ep_finalize(p, img.exec), 0);
	ck_assert_msg(diag_map_has(want), "no line '%s' in %s", want, path);
	/* renaming appends; perf takes the last line */
	ck_assert_int_eq(ep_set_name(p, a, "perf_a2"), 0);
	snprintf(want, sizeof(want), "%lx %x perf_a2\n", (unsigned long)(uintptr_t)a, 64);
	ck_assert(diag_map_has(want));
	ep_pool_destroy(p);

	/* a pool without the flag (and no EXECPACK_PERFMAP) writes nothing */
	const char *env = getenv("EXECPACK_PERFMAP");

	unlink(path);
	a = diag_jit(diag_pool, 30, 1);
	ck_assert_int_eq(ep_set_name(diag_pool, a, "quiet"), 0);
	if (!env || !*env || !strcmp(env, "0")) {
		ck_assert_int_eq(access(path, F_OK), -1);
	} else {
		/* EXECPACK_PERFMAP=1 (check_diag-dwarf.sh): every pool writes */
		snprintf(want, sizeof(want), "%lx %x quiet\n", (unsigned long)(uintptr_t)a, 64);
		ck_assert_msg(diag_map_has(want), "EXECPACK_PERFMAP set but no '%s'", want);
	}
	unlink(path);
}
END_TEST

/* (in the order main() runs them) */
void diag_add_name_tests(TCase *tc)
{
	tcase_add_test(tc, test_name_errors);
	tcase_add_test(tc, test_symbolize);
	tcase_add_test(tc, test_symbolize_many_pools);
	tcase_add_test(tc, test_name_before_finalize);
	tcase_add_test(tc, test_symbolize_concurrent);
	tcase_add_test(tc, test_name_lengths);
	tcase_add_test(tc, test_reuse_runs_new_code);
	tcase_add_test(tc, test_perfmap);
}
