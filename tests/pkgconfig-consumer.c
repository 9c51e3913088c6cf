/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pkgconfig-consumer.c - the smallest real user of an installed libexecpack.
 *
 * Built outside the source tree with nothing but
 * `pkg-config --cflags --libs execpack` (make installcheck, and the Debian
 * package check), so it uses only the public header.  It JITs
 * `mov eax, 42; ret`, runs it, and prints the library version and backend.
 *
 * Usage: pkgconfig-consumer [EXPECTED-VERSION]
 * Exit: 0 ok, 1 failure, 77 no executable memory on this system.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <execpack.h>

int main(int argc, char **argv)
{
	static const unsigned char code[] = {
		0xb8, 0x2a, 0x00, 0x00, 0x00, /* mov eax, 42 */
		0xc3,                         /* ret */
	};
	struct ep_config cfg;
	struct ep_pool *pool;
	struct ep_image img;
	int rc;

	if (argc > 1 && strcmp(argv[1], ep_version()) != 0) {
		fprintf(stderr, "version mismatch: library %s, pkg-config %s\n", ep_version(),
			argv[1]);
		return 1;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.sz = sizeof(cfg);
	cfg.backend = EP_BACKEND_AUTO;
	rc = ep_pool_create(&cfg, &pool);
	if (rc == -EACCES || rc == -EPERM || rc == -ENODEV) {
		printf("SKIP: no executable memory here: %s\n", ep_strerror(rc));
		return 77;
	}
	if (rc) {
		fprintf(stderr, "ep_pool_create: %s\n", ep_strerror(rc));
		return 1;
	}
	rc = ep_alloc(pool, sizeof(code), &img);
	if (rc) {
		fprintf(stderr, "ep_alloc: %s\n", ep_strerror(rc));
		goto fail;
	}
	if (img.size < sizeof(code) || !img.rw || !img.exec) {
		fprintf(stderr, "ep_alloc: bad image (size %zu)\n", img.size);
		goto fail;
	}
	memcpy(img.rw, code, sizeof(code));
	rc = ep_finalize(pool, img.exec);
	if (rc) {
		fprintf(stderr, "ep_finalize: %s\n", ep_strerror(rc));
		goto fail;
	}

	int (*fn)(void);

	/* ISO C has no function/object pointer cast; POSIX guarantees it works */
	memcpy(&fn, &img.exec, sizeof(fn));
	int got = fn();

	if (got != 42) {
		fprintf(stderr, "JIT code returned %d, expected 42\n", got);
		goto fail;
	}
	rc = ep_free(pool, img.exec);
	if (rc) {
		fprintf(stderr, "ep_free: %s\n", ep_strerror(rc));
		goto fail;
	}
	printf("libexecpack %s: backend %s: JIT code returned %d\n", ep_version(),
	       ep_pool_backend(pool), got);
	ep_pool_destroy(pool);
	return 0;
fail:
	ep_pool_destroy(pool);
	return 1;
}
