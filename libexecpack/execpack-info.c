/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * execpack-info - which libexecpack backends work on this machine, which one
 * EP_BACKEND_AUTO picks, and why each other one was not picked; as text for
 * people or, with --json, as one JSON object for scripts.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execpack.h"
#include "internal.h"

/* What is printed, gathered first so that both formats say the same. */
struct backend_info {
	const char *name;
	int rc; /* 0: works, else -errno */
	char why[512];
};

struct sysctl_info {
	const char *label, *key, *path; /* key: its name in --json */
	char value[64]; /* "" when unreadable */
};

/* A hardware guard of a pool of AUTO's pick (ep_pool_guards()). */
struct guard_info {
	const char *name; /* "pkey", "bti" */
	unsigned bit;
	bool on;
	char why[256]; /* why not, when !on */
};

struct info {
	struct backend_info backends[3];
	int auto_rc;
	char auto_why[512];
	char passed_over[1024];
	struct guard_info guards[2]; /* known when auto_rc is 0 */
	const char *env; /* EXECPACK_BACKEND, NULL when unset or empty */
	const char *env_pkey, *env_bti; /* EXECPACK_PKEY, EXECPACK_BTI */
	struct sysctl_info sys[6];
	char huge_label[48], huge_key[48], huge_path[96];
};

#define NSYS 6

static void sysctl_read(struct sysctl_info *s)
{
	FILE *f = fopen(s->path, "re");

	if (!s->path)
		return; /* a value of its own */
	s->value[0] = 0;
	if (!f)
		return;
	if (!fgets(s->value, sizeof(s->value), f))
		s->value[0] = 0;
	fclose(f);
	s->value[strcspn(s->value, "\n")] = 0;
}

/* Which guards the pool has, and each missing one's reason, from the
 * "name: reason; name: reason" of ep_pool_guards(). */
static void guards_of(struct info *in, const struct ep_pool *pool)
{
	char why[1024];
	unsigned g = ep_pool_guards(pool, why, sizeof(why));
	static const struct { const char *name; unsigned bit; } all[2] = {
		{ "pkey", EP_GUARD_PKEY }, { "bti", EP_GUARD_BTI },
	};

	for (size_t i = 0; i < 2; i++) {
		struct guard_info *gi = &in->guards[i];
		size_t n = strlen(all[i].name);

		gi->name = all[i].name;
		gi->bit = all[i].bit;
		gi->on = (g & all[i].bit) != 0;
		for (char *p = why; !gi->on && *p;) {
			char *end = strstr(p, "; ");
			size_t len = end ? (size_t)(end - p) : strlen(p);

			if (!strncmp(p, all[i].name, n) && !strncmp(p + n, ": ", 2))
				snprintf(gi->why, sizeof(gi->why), "%.*s", (int)(len - n - 2), p + n + 2);
			p += len + (end ? 2 : 0);
		}
	}
}

static void gather(struct info *in, const struct ep_config *cfg)
{
	static const struct {
		enum ep_backend b;
		const char *name;
	} order[] = {
		{ EP_BACKEND_HUGETLB, "hugetlb" },
		{ EP_BACKEND_MEMFD, "memfd" },
		{ EP_BACKEND_KMOD, "kmod" },
	};
	static const char *const sys[][3] = {
		{ "vm.nr_hugepages", "vm.nr_hugepages", "/proc/sys/vm/nr_hugepages" },
		{ NULL, NULL, NULL }, /* the free huge pages of the default size, below */
		{ "vm.memfd_noexec", "vm.memfd_noexec", "/proc/sys/vm/memfd_noexec" },
		{ "vm.max_map_count", "vm.max_map_count", "/proc/sys/vm/max_map_count" },
		{ "page size", "page_size", NULL },
		{ "huge page size", "huge_page_size", NULL },
	};
	const char *env = secure_getenv("EXECPACK_BACKEND");

	memset(in, 0, sizeof(*in));
	in->env = env && *env ? env : NULL;
	in->env_pkey = getenv("EXECPACK_PKEY");
	in->env_bti = getenv("EXECPACK_BTI");
	in->auto_rc = ep_backend_probe(EP_BACKEND_AUTO, cfg, in->auto_why, sizeof(in->auto_why));
	for (size_t i = 0; i < 3; i++) {
		struct backend_info *b = &in->backends[i];

		b->name = order[i].name;
		b->rc = ep_backend_probe(order[i].b, cfg, b->why, sizeof(b->why));
		if (b->rc && !b->why[0])
			snprintf(b->why, sizeof(b->why), "%s", ep_strerror(b->rc));
	}
	if (in->auto_rc == 0) {
		struct ep_pool *pool;

		if (ep_pool_create(cfg, &pool) == 0) {
			const char *r = ep_pool_reasons(pool);

			snprintf(in->passed_over, sizeof(in->passed_over), "%s", r ? r : "");
			guards_of(in, pool);
			ep_pool_destroy(pool);
		}
	}
	/* the sizes of the running kernel: 4, 16 or 64 KiB pages; the huge
	 * page vm.nr_hugepages reserves is 2 MiB with 4 KiB ones, 32 MiB with
	 * 16 KiB */
	size_t huge_kb = ep__huge_page_size() >> 10;

	snprintf(in->huge_label, sizeof(in->huge_label), "free %zu KiB huge pages", huge_kb);
	snprintf(in->huge_key, sizeof(in->huge_key), "free_hugepages_%zukB", huge_kb);
	snprintf(in->huge_path, sizeof(in->huge_path),
		 "/sys/kernel/mm/hugepages/hugepages-%zukB/free_hugepages", huge_kb);
	for (size_t i = 0; i < NSYS; i++) {
		in->sys[i].label = i == 1 ? in->huge_label : sys[i][0];
		in->sys[i].key = i == 1 ? in->huge_key : sys[i][1];
		in->sys[i].path = i == 1 ? in->huge_path : sys[i][2];
		sysctl_read(&in->sys[i]);
	}
	snprintf(in->sys[4].value, sizeof(in->sys[4].value), "%zu", ep__page_size());
	snprintf(in->sys[5].value, sizeof(in->sys[5].value), "%zu", ep__huge_page_size());
}

static void print_text(const struct info *in)
{
	printf("libexecpack %s\n\nbackends (in AUTO's order):\n", ep_version());
	for (size_t i = 0; i < 3; i++) {
		const struct backend_info *b = &in->backends[i];

		if (b->rc == 0)
			printf("  %-8s works\n", b->name);
		else
			printf("  %-8s unavailable: %s [%s]\n", b->name, b->why, ep_strerror(b->rc));
	}
	printf("\nAUTO picks: ");
	if (in->auto_rc == 0) {
		printf("%s%s\n", in->auto_why, in->env ? " (EXECPACK_BACKEND is set)" : "");
		if (!strcmp(in->auto_why, "hugetlb") && !in->env)
			printf("  (small pages until a thread's heap has committed %zu KiB of code "
			       "(a pack: one huge page), huge pages after: a huge page pays off only "
			       "for more code, and is resident whole from the start)\n",
			       ep__huge_page_size() >> 10);
		if (in->passed_over[0])
			printf("passed over: %s\n", in->passed_over);
	} else {
		printf("nothing works: %s\n", in->auto_why[0] ? in->auto_why : ep_strerror(in->auto_rc));
	}
	if (in->auto_rc == 0) {
		printf("\nhardware guards (of a pool of AUTO's pick):\n");
		for (size_t i = 0; i < 2; i++) {
			const struct guard_info *g = &in->guards[i];

			if (g->on)
				printf("  %-8s on: %s\n", g->name,
				       g->bit == EP_GUARD_PKEY
					       ? "the writable alias is under a protection key"
					       : "the code is mapped PROT_BTI");
			else
				printf("  %-8s off: %s\n", g->name, g->why);
		}
	}
	printf("\nsystem:\n");
	for (size_t i = 0; i < NSYS; i++)
		printf("  %-28s %s\n", in->sys[i].label, in->sys[i].value[0] ? in->sys[i].value : "n/a");
	printf("  %-28s %s\n", "EXECPACK_BACKEND", in->env ? in->env : "(unset)");
	printf("  %-28s %s\n", "EXECPACK_PKEY", in->env_pkey ? in->env_pkey : "(unset)");
	printf("  %-28s %s\n", "EXECPACK_BTI", in->env_bti ? in->env_bti : "(unset)");
}

/* Length of the valid UTF-8 sequence at s (1 to 4), or 0. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n;
	unsigned c = s[0], min;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, min = 0x10000;
	else
		return 0;
	unsigned cp = c & (0x7f >> n);

	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* s as a JSON string; NULL as null.  Bytes that are not UTF-8 (a --path
 * or EXECPACK_BACKEND may hold any) become U+FFFD, so the output always
 * parses. */
static void json_str(const char *s)
{
	if (!s) {
		fputs("null", stdout);
		return;
	}
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		size_t n = utf8_len(p);

		if (n == 0) {
			fputs("\\ufffd", stdout);
			p++;
		} else if (*p == '"' || *p == '\\') {
			printf("\\%c", *p++);
		} else if (*p < 0x20 || *p == 0x7f) {
			printf("\\u%04x", *p++);
		} else {
			fwrite(p, 1, n, stdout);
			p += n;
		}
	}
	putchar('"');
}

/* A sysctl as a number when it is one, else a string, or null. */
static void json_value(const char *v)
{
	char *end;

	if (!v[0]) {
		fputs("null", stdout);
		return;
	}
	errno = 0;
	long long n = strtoll(v, &end, 10);

	if (!*end && !errno && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')))
		printf("%lld", n);
	else
		json_str(v);
}

static void print_json(const struct info *in)
{
	fputs("{\n  \"version\": ", stdout);
	json_str(ep_version());
	fputs(",\n  \"backends\": [", stdout);
	for (size_t i = 0; i < 3; i++) {
		const struct backend_info *b = &in->backends[i];

		fputs(i ? ",\n    { \"name\": " : "\n    { \"name\": ", stdout);
		json_str(b->name);
		printf(", \"works\": %s", b->rc == 0 ? "true" : "false");
		if (b->rc) {
			fputs(", \"reason\": ", stdout);
			json_str(b->why);
			printf(", \"errno\": %d, \"error\": ", -b->rc);
			json_str(ep_strerror(b->rc));
		}
		fputs(" }", stdout);
	}
	fputs("\n  ],\n  \"auto\": { \"backend\": ", stdout);
	json_str(in->auto_rc == 0 ? in->auto_why : NULL);
	if (in->auto_rc == 0) {
		fputs(", \"passed_over\": ", stdout);
		json_str(in->passed_over);
	} else {
		fputs(", \"reason\": ", stdout);
		json_str(in->auto_why[0] ? in->auto_why : ep_strerror(in->auto_rc));
		printf(", \"errno\": %d", -in->auto_rc);
	}
	fputs(" },\n  \"guards\": ", stdout);
	if (in->auto_rc == 0) {
		for (size_t i = 0; i < 2; i++) {
			const struct guard_info *g = &in->guards[i];

			fputs(i ? ", " : "{ ", stdout);
			json_str(g->name);
			printf(": { \"on\": %s", g->on ? "true" : "false");
			if (!g->on) {
				fputs(", \"reason\": ", stdout);
				json_str(g->why);
			}
			fputs(" }", stdout);
		}
		fputs(" }", stdout);
	} else {
		fputs("null", stdout);
	}
	fputs(",\n  \"system\": {", stdout);
	for (size_t i = 0; i < NSYS; i++) {
		fputs(i ? ",\n    " : "\n    ", stdout);
		json_str(in->sys[i].key);
		fputs(": ", stdout);
		json_value(in->sys[i].value);
	}
	fputs("\n  },\n  \"environment\": { \"EXECPACK_BACKEND\": ", stdout);
	json_str(in->env);
	fputs(", \"EXECPACK_PKEY\": ", stdout);
	json_str(in->env_pkey);
	fputs(", \"EXECPACK_BTI\": ", stdout);
	json_str(in->env_bti);
	fputs(" }\n}\n", stdout);
}

static int usage(FILE *out, int rc)
{
	fprintf(out,
		"usage: execpack-info [--quiet | --json] [--path PATH]\n"
		"       execpack-info --version\n"
		"Prints which libexecpack backends work here and which one AUTO picks.\n"
		"  --path PATH  hugetlbfs mount or kmod device node to probe with\n"
		"  --quiet      print only the backend AUTO picks\n"
		"  --json       print the same as one JSON object\n"
		"  --version    print the library's version\n"
		"Exit status: 0 when AUTO finds a backend, 1 when none works.\n");
	return rc;
}

int main(int argc, char **argv)
{
	struct ep_config cfg = { .sz = sizeof(cfg) };
	bool quiet = false, json = false;
	struct info in;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q"))
			quiet = true;
		else if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--path") && i + 1 < argc)
			cfg.path = argv[++i];
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return usage(stdout, 0);
		else if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) {
			printf("execpack-info (libexecpack) %s\n", ep_version());
			return 0;
		} else {
			if (!strcmp(argv[i], "--path"))
				fprintf(stderr, "execpack-info: option '--path' needs an argument\n");
			else
				fprintf(stderr, "execpack-info: unknown option '%s'\n", argv[i]);
			return usage(stderr, 2);
		}
	}
	if (quiet && json) {
		fprintf(stderr, "execpack-info: --quiet and --json cannot be used together\n");
		return usage(stderr, 2);
	}
	if (quiet) {
		char why[512];
		int rc = ep_backend_probe(EP_BACKEND_AUTO, &cfg, why, sizeof(why));

		if (rc) {
			fprintf(stderr, "execpack-info: no backend works: %s\n",
				why[0] ? why : ep_strerror(rc));
			return 1;
		}
		printf("%s\n", why);
		return 0;
	}
	gather(&in, &cfg);
	if (json)
		print_json(&in);
	else
		print_text(&in);
	return in.auto_rc ? 1 : 0;
}
