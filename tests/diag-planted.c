/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-planted.c - check_diag's tests of the perf map in a /tmp that another
 * user writes to: links, a FIFO and a file planted in its place.
 */
#include "config.h"

#include "diag-suite.h"

/* ---- the perf map in a /tmp that another user writes to ------------------
 * /tmp/perf-<pid>.map has a name anyone can predict.  Another user plants
 * it before the process names code: a symbolic or a hard link to a file
 * of ours (nothing may be written through it), a FIFO (ep_finalize() must not
 * block on it, and writes nothing into it when someone reads it), a
 * regular file of theirs (not ours to write).  The test runs as root: the
 * victim is a child process (its pid names the file), and a child of the
 * victim that becomes uid 65534 plants the file first.
 */
enum plant { PLANT_LINK, PLANT_HARDLINK, PLANT_FIFO, PLANT_FIFO_READ, PLANT_FILE };

static char g_victim[64]; /* the file a planted link points to */

static void plant_as_nobody(enum plant what, const char *path)
{
	pid_t a = fork();

	if (a == 0) {
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(2);
		int rc = 0;

		if (what == PLANT_LINK)
			rc = symlink(g_victim, path);
		else if (what == PLANT_HARDLINK)
			rc = link(g_victim, path);
		else if (what == PLANT_FILE)
			rc = close(open(path, O_WRONLY | O_CREAT | O_EXCL, 0666));
		else
			rc = mkfifo(path, 0666);
		if (rc == 0 && what == PLANT_FILE)
			rc = chmod(path, 0666); /* past root's umask */
		_exit(rc == 0 ? 0 : 3);
	}
	int st = 0;

	waitpid(a, &st, 0);
	/* fs.protected_hardlinks=1 lets nobody link a file it cannot write:
	 * the link is then made here, as it would be where that is 0 (the
	 * library sees the same file either way) */
	if (what == PLANT_HARDLINK && WIFEXITED(st) && WEXITSTATUS(st) == 3 &&
	    link(g_victim, path) == 0)
		return;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		_exit(10 + (WIFEXITED(st) ? WEXITSTATUS(st) : 9));
}

/* In the victim: plant, then name and finalize code with EP_F_PERFMAP.
 * A blocked open is ended by the alarm (the process dies of SIGALRM). */
static void victim(enum plant what, int ready_fd)
{
	char path[64];
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_MEMFD,
				 .flags = EP_F_PERFMAP };
	struct ep_pool *p;
	struct ep_image img;

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
	unlink(path);
	plant_as_nobody(what, path);
	if (what == PLANT_FIFO_READ) {
		/* someone reads the FIFO: the parent, once it is there */
		char c = 1;

		if (write(ready_fd, &c, 1) != 1 || read(ready_fd, &c, 1) != 1)
			_exit(4);
	}
	signal(SIGALRM, SIG_DFL); /* (Check's handler would let open() restart) */
	alarm(20);
	if (ep_pool_create(&cfg, &p) != 0 || ep_alloc(p, 16, &img) != 0)
		_exit(5);
	tu_emit_ret_imm(img.rw, 7);
	if (ep_set_name(p, img.exec, "planted_perfmap") != 0 || ep_finalize(p, img.exec) != 0 ||
	    ep_set_name(p, img.exec, "planted_perfmap_again") != 0)
		_exit(6);
	ep_pool_destroy(p);
	_exit(0);
}

static void perfmap_planted(enum plant what, const char *label)
{
	int sv[2];

	if (geteuid() != 0) {
		printf("SKIP: %s: needs root to plant the file as another user\n", label);
		return;
	}
	snprintf(g_victim, sizeof(g_victim), "/tmp/ep-perfmap-victim-XXXXXX");
	int vfd = mkstemp(g_victim);

	ck_assert_int_ge(vfd, 0);
	close(vfd);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);

	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t v = fork();

	ck_assert_int_ge(v, 0);
	if (v == 0) {
		close(sv[0]);
		victim(what, sv[1]);
	}
	close(sv[1]);

	char path[64];
	int rfd = -1;

	snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)v);
	if (what == PLANT_FIFO_READ) {
		char c;

		ck_assert_int_eq(read(sv[0], &c, 1), 1);
		rfd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		ck_assert_msg(rfd >= 0, "cannot open the planted FIFO: %s", strerror(errno));
		ck_assert_int_eq(write(sv[0], &c, 1), 1);
	}
	int st = 0;

	ck_assert_int_eq(waitpid(v, &st, 0), v);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(sv[0]);

	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	struct stat sb;
	int is_link = lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode);
	char got[256] = "";
	ssize_t n = -1;

	if (rfd >= 0) {
		n = read(rfd, got, sizeof(got) - 1);
		close(rfd);
	} else if (what == PLANT_FILE) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		n = fd >= 0 ? read(fd, got, sizeof(got) - 1) : -1;
		if (fd >= 0)
			close(fd);
	}
	struct stat vs;
	int vsize = stat(g_victim, &vs) == 0 ? (int)vs.st_size : -1;

	unlink(path);
	unlink(g_victim);
	ck_assert_msg(!(WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM),
		      "%s: naming code did not return in 20 s (blocked on the perf map)", label);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the victim failed (status %#x)",
		      label, st);
	ck_assert_msg(secs < 10, "%s: naming code took %.1f s", label, secs);
	ck_assert_msg(vsize == 0, "%s: %d bytes written through the planted link to %s", label,
		      vsize, g_victim);
	if (what == PLANT_LINK)
		ck_assert_msg(is_link, "%s: the planted link was replaced", label);
	ck_assert_msg(n <= 0, "%s: the perf map was written into the planted %s: '%.*s'", label,
		      what == PLANT_FILE ? "file" : "FIFO", (int)(n > 0 ? n : 0), got);
}

START_TEST(test_perfmap_planted_link)
{
	perfmap_planted(PLANT_LINK, "symlink");
}
END_TEST

START_TEST(test_perfmap_planted_hardlink)
{
	perfmap_planted(PLANT_HARDLINK, "hard link");
}
END_TEST

START_TEST(test_perfmap_planted_fifo)
{
	perfmap_planted(PLANT_FIFO, "FIFO");
	perfmap_planted(PLANT_FIFO_READ, "FIFO with a reader");
}
END_TEST

START_TEST(test_perfmap_planted_file)
{
	perfmap_planted(PLANT_FILE, "another user's file");
}
END_TEST


/* (in the order main() runs them) */
void diag_add_planted_tests(TCase *tc)
{
	tcase_add_test(tc, test_perfmap_planted_link);
	tcase_add_test(tc, test_perfmap_planted_hardlink);
	tcase_add_test(tc, test_perfmap_planted_fifo);
	tcase_add_test(tc, test_perfmap_planted_file);
}
