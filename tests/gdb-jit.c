/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gdb-jit.c - run by tests/gdb-jit.sh, under gdb -batch and alone: JIT code
 * named "gdb_jit_prog" (push rbp; mov rbp, rsp; call gdb_stop_here;
 * pop rbp; ret) is registered through the GDB JIT interface.  gdb stops in
 * gdb_jit_ready() once it is finalized (a hardware breakpoint on the JIT
 * function can be set there), then in gdb_stop_here(), whose `bt` must show
 * the JIT frame by name.
 *
 * With the argument "debug", run with EXECPACK_DEBUG=1 (views a debugger can
 * write): after the first call of the JIT function, a second function is
 * JITted into the same page, which gdb has written its breakpoints into,
 * and both are called; the program checks what they return, that the
 * executable view is a private mapping and that no mapping is writable and
 * executable.
 *
 * Built four times.  With EP_FOREIGN_JIT_DESCRIPTOR (tests/gdb-jit-foreign)
 * the program defines __jit_debug_descriptor and __jit_debug_register_code
 * itself, as programs that embed another JIT (LLVM, LuaJIT) do, so that the
 * exported names bind to its copies: there is one list per process, and
 * the library must put its entries into that one, beside the program's
 * own, and take them out again; the program checks that it did, exiting 1
 * if not.  The -static builds (tests/gdb-jit-static,
 * tests/gdb-jit-static-foreign) are the same two linked with libexecpack.a,
 * where the library's definitions are weak: the program's win, and without
 * its own the library's serve.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "execpack.h"

#ifdef EP_FOREIGN_JIT_DESCRIPTOR
struct jit_code_entry {
	struct jit_code_entry *next_entry, *prev_entry;
	const char *symfile_addr;
	uint64_t symfile_size;
};

struct jit_descriptor {
	uint32_t version;
	uint32_t action_flag;
	struct jit_code_entry *relevant_entry;
	struct jit_code_entry *first_entry;
};

struct jit_descriptor __jit_debug_descriptor = { 1, 0, NULL, NULL };
static int g_register_calls;

__attribute__((noinline)) void __jit_debug_register_code(void);
void __jit_debug_register_code(void)
{
	g_register_calls++;
	__asm__ volatile("" ::: "memory");
}

/* The program's own JIT's entry, put in its list by hand (never announced
 * to gdb: it describes no file). */
static struct jit_code_entry g_own_entry;

/* The program's list holds its own entry, last, and n entries of the
 * library's before it, each an ELF file; with n > 0 the library announced
 * them through the program's __jit_debug_register_code(). */
static int foreign_list_has(int n, const char *when)
{
	const struct jit_descriptor *d = &__jit_debug_descriptor;
	const struct jit_code_entry *e = d->first_entry;
	int k = 0, files = 1;

	for (; e && e != &g_own_entry; e = e->next_entry, k++)
		files &= e->symfile_size > 4 && !memcmp(e->symfile_addr, "\177ELF", 4);
	if (d->version == 1 && d->action_flag == 0 && e == &g_own_entry && k == n && files &&
	    !g_own_entry.next_entry && (n == 0 || g_register_calls > 0))
		return 1;
	printf("FAIL: %s: the program's GDB JIT list is not its own entry after %d of the "
	       "library's (action %u, %d entries before %s, %d calls of its "
	       "__jit_debug_register_code)\n",
	       when, n, d->action_flag, k, e == &g_own_entry ? "its own" : "the end",
	       g_register_calls);
	return 0;
}
#define PROG_NAME "foreign_jit_prog"
#else
#define PROG_NAME "gdb_jit_prog"
#endif

__attribute__((noinline)) int gdb_stop_here(void);
int gdb_stop_here(void)
{
	__asm__ volatile("" ::: "memory");
	return 42;
}

/* The JIT code is finalized and named: gdb knows its symbol from here on. */
__attribute__((noinline)) void gdb_jit_ready(void);
void gdb_jit_ready(void)
{
	__asm__ volatile("" ::: "memory");
}

/* Mappings both writable and executable, and whether the one that holds
 * addr is private ('p'). */
static int wx_mappings(const void *addr, int *private_view)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512], perms[8];
	unsigned long lo, hi;
	int n = 0;

	*private_view = 0;
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
			continue;
		if (perms[1] == 'w' && perms[2] == 'x')
			n++;
		if ((uintptr_t)addr >= lo && (uintptr_t)addr < hi)
			*private_view = perms[3] == 'p';
	}
	if (f)
		fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	/* "debug" (with EXECPACK_DEBUG=1): after the first call, new code is
	 * written into the page gdb has written its breakpoints into, and the
	 * JIT function is called again */
	int debug = argc > 1 && !strcmp(argv[1], "debug");
	struct ep_pool *pool;
	struct ep_image img, other;
	int (*cb)(void) = gdb_stop_here;
	uint64_t target;
	unsigned char *p;
	size_t n = 0;

#ifdef EP_FOREIGN_JIT_DESCRIPTOR
	__jit_debug_descriptor.first_entry = &g_own_entry;
	__jit_debug_descriptor.relevant_entry = &g_own_entry;
#endif
	if (ep_pool_create(NULL, &pool) != 0 || ep_alloc(pool, 32, &img) != 0) {
		printf("SKIP: no executable memory\n");
		return 77;
	}
	memcpy(&target, &cb, sizeof(target));
	p = img.rw;
	p[n++] = 0x55;
	p[n++] = 0x48, p[n++] = 0x89, p[n++] = 0xe5;
	p[n++] = 0x48, p[n++] = 0xb8;
	memcpy(p + n, &target, 8), n += 8;
	p[n++] = 0xff, p[n++] = 0xd0;
	p[n++] = 0x5d;
	p[n++] = 0xc3;
	/* the program has n of its 64 bytes: gdb's symbol (disassemble) ends
	 * with its ret, not in the trap fill past it */
	if (ep_set_name(pool, img.exec, PROG_NAME) != 0 || ep_finalize(pool, img.exec) != 0 ||
	    ep_shrink(pool, img.exec, n) != 0)
		return 1;
	/* a second named function, registered and unregistered */
	if (ep_alloc(pool, 8, &other) != 0 || ep_set_name(pool, other.exec, "short_lived") != 0 ||
	    ep_finalize(pool, other.exec) != 0 || ep_free(pool, other.exec) != 0)
		return 1;
#ifdef EP_FOREIGN_JIT_DESCRIPTOR
	if (!foreign_list_has(1, "after ep_set_name and ep_free"))
		return 1;
#endif
	gdb_jit_ready();

	int (*prog)(void);

	memcpy(&prog, &img.exec, sizeof(prog));
	int r = prog();

	printf(PROG_NAME " returned %d\n", r);
	if (debug) {
		static const unsigned char seven[] = { 0xb8, 7, 0, 0, 0, 0xc3 }; /* mov eax, 7; ret */
		struct ep_image nb;
		int (*neighbour)(void);
		int priv = 0, wx = wx_mappings(img.exec, &priv);

		if (ep_alloc(pool, sizeof(seven), &nb) != 0)
			return 1;
		memcpy(nb.rw, seven, sizeof(seven));
		if (ep_set_name(pool, nb.exec, "gdb_jit_neighbour") != 0 ||
		    ep_finalize(pool, nb.exec) != 0)
			return 1;
		printf("gdb_jit_neighbour in the same page: %s\n",
		       ((uintptr_t)nb.exec ^ (uintptr_t)img.exec) < 4096 ? "yes" : "no");
		memcpy(&neighbour, &nb.exec, sizeof(neighbour));
		int seven_rc = neighbour();
		int r2 = prog();

		printf("gdb_jit_neighbour returned %d\n", seven_rc);
		printf(PROG_NAME " returned %d again\n", r2);
		printf("private exec view: %s; writable+executable mappings: %d\n", priv ? "yes" : "no",
		       wx);
		if (seven_rc != 7 || r2 != 42 || !priv || wx != 0)
			return 1;
	}
	ep_free(pool, img.exec);
	ep_pool_destroy(pool);
#ifdef EP_FOREIGN_JIT_DESCRIPTOR
	if (!foreign_list_has(0, "after ep_pool_destroy"))
		return 1;
	printf("PASS: the library's entries went into the program's GDB JIT list, "
	       "and out again\n");
#endif
	return r == 42 ? 0 : 1;
}
