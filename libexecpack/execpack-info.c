/*
 * execpack-info - which libexecpack backends work on this machine, which one
 * EP_BACKEND_AUTO picks, and why each other one was not picked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execpack.h"

static void sysctl_line(const char *label, const char *path)
{
	FILE *f = fopen(path, "re");
	char buf[64] = "n/a";

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			snprintf(buf, sizeof(buf), "n/a");
		fclose(f);
		buf[strcspn(buf, "\n")] = 0;
	}
	printf("  %-28s %s\n", label, buf);
}

static int usage(FILE *out, int rc)
{
	fprintf(out,
		"usage: execpack-info [--quiet] [--path PATH]\n"
		"Prints which libexecpack backends work here and which one AUTO picks.\n"
		"  --path PATH  hugetlbfs mount or kmod device node to probe with\n"
		"  --quiet      print only the backend AUTO picks\n"
		"Exit status: 0 when AUTO finds a backend, 1 when none works.\n");
	return rc;
}

int main(int argc, char **argv)
{
	static const struct {
		enum ep_backend b;
		const char *name;
	} backends[] = {
		{ EP_BACKEND_HUGETLB, "hugetlb" },
		{ EP_BACKEND_MEMFD, "memfd" },
		{ EP_BACKEND_KMOD, "kmod" },
	};
	struct ep_config cfg = { .sz = sizeof(cfg) };
	int quiet = 0;
	char why[512];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q"))
			quiet = 1;
		else if (!strcmp(argv[i], "--path") && i + 1 < argc)
			cfg.path = argv[++i];
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return usage(stdout, 0);
		else
			return usage(stderr, 2);
	}

	int rc = ep_backend_probe(EP_BACKEND_AUTO, &cfg, why, sizeof(why));

	if (quiet) {
		if (rc) {
			fprintf(stderr, "execpack-info: no backend works: %s\n", ep_strerror(rc));
			return 1;
		}
		printf("%s\n", why);
		return 0;
	}
	const char *env = getenv("EXECPACK_BACKEND");

	printf("libexecpack %s\n\nbackends (in AUTO's order):\n", ep_version());
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		char r[512];
		int brc = ep_backend_probe(backends[i].b, &cfg, r, sizeof(r));

		if (brc == 0)
			printf("  %-8s works\n", backends[i].name);
		else
			printf("  %-8s unavailable: %s [%s]\n", backends[i].name,
			       r[0] ? r : ep_strerror(brc), ep_strerror(brc));
	}
	printf("\nAUTO picks: ");
	if (rc == 0) {
		printf("%s%s\n", why, env && *env ? " (EXECPACK_BACKEND is set)" : "");
		struct ep_pool *pool;

		if (ep_pool_create(&cfg, &pool) == 0) {
			const char *reasons = ep_pool_reasons(pool);

			if (reasons && *reasons)
				printf("passed over: %s\n", reasons);
			ep_pool_destroy(pool);
		}
	} else {
		printf("nothing works: %s\n", why[0] ? why : ep_strerror(rc));
	}
	printf("\nsystem:\n");
	sysctl_line("vm.nr_hugepages", "/proc/sys/vm/nr_hugepages");
	sysctl_line("free 2 MiB huge pages", "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
	sysctl_line("vm.memfd_noexec", "/proc/sys/vm/memfd_noexec");
	sysctl_line("vm.max_map_count", "/proc/sys/vm/max_map_count");
	printf("  %-28s %s\n", "EXECPACK_BACKEND", env && *env ? env : "(unset)");
	return rc ? 1 : 0;
}
