/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * secure-env-prog.c - run by tests/secure-env.sh, as a plain program and
 * as a set-user-ID copy: creates a pool with EP_BACKEND_AUTO (so that
 * EXECPACK_BACKEND counts), with EP_F_JITDUMP when the argument is
 * "jitdump" (EXECPACK_JITDUMP_DIR counts) and no flag when it is "env"
 * (EXECPACK_JITDUMP and EXECPACK_PERFMAP count), names one function,
 * finalizes and runs it, and prints one line: its pid, real and effective
 * uid, AT_SECURE and the pool's backend.  Exit 0, or 1 with the library's
 * error.
 */
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "execpack.h"
#include "testutil.h"

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "jitdump";
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_AUTO };
	struct ep_pool *pool = NULL;
	struct ep_image img;
	int rc;

	if (!strcmp(mode, "jitdump"))
		cfg.flags = EP_F_JITDUMP;
	else if (strcmp(mode, "env") != 0) {
		fprintf(stderr, "usage: %s jitdump|env\n", argv[0]);
		return 2;
	}
	printf("pid %ld uid %u euid %u secure %lu", (long)getpid(), (unsigned)getuid(),
	       (unsigned)geteuid(), getauxval(AT_SECURE));
	fflush(stdout);
	rc = ep_pool_create(&cfg, &pool);
	if (rc == 0)
		rc = ep_alloc(pool, 64, &img);
	if (rc == 0) {
		tu_emit_sized(img.rw, 64, 7);
		rc = ep_set_name(pool, img.exec, "secure_env_code");
	}
	if (rc == 0)
		rc = ep_finalize(pool, img.exec);
	if (rc != 0) {
		printf("\nsecure-env-prog: %s\n", ep_strerror(rc));
		return 1;
	}
	rc = tu_as_fn(img.exec)() == 7 ? 0 : 1;
	printf(" backend %s\n", ep_pool_backend(pool));
	ep_pool_destroy(pool);
	return rc;
}
