/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fork.c - fork() and the processes it makes (the lists of pools and heaps
 * that its handlers walk are registry.c's).
 *
 * The mappings are MAP_SHARED, so a child of fork() shares its parent's code
 * pages.  The child makes them its own: the fork generation changes in the
 * child, and there every region is given a private copy at the same
 * addresses (the backend's privatize op) before fork() returns in it.  The
 * parent holds every heap lock until the child has done so, so no change of
 * the parent's reaches code the child runs (except where no copy could be
 * made: a sealed region, no memory; the child's own changes to it then
 * fail, libexecpack(7)), and the parent neither copies nor makes a file.
 * The child says so on a socket made for this fork: first its pid, then
 * that it is done.  The parent reads until "done", or end of file, or that
 * pid has exited; it never waits for end of file alone, because a child
 * that another thread made meanwhile without fork()'s handlers
 * (syscall(SYS_fork): no exec, so O_CLOEXEC does not help) holds the
 * socket open for its whole life.
 *
 * A child that is kept stopped (a debugger that holds a new child, a
 * tracer, SIGSTOP) would hold the parent's fork() for as long, every lock
 * of the library with it.  So the parent stops waiting when it sees the
 * child stopped (/proc: the pid it said, or the newest child of the
 * forking thread), or when the child has not said its pid within
 * STALL_MS: then the parent's generation is raised too, and the parent
 * makes each region its own before its first change to it, as a child
 * does after a copy that failed (its sealed regions excepted: they cannot
 * be copied and it goes on changing them, as it always did).  Either way
 * neither process ever writes a page that the other still maps: the
 * child's copies, whenever it runs, find the pages as they were at the
 * fork.  The child's words then go to a closed socket: MSG_NOSIGNAL.
 *
 * A child made without fork()'s handlers (_Fork(), syscall(SYS_fork),
 * clone() without CLONE_VM) is recognised by a page with MADV_WIPEONFORK,
 * which reads as zeros there: its first call resets the locks and makes its
 * copies then (libexecpack(7) says what such a child may see before that).
 *
 * Every lock of the library is covered, in one order that every other path
 * keeps too (a thread holding one only ever takes those after it):
 *   ep__roots_lock -> each pool's heaps_lock -> ep__thread_key_lock ->
 *   ep__thread_spare_lock -> ep__heaps_lock -> each heap's lock (and its
 *   remote-free gate) -> ep__info_lock -> ep__meta_lock -> diag's lock
 *   (jitdump's writes hold it too).  A code range's lock (code-range.c) is taken only inside
 *   a backend's map or unmap, under a heap's lock, and nothing after it: no
 *   thread holds it while the handlers hold every heap's.
 * The handlers take them all in that order and release them in the parent
 * and the child; a child that ran no handler resets exactly the same set,
 * once (the first of its threads to call does, the others wait for it).
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "code-range.h"
#include "diag-symtab.h"
#include "diag.h"
#include "fork.h"
#include "heap.h"
#include "info.h"
#include "lock.h"
#include "meta.h"
#include "pack-seq.h"
#include "patch.h"
#include "region.h"
#include "registry.h"
#include "remote.h"
#include "thread.h"
#include "track.h"
#include "wait.h"

static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
int *ep__fork_mark; /* a MADV_WIPEONFORK page: nonzero in the process that set it */
static int g_fork_pipe[2] = { -1, -1 }; /* a socket pair: [1] the child's */
static pid_t g_fork_tid; /* the thread under way in fork() */

/* How long a child may take to say its pid before the parent stops
 * waiting for it (it is stopped in a way /proc does not show, frozen,
 * or the machine is that busy: the parent's copies are then the cost). */
enum { STALL_MS = 1000 };


static void own_now(struct ep__heap *heap, struct ep__region *r)
{
	(void)ep__own_region_slow(heap, r); /* failed: tried again before a change */
}

/* In a new child, with every lock ours: a new generation, every region
 * copied. */
static void child_take_over(void)
{
	ep__add_relaxed(&ep__fork_gen, 1);
	for (struct ep__heap *h = ep__heaps; h; h = h->gnext)
		ep__heap_each_region(h, own_now);
	if (ep__fork_mark)
		ep__store_release(ep__fork_mark, 1);
}

/* Holding every lock across fork() means no change is half-done in the
 * child (see the top of this file for the order). */
static void lock_all(void)
{
	ep__mutex_lock(&ep__roots_lock);
	for (struct ep_pool *r = ep__roots; r; r = r->next_root)
		ep__mutex_lock(&r->heaps_lock);
	ep__mutex_lock(&ep__thread_key_lock);
	ep__mutex_lock(&ep__thread_spare_lock);
	ep__mutex_lock(&ep__heaps_lock);
	for (struct ep__heap *p = ep__heaps; p; p = p->gnext) {
		ep__lock(&p->lock);
		ep__remote_gate(p); /* and no free without the lock (remote.c) */
	}
	ep__mutex_lock(&ep__info_lock);
	ep__mutex_lock(&ep__meta_lock);
	ep__diag_fork_prepare();
}

static void atfork_prepare(void)
{
	lock_all();
	/* (a socket: the child's send() to a parent that stopped waiting
	 * must not raise SIGPIPE) */
	if (ep__heaps && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, g_fork_pipe))
		g_fork_pipe[0] = g_fork_pipe[1] = -1; /* (then the parent copies itself) */
	g_fork_tid = (pid_t)syscall(SYS_gettid);
}

static void close_pipe(void)
{
	for (int i = 0; i < 2; i++)
		if (g_fork_pipe[i] >= 0)
			close(g_fork_pipe[i]);
	g_fork_pipe[0] = g_fork_pipe[1] = -1;
}

/* The child's two words (sends this short are not split). */
enum { CHILD_DONE = 0 };

static void tell_parent(pid_t word)
{
	while (send(g_fork_pipe[1], &word, sizeof(word), MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/* Whether the child pid is gone: exited (not yet reaped: WNOWAIT leaves it
 * to the program), or reaped already. */
static bool child_gone(pid_t pid)
{
	siginfo_t si;

	si.si_pid = 0;
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno == ECHILD;
	return si.si_pid == pid;
}

/* What /proc says of process pid: whether it is stopped (by a signal, or
 * by a tracer); false where it cannot tell. */
static bool child_stopped(pid_t pid)
{
	char path[64], buf[512];

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);

	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	/* "pid (comm) S ...": comm may hold anything, ')' included */
	char *e = strrchr(buf, ')');

	return e && e[1] == ' ' && (e[2] == 'T' || e[2] == 't');
}

/* The newest child of thread tid (the new one, before it can say its pid
 * itself: children are listed in the order they were made), or 0. */
static pid_t newest_child(pid_t tid)
{
	char path[80], buf[4096];

	snprintf(path, sizeof(path), "/proc/self/task/%ld/children", (long)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);

	close(fd);
	if (n <= 0 || (size_t)n == sizeof(buf) - 1)
		return 0; /* (none, or more than fit: not sure which is last) */
	buf[n] = 0;
	long last = 0;

	for (char *q = buf; *q;) {
		char *end;
		long v = strtol(q, &end, 10);

		if (end == q)
			break;
		last = v;
		q = end;
		while (*q == ' ' || *q == '\n')
			q++;
	}
	return (pid_t)last;
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)(t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Until the child is done or dead (true), or seen stopped, or silent for
 * STALL_MS (false); asleep meanwhile.  A child that dies before it can
 * say its pid is seen by end of file.  The pid found in /proc only ever
 * stops the wait (it may not be that child's: not trusted to say it is
 * gone). */
static bool wait_child(int fd, pid_t tid)
{
	pid_t pid = 0, seen = 0, word;
	size_t have = 0;
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned tick = 0;; tick++) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		/* (short at first: a stopped child is seen soon; then rarely) */
		int n = poll(&pfd, 1, tick < 20 ? 1 : 20);

		if (n < 0 && errno != EINTR)
			return true; /* (cannot happen with a valid fd) */
		if (n > 0) {
			ssize_t got = read(fd, (char *)&word + have, sizeof(word) - have);

			if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN))
				return true; /* every writer gone: the child too */
			if (got > 0 && (have += (size_t)got) == sizeof(word)) {
				have = 0;
				if (word == CHILD_DONE)
					return true;
				pid = word;
			}
			continue;
		}
		if (pid && child_gone(pid))
			return true;
		if (!pid && !seen)
			seen = newest_child(tid);
		if ((pid || seen) && child_stopped(pid ? pid : seen))
			return false;
		if (!pid && ms_since(&t0) >= STALL_MS)
			return false;
	}
}

/* A sealed region cannot be copied: the parent goes on changing it, as
 * without a fork (the child's copy of it is frozen, libexecpack(7)). */
static void keep_sealed(struct ep__heap *h, struct ep__region *r)
{
	unsigned gen = ep__fork_generation();

	(void)h;
	if (r->sealed && r->gen == gen - 1)
		ep__store_relaxed(&r->gen, gen);
}

/* In the parent, every lock held, its child not done: the parent makes
 * each region its own before its first change to it (child_take_over()'s
 * work, put off). */
static void parent_let_go(void)
{
	ep__add_relaxed(&ep__fork_gen, 1);
	for (struct ep__heap *h = ep__heaps; h; h = h->gnext)
		ep__heap_each_region(h, keep_sealed);
}

static void atfork_unlock(void)
{
	ep__mutex_unlock(&ep__meta_lock);
	ep__mutex_unlock(&ep__info_lock);
	for (struct ep__heap *p = ep__heaps; p; p = p->gnext) {
		ep__remote_ungate(p);
		ep__unlock(&p->lock);
	}
	ep__mutex_unlock(&ep__heaps_lock);
	ep__mutex_unlock(&ep__thread_spare_lock);
	ep__mutex_unlock(&ep__thread_key_lock);
	for (struct ep_pool *r = ep__roots; r; r = r->next_root)
		ep__mutex_unlock(&r->heaps_lock);
	ep__mutex_unlock(&ep__roots_lock);
}

static void atfork_parent(void)
{
	ep__diag_fork_parent();
	if (g_fork_pipe[0] >= 0) {
		close(g_fork_pipe[1]);
		g_fork_pipe[1] = -1;
		if (!wait_child(g_fork_pipe[0], g_fork_tid))
			parent_let_go();
		close_pipe();
	} else if (ep__heaps) {
		parent_let_go(); /* (no socket: the child cannot say when it is done) */
	}
	atfork_unlock();
}

/* The child has one thread: the biases of the parent's threads go, and
 * membarrier(2) is set up again for this process. */
static void atfork_child(void)
{
	if (g_fork_pipe[1] >= 0)
		tell_parent(getpid()); /* first: the parent can then see it die */
	for (struct ep__heap *p = ep__heaps; p; p = p->gnext)
		ep__lock_reset(&p->lock);
	ep__lock_setup();
	ep__diag_fork_child();
	/* (the parent waits, or copies before it changes: the pages are as
	 * the maps say) */
	ep__copy_prompt = g_fork_pipe[1] >= 0;
	child_take_over();
	ep__copy_prompt = 0;
	if (g_fork_pipe[1] >= 0)
		tell_parent(CHILD_DONE);
	close_pipe();
	atfork_unlock();
}

/*
 * A child that ran no fork handler: whatever a vanished thread held is
 * free now (see libexecpack(7) on what was under way).  The same set as
 * the handlers', reset once: the mark goes 0 -> 2 for the thread that does
 * it, and to 1 when done; another thread of the child waits for that.
 */
void ep__fork_missed(void)
{
	int zero = 0;

	if (!ep__cas_acq_rel(ep__fork_mark, &zero, 2)) {
		/* (its copies take long: a spin, then a sleep until woken) */
		for (unsigned spins = 0, m; (m = ep__load_acquire(ep__fork_mark)) != 1;
		     spins++)
			if (!EP_SPIN(spins, "fork reset"))
				ep__futex_wait(ep__fork_mark, m, NULL);
		return;
	}
	pthread_mutex_init(&ep__roots_lock, NULL);
	for (struct ep_pool *r = ep__roots; r; r = r->next_root)
		pthread_mutex_init(&r->heaps_lock, NULL);
	pthread_mutex_init(&ep__thread_key_lock, NULL);
	pthread_mutex_init(&ep__thread_spare_lock, NULL);
	pthread_mutex_init(&ep__heaps_lock, NULL);
	pthread_mutex_init(&ep__info_lock, NULL);
	pthread_mutex_init(&ep__meta_lock, NULL);
	for (struct ep__heap *p = ep__heaps; p; p = p->gnext) {
		ep__lock_reset(&p->lock);
		ep__remote_reset(p);
		if (p->crange && !p->shares_backend)
			ep__crange_reset(p->crange);
	}
	ep__lock_setup();
	ep__diag_fork_reset();
	lock_all(); /* (all free now: taken at once) */
	/* counts a vanished writer left odd: its readers would wait or pass
	 * over them for ever */
	for (struct ep__heap *p = ep__heaps; p; p = p->gnext) {
		for (struct ep__pack *k = p->head; k; k = k->next)
			ep__pack_seq_reset(k);
		for (struct ep__pack *k = p->spare_packs; k; k = k->next)
			ep__pack_seq_reset(k);
	}
	ep__info_fork_reset();
	ep__symtab_fork_reset();
	/* made while another thread's fork() was under way: that pipe is
	 * not this process's to hold */
	close_pipe();
	ep__diag_fork_child();
	child_take_over(); /* (the mark is 1 from here) */
	ep__futex_wake(ep__fork_mark); /* the child's other threads */
	atfork_unlock();
}

static void hide_from_leak_check(void);

static void atfork_install(void)
{
	ep__diag_on_exit(hide_from_leak_check);
	size_t pg = ep__page_size();
	void *m = mmap(NULL, pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m != MAP_FAILED) {
		if (madvise(m, pg, MADV_WIPEONFORK) == 0) {
			*(int *)m = 1;
			/* readers check it without the once-flag (fork.h) */
			ep__store_release(&ep__fork_mark, (int *)m);
		} else {
			munmap(m, pg); /* (before Linux 4.14) */
		}
	}
	ep__lock_setup();
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/*
 * Under Valgrind, at exit: the pool's own copies of the addresses it handed
 * out (its heaps', and ep_lookup()'s entries in info.c) are made invisible
 * to memcheck's leak scan, so that an allocation the program lost is
 * reported "definitely lost".  diag.c's destructor calls it through the
 * hook set with ep__diag_on_exit(): the exit is diag's to see, and the core
 * it must tell sits above it (a direct call would be a call up).
 */
static void hide_from_leak_check(void)
{
	ep__mutex_lock(&ep__heaps_lock);
	for (struct ep__heap *p = ep__heaps; p; p = p->gnext) {
		for (size_t i = 0; i < p->nranges; i++)
			ep__diag_hide_word(&p->ranges[i], 2 * sizeof(uintptr_t));
		for (struct ep__pack *k = p->head; k; k = k->next)
			ep__diag_hide_word(&k->r.exec, sizeof(k->r.exec));
		for (size_t i = 0; i <= p->hash_mask; i++) {
			for (struct ep__alloc *a = p->hash[i]; a; a = a->hnext) {
				ep__diag_hide_word(&a->key, sizeof(a->key));
				ep__diag_hide_word(&a->exec, sizeof(a->exec));
				ep__diag_hide_word(&a->large.exec, sizeof(a->large.exec));
			}
		}
	}
	ep__mutex_unlock(&ep__heaps_lock);
	ep__info_hide();
}

/* Before the first heap is on registry.c's lists: the handlers, once. */
void ep__fork_setup(void)
{
	pthread_once(&g_atfork_once, atfork_install);
}
