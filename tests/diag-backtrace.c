/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-backtrace.c - check_diag's tests of JIT frames in backtraces:
 * libunwind through JIT code in every ep_set_unwind() kind (a TCase of its
 * own), ep_set_unwind()'s errors, ep_backtrace(), and its frame-pointer
 * walk over bad frame pointers and through a signal frame.
 */
#include "config.h"

#include "diag-suite.h"

/* ---- JIT frames in backtraces ------------------------------------------ */

/*
 * x86-64:
 * push rbp; mov rbp, rsp; mov rax, cb; call rax; pop rbp; ret   (fp)
 * nop; sub rsp, 8; mov rax, cb; call rax; add rsp, 8; ret       (no fp)
 * arm64:
 * stp x29, x30, [sp, #-16]!; mov x29, sp; ldr x16, =cb; blr x16;
 * ldp x29, x30, [sp], #16; ret                                  (fp)
 * stp x29, x30, [sp, #-16]!; ldr x16, =cb; blr x16;
 * ldp x29, x30, [sp], #16; ret                                  (no fp:
 * x29 is the caller's, the return address at the top of the frame)
 * The return address into the JIT code is at CALL_END.  They differ on
 * purpose: unw_backtrace() keeps a per-thread cache of frame layouts by
 * address that nothing invalidates (libunwind 1.6), so with CK_FORK=no a
 * reused address with a different layout would be stepped by stale data.
 */
#if defined(__x86_64__)
#define JIT_FRAMES 1
#define FP_CALL_END 16
#define SP_CALL_END 17
#define SP_PROLOGUE 5
#define SP_FRAME 8

static size_t emit_caller(unsigned char *p, int (*cb)(void), int fp)
{
	size_t n = 0;
	uint64_t target;

	memcpy(&target, &cb, sizeof(target));
	if (fp) {
		p[n++] = 0x55;
		p[n++] = 0x48, p[n++] = 0x89, p[n++] = 0xe5;
	} else {
		p[n++] = 0x90;
		p[n++] = 0x48, p[n++] = 0x83, p[n++] = 0xec, p[n++] = 0x08;
	}
	p[n++] = 0x48, p[n++] = 0xb8;
	memcpy(p + n, &target, 8), n += 8;
	p[n++] = 0xff, p[n++] = 0xd0;
	if (fp)
		p[n++] = 0x5d;
	else
		p[n++] = 0x48, p[n++] = 0x83, p[n++] = 0xc4, p[n++] = 0x08;
	p[n++] = 0xc3;
	return n;
}
#elif defined(__aarch64__)
#define JIT_FRAMES 1
#define FP_CALL_END 16
#define SP_CALL_END 12
#define SP_PROLOGUE 4
#define SP_FRAME 16

/* ldr x<rt>, <literal at byte lit>, placed at byte at */
static uint32_t a64_ldr_lit(unsigned rt, size_t at, size_t lit)
{
	return 0x58000000u | (uint32_t)((lit - at) / 4) << 5 | rt;
}

static size_t emit_caller(unsigned char *p, int (*cb)(void), int fp)
{
	size_t n = 0;
	uint64_t target;

	memcpy(&target, &cb, sizeof(target));
	tu_put32(p + n, 0xa9bf7bfdu), n += 4;      /* stp x29, x30, [sp, #-16]! */
	if (fp)
		tu_put32(p + n, 0x910003fdu), n += 4; /* mov x29, sp */
	tu_put32(p + n, a64_ldr_lit(16, n, 24)), n += 4;
	tu_put32(p + n, 0xd63f0200u), n += 4;      /* blr x16 */
	tu_put32(p + n, 0xa8c17bfdu), n += 4;      /* ldp x29, x30, [sp], #16 */
	tu_put32(p + n, 0xd65f03c0u), n += 4;      /* ret */
	while (n < 24)
		tu_put32(p + n, 0xd503201fu), n += 4; /* nop */
	memcpy(p + n, &target, 8), n += 8;
	return n;
}
#endif

#ifdef JIT_FRAMES
static void *jit_caller(int (*cb)(void), int fp, const char *name, int kind)
{
	struct ep_image img;

	ck_assert_int_eq(ep_alloc(diag_pool, 32, &img), 0);
	emit_caller(img.rw, cb, fp);
	if (kind >= 0) {
		int rc = ep_set_unwind(diag_pool, img.exec, kind, fp ? 0 : SP_PROLOGUE, fp ? 0 : SP_FRAME);

		ck_assert_msg(rc == 0, "ep_set_unwind: %s", ep_strerror(rc));
	}
	ck_assert_int_eq(ep_set_name(diag_pool, img.exec, name), 0);
	ck_assert_int_eq(ep_finalize(diag_pool, img.exec), 0);
	return img.exec;
}

static void *g_jit;        /* the JIT caller being tested */
static char g_bt[8192];    /* ep_backtrace() output */

#ifdef HAVE_LIBUNWIND
struct unw_result {
	int frames;
	int jit_frame;       /* index of the JIT frame, -1 */
	int jit_name_rc;     /* unw_get_proc_name() on it */
	char jit_name[64];
	unw_word_t jit_off;
	int main_reached;
	int bt_frames;       /* unw_backtrace() */
	int bt_has_jit;
};
static struct unw_result g_res;

/* Called from JIT code: walks the stack with libunwind. */
__attribute__((noinline)) static int unwind_cb(void)
{
	unw_context_t ctx;
	unw_cursor_t cur;
	uintptr_t lo = (uintptr_t)g_jit, hi = lo + 64;

	memset(&g_res, 0, sizeof(g_res));
	g_res.jit_frame = -1;
	g_res.jit_name_rc = 1;
	unw_getcontext(&ctx);
	unw_init_local(&cur, &ctx);
	do {
		unw_word_t ip = 0, off = 0;
		char name[64];

		unw_get_reg(&cur, UNW_REG_IP, &ip);
		int rc = unw_get_proc_name(&cur, name, sizeof(name), &off);

		if (ip > lo && ip <= hi && g_res.jit_frame < 0) {
			g_res.jit_frame = g_res.frames;
			g_res.jit_name_rc = rc;
			if (rc == 0)
				snprintf(g_res.jit_name, sizeof(g_res.jit_name), "%s", name);
			g_res.jit_off = off;
		}
		if (rc == 0 && !strcmp(name, "main"))
			g_res.main_reached = 1;
		g_res.frames++;
	} while (g_res.frames < 100 && unw_step(&cur) > 0);

	void *ips[64];

	g_res.bt_frames = unw_backtrace(ips, 64);
	for (int i = 0; i < g_res.bt_frames; i++)
		if ((uintptr_t)ips[i] > lo && (uintptr_t)ips[i] <= hi)
			g_res.bt_has_jit = 1;
	return 42;
}

static void check_unwind(int fp, int kind, const char *name)
{
	g_jit = jit_caller(unwind_cb, fp, name, kind);
	ck_assert_int_eq(tu_as_fn(g_jit)(), 42);
	ck_assert_msg(g_res.jit_frame == 1, "JIT frame at %d of %d", g_res.jit_frame,
		      g_res.frames);
#if !defined(__x86_64__)
	/* libunwind steps through a frame it has no call frame information
	 * for by the frame pointer on x86-64 only: elsewhere only the DWARF
	 * kinds get past the JIT frame (ep_set_unwind(3)) */
	if (kind != EP_UNWIND_DWARF_FP && kind != EP_UNWIND_DWARF_SP &&
	    !(kind < 0 && getenv("EXECPACK_UNWIND") && !strcmp(getenv("EXECPACK_UNWIND"), "dwarf"))) {
		ck_assert_msg(!g_res.main_reached || g_res.frames > 2, "%d frames", g_res.frames);
		return;
	}
#endif
	ck_assert_msg(g_res.main_reached, "main not reached (%d frames)", g_res.frames);
	ck_assert_msg(g_res.bt_has_jit, "unw_backtrace: no JIT frame in %d", g_res.bt_frames);
	ck_assert_int_ge(g_res.bt_frames, 4);
}

START_TEST(test_unwind_name)
{
	check_unwind(1, EP_UNWIND_NAME, "jit_named");
	ck_assert_int_eq(g_res.jit_name_rc, 0);
	ck_assert_str_eq(g_res.jit_name, "jit_named");
	ck_assert_uint_eq(g_res.jit_off, FP_CALL_END);
}
END_TEST

START_TEST(test_unwind_dwarf_fp)
{
	/* DWARF CFI drives the step; libunwind has no name for it, ours does */
	check_unwind(1, EP_UNWIND_DWARF_FP, "jit_dwarf_fp");
	char buf[32];
	size_t off;

	ck_assert_int_eq(ep_symbolize((char *)g_jit + FP_CALL_END - 1, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "jit_dwarf_fp");
}
END_TEST

START_TEST(test_unwind_dwarf_sp)
{
	/* no frame pointer at all: only the CFI can step through this frame */
	check_unwind(0, EP_UNWIND_DWARF_SP, "jit_dwarf_sp");
	char buf[32];
	size_t off;

	ck_assert_int_eq(ep_symbolize((char *)g_jit + SP_CALL_END - 1, buf, sizeof(buf), &off), 0);
	ck_assert_str_eq(buf, "jit_dwarf_sp");
}
END_TEST

START_TEST(test_unwind_default)
{
	/* the default kind: EXECPACK_UNWIND=dwarf selects EP_UNWIND_DWARF_FP */
	const char *e = getenv("EXECPACK_UNWIND");
	int dwarf = e && !strcmp(e, "dwarf");

	check_unwind(1, -1, "jit_default");
	if (dwarf) {
		ck_assert_int_ne(g_res.jit_name_rc, 0);
	} else {
		ck_assert_int_eq(g_res.jit_name_rc, 0);
		ck_assert_str_eq(g_res.jit_name, "jit_default");
	}
}
END_TEST

START_TEST(test_unwind_cancelled)
{
	/* after ep_free the range is no longer registered: a new allocation at
	 * the same address gets its own name */
	g_jit = jit_caller(unwind_cb, 1, "first_owner", EP_UNWIND_NAME);
	void *old = g_jit;

	ck_assert_int_eq(ep_free(diag_pool, g_jit), 0);
	g_jit = jit_caller(unwind_cb, 1, "second_owner", EP_UNWIND_NAME);
	ck_assert_ptr_eq(old, g_jit);
	ck_assert_int_eq(tu_as_fn(g_jit)(), 42);
	ck_assert_int_eq(g_res.jit_name_rc, 0);
	ck_assert_str_eq(g_res.jit_name, "second_owner");
}
END_TEST
#endif /* HAVE_LIBUNWIND */
#endif /* JIT_FRAMES */

START_TEST(test_set_unwind_errors)
{
	void *a = diag_jit(diag_pool, 20, 1);

	ck_assert_int_eq(ep_set_unwind(NULL, a, EP_UNWIND_NAME, 0, 0), -EINVAL);
	ck_assert_int_eq(ep_set_unwind(diag_pool, (char *)a + 1, EP_UNWIND_NAME, 0, 0), -EINVAL);
	ck_assert_int_eq(ep_set_unwind(diag_pool, a, 99, 0, 0), -EINVAL);
	ck_assert_int_eq(ep_set_unwind(diag_pool, a, EP_UNWIND_NAME, 1, 0), -EINVAL);
	ck_assert_int_eq(ep_set_unwind(diag_pool, a, EP_UNWIND_DWARF_SP, 1000, 8), -EINVAL);
	ck_assert_int_eq(ep_set_unwind(diag_pool, a, EP_UNWIND_DWARF_SP, 4, 7), -EINVAL);
	ck_assert_int_eq(ep_set_unwind(diag_pool, a, EP_UNWIND_NAME, 0, 0), 0);
#if defined(HAVE_LIBUNWIND) || (defined(HAVE___REGISTER_FRAME) && defined(HAVE___DEREGISTER_FRAME))
	ck_assert_int_eq(ep_set_unwind(diag_pool, a, EP_UNWIND_DWARF_FP, 0, 0), 0);
#else
	ck_assert_int_eq(ep_set_unwind(diag_pool, a, EP_UNWIND_DWARF_FP, 0, 0), -EOPNOTSUPP);
#endif
}
END_TEST

#ifdef JIT_FRAMES
__attribute__((noinline)) static int backtrace_cb(void)
{
	/* a frame record of its own, for the frame-pointer walk to find the
	 * return address into the JIT code */
	volatile uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	int fd[2];

	(void)frame;

	if (pipe(fd) != 0)
		return -1;
	int n = ep_backtrace(fd[1]);

	close(fd[1]);
	ssize_t got = read(fd[0], g_bt, sizeof(g_bt) - 1);

	close(fd[0]);
	g_bt[got > 0 ? got : 0] = 0;
	return n;
}

START_TEST(test_backtrace)
{
	g_jit = jit_caller(backtrace_cb, 1, "bt_prog", -1);
	int n = tu_as_fn(g_jit)();
	char want[64];

	ck_assert_msg(n >= 3, "ep_backtrace: %d\n%s", n, g_bt);
	snprintf(want, sizeof(want), " in bt_prog+0x%x [jit]\n", FP_CALL_END);
	ck_assert_msg(strstr(g_bt, want), "no '%s' in:\n%s", want, g_bt);
	ck_assert_msg(strstr(g_bt, "#0 0x"), "no frame 0 in:\n%s", g_bt);
#if defined(HAVE_LIBUNWIND) && defined(__x86_64__)
	ck_assert_msg(strstr(g_bt, " in main+0x"), "main not reached:\n%s", g_bt);
#else
	/* past the JIT frame the walk follows the frame records (libunwind
	 * has no rule for it off x86-64): frames without C names, but the
	 * JIT frame once and the walk going on past it, to main and its
	 * callers */
	const char *j = strstr(g_bt, want) + strlen(want);

	ck_assert_msg(!strstr(j, " [jit]"), "the JIT frame twice:\n%s", g_bt);
	int after = 0;

	for (const char *q = j; (q = strchr(q, '#')) != NULL; q++)
		after++;
	ck_assert_msg(after >= 3, "the walk stopped at the JIT frame:\n%s", g_bt);
#endif
	ck_assert_int_eq(ep_backtrace(-1), -EBADF);
}
END_TEST

#endif /* JIT_FRAMES */

#if defined(__x86_64__)
/* ---- ep_backtrace's frame-pointer walk: bad frame pointers ------------------
 * EXECPACK_BACKTRACE=fp selects the walk where libunwind is built in.  The
 * tests run on a thread whose stack is a mapping of known bounds with
 * PROT_NONE guard pages on both sides, so that a frame pointer that leaves
 * the stack points at memory that faults.
 */
#define BAD_STACK (256 * 1024)
#define BAD_FP_CALL_END 0x1c

struct guarded_stack {
	unsigned char *map, *lo, *hi;
	size_t pg;
};

static void stack_make(struct guarded_stack *s)
{
	s->pg = (size_t)sysconf(_SC_PAGESIZE);
	s->map = mmap(NULL, BAD_STACK + 2 * s->pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(s->map != MAP_FAILED);
	s->lo = s->map + s->pg;
	s->hi = s->lo + BAD_STACK;
	ck_assert_int_eq(mprotect(s->lo, BAD_STACK, PROT_READ | PROT_WRITE), 0);
}

static void stack_run(struct guarded_stack *s, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t t;

	ck_assert_int_eq(pthread_attr_init(&attr), 0);
	ck_assert_int_eq(pthread_attr_setstack(&attr, s->lo, BAD_STACK), 0);
	ck_assert_int_eq(pthread_create(&t, &attr, fn, arg), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	pthread_attr_destroy(&attr);
	munmap(s->map, BAD_STACK + 2 * s->pg);
}

/* Read what ep_backtrace() wrote into a pipe. */
static void pipe_drain(int fd, char *buf, size_t len)
{
	size_t got = 0;
	ssize_t r;

	while (got < len - 1 && (r = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)r;
	buf[got] = 0;
}

/*
 * push rbp; movabs rbp, bogus; mov edi, fd; movabs rax, ep_backtrace;
 * call rax; pop rbp; ret: ep_backtrace()'s frame record then holds bogus
 * as the next frame pointer.
 */
static void *jit_bad_fp(uintptr_t bogus, int fd)
{
	int (*bt)(int) = ep_backtrace;
	uint64_t target;
	uint32_t fd32 = (uint32_t)fd;
	struct ep_image img;
	unsigned char *p;
	size_t n = 0;

	memcpy(&target, &bt, sizeof(target));
	ck_assert_int_eq(ep_alloc(diag_pool, 64, &img), 0);
	p = img.rw;
	p[n++] = 0x55;
	p[n++] = 0x48, p[n++] = 0xbd;
	memcpy(p + n, &bogus, 8), n += 8;
	p[n++] = 0xbf;
	memcpy(p + n, &fd32, 4), n += 4;
	p[n++] = 0x48, p[n++] = 0xb8;
	memcpy(p + n, &target, 8), n += 8;
	p[n++] = 0xff, p[n++] = 0xd0;
	ck_assert_uint_eq(n, BAD_FP_CALL_END);
	p[n++] = 0x5d;
	p[n++] = 0xc3;
	ck_assert_int_eq(ep_set_name(diag_pool, img.exec, "bad_fp"), 0);
	ck_assert_int_eq(ep_finalize(diag_pool, img.exec), 0);
	return img.exec;
}

enum { NBAD = 7 };
struct bad_run {
	void *code[NBAD];
	int fd[NBAD][2];
	const char *what[NBAD];
	int rc[NBAD];
	char out[NBAD][4096];
};
static uintptr_t g_fake_frame[2];

static void *bad_fp_thread(void *arg)
{
	struct bad_run *b = arg;

	for (int i = 0; i < NBAD; i++) {
		b->rc[i] = tu_as_fn(b->code[i])();
		close(b->fd[i][1]);
	}
	return NULL;
}

/* Call ep_backtrace() under each bogus frame pointer on a guarded stack,
 * through the frame-pointer walk.  (libunwind, the default, is left out:
 * where there is no unwind information it follows frame pointers with its
 * own checks, which are not ours to promise; under Valgrind it faults.) */
static void run_bad_fp(struct bad_run *b)
{
	struct guarded_stack stk;
	uintptr_t bogus[NBAD];

	memset(b, 0, sizeof(*b));
	stack_make(&stk);
	uintptr_t hi = (uintptr_t)stk.hi, lo = (uintptr_t)stk.lo;

	/* a readable frame record outside the stack that points at itself */
	g_fake_frame[0] = (uintptr_t)g_fake_frame;
	g_fake_frame[1] = 0x1234;
	b->what[0] = "the guard page above the stack", bogus[0] = hi + 64;
	b->what[1] = "a record across the end of the stack", bogus[1] = hi - 8;
	b->what[2] = "the guard page below the stack", bogus[2] = lo - 64;
	b->what[3] = "a record outside the stack", bogus[3] = (uintptr_t)g_fake_frame;
	b->what[4] = "a misaligned pointer", bogus[4] = (hi - 4096 + 1003) | 1;
	b->what[5] = "a low address", bogus[5] = 0x10;
	b->what[6] = "the top of the address space", bogus[6] = ~(uintptr_t)0xfff;
	for (int i = 0; i < NBAD; i++) {
		ck_assert_int_eq(pipe(b->fd[i]), 0);
		b->code[i] = jit_bad_fp(bogus[i], b->fd[i][1]);
	}
	ck_assert_int_eq(setenv("EXECPACK_BACKTRACE", "fp", 1), 0);
	stack_run(&stk, bad_fp_thread, b);
	unsetenv("EXECPACK_BACKTRACE");
	for (int i = 0; i < NBAD; i++) {
		pipe_drain(b->fd[i][0], b->out[i], sizeof(b->out[i]));
		close(b->fd[i][0]);
		ck_assert_int_eq(ep_free(diag_pool, b->code[i]), 0);
	}
}

START_TEST(test_backtrace_bad_fp)
{
	struct bad_run *b = calloc(1, sizeof(*b));

	ck_assert_ptr_nonnull(b);
	run_bad_fp(b);
	for (int i = 0; i < NBAD; i++) {
		const char *o = b->out[i];

		/* no fault on the bogus pointer, and the walk stopped there: the
		 * JIT frame is the only one and nothing past it was read */
		ck_assert_msg(b->rc[i] == 1, "%s: ep_backtrace %d:\n%s", b->what[i], b->rc[i], o);
		ck_assert_msg(!strncmp(o, "#0 0x", 5) && strstr(o, " in bad_fp+0x1c [jit]\n") &&
				      !strchr(o, '\n')[1],
			      "%s: not the one JIT frame:\n%s", b->what[i], o);
	}
	free(b);
}
END_TEST

/*
 * The walk through a signal frame, with the handler on an alternate signal
 * stack: "sig_prog" calls its inner part, which sends itself SIGUSR1 with
 * tgkill; the handler's ep_backtrace() must name the interrupted pc
 * (sig_prog+0x25, after the syscall) and, back on the thread's own stack,
 * the return address into the outer part (sig_prog+0x9).
 */
static int g_sig_fd, g_sig_rc;

static void sig_bt_handler(int sig, siginfo_t *si, void *uc)
{
	/* __builtin_frame_address: the handler keeps a frame record */
	volatile uintptr_t frame = (uintptr_t)__builtin_frame_address(0);

	(void)sig, (void)si, (void)uc, (void)frame;
	g_sig_rc = ep_backtrace(g_sig_fd);
}

static void *jit_signaller(pid_t pid, pid_t tid)
{
	struct ep_image img;
	unsigned char *p;
	size_t n = 0;
	uint32_t v;

	ck_assert_int_eq(ep_alloc(diag_pool, 64, &img), 0);
	p = img.rw;
	p[n++] = 0x55;                                  /* push rbp */
	p[n++] = 0x48, p[n++] = 0x89, p[n++] = 0xe5;    /* mov rbp, rsp */
	p[n++] = 0xe8, v = 2, memcpy(p + n, &v, 4), n += 4; /* call inner */
	p[n++] = 0x5d, p[n++] = 0xc3;                   /* pop rbp; ret */
	ck_assert_uint_eq(n, 11);                       /* inner: */
	p[n++] = 0x55;
	p[n++] = 0x48, p[n++] = 0x89, p[n++] = 0xe5;
	p[n++] = 0xbf, v = (uint32_t)pid, memcpy(p + n, &v, 4), n += 4;
	p[n++] = 0xbe, v = (uint32_t)tid, memcpy(p + n, &v, 4), n += 4;
	p[n++] = 0xba, v = SIGUSR1, memcpy(p + n, &v, 4), n += 4;
	p[n++] = 0xb8, v = SYS_tgkill, memcpy(p + n, &v, 4), n += 4;
	p[n++] = 0x0f, p[n++] = 0x05;                   /* syscall */
	ck_assert_uint_eq(n, 0x25);
	p[n++] = 0x5d, p[n++] = 0xc3;
	ck_assert_int_eq(ep_set_name(diag_pool, img.exec, "sig_prog"), 0);
	ck_assert_int_eq(ep_finalize(diag_pool, img.exec), 0);
	return img.exec;
}

/*
 * Memcheck (Valgrind 3.19) keeps one "current stack" for the whole process
 * and takes a move of the stack pointer into another registered stack for
 * a stack switch, which it does not track.  After the handler, which runs
 * on the alternate signal stack, returned, the first frame this thread
 * allocated on its own stack with a size memcheck has no fixed-size case
 * for (0x148 bytes: __libc_sigaction, in the sigaction() below) was now
 * and then taken for such a switch: its bytes stayed unaddressable and its
 * stores were reported as invalid writes (one run in five here, three in
 * four on a fresh machine).  A frame of that kind allocated before the
 * JIT call was always addressable and the same one just after it not
 * always; with the alternate stack registered (VALGRIND_STACK_REGISTER)
 * it was unaddressable every time.  So once the handler has returned, the
 * test tells memcheck that the thread's stack below the stack pointer's
 * 128-byte red zone is usable again, undefined as any new frame is, before
 * anything else runs on it.
 */
static void stack_usable_below_sp(const struct guarded_stack *stk)
{
#ifdef HAVE_VALGRIND_MEMCHECK_H
	uintptr_t sp;

	__asm__ volatile("mov %%rsp, %0" : "=r"(sp));
	if (sp - 128 > (uintptr_t)stk->lo)
		VALGRIND_MAKE_MEM_UNDEFINED(stk->lo, sp - 128 - (uintptr_t)stk->lo);
#else
	(void)stk;
#endif
}

static void *sigframe_thread(void *arg)
{
	stack_t ss = { .ss_size = 64 * 1024 };
	struct sigaction sa, old;

	ss.ss_sp = mmap(NULL, ss.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	if (ss.ss_sp == MAP_FAILED || sigaltstack(&ss, NULL) != 0)
		return (void *)1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sig_bt_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, &old);
	tu_as_fn(g_jit)();
	stack_usable_below_sp(arg);
	sigaction(SIGUSR1, &old, NULL);
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	munmap(ss.ss_sp, ss.ss_size);
	return NULL;
}

static void *sigframe_outer(void *arg)
{
	/* the JIT code needs the tid of the thread that runs it */
	g_jit = jit_signaller(getpid(), (pid_t)syscall(SYS_gettid));
	return sigframe_thread(arg);
}

START_TEST(test_backtrace_sigframe)
{
	struct guarded_stack stk;
	int fd[2];

	if (EP_TEST_TSAN)
		return; /* TSan defers the handler to its next interceptor: no
			 * signal frame over the JIT code is left to walk */
	ck_assert_int_eq(pipe(fd), 0);
	g_sig_fd = fd[1];
	g_sig_rc = -1;
	stack_make(&stk);
	ck_assert_int_eq(setenv("EXECPACK_BACKTRACE", "fp", 1), 0);
	stack_run(&stk, sigframe_outer, &stk);
	unsetenv("EXECPACK_BACKTRACE");
	close(fd[1]);
	pipe_drain(fd[0], g_bt, sizeof(g_bt));
	close(fd[0]);
	ck_assert_msg(g_sig_rc >= 2, "ep_backtrace: %d\n%s", g_sig_rc, g_bt);
	if (RUNNING_ON_VALGRIND)
		return; /* Valgrind lays out signal frames its own way */
	ck_assert_msg(strstr(g_bt, " in sig_prog+0x25 [jit]\n"), "no interrupted pc in:\n%s", g_bt);
	ck_assert_msg(strstr(g_bt, " in sig_prog+0x9 [jit]\n"), "no caller frame in:\n%s", g_bt);
	ck_assert_int_eq(ep_free(diag_pool, g_jit), 0);
}
END_TEST
#endif /* __x86_64__ */

/* (in the order main() runs them) */
void diag_add_backtrace_tests(TCase *tc)
{
	tcase_add_test(tc, test_set_unwind_errors);
#ifdef JIT_FRAMES
	tcase_add_test(tc, test_backtrace);
#else
	printf("SKIP: test_backtrace: no caller emitter for this architecture in the test\n");
#endif
#if defined(__x86_64__)
	tcase_add_test(tc, test_backtrace_bad_fp);
	tcase_add_test(tc, test_backtrace_sigframe);
#else
	printf("SKIP: test_backtrace_bad_fp, test_backtrace_sigframe: the test's JIT code "
	       "and ep_backtrace()'s signal-frame walk are x86-64 only\n");
#endif
}

/* The libunwind TCase, where libunwind is built in and the test has a
 * caller emitter for the architecture. */
void diag_add_unwind_tcase(Suite *s)
{
#if defined(HAVE_LIBUNWIND) && defined(JIT_FRAMES)
	TCase *tc = tcase_create("libunwind");

	tcase_add_checked_fixture(tc, diag_setup, diag_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_unwind_name);
	tcase_add_test(tc, test_unwind_dwarf_fp);
	tcase_add_test(tc, test_unwind_dwarf_sp);
	tcase_add_test(tc, test_unwind_default);
	tcase_add_test(tc, test_unwind_cancelled);
	suite_add_tcase(s, tc);
#else
	(void)s;
#endif
}
