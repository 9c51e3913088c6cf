/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kmod-races.c - check_kmod's tests of the device under racing calls
 * and faulting arguments: threads sharing one file, a create whose result
 * cannot be copied out, a copy whose source faults (alone and while its
 * page comes and goes), an argument's size changed during the call.
 */
#include "config.h"

#include "kmod-suite.h"

/*
 * Threads sharing one open file create, map, copy, destroy and unmap at
 * once.  Copies read from another pack's mapping whose page tables were
 * just zapped, so pinning the source faults it in (mmap_lock, and the
 * fault handler of that pack), while the other threads' mmap() calls hold
 * mmap_lock and take the context's lock: a lock-order mistake in the module
 * hangs here.
 */
struct stress {
	int fd;
	unsigned seed;
	int bad;
};

static void *stress_thread(void *arg)
{
	struct stress *st = arg;
	unsigned char pat = 0xcc, buf[256];

	for (unsigned it = 0; it < 150 && !st->bad; it++) {
		struct execpack_create a, b;

		if (create(st->fd, 2 * page, &pat, 1, &a) || create(st->fd, page, &pat, 1, &b)) {
			st->bad = 1;
			break;
		}
		unsigned char *x = mmap(NULL, 2 * page, PROT_READ | PROT_EXEC, MAP_SHARED, st->fd,
					(off_t)a.cookie);
		unsigned char *y = mmap(NULL, page, PROT_READ, MAP_SHARED, st->fd, (off_t)b.cookie);

		if (x == MAP_FAILED || y == MAP_FAILED) {
			st->bad = 2;
			break;
		}
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (unsigned char)(st->seed + it + i);
		size_t off = (st->seed * 131 + it * 977) % (page - sizeof(buf));

		if (copy_in(st->fd, b.id, off, buf, sizeof(buf)))
			st->bad = 3;
		madvise(y, page, MADV_DONTNEED);
		/* source: the other pack's mapping, faulted in during the copy */
		if (copy_in(st->fd, a.id, page - 100, y + off, sizeof(buf)))
			st->bad = 4;
		if (memcmp(x + page - 100, buf, sizeof(buf)))
			st->bad = 5;
		if (destroy(st->fd, b.id) || (it & 1 ? destroy(st->fd, a.id) : 0))
			st->bad = 6;
		munmap(y, page);
		munmap(x, 2 * page);
		if (!(it & 1) && destroy(st->fd, a.id))
			st->bad = 7;
	}
	return NULL;
}

START_TEST(test_dev_threads)
{
	int fd = dev_open();
	struct stress st[4];
	pthread_t t[4];
	uint64_t base = info(fd).user_used;

	for (unsigned i = 0; i < 4; i++) {
		st[i] = (struct stress){ .fd = fd, .seed = i * 7919 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, stress_thread, &st[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(st[i].bad == 0, "thread %u failed at step %d", i, st[i].bad);
	}
	ck_assert_uint_eq(info(fd).user_used, base); /* all destroyed and unmapped */
	close(fd);
}
END_TEST

/*
 * A create whose result cannot be copied out (the argument struct sits in a
 * read-only page: -EFAULT) must never have made its pack findable: ids are
 * the lowest free ones, so another thread destroying "the next id" hit the
 * pack in that window and the module put it twice (refcount underflow, use
 * after free).  The destroyer must only ever see -ENOENT.
 */
struct efault_race {
	int fd;
	volatile int stop;
	unsigned long destroyed, other;
};

static void *destroy_next_id(void *arg)
{
	struct efault_race *r = arg;

	while (!r->stop) {
		int rc = destroy(r->fd, 1);

		if (rc == 0)
			r->destroyed++;
		else if (rc != -ENOENT)
			r->other++;
	}
	return NULL;
}

START_TEST(test_dev_create_efault_race)
{
	int fd = dev_open();
	uint64_t base = info(fd).user_used;
	unsigned char pat = 0xcc;
	struct execpack_create *ro = mmap(NULL, page, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(ro, MAP_FAILED);
	*ro = (struct execpack_create){
		.size = sizeof(*ro), .len = page, .pattern = (uintptr_t)&pat, .pattern_len = 1,
	};
	ck_assert_int_eq(mprotect(ro, page, PROT_READ), 0);

	struct efault_race r = { .fd = fd };
	pthread_t t;
	struct timespec t0, now;
	unsigned long rounds = 0, efault = 0;

	ck_assert_int_eq(pthread_create(&t, NULL, destroy_next_id, &r), 0);
	/* Bounded in time too: a few seconds even on an emulated CPU. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 100; i++, rounds++)
			efault += xioctl(fd, EXECPACK_IOC_CREATE, ro) == -EFAULT;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (rounds < 20000 &&
		 (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 < 1500);
	r.stop = 1;
	pthread_join(t, NULL);

	ck_assert_uint_eq(efault, rounds);
	ck_assert_msg(r.destroyed == 0,
		      "destroy found %lu of %lu packs whose create failed with EFAULT", r.destroyed,
		      rounds);
	ck_assert_uint_eq(r.other, 0);
	ck_assert_uint_eq(info(fd).user_used, base);
	/* no id stayed reserved: the next create gets the lowest one again */
	struct execpack_create c;

	ck_assert_int_eq(create(fd, page, &pat, 1, &c), 0);
	ck_assert_uint_eq(c.id, 1);
	ck_assert_int_eq(destroy(fd, c.id), 0);
	ck_assert_uint_eq(info(fd).user_used, base);
	munmap(ro, page);
	close(fd);
}
END_TEST

/*
 * A copy whose source cannot be read fails with EFAULT and leaves the pack
 * exactly as it was: no zeros where the source could not be read (what
 * copy_from_user() straight into the pack left), and no part of the source
 * before the fault either.  The bytes are read back through the pack's
 * executable mapping.
 */
static void pack_is(const unsigned char *x, const unsigned char *want, size_t len,
		    const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (x[i] != want[i])
			ck_abort_msg("%s: pack byte %zu is %#x, was %#x", what, i, x[i], want[i]);
}

START_TEST(test_dev_copy_efault_unchanged)
{
	int fd = dev_open();
	const unsigned char pat[3] = { 0xd4, 0xcc, 0x0b };
	size_t size = 4 * page;
	struct execpack_create c;

	ck_assert_int_eq(create(fd, size, pat, 3, &c), 0);
	const unsigned char *x = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_SHARED, fd,
				      (off_t)c.cookie);

	ck_assert_ptr_ne(x, MAP_FAILED);
	unsigned char *want = malloc(size);

	ck_assert_ptr_nonnull(want);
	for (size_t i = 0; i < size; i++)
		want[i] = pat[i % 3];
	pack_is(x, want, size, "created");

	/* a source whose second page is gone: readable up to src + page */
	unsigned char *src = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(src, MAP_FAILED);
	for (size_t i = 0; i < page; i++)
		src[i] = (unsigned char)(0x40 + i % 61); /* never 0, never the pattern's bytes */
	ck_assert_int_eq(munmap(src + page, page), 0);

	/* the kernel's half of the address space on every 64-bit Linux */
	const void *kaddr = (const void *)(uintptr_t)(UINTPTR_MAX > 0xffffffffu ?
							UINT64_C(0xffffffff81000000) : 0xc0000000u);
	const struct {
		const char *what;
		const void *src;
		uint64_t off, len;
	} bad[] = {
		{ "NULL, 1 byte", NULL, 5, 1 },
		{ "NULL, one word", NULL, 8, 8 },
		{ "NULL, 300 bytes over a page boundary", NULL, page - 100, 300 },
		{ "NULL, the whole pack", NULL, 0, size },
		{ "kernel address, 4 bytes", kaddr, 4, 4 },
		{ "kernel address, 300 bytes", kaddr, page - 100, 300 },
		{ "kernel address, 2 pages", kaddr, 1, 2 * page },
		{ "into an unmapped page, one word", src + page - 4, 16, 8 },
		{ "into an unmapped page, 300 bytes", src + page - 100, 2 * page - 50, 300 },
		{ "into an unmapped page, 2 pages", src, 0, 2 * page },
		{ "into an unmapped page, 3 pages unaligned", src + 8, 3, 3 * page },
		{ "the unmapped page itself", src + page, 10, 100 },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = copy_in(fd, c.id, bad[i].off, bad[i].src, bad[i].len);

		ck_assert_msg(rc == -EFAULT, "copy from %s: %d (%s), not EFAULT", bad[i].what, rc,
			      strerror(-rc));
		pack_is(x, want, size, bad[i].what);
	}

	/* what can be read still lands exactly, up to the last readable byte */
	ck_assert_int_eq(copy_in(fd, c.id, 2 * page - 50, src + page - 100, 100), 0);
	memcpy(want + 2 * page - 50, src + page - 100, 100);
	pack_is(x, want, size, "a copy ending at the unmapped page");

	/* a copy over several source and pack pages, neither aligned */
	unsigned char *big = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(big, MAP_FAILED);
	for (size_t i = 0; i < 3 * page; i++)
		big[i] = (unsigned char)(i * 13 + 7);
	ck_assert_int_eq(copy_in(fd, c.id, page + 5, big + 77, 2 * page + 123), 0);
	memcpy(want + page + 5, big + 77, 2 * page + 123);
	pack_is(x, want, size, "a copy of 2 pages + 123 bytes");

	munmap(big, 3 * page);
	munmap(src, page);
	munmap((void *)x, size);
	free(want);
	ck_assert_int_eq(destroy(fd, c.id), 0);
	close(fd);
}
END_TEST

/*
 * The same while another thread maps and unmaps the source's second page
 * (a memfd page, so that whenever it is mapped it holds its bytes): each
 * copy either lands whole or fails with EFAULT leaving the pack as it was,
 * never part of the source and never zeros.
 */
struct unmap_race {
	void *at;
	int memfd;
	volatile int stop;
	int bad;
};

static void *toggle_source_page(void *arg)
{
	struct unmap_race *r = arg;

	while (!r->stop) {
		if (mmap(r->at, page, PROT_READ, MAP_SHARED | MAP_FIXED_NOREPLACE, r->memfd, 0) !=
		    r->at) {
			r->bad = errno;
			break;
		}
		munmap(r->at, page);
	}
	return NULL;
}

START_TEST(test_dev_copy_efault_race)
{
	int fd = dev_open();
	const unsigned char pat[3] = { 0xd4, 0xcc, 0x0b };
	size_t size = 3 * page, off = 3, len = 2 * page - 10;
	struct execpack_create c;

	ck_assert_int_eq(create(fd, size, pat, 3, &c), 0);
	const unsigned char *x = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_SHARED, fd,
				      (off_t)c.cookie);

	ck_assert_ptr_ne(x, MAP_FAILED);
	unsigned char *filled = malloc(size), *copied = malloc(size);

	ck_assert_ptr_nonnull(filled);
	ck_assert_ptr_nonnull(copied);
	for (size_t i = 0; i < size; i++)
		filled[i] = pat[i % 3];

	unsigned char *src = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int memfd = memfd_create("execpack-source", MFD_CLOEXEC);

	ck_assert_ptr_ne(src, MAP_FAILED);
	ck_assert_int_ge(memfd, 0);
	ck_assert_int_eq(ftruncate(memfd, (off_t)page), 0);
	for (size_t i = 0; i < 2 * page; i++)
		src[i] = (unsigned char)(0x40 + i % 61);
	ck_assert_int_eq(pwrite(memfd, src + page, page, 0), (ssize_t)page);
	memcpy(copied, filled, size);
	memcpy(copied + off, src + 5, len);
	ck_assert_int_eq(munmap(src + page, page), 0);

	struct unmap_race r = { .at = src + page, .memfd = memfd };
	pthread_t t;
	struct timespec t0, now;
	unsigned long rounds = 0, landed = 0, efault = 0, other = 0;
	const char *torn = NULL;

	ck_assert_int_eq(pthread_create(&t, NULL, toggle_source_page, &r), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 20 && !torn; i++, rounds++) {
			int rc = copy_in(fd, c.id, off, src + 5, len);

			if (rc == 0) {
				landed++;
				if (memcmp(x, copied, size))
					torn = "returned 0";
				ck_assert_int_eq(fill_range(fd, c.id, 0, size), 0);
			} else if (rc == -EFAULT) {
				efault++;
				if (memcmp(x, filled, size))
					torn = "failed with EFAULT";
			} else {
				other++;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (!torn && rounds < 5000 &&
		 (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 < 1500);
	r.stop = 1;
	pthread_join(t, NULL);

	fprintf(stderr, "unmap race: %lu copies: %lu landed, %lu EFAULT\n", rounds, landed, efault);
	ck_assert_msg(r.bad == 0, "mapping the source page: %s", strerror(r.bad));
	ck_assert_msg(!torn, "a copy that %s left the pack neither as it was nor as copied",
		      torn);
	ck_assert_uint_eq(other, 0);
	munmap(src, page);
	munmap(src + page, page);
	munmap((void *)x, size);
	close(memfd);
	free(filled);
	free(copied);
	close(fd);
}
END_TEST

/*
 * The argument's size is read once: a thread flipping the size field
 * between a valid size and 0 while CREATE runs made CREATE validate the
 * first value and copy back as many bytes as the second said (none), so it
 * returned 0 without the id, leaving a charged pack no one could name.
 * Every CREATE that returns 0 must have written its id and cookie back.
 */
struct size_race {
	struct execpack_create *arg;
	volatile int stop;
};

static void *flip_size(void *arg)
{
	struct size_race *r = arg;
	volatile uint32_t *size = &r->arg->size;

	while (!r->stop) {
		*size = 0;
		*size = sizeof(struct execpack_create);
	}
	return NULL;
}

START_TEST(test_dev_create_size_race)
{
	int fd = dev_open();
	uint64_t base = info(fd).user_used;
	unsigned char pat = 0xcc;
	struct execpack_create *a = calloc(1, sizeof(*a));

	ck_assert_ptr_nonnull(a);
	a->size = sizeof(*a);

	struct size_race r = { .arg = a };
	pthread_t t;
	struct timespec t0, now;
	unsigned long rounds = 0, made = 0, lost = 0, refused = 0, other = 0, undestroyed = 0;

	ck_assert_int_eq(pthread_create(&t, NULL, flip_size, &r), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 50; i++, rounds++) {
			a->flags = 0;
			a->len = page;
			a->pattern = (uintptr_t)&pat;
			a->pattern_len = 1;
			a->id = 0;
			a->cookie = UINT64_MAX;
			int rc = xioctl(fd, EXECPACK_IOC_CREATE, a);

			if (rc == 0) {
				made++;
				if (a->id == 0 || a->cookie == UINT64_MAX)
					lost++; /* ids start at 1, cookies are page offsets */
				else if (destroy(fd, a->id))
					undestroyed++;
			} else if (rc == -EINVAL) {
				refused++; /* saw size 0 */
			} else {
				other++;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (rounds < 20000 &&
		 (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 < 2000);
	r.stop = 1;
	pthread_join(t, NULL);
	free(a);

	fprintf(stderr, "size race: %lu creates: %lu made, %lu refused (size 0)\n", rounds, made,
		refused);
	ck_assert_msg(lost == 0, "%lu of %lu creates returned 0 without writing their id back",
		      lost, made);
	ck_assert_uint_gt(made, 0);
	ck_assert_uint_eq(other, 0);
	ck_assert_uint_eq(undestroyed, 0);
	/* every pack made was destroyed: none is charged without an id */
	ck_assert_uint_eq(info(fd).user_used, base);
	close(fd);
	fd = dev_open();
	ck_assert_uint_eq(info(fd).user_used, base);
	close(fd);
}
END_TEST

/* (in the order the suite runs them) */
void kmod_add_race_tests(TCase *tc)
{
	tcase_add_test(tc, test_dev_threads);
	tcase_add_test(tc, test_dev_create_efault_race);
	tcase_add_test(tc, test_dev_copy_efault_unchanged);
	tcase_add_test(tc, test_dev_copy_efault_race);
	tcase_add_test(tc, test_dev_create_size_race);
}
