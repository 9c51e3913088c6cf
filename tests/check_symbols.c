/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_symbols.c - ep_set_symbols(): the functions of one allocation
 * named for ep_symbolize() (every symbol's first and last byte, the gaps
 * between them), ep_lookup() and the perf map; a table replaced and
 * removed; bad tables refused with nothing changed; ep_shrink() narrowing
 * and ep_free() removing them; large allocations; many symbols.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static void perfmap_remove(void)
{
	char path[64];

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	unlink(path);
}

/* Whether /tmp/perf-<pid>.map has "START SIZE name". */
static int map_has(const void *start, size_t size, const char *name)
{
	char path[64], line[512], want[512];
	int found = 0;

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	snprintf(want, sizeof(want), "%lx %zx %s\n", (unsigned long)(uintptr_t)start, size, name);
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strcmp(line, want))
			found = 1;
	fclose(f);
	return found;
}

/* ep_symbolize(addr) gives name at offset off. */
static void assert_sym(const void *addr, const char *name, size_t off)
{
	char buf[EP_NAME_MAX + 1];
	size_t got = SIZE_MAX;
	int rc = ep_symbolize(addr, buf, sizeof(buf), &got);

	ck_assert_msg(rc == 0, "%p (%s+%zu): %s", addr, name, off, ep_strerror(rc));
	ck_assert_str_eq(buf, name);
	ck_assert_uint_eq(got, off);
}

static void assert_nosym(const void *addr)
{
	char buf[EP_NAME_MAX + 1];

	ck_assert_int_eq(ep_symbolize(addr, buf, sizeof(buf), NULL), -ENOENT);
}

/* ep_lookup(addr): the allocation at exec, with name (NULL: unnamed). */
static void assert_lookup(const void *addr, void *exec, const char *name)
{
	struct ep_info in;

	ck_assert_int_eq(ep_lookup(addr, &in), 0);
	ck_assert_ptr_eq(in.exec, exec);
	ck_assert_str_eq(in.name, name ? name : "");
	ck_assert_uint_eq(!!(in.flags & EP_INFO_NAMED), name != NULL);
}

static void *jit(struct ep_pool *p, size_t size, struct ep_image *img)
{
	ck_assert_int_eq(ep_alloc(p, size, img), 0);
	tu_emit_sized(img->rw, size, 7);
	return img->exec;
}

static const struct ep_symbol three[] = {
	/* (not sorted: any order of disjoint ranges) */
	{ 200, 50, "mod_f1" },
	{ 0, 100, "mod_f0" },
	{ 256, 1000, "mod_f2" },
};

START_TEST(test_symbolize_and_lookup)
{
	struct ep_pool *p = make_pool(EP_F_PERFMAP, 0);
	struct ep_image img;
	char *x = jit(p, 4096, &img);

	perfmap_remove();
	/* before ep_finalize(), like ep_set_name() */
	ck_assert_int_eq(ep_set_name(p, x, "module"), 0);
	ck_assert_int_eq(ep_set_symbols(p, x, three, 3), 0);
	ck_assert_int_eq(ep_finalize(p, x), 0);
	for (size_t i = 0; i < 3; i++) {
		const struct ep_symbol *s = &three[i];

		assert_sym(x + s->offset, s->name, 0);
		assert_sym(x + s->offset + s->size - 1, s->name, s->size - 1);
		assert_lookup(x + s->offset, x, s->name);
		assert_lookup(x + s->offset + s->size - 1, x, s->name);
		ck_assert_msg(map_has(x + s->offset, s->size, s->name), "no perf map line for %s",
			      s->name);
	}
	/* the gaps and the rest: the allocation's own name */
	assert_sym(x + 100, "module", 100);
	assert_sym(x + 199, "module", 199);
	assert_sym(x + 250, "module", 250);
	assert_sym(x + 1256, "module", 1256);
	assert_lookup(x + 150, x, "module");
	assert_lookup(x + 4095, x, "module");

	/* unnamed, with symbols: the gaps have no name */
	char *y = jit(p, 1024, &img);

	ck_assert_int_eq(ep_finalize(p, y), 0);
	ck_assert_int_eq(ep_set_symbols(p, y, three, 2), 0); /* after ep_finalize() */
	assert_sym(y + 249, "mod_f1", 49);
	assert_sym(y + 99, "mod_f0", 99);
	assert_nosym(y + 100);
	assert_lookup(y + 210, y, "mod_f1");
	assert_lookup(y + 100, y, NULL);
	ck_assert(map_has(y + 200, 50, "mod_f1"));
	/* the first allocation's are its own */
	assert_sym(x + 210, "mod_f1", 10);
	ep_pool_destroy(p);
	assert_nosym(y + 210);
	perfmap_remove();
}
END_TEST

START_TEST(test_replace_remove)
{
	struct ep_pool *p = make_pool(0, 0);
	struct ep_image img;
	char *x = jit(p, 2048, &img);
	const struct ep_symbol other[] = { { 100, 20, "other_a" }, { 1000, 48, "other_b" } };

	ck_assert_int_eq(ep_finalize(p, x), 0);
	ck_assert_int_eq(ep_set_name(p, x, "module"), 0);
	ck_assert_int_eq(ep_set_symbols(p, x, three, 3), 0);
	ck_assert_int_eq(ep_set_symbols(p, x, other, 2), 0);
	assert_sym(x + 0, "module", 0); /* mod_f0 went */
	assert_sym(x + 300, "module", 300);
	assert_sym(x + 119, "other_a", 19);
	assert_sym(x + 1047, "other_b", 47);
	assert_lookup(x + 1000, x, "other_b");
	/* n == 0: none left (syms may be NULL then) */
	ck_assert_int_eq(ep_set_symbols(p, x, NULL, 0), 0);
	assert_sym(x + 119, "module", 119);
	assert_lookup(x + 119, x, "module");
	ck_assert_int_eq(ep_set_symbols(p, x, NULL, 0), 0);
	/* renaming the allocation keeps the symbols */
	ck_assert_int_eq(ep_set_symbols(p, x, other, 2), 0);
	ck_assert_int_eq(ep_set_name(p, x, "renamed"), 0);
	assert_sym(x + 100, "other_a", 0);
	assert_sym(x + 99, "renamed", 99);
	/* a long name: EP_NAME_MAX bytes kept */
	char longname[EP_NAME_MAX + 20];

	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	struct ep_symbol lg = { 8, 8, longname };
	char buf[EP_NAME_MAX + 1];

	ck_assert_int_eq(ep_set_symbols(p, x, &lg, 1), 0);
	ck_assert_int_eq(ep_symbolize(x + 9, buf, sizeof(buf), NULL), 0);
	ck_assert_uint_eq(strlen(buf), EP_NAME_MAX);
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_errors)
{
	struct ep_pool *p = make_pool(0, 0);
	struct ep_image img;
	char *x = jit(p, 1024, &img);
	struct ep_symbol bad[2];
	int local;

	ck_assert_int_eq(ep_set_symbols(p, x, three, 2), 0);
	ck_assert_int_eq(ep_set_symbols(NULL, x, three, 2), -EINVAL);
	ck_assert_int_eq(ep_set_symbols(p, NULL, three, 2), -EINVAL);
	ck_assert_int_eq(ep_set_symbols(p, x, NULL, 1), -EINVAL);
	ck_assert_int_eq(ep_set_symbols(p, &local, three, 1), -EINVAL); /* no allocation */
	ck_assert_int_eq(ep_set_symbols(p, x + 64, three, 1), -EINVAL); /* not its exec */
	/* size 0 */
	bad[0] = (struct ep_symbol){ 0, 0, "z" };
	ck_assert_int_eq(ep_set_symbols(p, x, bad, 1), -EINVAL);
	/* past the allocation: by its start, by its end, wrapping */
	bad[0] = (struct ep_symbol){ 1 << 20, 8, "far" };
	ck_assert_int_eq(ep_set_symbols(p, x, bad, 1), -EINVAL);
	bad[0] = (struct ep_symbol){ 1000, 1 << 20, "long" };
	ck_assert_int_eq(ep_set_symbols(p, x, bad, 1), -EINVAL);
	bad[0] = (struct ep_symbol){ 8, SIZE_MAX, "wrap" };
	ck_assert_int_eq(ep_set_symbols(p, x, bad, 1), -EINVAL);
	/* overlapping, in order and not */
	bad[0] = (struct ep_symbol){ 0, 100, "a" };
	bad[1] = (struct ep_symbol){ 99, 10, "b" };
	ck_assert_int_eq(ep_set_symbols(p, x, bad, 2), -EINVAL);
	bad[0] = (struct ep_symbol){ 50, 100, "a" };
	bad[1] = (struct ep_symbol){ 0, 51, "b" };
	ck_assert_int_eq(ep_set_symbols(p, x, bad, 2), -EINVAL);
	bad[1] = (struct ep_symbol){ 50, 10, "b" };
	ck_assert_int_eq(ep_set_symbols(p, x, bad, 2), -EINVAL);
	/* a NULL name, an empty one, a newline (one perf map line each) */
	bad[0] = (struct ep_symbol){ 0, 8, NULL };
	ck_assert_int_eq(ep_set_symbols(p, x, bad, 1), -EINVAL);
	bad[0] = (struct ep_symbol){ 0, 8, "" };
	ck_assert_int_eq(ep_set_symbols(p, x, bad, 1), -EINVAL);
	bad[0] = (struct ep_symbol){ 0, 8, "a\nb" };
	ck_assert_int_eq(ep_set_symbols(p, x, bad, 1), -EINVAL);
	/* nothing changed */
	assert_sym(x + 210, "mod_f1", 10);
	assert_sym(x + 5, "mod_f0", 5);
	assert_nosym(x + 150);
	/* touching ranges are not overlapping */
	bad[0] = (struct ep_symbol){ 0, 100, "a" };
	bad[1] = (struct ep_symbol){ 100, 924, "b" };
	ck_assert_int_eq(ep_set_symbols(p, x, bad, 2), 0);
	assert_sym(x + 99, "a", 99);
	assert_sym(x + 100, "b", 0);
	assert_sym(x + 1023, "b", 923);
	ck_assert_int_eq(ep_free(p, x), 0);
	ck_assert_int_eq(ep_set_symbols(p, x, three, 1), -EINVAL); /* freed */
	ep_pool_destroy(p);
}
END_TEST

START_TEST(test_shrink_free)
{
	struct ep_pool *p = make_pool(EP_F_PERFMAP, 0);
	struct ep_image img;
	char *x = jit(p, 4096, &img);

	perfmap_remove();
	ck_assert_int_eq(ep_finalize(p, x), 0);
	ck_assert_int_eq(ep_set_symbols(p, x, three, 3), 0);
	/* the program ends at 230: mod_f1 ends there, mod_f2 goes */
	ck_assert_int_eq(ep_shrink(p, x, 230), 0);
	assert_sym(x + 229, "mod_f1", 29);
	assert_sym(x + 0, "mod_f0", 0);
	assert_nosym(x + 230);
	assert_nosym(x + 256);
	ck_assert(map_has(x + 200, 30, "mod_f1"));
	/* and a range past the new end is refused */
	struct ep_symbol past = { 256, 8, "past" };

	ck_assert_int_eq(ep_set_symbols(p, x, &past, 1), -EINVAL);
	assert_sym(x + 229, "mod_f1", 29);
	/* freed: all gone */
	ck_assert_int_eq(ep_free(p, x), 0);
	assert_nosym(x + 0);
	assert_nosym(x + 210);
	ep_pool_destroy(p);
	perfmap_remove();
}
END_TEST

START_TEST(test_large)
{
	struct ep_pool *p = make_pool(0, 64 * 1024); /* (larger: its own mapping) */
	struct ep_image img;
	size_t size = 512 * 1024;
	char *x = jit(p, size, &img);
	const struct ep_symbol s[] = { { 0, 4096, "big_a" }, { size - 64, 64, "big_z" } };
	struct ep_info in;

	ck_assert_int_eq(ep_finalize(p, x), 0);
	ck_assert_int_eq(ep_set_symbols(p, x, s, 2), 0);
	ck_assert_int_eq(ep_lookup(x, &in), 0);
	ck_assert(in.flags & EP_INFO_LARGE);
	assert_lookup(x + size - 1, x, "big_z");
	assert_lookup(x + 4095, x, "big_a");
	assert_lookup(x + 4096, x, NULL);
	assert_sym(x + size - 64, "big_z", 0);
	ep_pool_destroy(p);
	assert_nosym(x + size - 64);
}
END_TEST

START_TEST(test_many)
{
	struct ep_pool *p = make_pool(0, 0);
	struct ep_image img;
	enum { N = 10000, FN = 32 };
	char *x = jit(p, (size_t)N * FN, &img);
	struct ep_symbol *s = calloc(N, sizeof(*s));
	char (*names)[16] = calloc(N, sizeof(*names));

	ck_assert(s && names);
	for (size_t i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "fn_%zu", i);
		s[i] = (struct ep_symbol){ i * FN, FN - 4, names[i] };
	}
	ck_assert_int_eq(ep_finalize(p, x), 0);
	ck_assert_int_eq(ep_set_symbols(p, x, s, N), 0);
	free(s); /* (copied) */
	for (size_t i = 0; i < N; i += 997) {
		assert_sym(x + i * FN + 3, names[i], 3);
		assert_lookup(x + i * FN + FN - 5, x, names[i]);
		assert_nosym(x + i * FN + FN - 2);
	}
	free(names);
	ep_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("symbols");
	TCase *tc = tcase_create("symbols");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_symbolize_and_lookup);
	tcase_add_test(tc, test_replace_remove);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_shrink_free);
	tcase_add_test(tc, test_large);
	tcase_add_test(tc, test_many);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
