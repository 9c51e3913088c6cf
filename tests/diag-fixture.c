/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-fixture.c - check_diag's fixture: the pool every test gets (setup,
 * teardown), jit() and the perf map's lines (diag-suite.h).
 */
#include "config.h"

#include "diag-suite.h"

struct ep_pool *diag_pool;

struct ep_pool *diag_make_pool(unsigned flags)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD, .flags = flags };
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(&cfg, &p);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	return p;
}

void diag_setup(void)
{
	diag_pool = diag_make_pool(0);
}

void diag_teardown(void)
{
	char path[64];

	ep_pool_destroy(diag_pool);
	diag_pool = NULL;
	/* with EXECPACK_PERFMAP=1 every test writes a perf map: leave none */
	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	unlink(path);
}

void *diag_jit(struct ep_pool *p, size_t size, uint32_t v)
{
	int rc;
	void *exec = tu_jit_ret(p, size, v, &rc);

	ck_assert_msg(exec != NULL, "jit: %s", ep_strerror(rc));
	return exec;
}

int diag_map_has(const char *want)
{
	char path[64], line[512];
	int found = 0;

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strcmp(line, want))
			found = 1;
	fclose(f);
	return found;
}
