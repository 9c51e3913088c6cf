/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_errors.c - ep_strerror() against the sources themselves.
 *
 * The library's sources and its kernel module are read at test time and
 * every errno constant they negate (return -EFOO, rc = -EFOO, ...) must get
 * a text of its own from ep_strerror(), so a code added later without a
 * message fails here.  The same scan checks that the library never calls
 * strerror(), which is not thread-safe.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execpack.h"

#ifndef EP_TOP_SRCDIR
#define EP_TOP_SRCDIR "."
#endif

static const char *srcdir(void)
{
	const char *d = getenv("top_srcdir");

	return d && *d ? d : EP_TOP_SRCDIR;
}

/* The file's text with comments and string and character literals blanked,
 * so that neither words in comments nor format strings count. */
static char *read_code(const char *path)
{
	FILE *f = fopen(path, "re");

	ck_assert_msg(f != NULL, "cannot open %s", path);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);

	ck_assert_int_ge(n, 0);
	rewind(f);
	char *s = malloc((size_t)n + 1);

	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(fread(s, 1, (size_t)n, f), (size_t)n);
	s[n] = '\0';
	fclose(f);
	for (char *p = s; *p; p++) {
		if (p[0] == '/' && p[1] == '*') {
			char *e = strstr(p + 2, "*/");
			char *end = e ? e + 2 : p + strlen(p);

			memset(p, ' ', (size_t)(end - p));
			p = end - 1;
		} else if (p[0] == '/' && p[1] == '/') {
			while (*p && *p != '\n')
				*p++ = ' ';
			if (!*p)
				break;
		} else if (*p == '"' || *p == '\'') {
			char q = *p++;

			while (*p && *p != q) {
				if (*p == '\\' && p[1])
					*p++ = ' ';
				*p++ = ' ';
			}
			if (!*p)
				break;
		}
	}
	return s;
}

static bool ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

/* Calls fn for each C file of the library and of the kernel module. */
static int for_each_source(void (*fn)(const char *path, const char *code, void *arg), void *arg)
{
	static const char *const dirs[] = { "libexecpack", "libexecpack/kmod" };
	int files = 0;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char dir[4096];

		snprintf(dir, sizeof(dir), "%s/%s", srcdir(), dirs[i]);
		DIR *d = opendir(dir);

		ck_assert_msg(d != NULL, "cannot read %s (top_srcdir=%s)", dir, srcdir());
		for (struct dirent *de; (de = readdir(d));) {
			size_t len = strlen(de->d_name);

			if (len < 3 || strcmp(de->d_name + len - 2, ".c") != 0)
				continue;
			char path[8192];

			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			char *code = read_code(path);

			fn(path, code, arg);
			free(code);
			files++;
		}
		closedir(d);
	}
	return files;
}

#ifdef HAVE_STRERRORNAME_NP
/* Names the kernel uses internally and never hands to user space. */
static const char *const kernel_only[] = { "ERESTARTSYS", "ERESTARTNOINTR", "ENOIOCTLCMD" };

static int errno_by_name(const char *name)
{
	static const struct {
		const char *name;
		int value;
	} aliases[] = { { "ENOTSUP", ENOTSUP }, { "EWOULDBLOCK", EWOULDBLOCK },
			{ "EDEADLOCK", EDEADLOCK } };

	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcmp(name, aliases[i].name) == 0)
			return aliases[i].value;
	for (int e = 1; e < 4096; e++) {
		const char *n = strerrorname_np(e);

		if (n && strcmp(n, name) == 0)
			return e;
	}
	return 0;
}

struct seen {
	int codes[256];
	char where[256][64]; /* the first file that returns it */
	size_t n;
	bool has_nametoolong, has_proto;
};

static void collect(const char *path, const char *code, void *arg)
{
	struct seen *s = arg;

	for (const char *p = code; (p = strstr(p, "-E")); p += 2) {
		if (p > code && ident_char(p[-1]))
			continue;
		size_t len = 1;

		while ((p[1 + len] >= 'A' && p[1 + len] <= 'Z') || (p[1 + len] >= '0' && p[1 + len] <= '9'))
			len++;
		if (len < 2 || ident_char(p[1 + len]))
			continue;
		char name[32];

		if (len >= sizeof(name))
			continue;
		memcpy(name, p + 1, len);
		name[len] = '\0';
		bool internal = false;

		for (size_t i = 0; i < sizeof(kernel_only) / sizeof(kernel_only[0]); i++)
			internal |= strcmp(name, kernel_only[i]) == 0;
		if (internal)
			continue;
		int e = errno_by_name(name);

		ck_assert_msg(e > 0, "%s: -%s is not an errno name this C library knows", path, name);
		s->has_nametoolong |= e == ENAMETOOLONG;
		s->has_proto |= e == EPROTO;
		bool dup = false;

		for (size_t i = 0; i < s->n; i++)
			dup |= s->codes[i] == e;
		if (dup)
			continue;
		ck_assert_uint_lt(s->n, sizeof(s->codes) / sizeof(s->codes[0]));
		snprintf(s->where[s->n], sizeof(s->where[0]), "%s", path + strlen(srcdir()) + 1);
		s->codes[s->n++] = e;
	}
}
#endif

START_TEST(test_every_returned_errno_has_text)
{
#ifdef HAVE_STRERRORNAME_NP
	static struct seen s;
	const char *unknown = ep_strerror(-4000);

	s.n = 0;
	ck_assert_str_eq(unknown, "Unknown error");
	ck_assert_int_gt(for_each_source(collect, &s), 5);
	/* the scan is not vacuous: it sees the codes of ep_set_name() and of
	 * the kmod backend's ABI check */
	ck_assert_msg(s.has_nametoolong && s.has_proto && s.n >= 15,
		      "the scan found only %zu codes", s.n);
	for (size_t i = 0; i < s.n; i++) {
		const char *t = ep_strerror(-s.codes[i]);

		ck_assert_msg(strcmp(t, unknown) != 0, "ep_strerror(-%s) (returned in %s) is \"%s\"",
			      strerrorname_np(s.codes[i]), s.where[i], t);
		ck_assert_str_eq(ep_strerror(s.codes[i]), t);
		for (size_t j = 0; j < i; j++)
			ck_assert_msg(strcmp(t, ep_strerror(-s.codes[j])) != 0,
				      "-%s and -%s have the same text \"%s\"",
				      strerrorname_np(s.codes[i]), strerrorname_np(s.codes[j]), t);
	}
#else
	printf("no strerrorname_np() in this C library: errno names not checked\n");
#endif
}
END_TEST

static void find_strerror(const char *path, const char *code, void *arg)
{
	int *calls = arg;

	for (const char *p = code; (p = strstr(p, "strerror")); p += 8) {
		const char *q = p + 8;

		if (p > code && ident_char(p[-1]))
			continue; /* ep_strerror */
		while (*q == ' ' || *q == '\t')
			q++;
		if (*q != '(')
			continue;
		(*calls)++;
		fprintf(stderr, "%s: calls strerror(), which is not thread-safe\n", path);
	}
}

START_TEST(test_no_strerror_in_library)
{
	int calls = 0;

	for_each_source(find_strerror, &calls);
	ck_assert_int_eq(calls, 0);
}
END_TEST

START_TEST(test_edge_codes)
{
	ck_assert_str_eq(ep_strerror(0), "Success");
	ck_assert_str_eq(ep_strerror(INT_MIN), "Unknown error");
	ck_assert_str_eq(ep_strerror(INT_MAX), "Unknown error");
	ck_assert_str_eq(ep_strerror(EINVAL), ep_strerror(-EINVAL));
	ck_assert_ptr_nonnull(strstr(ep_strerror(-ENAMETOOLONG), "EP_NAME_MAX"));
	ck_assert_ptr_nonnull(strstr(ep_strerror(-EPROTO), "module"));
}
END_TEST

/* One version: the header's macros, ep_version() and the package's
 * (configure reads it from the header; the tarball and execpack.pc use it). */
START_TEST(test_version_single_source)
{
	char want[64];

	snprintf(want, sizeof(want), "%d.%d.%d", EP_VERSION_MAJOR, EP_VERSION_MINOR,
		 EP_VERSION_PATCH);
	ck_assert_str_eq(ep_version(), want);
	ck_assert_str_eq(PACKAGE_VERSION, want);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("errors");
	TCase *tc = tcase_create("strerror");

	tcase_add_test(tc, test_every_returned_errno_has_text);
	tcase_add_test(tc, test_no_strerror_in_library);
	tcase_add_test(tc, test_edge_codes);
	tcase_add_test(tc, test_version_single_source);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
