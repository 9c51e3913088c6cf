/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pcre2-pss.c - what N JIT-compiled PCRE2 patterns cost in memory: the
 * process's Pss (/proc/self/smaps_rollup) before and after compiling them,
 * all kept alive.  Linked once against a stock libpcre2-8.a and once
 * against one built with examples/sljit/sljitConfigPre.h, the difference
 * between the two increases is the executable allocator's.
 *
 *   pcre2-pss [N [--no-jit]]   (N: default 10000)
 *
 * --no-jit compiles the patterns without JIT: what they cost without code.
 * Prints one line: N, the Pss increase in KiB, and the JIT code the
 * patterns hold (PCRE2_INFO_JITSIZE, summed).  Each pattern is also
 * matched once with its JIT code against a subject it must match.  Then
 * all are freed, with no other call (pcre2_jit_free_unused_memory() is
 * what the program does not make), and a second line gives the Pss
 * increase that stays.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pss of the whole process in KiB, or -1. */
static long pss_kib(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pss: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* Pattern i and a subject it matches: five shapes, each made distinct by i. */
static void pattern(unsigned i, char *pat, size_t plen, char *subj, size_t slen)
{
	switch (i % 5) {
	case 0:
		snprintf(pat, plen, "^user%u@[a-z0-9.-]+\\.(com|org|net)$", i);
		snprintf(subj, slen, "user%u@mail.example.org", i);
		break;
	case 1:
		snprintf(pat, plen, "(?i)\\b(error|warn|fatal)%u:\\s+(\\w+)=(\\d+)", i);
		snprintf(subj, slen, "x WARN%u:  key=42", i);
		break;
	case 2:
		snprintf(pat, plen, "[A-Z]{2}%u-\\d{3,%u}(?:[a-f]+|[0-9]{2})", i, 4 + i % 7);
		snprintf(subj, slen, "id AB%u-1234ff", i);
		break;
	case 3:
		snprintf(pat, plen, "^(\\d{4})-(\\d{2})-(\\d{2})T%u(?<h>\\d\\d):\\d\\d", i);
		snprintf(subj, slen, "2026-12-06T%u21:40", i);
		break;
	default:
		snprintf(pat, plen, "(foo|bar|baz)+%u(?=qux)|^[^\\s]{%u}$", i, 1 + i % 9);
		snprintf(subj, slen, "foobarbaz%uqux", i);
		break;
	}
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 10000;
	int jit = !(argc > 2 && strcmp(argv[2], "--no-jit") == 0);
	pcre2_code **codes = calloc(n ? n : 1, sizeof(*codes));
	pcre2_match_data *md = pcre2_match_data_create(16, NULL);
	size_t jit_bytes = 0;
	long before, after;
	char pat[160], subj[160];
	unsigned i;

	if (!codes || !md || n == 0) {
		fprintf(stderr, "usage: pcre2-pss [N > 0 [--no-jit]]\n");
		return 2;
	}
	before = pss_kib();
	for (i = 0; i < n; i++) {
		int err, rc;
		PCRE2_SIZE off;
		size_t sz = 0;

		pattern(i, pat, sizeof(pat), subj, sizeof(subj));
		codes[i] = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, 0, &err, &off, NULL);
		if (!codes[i]) {
			fprintf(stderr, "pattern %u (%s): compile error %d at %zu\n", i, pat, err,
				(size_t)off);
			return 1;
		}
		if (!jit) {
			rc = pcre2_match(codes[i], (PCRE2_SPTR)subj, strlen(subj), 0, 0, md, NULL);
			if (rc <= 0) {
				fprintf(stderr, "pattern %u (%s) on \"%s\": pcre2_match: %d\n", i,
					pat, subj, rc);
				return 1;
			}
			continue;
		}
		rc = pcre2_jit_compile(codes[i], PCRE2_JIT_COMPLETE);
		if (rc != 0) {
			fprintf(stderr, "pattern %u (%s): pcre2_jit_compile: %d\n", i, pat, rc);
			return 1;
		}
		pcre2_pattern_info(codes[i], PCRE2_INFO_JITSIZE, &sz);
		if (sz == 0) {
			fprintf(stderr, "pattern %u (%s): no JIT code\n", i, pat);
			return 1;
		}
		jit_bytes += sz;
		rc = pcre2_jit_match(codes[i], (PCRE2_SPTR)subj, strlen(subj), 0, 0, md, NULL);
		if (rc <= 0) {
			fprintf(stderr, "pattern %u (%s) on \"%s\": pcre2_jit_match: %d\n", i, pat,
				subj, rc);
			return 1;
		}
	}
	after = pss_kib();
	if (before < 0 || after < 0) {
		fprintf(stderr, "no Pss in /proc/self/smaps_rollup\n");
		return 1;
	}
	printf("%u patterns%s: Pss +%ld KiB (%ld -> %ld KiB), JIT code %zu KiB\n", n,
	       jit ? "" : " without JIT", after - before, before, after, jit_bytes / 1024);
	for (i = 0; i < n; i++)
		pcre2_code_free(codes[i]);
	pcre2_match_data_free(md);
	free(codes);
	after = pss_kib();
	printf("%u patterns%s freed: Pss +%ld KiB (%ld -> %ld KiB)\n", n, jit ? "" : " without JIT",
	       after - before, before, after);
	return 0;
}
