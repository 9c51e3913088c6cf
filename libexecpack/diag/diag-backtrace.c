/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-backtrace.c - ep_backtrace() for crash handlers: libunwind's walk,
 * or the frame records (EXECPACK_BACKTRACE=fp, and where libunwind stops
 * at a JIT frame), with JIT frames named through ep_symbolize().
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#ifdef HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#include "execpack.h"
#include "internal.h"

struct out {
	int fd;
	int err;
	char buf[512];
	size_t n;
};

static void out_flush(struct out *o)
{
	size_t done = 0;

	while (done < o->n) {
		ssize_t w = write(o->fd, o->buf + done, o->n - done);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			o->err = -errno;
			break;
		}
		done += (size_t)w;
	}
	o->n = 0;
}

static void out_str(struct out *o, const char *s)
{
	for (; *s; s++) {
		if (o->n == sizeof(o->buf))
			out_flush(o);
		o->buf[o->n++] = *s;
	}
}

static void out_hex(struct out *o, uintptr_t v)
{
	char t[2 + 16 + 1];
	int i = (int)sizeof(t) - 1;

	t[i] = 0;
	do {
		t[--i] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	t[--i] = 'x';
	t[--i] = '0';
	out_str(o, t + i);
}

static void out_dec(struct out *o, unsigned v)
{
	char t[12];
	int i = (int)sizeof(t) - 1;

	t[i] = 0;
	do {
		t[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	out_str(o, t + i);
}

/* One line: "#N 0xIP in name+0xOFF [jit]".  lookup is ip for the
 * interrupted frame, ip-1 for return addresses (still inside the call). */
static void out_frame(struct out *o, unsigned n, uintptr_t ip, uintptr_t lookup,
		      const char *other, uintptr_t other_off)
{
	char name[EP_NAME_MAX + 1];
	size_t off = 0;
	int rc = ep_symbolize((const void *)lookup, name, sizeof(name), &off);

	out_str(o, "#");
	out_dec(o, n);
	out_str(o, " ");
	out_hex(o, ip);
	if (rc == 0 || rc == -ERANGE) {
		out_str(o, " in ");
		out_str(o, name);
		out_str(o, "+");
		out_hex(o, off + (ip - lookup));
		out_str(o, " [jit]");
	} else if (other) {
		out_str(o, " in ");
		out_str(o, other);
		out_str(o, "+");
		out_hex(o, other_off);
	}
	out_str(o, "\n");
}

/* ---- the frame-pointer walk ------------------------------------------------
 * Async-signal-safe: system calls (open, read, close, sigaction), no locks,
 * no allocation, and no read of memory that was not first checked to lie in
 * the readable mapping that holds the stack being walked.  The mapping is
 * found in /proc/self/maps, parsed as it is read; a thread's stack is one
 * mapping (glibc and the kernel put nothing else readable in between), and
 * its guard pages are mappings of their own, so a frame pointer that leaves
 * it is refused before it is used.
 */

/* The readable mapping [*lo, *hi) that holds addr.  0, or -errno. */
static int map_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	/* per line: START-END PERMS ...; only the first three fields matter */
	enum { START, END, PERMS, REST } st = START;
	uintptr_t s = 0, e = 0;
	char buf[512];
	int rc = -ENOENT;
	ssize_t got;

	while (rc == -ENOENT && (got = read(fd, buf, sizeof(buf))) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		for (ssize_t i = 0; i < got && rc == -ENOENT; i++) {
			char c = buf[i];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

			if (c == '\n') {
				st = START, s = 0, e = 0;
				continue;
			}
			switch (st) {
			case START:
				if (d >= 0)
					s = s << 4 | (uintptr_t)d;
				else
					st = c == '-' ? END : REST;
				break;
			case END:
				if (d >= 0)
					e = e << 4 | (uintptr_t)d;
				else
					st = c == ' ' ? PERMS : REST;
				break;
			case PERMS:
				if (c == 'r' && addr >= s && addr < e) {
					*lo = s;
					*hi = e;
					rc = 0;
				}
				st = REST;
				break;
			case REST:
				break;
			}
		}
	}
	close(fd);
	return rc;
}

#ifdef EP__ARCH_SIGFRAMES
#define EP_SIGFRAMES 1
/*
 * The return address the kernel gives signal handlers (glibc's
 * __restore_rt, the same for every handler), or 0.  sigaction(2) reports
 * it for any signal that has a handler.
 */
static uintptr_t sig_restorer(void)
{
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;

		if (sigaction(sig, NULL, &sa) == 0 && sa.sa_restorer)
			return (uintptr_t)sa.sa_restorer;
	}
	return 0;
}
#endif

/*
 * Walk the frame records from fp ([saved fp, return address] pairs, as
 * `push rbp; mov rbp, rsp` makes them; at fp - 16 on riscv64, arch.h's
 * EP__FRAME_RECORD).  Each next record must lie higher on
 * the same stack, 8-byte aligned and wholly inside its mapping.  A record
 * whose return address is the signal restorer is a handler's frame: the
 * interrupted context follows it (x86-64 rt_sigframe: the return address,
 * then the ucontext), and the walk goes on from its pc and frame pointer on
 * the interrupted stack, which is another mapping when the handler runs on
 * an alternate signal stack.
 */
static unsigned fp_walk(struct out *o, const uintptr_t *fp, unsigned n)
{
	uintptr_t cur = (uintptr_t)fp + EP__FRAME_RECORD, lo = cur, hi = 0;
#ifdef EP_SIGFRAMES
	uintptr_t restorer = sig_restorer();
#endif

	if (map_of(cur, &lo, &hi) != 0)
		return n;
	lo = cur;
	while (n < 256 && cur >= lo && cur < hi && cur % 8 == 0 &&
	       hi - cur >= 2 * sizeof(uintptr_t)) {
		const uintptr_t *rec = (const uintptr_t *)cur;
		uintptr_t next = rec[0] + EP__FRAME_RECORD, ip = rec[1];

		if (!ip)
			break;
		out_frame(o, n++, ip, ip - 1, NULL, 0);
#ifdef EP_SIGFRAMES
		if (restorer && ip == restorer) {
			const ucontext_t *uc = (const ucontext_t *)(cur + 2 * sizeof(uintptr_t));
			uintptr_t end = EP__UC_END(uc);

			if (end > hi || n >= 256)
				break;
			uintptr_t pc = EP__UC_PC(uc);
			uintptr_t sp = EP__UC_SP(uc);

			next = EP__UC_FP(uc);
			out_frame(o, n++, pc, pc, NULL, 0); /* the exact pc: no call */
			if (sp < lo || sp >= hi) {
				/* the handler ran on another stack */
				if (map_of(sp, &lo, &hi) != 0)
					break;
			}
			lo = sp;
			cur = next;
			continue;
		}
#endif
		if (next <= cur)
			break;
		lo = cur + 2 * sizeof(uintptr_t);
		cur = next;
	}
	return n;
}

/* EXECPACK_BACKTRACE=fp: the frame-pointer walk even where libunwind is
 * there.  glibc's secure_getenv() is async-signal-safe: it is getenv(),
 * which takes no lock, behind a test of a flag set at startup. */
static bool fp_walk_wanted(void)
{
#ifdef HAVE_LIBUNWIND
	const char *e = secure_getenv("EXECPACK_BACKTRACE");

	return e && !strcmp(e, "fp");
#else
	return true;
#endif
}

EP_API int ep_backtrace(int fd)
{
	struct out o = { .fd = fd };
	unsigned n = 0;
	int saved_errno = errno;
	/* also makes this function keep a frame record: the walk starts here */
	const uintptr_t *fp = __builtin_frame_address(0);

	if (fp_walk_wanted()) {
		n = fp_walk(&o, fp, 0);
	} else {
#ifdef HAVE_LIBUNWIND
		unw_context_t ctx;
		unw_cursor_t cur;
		bool after_signal = true; /* the first frame's ip is exact */

		if (unw_getcontext(&ctx) != 0 || unw_init_local(&cur, &ctx) != 0) {
			errno = saved_errno;
			return -ENOTSUP;
		}
		do {
			unw_word_t ip = 0, off = 0;
			char fn[128];

			if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0)
				break;
			uintptr_t lookup = after_signal ? ip : ip - 1;
			int jit = ep_symbolize((const void *)lookup, NULL, 0, NULL) != -ENOENT;
			bool named = !jit && unw_get_proc_name(&cur, fn, sizeof(fn), &off) == 0;

			out_frame(&o, n++, ip, lookup, named ? fn : NULL, off);
			after_signal = unw_is_signal_frame(&cur) > 0;
			if (n >= 256)
				break;
			unw_word_t fpv = 0, sp = 0, ip1 = 0, sp1 = 0;

			if (jit && (unw_get_reg(&cur, EP__UNW_FP, &fpv) != 0 ||
				    unw_get_reg(&cur, UNW_REG_SP, &sp) != 0))
				fpv = 0;
			int st = unw_step(&cur);

			if (st > 0 && jit && fpv &&
			    (unw_get_reg(&cur, UNW_REG_IP, &ip1) != 0 ||
			     unw_get_reg(&cur, UNW_REG_SP, &sp1) != 0))
				st = 0;
			if (jit && fpv && (st <= 0 || (ip1 == ip && sp1 == sp))) {
				/* libunwind has no rule for this JIT frame and
				 * no frame-pointer fallback (arm64, riscv64):
				 * follow the frame records from here on */
				n = fp_walk(&o, (const uintptr_t *)fpv, n);
				break;
			}
			if (st <= 0)
				break;
		} while (1);
#endif
	}
	out_flush(&o);
	errno = saved_errno;
	return o.err ? o.err : (int)n;
}
