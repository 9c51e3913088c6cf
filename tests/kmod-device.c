/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kmod-device.c - check_kmod's tests of the device itself, one call at a
 * time: no writable mapping, copy and fill, bad input, an argument's size
 * limit, a context's release, the per-user limit.
 */
#include "config.h"

#include "kmod-suite.h"

START_TEST(test_dev_mmap_write_refused)
{
	int fd = dev_open();
	unsigned char pat = 0xcc;
	struct execpack_create c;

	ck_assert_int_eq(create(fd, 4 * page, &pat, 1, &c), 0);
	errno = 0;
	ck_assert_ptr_eq(mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)c.cookie),
			 MAP_FAILED);
	ck_assert_int_eq(errno, EPERM);
	/* not even a private copy-on-write view */
	ck_assert_ptr_eq(mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, (off_t)c.cookie),
			 MAP_FAILED);
	ck_assert_ptr_eq(mmap(NULL, page, PROT_WRITE | PROT_EXEC, MAP_SHARED, fd, (off_t)c.cookie),
			 MAP_FAILED);

	unsigned char *x = mmap(NULL, 4 * page, PROT_READ | PROT_EXEC, MAP_SHARED, fd,
				(off_t)c.cookie);

	ck_assert_ptr_ne(x, MAP_FAILED);
	/* filled with the pattern before anyone could map it */
	for (size_t i = 0; i < 4 * page; i++)
		ck_assert_uint_eq(x[i], 0xcc);
	/* zapped page tables come back from the pack through the fault path */
	ck_assert_int_eq(madvise(x, 4 * page, MADV_DONTNEED), 0);
	ck_assert_int_eq(copy_in(fd, c.id, page + 1, "\x90", 1), 0);
	ck_assert_uint_eq(x[page + 1], 0x90);
	ck_assert_uint_eq(x[3 * page], 0xcc);
	errno = 0;
	ck_assert_int_eq(mprotect(x, page, PROT_READ | PROT_WRITE), -1);
	ck_assert_int_eq(errno, EACCES);

	unsigned char *y = mmap(NULL, page, PROT_READ, MAP_PRIVATE, fd, (off_t)c.cookie);

	ck_assert_ptr_ne(y, MAP_FAILED);
	ck_assert_int_eq(mprotect(y, page, PROT_READ | PROT_WRITE), -1);
	ck_assert_int_eq(errno, EACCES);

	/* a view past the pack's end or of no pack at all */
	ck_assert_ptr_eq(mmap(NULL, 5 * page, PROT_READ, MAP_SHARED, fd, (off_t)c.cookie),
			 MAP_FAILED);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_eq(mmap(NULL, page, PROT_READ, MAP_SHARED, fd,
			      (off_t)(c.cookie + (1u << 30))), MAP_FAILED);
	/* mremap cannot grow it (VM_DONTEXPAND) */
	ck_assert_ptr_eq(mremap(y, page, 2 * page, MREMAP_MAYMOVE), MAP_FAILED);

	int total, writable;

	dev_mappings(&total, &writable);
	ck_assert_int_ge(total, 2);
	ck_assert_int_eq(writable, 0);
	munmap(x, 4 * page);
	munmap(y, page);
	ck_assert_int_eq(destroy(fd, c.id), 0);
	close(fd);
}
END_TEST

START_TEST(test_dev_copy_and_fill)
{
	int fd = dev_open();
	const unsigned char pat[3] = { 0xd4, 0xcc, 0x0b };
	struct execpack_create c;

	ck_assert_int_eq(create(fd, 2 * page, pat, 3, &c), 0);
	unsigned char *x = mmap(NULL, 2 * page, PROT_READ, MAP_SHARED, fd, (off_t)c.cookie);

	ck_assert_ptr_ne(x, MAP_FAILED);
	for (size_t i = 0; i < 2 * page; i++)
		ck_assert_uint_eq(x[i], pat[i % 3]);

	/* a copy across the page boundary lands exactly */
	unsigned char buf[300];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 1);
	ck_assert_int_eq(copy_in(fd, c.id, page - 100, buf, sizeof(buf)), 0);
	ck_assert_int_eq(memcmp(x + page - 100, buf, sizeof(buf)), 0);
	ck_assert_uint_eq(x[page - 101], pat[(page - 101) % 3]);
	ck_assert_uint_eq(x[page + 200], pat[(page + 200) % 3]);

	/* small stores, aligned and not */
	ck_assert_int_eq(copy_in(fd, c.id, 13, "\x01\x02\x03", 3), 0);
	ck_assert_int_eq(memcmp(x + 13, "\x01\x02\x03", 3), 0);
	ck_assert_uint_eq(x[12], pat[12 % 3]);
	ck_assert_uint_eq(x[16], pat[16 % 3]);
	ck_assert_int_eq(copy_in(fd, c.id, 24, "ABCDEFGH", 8), 0);
	ck_assert_int_eq(memcmp(x + 24, "ABCDEFGH", 8), 0);

	/* fill: the pattern restarts at the start of the range */
	ck_assert_int_eq(fill_range(fd, c.id, page - 100 + 5, 200), 0);
	ck_assert_uint_eq(x[page - 100 + 4], buf[4]);
	for (size_t i = 0; i < 200; i++)
		ck_assert_uint_eq(x[page - 95 + i], pat[i % 3]);
	ck_assert_uint_eq(x[page - 95 + 200], buf[205]);
	ck_assert_int_eq(copy_in(fd, c.id, 0, buf, 0), 0); /* empty is fine */

	munmap(x, 2 * page);
	destroy(fd, c.id);

	/* a whole page as the pattern */
	unsigned char *big = malloc(page);

	for (size_t i = 0; i < page; i++)
		big[i] = (unsigned char)(i ^ (i >> 8));
	ck_assert_int_eq(create(fd, 3 * page, big, (uint32_t)page, &c), 0);
	x = mmap(NULL, 3 * page, PROT_READ, MAP_SHARED, fd, (off_t)c.cookie);
	ck_assert_ptr_ne(x, MAP_FAILED);
	for (size_t i = 0; i < 3 * page; i++)
		ck_assert_uint_eq(x[i], big[i % page]);
	munmap(x, 3 * page);
	free(big);
	close(fd); /* release frees the pack we did not destroy */
}
END_TEST

START_TEST(test_dev_bad_input)
{
	int fd = dev_open();
	unsigned char pat[EXECPACK_PATTERN_MAX + 1] = { 0xcc };
	struct execpack_create c;

	/* create */
	ck_assert_int_eq(create(fd, 0, pat, 1, NULL), -EINVAL);
	ck_assert_int_eq(create(fd, page + 1, pat, 1, NULL), -EINVAL);
	ck_assert_int_eq(create(fd, UINT64_MAX & ~(uint64_t)(page - 1), pat, 1, NULL), -EINVAL);
	ck_assert_int_eq(create(fd, page, pat, 0, NULL), -EINVAL);
	ck_assert_int_eq(create(fd, page, pat, EXECPACK_PATTERN_MAX + 1, NULL), -EINVAL);
	ck_assert_int_eq(create(fd, page, (void *)16, 4, NULL), -EFAULT);

	struct execpack_create cf = {
		.size = sizeof(cf), .flags = 1, .len = page, .pattern = (uintptr_t)pat,
		.pattern_len = 1,
	};

	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_CREATE, &cf), -EINVAL);
	cf.flags = 0;
	cf.size = 8; /* shorter than any version */
	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_CREATE, &cf), -EINVAL);

	/* a newer, longer struct: accepted when the tail is zero */
	struct {
		struct execpack_create c;
		uint64_t future;
	} grown = { { .size = sizeof(grown), .len = page, .pattern = (uintptr_t)pat,
		      .pattern_len = 1 }, 0 };

	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_CREATE, &grown), 0);
	ck_assert_uint_ne(grown.c.id, 0);
	ck_assert_int_eq(destroy(fd, grown.c.id), 0);
	grown.future = 1;
	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_CREATE, &grown), -E2BIG);
	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_CREATE, (void *)8), -EFAULT);

	/* copy / fill ranges, with overflow */
	ck_assert_int_eq(create(fd, 2 * page, pat, 1, &c), 0);
	unsigned char buf[64] = { 0 };

	ck_assert_int_eq(copy_in(fd, c.id + 1000, 0, buf, 1), -ENOENT);
	ck_assert_int_eq(copy_in(fd, c.id, 2 * page, buf, 1), -ERANGE);
	ck_assert_int_eq(copy_in(fd, c.id, 2 * page - 1, buf, 2), -ERANGE);
	ck_assert_int_eq(copy_in(fd, c.id, UINT64_MAX - 7, buf, 16), -ERANGE);
	ck_assert_int_eq(copy_in(fd, c.id, 16, buf, UINT64_MAX - 7), -ERANGE);
	ck_assert_int_eq(copy_in(fd, c.id, 0, (void *)16, 32), -EFAULT);
	ck_assert_int_eq(copy_in(fd, c.id, 0, (void *)16, 4), -EFAULT);
	ck_assert_int_eq(copy_in(fd, c.id, 2 * page, buf, 0), 0);
	ck_assert_int_eq(fill_range(fd, c.id, UINT64_MAX, 2), -ERANGE);
	ck_assert_int_eq(fill_range(fd, c.id, 0, 2 * page + 1), -ERANGE);
	ck_assert_int_eq(fill_range(fd, c.id + 1000, 0, 1), -ENOENT);
	ck_assert_int_eq(fill_range(fd, c.id, 0, 2 * page), 0);

	/* destroy, twice */
	ck_assert_int_eq(destroy(fd, c.id), 0);
	ck_assert_int_eq(destroy(fd, c.id), -ENOENT);
	ck_assert_int_eq(destroy(fd, 0xffffffffu), -ENOENT);
	ck_assert_int_eq(copy_in(fd, c.id, 0, buf, 1), -ENOENT);

	/* unknown commands */
	ck_assert_int_eq(xioctl(fd, _IOW(EXECPACK_IOC_MAGIC, 99, struct execpack_fill), buf),
			 -ENOTTY);
	ck_assert_int_eq(xioctl(fd, _IO('T', 1), buf), -ENOTTY);
	close(fd);
}
END_TEST


/*
 * An argument may be at most a page (as openat2 and clone3 take theirs):
 * larger sizes are E2BIG at once, not a scan of up to 4 GiB of user memory
 * for a non-zero byte.  The argument sits at the start of 16 MiB of zero
 * pages followed by an unmapped page, so a module that scans gets there and
 * says EFAULT (slowly) instead, and a page-sized argument is readable.
 */
START_TEST(test_dev_arg_size_limit)
{
	int fd = dev_open();
	size_t zlen = 16u << 20;
	unsigned char pat = 0xcc;
	unsigned char *z = mmap(NULL, zlen + page, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	ck_assert_ptr_ne(z, MAP_FAILED);
	ck_assert_int_eq(munmap(z + zlen, page), 0);

	static const struct {
		const char *name;
		unsigned long cmd;
	} cmds[] = {
		{ "INFO", EXECPACK_IOC_INFO },	   { "CREATE", EXECPACK_IOC_CREATE },
		{ "COPY", EXECPACK_IOC_COPY },	   { "FILL", EXECPACK_IOC_FILL },
		{ "DESTROY", EXECPACK_IOC_DESTROY },
	};
	const uint32_t sizes[] = { 0xfffffff8u, (uint32_t)page + 8, (uint32_t)page + 1,
				   2 * (uint32_t)page, 0xffffffffu };

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
			struct timespec t0, t1;

			memset(z, 0, page);
			if (cmds[i].cmd == EXECPACK_IOC_CREATE) /* else valid but for the size */
				*(struct execpack_create *)z = (struct execpack_create){
					.len = page, .pattern = (uintptr_t)&pat, .pattern_len = 1,
				};
			*(uint32_t *)z = sizes[j];
			clock_gettime(CLOCK_MONOTONIC, &t0);
			int rc = xioctl(fd, cmds[i].cmd, z);

			clock_gettime(CLOCK_MONOTONIC, &t1);
			long ms = (t1.tv_sec - t0.tv_sec) * 1000 +
				  (t1.tv_nsec - t0.tv_nsec) / 1000000;

			ck_assert_msg(rc == -E2BIG, "%s with size %#x: %d (%s), not E2BIG",
				      cmds[i].name, sizes[j], rc, strerror(-rc));
			ck_assert_msg(ms < 2000, "%s with size %#x took %ld ms", cmds[i].name,
				      sizes[j], ms);
		}
	}

	/* exactly a page is still a (newer) struct with a zero tail */
	memset(z, 0, page);
	struct execpack_info *in = (struct execpack_info *)z;

	in->size = (uint32_t)page;
	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_INFO, in), 0);
	ck_assert_uint_eq(in->abi_version, EXECPACK_ABI_VERSION);
	ck_assert_uint_eq(in->page_size, page);
	z[page - 1] = 1;
	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_INFO, in), -E2BIG);

	memset(z, 0, page);
	struct execpack_create *cr = (struct execpack_create *)z;

	*cr = (struct execpack_create){
		.size = (uint32_t)page, .len = page, .pattern = (uintptr_t)&pat, .pattern_len = 1,
	};
	ck_assert_int_eq(xioctl(fd, EXECPACK_IOC_CREATE, cr), 0);
	ck_assert_uint_ne(cr->id, 0);
	ck_assert_int_eq(destroy(fd, cr->id), 0);

	munmap(z, zlen);
	close(fd);
}
END_TEST

/* Each open is a context: its packs and their charge go with its file. */
START_TEST(test_dev_context_release)
{
	int a = dev_open(), b = dev_open();
	unsigned char pat = 0xcc;
	struct execpack_create c;
	uint64_t base = info(b).user_used;

	ck_assert_int_eq(create(a, 8 * page, &pat, 1, &c), 0);
	ck_assert_uint_eq(info(b).user_used, base + 8 * page);
	/* ids are per context */
	ck_assert_int_eq(destroy(b, c.id), -ENOENT);

	/* destroyed while mapped: the mapping keeps the pages and the charge */
	unsigned char *x = mmap(NULL, 8 * page, PROT_READ, MAP_SHARED, a, (off_t)c.cookie);

	ck_assert_ptr_ne(x, MAP_FAILED);
	ck_assert_int_eq(destroy(a, c.id), 0);
	ck_assert_uint_eq(x[5 * page], 0xcc);
	ck_assert_uint_eq(info(b).user_used, base + 8 * page);
	munmap(x, 8 * page);
	ck_assert_uint_eq(info(b).user_used, base);

	ck_assert_int_eq(create(a, 4 * page, &pat, 1, &c), 0);
	ck_assert_uint_eq(info(b).user_used, base + 4 * page);
	close(a);
	ck_assert_uint_eq(info(b).user_used, base);
	close(b);
}
END_TEST

/* The per-user limit (module parameter user_limit) gives EPERM. */
START_TEST(test_dev_user_limit)
{
	int fd = dev_open();
	struct execpack_info in = info(fd);
	unsigned char pat = 0xcc;
	struct execpack_create c;

	ck_assert_uint_eq(in.abi_version, EXECPACK_ABI_VERSION);
	ck_assert_uint_eq(in.page_size, page);
	ck_assert_msg(in.user_limit > 0, "module loaded without a user_limit");
	ck_assert_uint_le(in.user_used, in.user_limit);

	uint64_t room = (in.user_limit - in.user_used) & ~(uint64_t)(page - 1);

	ck_assert_uint_gt(room, 0);
	ck_assert_int_eq(create(fd, in.user_limit + page, &pat, 1, NULL), -EPERM);
	if (room <= in.max_pack) {
		ck_assert_int_eq(create(fd, room, &pat, 1, &c), 0);
		ck_assert_int_eq(create(fd, page, &pat, 1, NULL), -EPERM);
		ck_assert_int_eq(destroy(fd, c.id), 0);
	}
	ck_assert_int_eq(create(fd, page, &pat, 1, &c), 0);
	ck_assert_int_eq(destroy(fd, c.id), 0);

	/* the same through the library */
	struct ep_pool *pool = kmod_pool(0);
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(pool, in.user_limit + page, &img), -EPERM);
	ck_assert_int_eq(ep_alloc(pool, 64, &img), 0);
	ep_pool_destroy(pool);
	close(fd);
}
END_TEST

/* (in the order the suite runs them) */
void kmod_add_device_tests(TCase *tc)
{
	tcase_add_test(tc, test_dev_mmap_write_refused);
	tcase_add_test(tc, test_dev_copy_and_fill);
	tcase_add_test(tc, test_dev_bad_input);
	tcase_add_test(tc, test_dev_context_release);
	tcase_add_test(tc, test_dev_arg_size_limit);
	tcase_add_test(tc, test_dev_user_limit);
}
