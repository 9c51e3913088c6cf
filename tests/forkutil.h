/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * forkutil.h - the fork-plus-pipes handshake the fork suites share: make a
 * child (fork(), _Fork() or syscall(SYS_fork): the last two run no fork
 * handlers), talk to it over two pipes one byte at a time, and wait for
 * its status with a bound, so that a child that hangs fails its test
 * instead of hanging the suite.  Checks inside the child use CHILD_CHECK
 * (reliability.h): the Check framework must not run there.
 */
#ifndef EP_FORKUTIL_H
#define EP_FORKUTIL_H

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "reliability.h"

/* How a child is made. */
enum fu_kind { FU_FORK, FU_UFORK, FU_RAW, FU_KINDS };

static const char *const fu_kind_names[FU_KINDS] = { "fork()", "_Fork()", "syscall(SYS_fork)" };

#if defined(__GLIBC__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 34)
#define FU_HAVE_UFORK 1
#endif
#endif

/* Whether this kind of child can be made here: NULL if so, else why not. */
static inline const char *fu_unavailable(enum fu_kind k)
{
#ifdef EP_TEST_TSAN
	/* ThreadSanitizer's runtime keeps a thread of its own; a child made
	 * behind its back (no fork() interceptor) may inherit its locks held */
	if (k != FU_FORK)
		return "ThreadSanitizer only supports fork()";
#endif
#ifndef FU_HAVE_UFORK
	if (k == FU_UFORK)
		return "no _Fork() in this C library (glibc 2.34+)";
#endif
	(void)k;
	return NULL;
}

/* A child without fork()'s handlers (neither the library's nor libc's). */
static inline pid_t fu_raw_fork(void)
{
#ifdef SYS_fork
	return (pid_t)syscall(SYS_fork);
#else
	return (pid_t)syscall(SYS_clone, SIGCHLD, 0L, 0L, 0L, 0L);
#endif
}

static inline pid_t fu_fork_as(enum fu_kind k)
{
	switch (k) {
	case FU_UFORK:
#ifdef FU_HAVE_UFORK
		return _Fork();
#else
		errno = ENOSYS;
		return -1;
#endif
	case FU_RAW:
		return fu_raw_fork();
	default:
		return fork();
	}
}

/* One side's view of a child and the pipes between them. */
struct fu_child {
	pid_t pid; /* the child's pid in the parent; 0 in the child */
	int tx;	   /* this side's write end: what the other side's rx reads */
	int rx;	   /* this side's read end */
};

static inline void fu_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/*
 * Two pipes, stdio flushed (no buffered line printed twice), and a child
 * made as k says.  Returns as fork() does: 0 in the child, the child's pid
 * in the parent, -1 with errno set on failure (nothing left open).  Each
 * side keeps its own two ends in c and closes the other side's, so that a
 * side that dies ends the other's reads.
 */
static inline pid_t fu_fork(struct fu_child *c, enum fu_kind k)
{
	int down[2], up[2]; /* parent to child, child to parent */

	c->pid = -1;
	c->tx = c->rx = -1;
	if (pipe(down))
		return -1;
	if (pipe(up)) {
		int e = errno;

		close(down[0]);
		close(down[1]);
		errno = e;
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fu_fork_as(k);

	if (pid < 0) {
		int e = errno;

		close(down[0]);
		close(down[1]);
		close(up[0]);
		close(up[1]);
		errno = e;
		return -1;
	}
	if (pid == 0) {
		close(down[1]);
		close(up[0]);
		c->pid = 0;
		c->rx = down[0];
		c->tx = up[1];
		return 0;
	}
	close(down[0]);
	close(up[1]);
	c->pid = pid;
	c->tx = down[1];
	c->rx = up[0];
	return pid;
}

static inline double fu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Send one byte to the other side: 0, or -1 (it is gone). */
static inline int fu_send(const struct fu_child *c, char m)
{
	return rel_send(c->tx, m);
}

/* Send / receive n bytes (a pointer, say) in one write; 0 or -1. */
static inline int fu_send_buf(const struct fu_child *c, const void *p, size_t n)
{
	ssize_t w;

	do
		w = write(c->tx, p, n);
	while (w < 0 && errno == EINTR);
	return w == (ssize_t)n ? 0 : -1;
}

static inline int fu_recv_buf(const struct fu_child *c, void *p, size_t n)
{
	ssize_t r;

	do
		r = read(c->rx, p, n);
	while (r < 0 && errno == EINTR);
	return r == (ssize_t)n ? 0 : -1;
}

/* Everything the other side sends until it closes its end (it exited),
 * as a string of at most n - 1 bytes (more is left unread); its length. */
static inline size_t fu_recv_text(const struct fu_child *c, char *buf, size_t n)
{
	size_t len = 0;

	while (len + 1 < n) {
		ssize_t r = read(c->rx, buf + len, n - 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	buf[len] = 0;
	return len;
}

/* Receive one byte, waiting at most secs seconds (secs < 0: for as long as
 * it takes): 0, or -1 (closed, error or timeout). */
static inline int fu_recv(const struct fu_child *c, char *m, double secs)
{
	if (secs >= 0) {
		struct pollfd pfd = { .fd = c->rx, .events = POLLIN };
		int n;

		do
			n = poll(&pfd, 1, (int)(secs * 1000));
		while (n < 0 && errno == EINTR);
		if (n != 1)
			return -1;
	}
	return rel_recv(c->rx, m);
}

/* In the child: the next byte must be want, or the child fails. */
#define FU_CHILD_EXPECT(c, want)                                                         \
	do {                                                                             \
		char got_ = 0;                                                           \
		CHILD_CHECK(fu_recv((c), &got_, -1) == 0,                                \
			    "pipe closed while waiting for '%c'", (want));              \
		CHILD_CHECK(got_ == (want), "got '%c' on the pipe, expected '%c'", got_, \
			    (want));                                                     \
	} while (0)

/* In the parent (a Check test): the next byte must be want, within secs. */
#define FU_EXPECT(c, want, secs)                                                          \
	do {                                                                              \
		char got_ = 0;                                                            \
		ck_assert_msg(fu_recv((c), &got_, (secs)) == 0,                           \
			      "the child sent nothing where '%c' was due (closed or timed " \
			      "out)", (want));                                            \
		ck_assert_msg(got_ == (want), "got '%c' from the child, expected '%c'",   \
			      got_, (want));                                              \
	} while (0)

/*
 * In the parent: close this side's ends, then wait for the child at most
 * secs seconds (secs < 0: for as long as it takes).  Returns its exit
 * status, 128+signal, -2 if it still ran then (it is killed and reaped) or
 * -1.  Under Valgrind a child that left by rel_child_exit_ok(c->tx) (a
 * SIGKILL after 'k') counts as exit status 0; the 'k' is the last byte it
 * sent, so what the parent left unread before it is read past.
 */
static inline int fu_finish(struct fu_child *c, double secs)
{
	double end = fu_now() + secs;
	int st = -1;

	fu_close(&c->tx);
	for (;;) {
		int ws;
		pid_t r = waitpid(c->pid, &ws, secs < 0 ? 0 : WNOHANG);

		if (r == c->pid) {
			st = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : -1;
			break;
		}
		if (r < 0 && errno != EINTR)
			break;
		if (secs >= 0 && fu_now() > end) {
			kill(c->pid, SIGKILL);
			rel_wait(c->pid);
			st = -2;
			break;
		}
		if (secs >= 0) {
			struct timespec ts = { 0, 1000 * 1000 };

			nanosleep(&ts, NULL);
		}
	}
	if (st == 128 + SIGKILL && RUNNING_ON_VALGRIND) {
		char m = 0, last = 0;
		struct pollfd pfd = { .fd = c->rx, .events = POLLIN };

		while (poll(&pfd, 1, 0) == 1 && rel_recv(c->rx, &m) == 0)
			last = m;
		if (last == 'k')
			st = 0;
	}
	fu_close(&c->rx);
	return st;
}

/* What a status from fu_finish() means, for a failure's message. */
static inline const char *fu_status_text(int st)
{
	if (st == -2)
		return " (hung: killed after the timeout)";
	if (st == REL_CHILD_FAIL)
		return " (a check in the child failed: see its message above)";
	if (st == 128 + SIGALRM)
		return " (hung: killed by its alarm)";
	if (st > 128)
		return " (killed by a signal: ran a trap or bad code?)";
	return "";
}

#endif /* EP_FORKUTIL_H */
