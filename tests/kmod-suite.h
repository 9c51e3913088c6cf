/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kmod-suite.h - what check_kmod's files share: the device's path and page
 * size (set by main(), check_kmod.c), the raw device's calls, a pool on it,
 * and each family's function that adds its tests to the suite.
 */
#ifndef EP_TESTS_KMOD_SUITE_H
#define EP_TESTS_KMOD_SUITE_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#include "execpack.h"
#include "kmod/execpack_uapi.h"
#include "testutil.h"

extern const char *dev_path;
extern size_t page;

/* ---- raw device helpers --------------------------------------------------- */

static inline int dev_open(void)
{
	int fd = open(dev_path, O_RDWR | O_CLOEXEC);

	ck_assert_msg(fd >= 0, "open %s: %s", dev_path, strerror(errno));
	return fd;
}

/* 0 or -errno */
static inline int xioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
}

static inline int create(int fd, uint64_t len, const void *pat, uint32_t plen,
			 struct execpack_create *out)
{
	struct execpack_create c = {
		.size = sizeof(c), .len = len, .pattern = (uintptr_t)pat, .pattern_len = plen,
	};
	int rc = xioctl(fd, EXECPACK_IOC_CREATE, &c);

	if (out)
		*out = c;
	return rc;
}

static inline int copy_in(int fd, uint32_t id, uint64_t off, const void *src, uint64_t len)
{
	struct execpack_copy c = {
		.size = sizeof(c), .id = id, .off = off, .src = (uintptr_t)src, .len = len,
	};

	return xioctl(fd, EXECPACK_IOC_COPY, &c);
}

static inline int fill_range(int fd, uint32_t id, uint64_t off, uint64_t len)
{
	struct execpack_fill f = { .size = sizeof(f), .id = id, .off = off, .len = len };

	return xioctl(fd, EXECPACK_IOC_FILL, &f);
}

static inline int destroy(int fd, uint32_t id)
{
	struct execpack_destroy d = { .size = sizeof(d), .id = id };

	return xioctl(fd, EXECPACK_IOC_DESTROY, &d);
}

static inline struct execpack_info info(int fd)
{
	struct execpack_info i = { .size = sizeof(i) };

	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_INFO, &i), 0);
	return i;
}

static inline struct ep_pool *kmod_pool(size_t pack_size)
{
	struct ep_config cfg = {
		.sz = sizeof(cfg), .backend = EP_BACKEND_KMOD, .pack_size = pack_size,
		.path = dev_path,
	};
	struct ep_pool *pool = NULL;
	int rc = ep_pool_create(&cfg, &pool);

	ck_assert_msg(rc == 0, "ep_pool_create(kmod): %s", ep_strerror(rc));
	ck_assert_str_eq(ep_pool_backend(pool), "kmod");
	return pool;
}

/* Mappings of the device in /proc/self/maps: total, and how many writable. */
static inline void dev_mappings(int *total, int *writable)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[1024];

	ck_assert_ptr_nonnull(f);
	*total = *writable = 0;
	while (fgets(line, sizeof(line), f)) {
		char perms[8] = "";

		if (!strstr(line, "execpack") || sscanf(line, "%*x-%*x %7s", perms) != 1)
			continue;
		(*total)++;
		if (perms[1] == 'w')
			(*writable)++;
	}
	fclose(f);
}


void kmod_add_api_tests(TCase *tc);
void kmod_add_device_tests(TCase *tc);
void kmod_add_race_tests(TCase *tc);

#endif
