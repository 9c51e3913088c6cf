/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elf.c - load eBPF code from relocatable ELF objects (clang -target bpf -c).
 *
 * Supported: one code section or function chosen by name (.text default),
 * several functions per section (delimited by their STT_FUNC symbols),
 * local calls into .text (R_BPF_64_32, .text is appended after the chosen
 * section as libbpf does), and lddw of data symbols (R_BPF_64_64: the data
 * section is copied, writable, and lives as long as the program).  Maps,
 * BTF-based relocations and anything else are rejected by name.
 */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf_int.h"

#ifndef EM_BPF
#define EM_BPF 247
#endif
#ifndef R_BPF_64_64
#define R_BPF_64_64 1
#endif
#ifndef R_BPF_64_32
#define R_BPF_64_32 10
#endif

struct elf {
	const uint8_t *base;
	size_t len;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	const char *shstr;
	size_t shstr_len;
	const Elf64_Sym *syms;
	size_t nsyms;
	const char *str;
	size_t str_len;
	void **blobs;    /* per section: copied data, or NULL */
};

static bool in_file(const struct elf *e, uint64_t off, uint64_t size)
{
	return off <= e->len && size <= e->len - off;
}

/* A name from a string table, "?" unless it ends inside the table. */
static const char *str_at(const char *tab, size_t len, uint64_t n)
{
	return n < len && memchr(tab + n, 0, len - n) ? tab + n : "?";
}

static const char *sec_name(const struct elf *e, size_t i)
{
	return str_at(e->shstr, e->shstr_len, e->sh[i].sh_name);
}

static const char *sym_name(const struct elf *e, const Elf64_Sym *s)
{
	if (ELF64_ST_TYPE(s->st_info) == STT_SECTION && s->st_shndx < e->eh->e_shnum)
		return sec_name(e, s->st_shndx);
	return str_at(e->str, e->str_len, s->st_name);
}

/* Headers, symbols and relocations are read in place as structs. */
static bool aligned8(const struct elf *e, uint64_t off)
{
	return ((uintptr_t)e->base + off) % 8 == 0;
}

static int find_section(const struct elf *e, const char *name)
{
	for (size_t i = 1; i < e->eh->e_shnum; i++)
		if (!strcmp(sec_name(e, i), name))
			return (int)i;
	return -1;
}

/*
 * "; code sections: a, b" for the sections other than skip that hold code
 * (executable, with bytes, a whole number of instructions), so that an
 * error about the section asked for says which ones there are; "" when
 * there is none.
 */
static void code_sections(const struct elf *e, int skip, char *buf, size_t len)
{
	size_t k = 0;

	buf[0] = 0;
	for (size_t i = 1; i < e->eh->e_shnum && k < len; i++) {
		const Elf64_Shdr *sh = &e->sh[i];

		if ((int)i == skip || !(sh->sh_flags & SHF_EXECINSTR) || sh->sh_type == SHT_NOBITS ||
		    sh->sh_size == 0 || sh->sh_size % 8)
			continue;
		int w = snprintf(buf + k, len - k, "%s%s", k ? ", " : "; code sections: ",
				 sec_name(e, i));

		if (w < 0)
			break;
		k += (size_t)w;
	}
}

static int open_elf(struct elf *e, const void *buf, size_t len, struct ebpf_err *err)
{
	memset(e, 0, sizeof(*e));
	e->base = buf;
	e->len = len;
	e->eh = buf;
	if (!aligned8(e, 0))
		return ebpf_fail(err, -1, "ELF image is not 8-byte aligned in memory");
	if (len < sizeof(Elf64_Ehdr) || memcmp(e->eh->e_ident, ELFMAG, SELFMAG))
		return ebpf_fail(err, -1, "not an ELF file");
	if (e->eh->e_ident[EI_CLASS] != ELFCLASS64 || e->eh->e_ident[EI_DATA] != ELFDATA2LSB)
		return ebpf_fail(err, -1, "ELF is not 64-bit little-endian");
	if (e->eh->e_machine != EM_BPF)
		return ebpf_fail(err, -1, "ELF machine %u is not BPF (%u)", e->eh->e_machine, EM_BPF);
	if (e->eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    !in_file(e, e->eh->e_shoff, (uint64_t)e->eh->e_shnum * sizeof(Elf64_Shdr)) ||
	    e->eh->e_shstrndx >= e->eh->e_shnum || !aligned8(e, e->eh->e_shoff))
		return ebpf_fail(err, -1, "ELF section headers are malformed");
	e->sh = (const Elf64_Shdr *)(e->base + e->eh->e_shoff);
	for (size_t i = 0; i < e->eh->e_shnum; i++) {
		uint32_t t = e->sh[i].sh_type;

		if (t != SHT_NOBITS && !in_file(e, e->sh[i].sh_offset, e->sh[i].sh_size))
			return ebpf_fail(err, -1, "ELF section %zu lies outside the file", i);
		if ((t == SHT_SYMTAB || t == SHT_REL || t == SHT_RELA) &&
		    !aligned8(e, e->sh[i].sh_offset))
			return ebpf_fail(err, -1, "ELF section %zu is misaligned", i);
	}
	/* NOBITS sections have no bytes in the file: not as strings, not as code */
	if (e->sh[e->eh->e_shstrndx].sh_type == SHT_NOBITS)
		return ebpf_fail(err, -1, "ELF section name table has no contents");
	e->shstr = (const char *)e->base + e->sh[e->eh->e_shstrndx].sh_offset;
	e->shstr_len = e->sh[e->eh->e_shstrndx].sh_size;
	for (size_t i = 0; i < e->eh->e_shnum; i++) {
		if (e->sh[i].sh_type != SHT_SYMTAB)
			continue;
		if (e->sh[i].sh_link >= e->eh->e_shnum || e->sh[e->sh[i].sh_link].sh_type == SHT_NOBITS)
			return ebpf_fail(err, -1, "ELF symbol table has a bad string table link");
		e->syms = (const Elf64_Sym *)(e->base + e->sh[i].sh_offset);
		e->nsyms = e->sh[i].sh_size / sizeof(Elf64_Sym);
		e->str = (const char *)e->base + e->sh[e->sh[i].sh_link].sh_offset;
		e->str_len = e->sh[e->sh[i].sh_link].sh_size;
	}
	e->blobs = calloc(e->eh->e_shnum, sizeof(void *));
	return e->blobs ? 0 : -ENOMEM;
}

/* Relocation section for section sec, or -1. */
static int rel_for(const struct elf *e, int sec)
{
	for (size_t i = 1; i < e->eh->e_shnum; i++)
		if ((e->sh[i].sh_type == SHT_REL || e->sh[i].sh_type == SHT_RELA) &&
		    e->sh[i].sh_info == (unsigned)sec)
			return (int)i;
	return -1;
}

static bool sec_needs(const struct elf *e, int sec, int text)
{
	int r = rel_for(e, sec);

	if (r < 0 || e->sh[r].sh_type != SHT_REL)
		return false;
	const Elf64_Rel *rel = (const Elf64_Rel *)(e->base + e->sh[r].sh_offset);

	for (size_t k = 0; k < e->sh[r].sh_size / sizeof(*rel); k++) {
		size_t s = ELF64_R_SYM(rel[k].r_info);

		if (ELF64_R_TYPE(rel[k].r_info) == R_BPF_64_32 && s < e->nsyms &&
		    e->syms[s].st_shndx == text)
			return true;
	}
	return false;
}

static int relocate(struct elf *e, int sec, size_t sec_base, int text, size_t text_base,
		    int main_sec, size_t main_base, struct ebpf_insn *insns, size_t total,
		    struct ebpf_err *err)
{
	int r = rel_for(e, sec);
	size_t nin = e->sh[sec].sh_size / 8;

	if (r < 0)
		return 0;
	if (e->sh[r].sh_type == SHT_RELA)
		return ebpf_fail(err, -1, "RELA relocations (section %s) are not supported", sec_name(e, r));
	const Elf64_Rel *rel = (const Elf64_Rel *)(e->base + e->sh[r].sh_offset);

	for (size_t k = 0; k < e->sh[r].sh_size / sizeof(*rel); k++) {
		uint64_t off = rel[k].r_offset;
		size_t s = ELF64_R_SYM(rel[k].r_info), idx = (size_t)(off / 8);
		unsigned type = (unsigned)ELF64_R_TYPE(rel[k].r_info);
		int at = (int)(sec_base + idx);

		if (off % 8 || idx >= nin)
			return ebpf_fail(err, -1, "relocation offset 0x%llx outside %s",
					 (unsigned long long)off, sec_name(e, sec));
		if (s >= e->nsyms)
			return ebpf_fail(err, at, "relocation with a bad symbol index");
		const Elf64_Sym *sym = &e->syms[s];
		struct ebpf_insn *in = &insns[sec_base + idx];

		if (sym->st_shndx == SHN_UNDEF || sym->st_shndx >= e->eh->e_shnum)
			return ebpf_fail(err, at, "undefined or special symbol '%s' (externs are not supported)",
					 sym_name(e, sym));
		if (type == R_BPF_64_32) {
			size_t tbase;

			if (in->code != (EBPF_CLS_JMP | EBPF_CALL) || in->src != EBPF_PSEUDO_CALL)
				return ebpf_fail(err, at, "R_BPF_64_32 on a non-call instruction");
			if (sym->st_shndx == text && text >= 0)
				tbase = text_base;
			else if (sym->st_shndx == main_sec)
				tbase = main_base;
			else
				return ebpf_fail(err, at, "call to '%s' in section %s (only .text is linked)",
						 sym_name(e, sym), sec_name(e, sym->st_shndx));
			if (sym->st_value % 8)
				return ebpf_fail(err, at, "call target '%s' is misaligned", sym_name(e, sym));
			long t = (long)tbase + (long)(sym->st_value / 8) + in->imm + 1;

			if (t < 0 || (size_t)t >= total)
				return ebpf_fail(err, at, "call to '%s' out of range", sym_name(e, sym));
			in->imm = (int32_t)(t - (long)(at + 1));
		} else if (type == R_BPF_64_64) {
			const Elf64_Shdr *ds = &e->sh[sym->st_shndx];
			const char *dn = sec_name(e, sym->st_shndx);

			if (!ebpf_is_lddw(in) || sec_base + idx + 1 >= total)
				return ebpf_fail(err, at, "R_BPF_64_64 on a non-lddw instruction");
			if (!strcmp(dn, "maps") || !strcmp(dn, ".maps"))
				return ebpf_fail(err, at, "BPF maps ('%s') are not supported", sym_name(e, sym));
			if (ds->sh_flags & SHF_EXECINSTR)
				return ebpf_fail(err, at, "lddw of code address '%s' is not supported",
						 sym_name(e, sym));
			if (!(ds->sh_flags & SHF_ALLOC))
				return ebpf_fail(err, at, "lddw of non-data section %s", dn);
			if (!e->blobs[sym->st_shndx]) {
				void *b = calloc(1, ds->sh_size ? ds->sh_size : 1);

				if (!b)
					return -ENOMEM;
				if (ds->sh_type != SHT_NOBITS)
					memcpy(b, e->base + ds->sh_offset, ds->sh_size);
				e->blobs[sym->st_shndx] = b;
			}
			uint64_t addend = (uint32_t)in->imm;

			/* Two comparisons: st_value + addend could wrap past the size. */
			if (sym->st_value > ds->sh_size || addend > ds->sh_size - sym->st_value)
				return ebpf_fail(err, at, "data reference past the end of %s", dn);
			uint64_t addr = (uint64_t)(uintptr_t)e->blobs[sym->st_shndx] + sym->st_value + addend;

			in[0].imm = (int32_t)(uint32_t)addr;
			in[1].imm = (int32_t)(uint32_t)(addr >> 32);
		} else {
			return ebpf_fail(err, at, "unsupported relocation type %u against '%s'", type,
					 sym_name(e, sym));
		}
	}
	return 0;
}

/*
 * Function boundaries of section sec, loaded at instruction base: every
 * STT_FUNC symbol starts a function and, where its size says it ends
 * before the next one, its end starts another, so that code nobody calls
 * is not merged into the function before it.
 */
static int add_funcs(const struct elf *e, int sec, size_t base, size_t **funcs,
		     size_t *nfuncs, struct ebpf_err *err)
{
	uint64_t size = e->sh[sec].sh_size;

	for (size_t i = 0; i < e->nsyms; i++) {
		const Elf64_Sym *s = &e->syms[i];

		if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx != sec)
			continue;
		if (s->st_value % 8 || s->st_size % 8 || s->st_value >= size ||
		    s->st_size > size - s->st_value)
			return ebpf_fail(err, -1, "function '%s' is misaligned or outside %s",
					 sym_name(e, s), sec_name(e, sec));
		size_t *nf = realloc(*funcs, (*nfuncs + 2) * sizeof(**funcs));

		if (!nf)
			return -ENOMEM;
		*funcs = nf;
		nf[(*nfuncs)++] = base + s->st_value / 8;
		if (s->st_size && s->st_value + s->st_size < size)
			nf[(*nfuncs)++] = base + (s->st_value + s->st_size) / 8;
	}
	return 0;
}

int ebpf_load_elf(struct ebpf_vm *vm, const void *buf, size_t len,
		  const char *sel, const char *name, struct ebpf_prog **out,
		  struct ebpf_err *err)
{
	struct elf e;
	struct ebpf_insn *insns = NULL;
	int rc, sec, text;
	size_t entry = 0, pre = 0, n, nmain, ntext = 0, *funcs = NULL, nfuncs = 0;
	char others[120];

	if (err) {
		err->insn = -1;
		err->msg[0] = 0;
	}
	rc = open_elf(&e, buf, len, err);
	if (rc)
		goto out;
	if (!sel)
		sel = ".text";
	text = find_section(&e, ".text");
	sec = find_section(&e, sel);
	if (sec < 0 || !(e.sh[sec].sh_flags & SHF_EXECINSTR)) {
		sec = -1;
		for (size_t i = 0; i < e.nsyms; i++) {
			const Elf64_Sym *s = &e.syms[i];

			if (ELF64_ST_TYPE(s->st_info) == STT_FUNC && s->st_shndx < e.eh->e_shnum &&
			    !strcmp(sym_name(&e, s), sel)) {
				sec = s->st_shndx;
				entry = s->st_value / 8;
				break;
			}
		}
		if (sec < 0) {
			code_sections(&e, -1, others, sizeof(others));
			rc = ebpf_fail(err, -1, "no code section or function named '%s'%s", sel, others);
			goto out;
		}
	}
	if (e.sh[sec].sh_type == SHT_NOBITS || e.sh[sec].sh_size % 8 || e.sh[sec].sh_size == 0) {
		code_sections(&e, sec, others, sizeof(others));
		rc = ebpf_fail(err, -1, "section %s is empty or not a multiple of 8 bytes%s",
			       sec_name(&e, sec), others);
		goto out;
	}
	nmain = e.sh[sec].sh_size / 8;
	if (sec != text && text >= 0 && e.sh[text].sh_type != SHT_NOBITS && sec_needs(&e, sec, text))
		ntext = e.sh[text].sh_size / 8;
	/* A function that is not first in its section: enter via call + exit. */
	if (entry)
		pre = 2;
	n = pre + nmain + ntext;
	insns = calloc(n, sizeof(*insns));
	if (!insns) {
		rc = -ENOMEM;
		goto out;
	}
	if (pre) {
		insns[0] = (struct ebpf_insn){ .code = EBPF_CLS_JMP | EBPF_CALL,
					       .src = EBPF_PSEUDO_CALL, .imm = (int32_t)(entry + 1) };
		insns[1] = (struct ebpf_insn){ .code = EBPF_CLS_JMP | EBPF_EXIT };
	}
	memcpy(insns + pre, e.base + e.sh[sec].sh_offset, nmain * 8);
	if (ntext)
		memcpy(insns + pre + nmain, e.base + e.sh[text].sh_offset, ntext * 8);
	rc = relocate(&e, sec, pre, ntext ? text : (sec == text ? text : -1),
		      ntext ? pre + nmain : pre, sec, pre, insns, n, err);
	if (!rc && ntext)
		rc = relocate(&e, text, pre + nmain, text, pre + nmain, sec, pre, insns, n, err);
	if (!rc)
		rc = add_funcs(&e, sec, pre, &funcs, &nfuncs, err);
	if (!rc && ntext)
		rc = add_funcs(&e, text, pre + nmain, &funcs, &nfuncs, err);
	if (rc)
		goto out;
	rc = ebpf_load_funcs(vm, insns, n, funcs, nfuncs, name ? name : sel, out, err);
	if (rc)
		goto out;
	/* Hand the data copies to the program. */
	for (size_t i = 0; i < e.eh->e_shnum; i++) {
		if (!e.blobs[i])
			continue;
		void **nb = realloc((*out)->blobs, ((*out)->nblobs + 1) * sizeof(void *));

		if (!nb) {
			ebpf_unload(*out);
			*out = NULL;
			rc = -ENOMEM;
			goto out;
		}
		(*out)->blobs = nb;
		(*out)->blobs[(*out)->nblobs++] = e.blobs[i];
		e.blobs[i] = NULL;
	}
out:
	if (e.blobs)
		for (size_t i = 0; i < e.eh->e_shnum; i++)
			free(e.blobs[i]);
	free(e.blobs);
	free(insns);
	free(funcs);
	return rc;
}
