/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_jitdump.c - perf's jitdump file (libexecpack/diag/jitdump.c): the file
 * a pool with EP_F_JITDUMP writes is parsed here as perf parses it, and its
 * header, records, names and code bytes checked against the allocations;
 * the executable, read-only mapping perf finds it by; EXECPACK_JITDUMP=1;
 * the closing record at exit; a child after fork() writing its own file;
 * the file created for this process alone: private, never a file, link or
 * FIFO that was there before unless it is our own stale regular file, and
 * never one that another user planted (those tests act as uid 65534, so
 * they need root; without it they say SKIP).
 *
 * Each test runs in a process of its own (CK_FORK, or a forked child), so
 * that every one starts a fresh jit-<pid>.dump.  The files go to a scratch
 * directory (EXECPACK_JITDUMP_DIR).
 */
#include "config.h"

#include <check.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "execpack.h"
#include "testutil.h"

/* The format, from tools/perf/Documentation/jitdump-specification.txt. */
struct hdr {
	uint32_t magic, version, total_size, elf_mach, pad1, pid;
	uint64_t timestamp, flags;
};
struct load {
	uint32_t id, total_size;
	uint64_t timestamp;
	uint32_t pid, tid;
	uint64_t vma, code_addr, code_size, code_index;
};

struct rec {
	uint32_t id;
	uint64_t timestamp;
	struct load load;
	char name[EP_NAME_MAX + 1];
	unsigned char *code;
};

struct dump {
	struct hdr h;
	struct rec r[16];
	int n;
};

static char g_dir[64];

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void dump_path(char *buf, size_t len, long pid)
{
	snprintf(buf, len, "%s/jit-%ld.dump", g_dir, pid);
}

/* Parse jit-<pid>.dump strictly: every record whole, sizes adding up. */
static void dump_read(long pid, struct dump *d)
{
	char path[128];

	dump_path(path, sizeof(path), pid);
	FILE *f = fopen(path, "rb");

	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	memset(d, 0, sizeof(*d));
	ck_assert_int_eq(fread(&d->h, sizeof(d->h), 1, f), 1);
	ck_assert_uint_eq(d->h.total_size, sizeof(d->h));
	for (;;) {
		uint32_t pre[2];
		uint64_t ts;

		if (fread(pre, sizeof(pre), 1, f) != 1)
			break;
		ck_assert_int_eq(fread(&ts, sizeof(ts), 1, f), 1);
		ck_assert_int_lt(d->n, 16);
		struct rec *r = &d->r[d->n++];

		r->id = pre[0];
		r->timestamp = ts;
		ck_assert_uint_ge(pre[1], 16);
		if (r->id != 0) {
			ck_assert_int_eq(fseek(f, (long)pre[1] - 16, SEEK_CUR), 0);
			continue;
		}
		r->load.id = pre[0];
		r->load.total_size = pre[1];
		r->load.timestamp = ts;
		ck_assert_int_eq(fread(&r->load.pid, sizeof(r->load) - 16, 1, f), 1);
		size_t rest = pre[1] - sizeof(r->load), nl = 0;
		int c;

		while ((c = fgetc(f)) > 0 && nl < EP_NAME_MAX)
			r->name[nl++] = (char)c;
		ck_assert_int_eq(c, 0); /* the name ends in a NUL */
		ck_assert_uint_eq(rest, nl + 1 + r->load.code_size);
		r->code = malloc(r->load.code_size);
		ck_assert_ptr_nonnull(r->code);
		ck_assert_int_eq(fread(r->code, r->load.code_size, 1, f), 1);
	}
	ck_assert(feof(f)); /* nothing torn at the end */
	fclose(f);
}

static void dump_free(struct dump *d)
{
	for (int i = 0; i < d->n; i++)
		free(d->r[i].code);
}

static void check_load(const struct rec *r, const void *exec, size_t size, const char *name,
		       uint64_t index)
{
	ck_assert_uint_eq(r->id, 0); /* JIT_CODE_LOAD */
	ck_assert_str_eq(r->name, name);
	ck_assert_uint_eq(r->load.vma, (uintptr_t)exec);
	ck_assert_uint_eq(r->load.code_addr, (uintptr_t)exec);
	ck_assert_uint_eq(r->load.code_size, size);
	ck_assert_uint_eq(r->load.code_index, index);
	ck_assert_uint_eq(r->load.pid, (uint32_t)getpid());
	ck_assert_uint_ne(r->load.tid, 0);
	ck_assert_msg(!memcmp(r->code, exec, size), "code bytes of %s differ", name);
}

static struct ep_pool *make_pool(unsigned flags)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD, .flags = flags };
	struct ep_pool *p = NULL;
	int rc = ep_pool_create(&cfg, &p);

	ck_assert_msg(rc == 0, "ep_pool_create: %s", ep_strerror(rc));
	return p;
}

/* A finalized allocation of size bytes returning imm. */
static void *jit_sized(struct ep_pool *p, size_t size, uint32_t imm, struct ep_image *img)
{
	ck_assert_int_eq(ep_alloc(p, size, img), 0);
	tu_emit_sized(img->rw, size, imm);
	return img->exec;
}

/* Whether /proc/self/maps maps path readable and executable, not writable. */
static int mapped_rx(const char *path)
{
	char line[4096], perms[8], file[PATH_MAX];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		file[0] = 0;
		if (sscanf(line, "%*x-%*x %7s %*x %*x:%*x %*u %4095s", perms, file) == 2 &&
		    !strcmp(file, path) && perms[0] == 'r' && perms[1] == '-' && perms[2] == 'x')
			found = 1;
	}
	fclose(f);
	return found;
}

START_TEST(test_header_and_loads)
{
	uint64_t t0 = mono_ns();
	struct ep_pool *p = make_pool(EP_F_JITDUMP);
	struct ep_image a, b, c;
	char path[128];

	/* named before finalize: written at finalize */
	jit_sized(p, 100, 1, &a);
	ck_assert_int_eq(ep_set_name(p, a.exec, "jd_first"), 0);
	ck_assert_int_eq(ep_finalize(p, a.exec), 0);
	/* named after finalize: written at once, with the bytes now there */
	jit_sized(p, 4000, 2, &b);
	ck_assert_int_eq(ep_finalize(p, b.exec), 0);
	ck_assert_int_eq(ep_set_name(p, b.exec, "jd_second"), 0);
	/* unnamed code is not written */
	jit_sized(p, 64, 3, &c);
	ck_assert_int_eq(ep_finalize(p, c.exec), 0);
	/* renaming writes a new load; perf keeps the newest */
	ck_assert_int_eq(ep_set_name(p, a.exec, "jd_renamed"), 0);
	ck_assert_int_eq(((tu_fn)a.exec)(), 1);
	uint64_t t1 = mono_ns();

	dump_path(path, sizeof(path), (long)getpid());
	ck_assert_msg(mapped_rx(path), "%s is not mapped r-x", path);

	struct dump d;

	dump_read((long)getpid(), &d);
	ck_assert_uint_eq(d.h.magic, 0x4A695444u);
	ck_assert_uint_eq(d.h.version, 1);
#if defined(__x86_64__)
	ck_assert_uint_eq(d.h.elf_mach, EM_X86_64);
#elif defined(__aarch64__)
	ck_assert_uint_eq(d.h.elf_mach, EM_AARCH64);
#elif defined(__riscv)
	ck_assert_uint_eq(d.h.elf_mach, EM_RISCV);
#endif
	ck_assert_uint_eq(d.h.pid, (uint32_t)getpid());
	ck_assert_uint_eq(d.h.flags, 0); /* CLOCK_MONOTONIC, not the TSC */
	ck_assert_uint_ge(d.h.timestamp, t0);
	ck_assert_uint_le(d.h.timestamp, t1);
	ck_assert_int_eq(d.n, 3);
	check_load(&d.r[0], a.exec, a.size, "jd_first", 0);
	check_load(&d.r[1], b.exec, b.size, "jd_second", 1);
	check_load(&d.r[2], a.exec, a.size, "jd_renamed", 2);
	uint64_t prev = d.h.timestamp;

	for (int i = 0; i < d.n; i++) {
		ck_assert_uint_ge(d.r[i].timestamp, prev);
		prev = d.r[i].timestamp;
	}
	ck_assert_uint_le(prev, t1);
	/* the code is all there, its end included, as perf sees it */
	unsigned char ret[TU_RET_LEN];

	tu_emit_ret_imm(ret, 2);
	ck_assert_int_eq(memcmp(d.r[1].code + tu_ret_offset(b.exec, 4000), ret, TU_RET_LEN), 0);
	dump_free(&d);
	ep_pool_destroy(p);
}
END_TEST

/* Without the flag or the variable nothing is written. */
START_TEST(test_off)
{
	struct ep_pool *p = make_pool(0);
	struct ep_image a;
	char path[128];

	jit_sized(p, 64, 1, &a);
	ck_assert_int_eq(ep_finalize(p, a.exec), 0);
	ck_assert_int_eq(ep_set_name(p, a.exec, "quiet"), 0);
	dump_path(path, sizeof(path), (long)getpid());
	ck_assert_int_eq(access(path, F_OK), -1);
	ep_pool_destroy(p);
}
END_TEST

/* A child: EXECPACK_JITDUMP=1 for a pool without the flag, then exit():
 * the file ends with JIT_CODE_CLOSE. */
START_TEST(test_env_and_close)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setenv("EXECPACK_JITDUMP", "1", 1);
		struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD };
		struct ep_pool *p = NULL;
		struct ep_image a;

		if (ep_pool_create(&cfg, &p) != 0 || ep_alloc(p, 64, &a) != 0)
			_exit(2);
		tu_emit_sized(a.rw, 64, 7);
		if (ep_finalize(p, a.exec) != 0 || ep_set_name(p, a.exec, "env_named") != 0)
			_exit(3);
		exit(0); /* not _exit: the library's destructor writes the close */
	}
	int st = 0;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct dump d;

	dump_read((long)pid, &d);
	ck_assert_uint_eq(d.h.pid, (uint32_t)pid);
	ck_assert_int_eq(d.n, 2);
	ck_assert_uint_eq(d.r[0].id, 0);
	ck_assert_str_eq(d.r[0].name, "env_named");
	ck_assert_uint_eq(d.r[0].load.code_size, 64);
	ck_assert_uint_eq(d.r[1].id, 3); /* JIT_CODE_CLOSE */
	ck_assert_uint_ge(d.r[1].timestamp, d.r[0].timestamp);
	dump_free(&d);
}
END_TEST

/*
 * A record covers the program's bytes, not the trap fill past them: the
 * allocation's when nothing else is known, the size ep_set_name_size()
 * gives, and after ep_shrink() a new record with its size (perf inject
 * keeps the newest for an address), also where no whole chunk is given
 * back.  In a child, so that its records are alone in its file.
 */
START_TEST(test_sizes)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
					 .flags = EP_F_JITDUMP };
		struct ep_pool *p = NULL;
		struct ep_image a, b, c;

		if (ep_pool_create(&cfg, &p) != 0 || ep_alloc(p, 100, &a) != 0 ||
		    ep_alloc(p, 64, &b) != 0 || ep_alloc(p, 64, &c) != 0)
			_exit(2);
		tu_emit_ret_imm(a.rw, 1);
		tu_emit_ret_imm(b.rw, 2);
		tu_emit_ret_imm(c.rw, 3);
		if (ep_set_name(p, a.exec, "jd_a") != 0 || ep_finalize(p, a.exec) != 0 ||
		    ep_shrink(p, a.exec, 18) != 0)
			_exit(3);
		if (ep_set_name_size(p, b.exec, "jd_b", 15) != 0 || ep_finalize(p, b.exec) != 0)
			_exit(4);
		if (ep_finalize(p, c.exec) != 0 || ep_set_name(p, c.exec, "jd_c") != 0 ||
		    ep_shrink(p, c.exec, 20) != 0 || ep_shrink(p, c.exec, 30) != 0)
			_exit(5);
		_exit(0);
	}
	int st = 0;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	struct dump d;
	static const struct {
		const char *name;
		uint64_t size;
		uint32_t imm;
	} want[] = { { "jd_a", 128, 1 }, { "jd_a", 18, 1 }, { "jd_b", 15, 2 },
		     { "jd_c", 64, 3 }, { "jd_c", 20, 3 } };
	unsigned char ret[TU_RET_LEN];

	dump_read((long)pid, &d);
	ck_assert_int_eq(d.n, 5);
	for (int i = 0; i < d.n; i++) {
		ck_assert_uint_eq(d.r[i].id, 0);
		ck_assert_str_eq(d.r[i].name, want[i].name);
		ck_assert_msg(d.r[i].load.code_size == want[i].size,
			      "record %d (%s): %llu bytes, not %llu", i, want[i].name,
			      (unsigned long long)d.r[i].load.code_size,
			      (unsigned long long)want[i].size);
		tu_emit_ret_imm(ret, want[i].imm);
		ck_assert(!memcmp(d.r[i].code, ret, TU_RET_LEN));
	}
	ck_assert_uint_eq(d.r[1].load.code_addr, d.r[0].load.code_addr);
	dump_free(&d);
}
END_TEST

/* After fork() the child writes jit-<child>.dump, never the parent's file. */
START_TEST(test_fork)
{
	struct ep_pool *p = make_pool(EP_F_JITDUMP);
	struct ep_image a;

	jit_sized(p, 64, 1, &a);
	ck_assert_int_eq(ep_finalize(p, a.exec), 0);
	ck_assert_int_eq(ep_set_name(p, a.exec, "parent_code"), 0);
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct ep_pool *q = NULL;
		struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
					 .flags = EP_F_JITDUMP };
		struct ep_image b;

		if (ep_pool_create(&cfg, &q) != 0 || ep_alloc(q, 128, &b) != 0)
			_exit(2);
		tu_emit_sized(b.rw, 128, 9);
		if (ep_finalize(q, b.exec) != 0 || ep_set_name(q, b.exec, "child_code") != 0)
			_exit(3);
		_exit(0);
	}
	int st = 0;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct dump d;

	dump_read((long)getpid(), &d);
	ck_assert_int_eq(d.n, 1);
	ck_assert_str_eq(d.r[0].name, "parent_code");
	dump_free(&d);
	dump_read((long)pid, &d);
	ck_assert_uint_eq(d.h.pid, (uint32_t)pid);
	ck_assert_int_eq(d.n, 1);
	ck_assert_str_eq(d.r[0].name, "child_code");
	ck_assert_uint_eq(d.r[0].load.pid, (uint32_t)pid);
	ck_assert_uint_eq(d.r[0].load.code_index, 0);
	dump_free(&d);
	ep_pool_destroy(p);
}
END_TEST

/* A pool with EP_F_JITDUMP names and finalizes one function and runs it:
 * the file is best effort, so every call succeeds whatever became of it. */
static void write_named(const char *name)
{
	struct ep_pool *p = make_pool(EP_F_JITDUMP);
	struct ep_image a;

	jit_sized(p, 64, 5, &a);
	ck_assert_int_eq(ep_set_name(p, a.exec, name), 0);
	ck_assert_int_eq(ep_finalize(p, a.exec), 0);
	ck_assert_int_eq(((tu_fn)a.exec)(), 5);
	ep_pool_destroy(p);
}

/* What a file that is not ours holds: its whole content, for comparing. */
static size_t slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	ssize_t n;

	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	n = read(fd, buf, len - 1);
	ck_assert_int_ge(n, 0);
	buf[n] = 0;
	close(fd);
	return (size_t)n;
}

/* The file is made for this process: a regular file of ours, mode 0600
 * less the umask (it holds the process's code), not 0644. */
START_TEST(test_private_file)
{
	mode_t mask = umask(022);
	char path[128];
	struct stat st;

	umask(mask);
	write_named("private_code");
	dump_path(path, sizeof(path), (long)getpid());
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_uint_eq(st.st_uid, geteuid());
	ck_assert_msg((st.st_mode & 07777) == (0600 & ~mask), "mode %o, not %o",
		      (unsigned)(st.st_mode & 07777), (unsigned)(0600 & ~mask));
}
END_TEST

/* A regular file of ours left by an earlier process with this pid is
 * replaced by a new file: perf reads a whole, fresh dump. */
START_TEST(test_stale_own_file)
{
	static const char junk[] = "left by an earlier process with this pid\n";
	char path[128];
	struct dump d;

	dump_path(path, sizeof(path), (long)getpid());
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	write_named("after_stale");
	dump_read((long)getpid(), &d);
	ck_assert_uint_eq(d.h.pid, (uint32_t)getpid());
	ck_assert_int_eq(d.n, 1);
	ck_assert_str_eq(d.r[0].name, "after_stale");
	dump_free(&d);
}
END_TEST

/* A symbolic link at the file's name is never followed, even one of ours:
 * its target keeps what it held and the link stays. */
START_TEST(test_symlink_not_followed)
{
	static const char held[] = "the link's target\n";
	char path[128], target[128], buf[256];
	struct stat st;

	dump_path(path, sizeof(path), (long)getpid());
	snprintf(target, sizeof(target), "%s/target-%ld", g_dir, (long)getpid());
	int fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, held, strlen(held)), (ssize_t)strlen(held));
	close(fd);
	ck_assert_int_eq(symlink(target, path), 0);
	write_named("not_through_a_link");
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_uint_eq(slurp(target, buf, sizeof(buf)), strlen(held));
	ck_assert_str_eq(buf, held);
	ck_assert(!mapped_rx(target));
	unlink(target);
}
END_TEST

/* A FIFO at the file's name, even one of ours: the library neither waits
 * on it (a test that hung would time out) nor writes into it, and leaves
 * it where it is.  The test holds the read end open, so that anything
 * written stays in the pipe to be seen. */
START_TEST(test_fifo_not_used)
{
	char path[128], buf[256];
	struct stat st;

	dump_path(path, sizeof(path), (long)getpid());
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	int rd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	ck_assert_int_ge(rd, 0);
	write_named("not_into_a_fifo");
	ssize_t n = read(rd, buf, sizeof(buf));

	ck_assert_msg(n <= 0, "%zd bytes were written into the FIFO", n);
	close(rd);
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISFIFO(st.st_mode));
}
END_TEST

/* --- another user's file in a shared directory ---------------------------- */

#define OTHER_UID 65534 /* nobody */

static char g_shared[96]; /* a directory like /tmp: mode 1777 */

/* The shared directory, and the dump's name in it for this process. */
static bool shared_setup(const char *test, char *path, size_t len)
{
	if (geteuid() != 0) {
		printf("SKIP: %s: needs root to act as another user (uid %d)\n", test, OTHER_UID);
		return false;
	}
	snprintf(g_shared, sizeof(g_shared), "%s/shared-%ld", g_dir, (long)getpid());
	ck_assert_int_eq(mkdir(g_shared, 0700), 0);
	ck_assert_int_eq(chmod(g_shared, 01777), 0);
	ck_assert_int_eq(setenv("EXECPACK_JITDUMP_DIR", g_shared, 1), 0);
	snprintf(path, len, "%s/jit-%ld.dump", g_shared, (long)getpid());
	return true;
}

/* Run plant(path) in a child that is uid and gid OTHER_UID. */
static void as_other_user(int (*plant)(const char *), const char *path)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		umask(0);
		if (setgroups(0, NULL) != 0 || setgid(OTHER_UID) != 0 || setuid(OTHER_UID) != 0)
			_exit(2);
		_exit(plant(path));
	}
	int st = 0;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other user's child: %#x", st);
}

static const char g_planted[] = "planted by another user\n";

static int plant_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);

	if (fd < 0 || write(fd, g_planted, strlen(g_planted)) != (ssize_t)strlen(g_planted))
		return 3;
	return close(fd) == 0 ? 0 : 4;
}

static int plant_fifo(const char *path)
{
	return mkfifo(path, 0666) == 0 ? 0 : 3;
}

/* A 0666 file of another user at the dump's name is not ours: it is not
 * truncated, written or mapped, and no code or name reaches it. */
START_TEST(test_other_users_file)
{
	char path[160], buf[256];
	struct stat st;

	if (!shared_setup("test_other_users_file", path, sizeof(path)))
		return;
	as_other_user(plant_file, path);
	write_named("secret_code");
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_uint_eq(st.st_uid, OTHER_UID);
	ck_assert_uint_eq(st.st_mode & 07777, 0666);
	ck_assert_uint_eq(slurp(path, buf, sizeof(buf)), strlen(g_planted));
	ck_assert_str_eq(buf, g_planted);
	ck_assert(!mapped_rx(path));
}
END_TEST

/* Another user's FIFO there: not opened for writing, nothing written into
 * it, not removed. */
START_TEST(test_other_users_fifo)
{
	char path[160], buf[256];
	struct stat st;

	if (!shared_setup("test_other_users_fifo", path, sizeof(path)))
		return;
	as_other_user(plant_fifo, path);
	int rd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	ck_assert_int_ge(rd, 0);
	write_named("secret_code");
	ssize_t n = read(rd, buf, sizeof(buf));

	ck_assert_msg(n <= 0, "%zd bytes were written into the FIFO", n);
	close(rd);
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISFIFO(st.st_mode));
	ck_assert_uint_eq(st.st_uid, OTHER_UID);
}
END_TEST

static Suite *jitdump_suite(void)
{
	Suite *s = suite_create("jitdump");
	TCase *tc = tcase_create("jitdump");

	tcase_add_test(tc, test_header_and_loads);
	tcase_add_test(tc, test_off);
	tcase_add_test(tc, test_env_and_close);
	tcase_add_test(tc, test_fork);
	tcase_add_test(tc, test_private_file);
	tcase_add_test(tc, test_stale_own_file);
	tcase_add_test(tc, test_symlink_not_followed);
	tcase_add_test(tc, test_fifo_not_used);
	tcase_add_test(tc, test_other_users_file);
	tcase_add_test(tc, test_other_users_fifo);
	tcase_add_test(tc, test_sizes);
	suite_add_tcase(s, tc);
	return s;
}

static void remove_dir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	if (system(cmd) != 0) {
		/* a scratch directory left in /tmp is harmless */
	}
}

int main(void)
{
	const char *env = getenv("EXECPACK_JITDUMP");

	if (env && *env && strcmp(env, "0")) {
		printf("SKIP: EXECPACK_JITDUMP is set: every pool writes, test_off cannot run\n");
		return 77;
	}
	snprintf(g_dir, sizeof(g_dir), "/tmp/check_jitdump.XXXXXX");
	if (!mkdtemp(g_dir)) {
		perror("mkdtemp");
		return 99;
	}
	/* the other user of the shared-directory tests must reach into it */
	if (chmod(g_dir, 0755) != 0) {
		perror("chmod");
		return 99;
	}
	setenv("EXECPACK_JITDUMP_DIR", g_dir, 1);
	/* every test in a process of its own: each opens a fresh file */
	setenv("CK_FORK", "yes", 1);
	SRunner *sr = srunner_create(jitdump_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	remove_dir();
	return failed ? 1 : 0;
}
