/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * execpack-ebpf-run - run one eBPF program; speaks the bpf_conformance plugin protocol.
 */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "disasm.h"
#include "ebpf.h"
#include "execpack.h"
#include "helpers.h"

static const char usage[] =
"usage: execpack-ebpf-run [MEMHEX] [--jit|--interp] [--elf] [--raw] [--section NAME]\n"
"                         [--dump] [--dump-jited] [--file FILE | FILE]\n"
"\n"
"Runs one eBPF program (RFC 9669) and prints r0 in hex.  This is the plugin\n"
"protocol of the bpf_conformance test runner.\n"
"\n"
"  MEMHEX          optional first argument not starting with --: the input\n"
"                  memory as hex bytes (\"01 02 ff\"; whitespace optional).\n"
"                  r1 points to a writable copy of it (NULL if absent or\n"
"                  empty), r2 holds its length.\n"
"  (program)       read from stdin as hex bytes, two digits per byte,\n"
"                  separated by whitespace; each 8 bytes is one instruction.\n"
"  --file FILE     read the program from FILE instead of stdin.  A second\n"
"  FILE            positional argument (after MEMHEX) means the same.\n"
"  --raw           the program input is raw bytecode, not hex.\n"
"  --elf           the program input is an ELF object (hex on stdin, or raw\n"
"                  or hex in FILE), e.g. from clang -target bpf -O2 -c.\n"
"                  Input that starts with the ELF magic is an object anyway.\n"
"  --section NAME  with --elf: code section or function name (default .text).\n"
"  --jit           compile to x86-64 with libexecpack and run (the default\n"
"                  on x86-64; elsewhere the interpreter is, and --jit fails).\n"
"  --interp        run in the reference interpreter.\n"
"  --dump          list the bytecode (after loading: ELF relocations\n"
"                  applied) instead of running it.  A program that does\n"
"                  not load is listed as given, then the error is shown.\n"
"  --dump-jited    list the x86-64 code the JIT makes, disassembled by\n"
"                  Capstone, instead of running it.  Builds without\n"
"                  Capstone (libcapstone-dev at configure time) say so and\n"
"                  fail.  With --dump, both listings.\n"
"  --help          this text.\n"
"\n"
"r10 is the frame pointer of a 512-byte stack (one per local call frame).\n"
"Helpers (call imm, or callx with the number in a register):\n"
"  1 add(r1..r5) = r1+r2+r3+r4+r5     2 mul(r1, r2) = r1*r2\n"
"  3 mix(r1..r5) = 64-bit hash        4 trace(r1): prints r1 on stderr, 0\n"
"  5 identity(r1) = r1                6 memsum(p, n) = sum of n bytes at p\n"
"Memory accesses are not bounds checked: run trusted programs only.\n"
"\n"
"Exit status: 0 and r0 on stdout on success; otherwise 1 and one line on\n"
"stderr saying why (load/verify errors name the instruction index).\n";

__attribute__((format(printf, 1, 2)))
static int die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "execpack-ebpf-run: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

static char *slurp(FILE *f, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);

	while (buf) {
		size_t k = fread(buf + n, 1, cap - n, f);

		n += k;
		if (k == 0)
			break;
		if (n == cap) {
			char *nb = realloc(buf, cap * 2 + 1);

			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
	}
	if (buf)
		buf[n] = 0;
	*len = n;
	return buf;
}

int main(int argc, char **argv)
{
	const char *memhex = NULL, *file = NULL, *section = NULL;
#if defined(__x86_64__)
	bool jit = true;
#else
	bool jit = false; /* the JIT emits x86-64 code only */
#endif
	bool elf = false, raw = false, interp_asked = false;
	bool dump = false, dump_jited = false;
	int npos = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(a, "--jit")) {
			jit = true;
		} else if (!strcmp(a, "--interp")) {
			jit = false;
			interp_asked = true;
		} else if (!strcmp(a, "--dump")) {
			dump = true;
		} else if (!strcmp(a, "--dump-jited")) {
			dump_jited = true;
		} else if (!strcmp(a, "--elf")) {
			elf = true;
		} else if (!strcmp(a, "--raw")) {
			raw = true;
		} else if (!strcmp(a, "--file") || !strcmp(a, "--section")) {
			if (i + 1 >= argc)
				return die("%s needs an argument", a);
			*(a[2] == 'f' ? &file : &section) = argv[++i];
		} else if (!strncmp(a, "--", 2)) {
			return die("unknown option %s (see --help)", a);
		} else if (npos == 0) {
			memhex = a;
			npos++;
		} else if (npos == 1 && !file) {
			file = a;
			npos++;
		} else {
			return die("unexpected argument %s", a);
		}
	}
	if (dump_jited && interp_asked)
		return die("%s", "--dump-jited lists JIT output: not with --interp");
	if (dump_jited && !ebpf_can_dump_jited())
		return die("%s", "--dump-jited needs the Capstone disassembler, and this execpack-ebpf-run "
			   "was built without it (install libcapstone-dev, then run configure "
			   "and make again)");
	if (dump_jited)
		jit = true;
	else if (dump)
		jit = false; /* a bytecode listing needs no executable memory */

	uint8_t *mem = NULL, *code = NULL;
	size_t memlen = 0, codelen = 0, textlen;
	char *text;

	if (memhex && ebpf_parse_hex(memhex, &mem, &memlen))
		return die("input memory is not hex bytes: %.40s", memhex);
	if (memlen == 0) { /* empty memory: r1 = NULL, as with none */
		free(mem);
		mem = NULL;
	}
	if (file) {
		FILE *f = fopen(file, "rb");
		struct stat st;

		if (!f)
			return die("cannot open %s: %s", file, strerror(errno));
		if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
			fclose(f);
			return die("cannot read %s: it is a directory, not a file", file);
		}
		text = slurp(f, &textlen);
		if (text && ferror(f)) {
			int e = errno;

			free(text);
			fclose(f);
			return die("cannot read %s: %s", file, strerror(e));
		}
		fclose(f);
	} else {
		text = slurp(stdin, &textlen);
		if (text && ferror(stdin)) {
			free(text);
			return die("cannot read the program from standard input: %s",
				   strerror(errno));
		}
	}
	if (!text)
		return die("%s", "out of memory reading the program");
	if (raw || (textlen >= 4 && !memcmp(text, "\177ELF", 4))) {
		code = (uint8_t *)text;
		codelen = textlen;
		text = NULL;
	} else if (ebpf_parse_hex(text, &code, &codelen)) {
		return die("%s", "program is not hex bytes (two hex digits per byte, whitespace separated)");
	}
	free(text);
	/*
	 * The ELF magic means an object, raw or as hex, with or without --elf:
	 * as bytecode its first instruction (0x7f with a non-zero offset) is
	 * invalid anyway.
	 */
	if (codelen >= 4 && !memcmp(code, "\177ELF", 4))
		elf = true;
	if (section && !elf)
		return die("%s", "--section needs an ELF object");
	if (!elf && codelen % 8)
		return die("program length %s is not a multiple of 8 bytes", codelen % 2 ? "(odd)" : "");
	if (!elf && codelen == 0)
		return die("%s", "empty program");

	struct ep_pool *pool = NULL;
	struct ebpf_vm *vm;
	struct ebpf_prog *prog;
	struct ebpf_err err = { -1, "" };
	int rc;

	if (jit) {
		struct ep_config cfg = { .sz = sizeof(cfg) };

		rc = ep_pool_create(&cfg, &pool);
		if (rc) {
			/* the library's reason (EXECPACK_BACKEND, no free huge
			 * pages, ...), or the error's text when it has none */
			char why[512];

			if (ep_backend_probe(EP_BACKEND_AUTO, &cfg, why, sizeof(why)) == 0 || !why[0])
				snprintf(why, sizeof(why), "%s", ep_strerror(rc));
			return die("cannot create an executable memory pool: %s", why);
		}
	}
	if (ebpf_vm_create(pool, &vm))
		return die("%s", "out of memory");
	ebpf_std_helpers(vm);
	if (elf)
		rc = ebpf_load_elf(vm, code, codelen, section, NULL, &prog, &err);
	else
		rc = ebpf_load(vm, (const struct ebpf_insn *)code, codelen / 8, NULL, &prog, &err);
	if (rc) {
		/* a listing of what would not load helps to see why */
		if (dump && !elf) {
			ebpf_dump_insns(stdout, vm, (const struct ebpf_insn *)code, codelen / 8, NULL);
			fflush(stdout); /* before the error, in that order */
		}
		ebpf_vm_destroy(vm);
		ep_pool_destroy(pool);
		free(mem);
		free(code);
		/* an object whose code is not where it was looked for: the
		 * message lists the code sections, say how to pick one */
		return die("load failed: %s%s", err.msg[0] ? err.msg : strerror(-rc),
			   elf && !section && strstr(err.msg, "; code sections: ") ?
				   " (--section NAME picks one)" : "");
	}
	if (dump)
		ebpf_dump_prog(stdout, prog);
	if (jit && (rc = ebpf_jit(prog, &err)))
		return die("JIT failed: %s", err.msg[0] ? err.msg : strerror(-rc));
	if (dump_jited) {
		if (dump)
			putchar('\n');
		rc = ebpf_dump_jited(stdout, prog);
		if (rc)
			return die("cannot disassemble the JIT output: %s", strerror(-rc));
	}
	if (dump || dump_jited) {
		ebpf_unload(prog);
		ebpf_vm_destroy(vm);
		ep_pool_destroy(pool);
		free(mem);
		free(code);
		return 0;
	}

	uint64_t r0;

	rc = jit ? ebpf_run_jit(prog, mem, memlen, &r0) : ebpf_run_interp(prog, mem, memlen, &r0);
	if (rc)
		return die("run failed: %s", strerror(-rc));
	printf("%" PRIx64 "\n", r0);
	ebpf_unload(prog);
	ebpf_vm_destroy(vm);
	ep_pool_destroy(pool);
	free(mem);
	free(code);
	return 0;
}
