/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-gdbjit.c - the GDB JIT interface.
 *
 * GDB puts a breakpoint in __jit_debug_register_code() and, each time it is
 * called, reads the entry named by __jit_debug_descriptor: an in-memory
 * object file.  Each named, finalized allocation gets a minimal ELF file
 * with a NOBITS .text at its address and one function symbol, so `bt` and
 * `info symbol` name JIT frames.
 *
 * The two symbols are exported (see libexecpack.map) so that gdb finds them
 * in the library, and they are weak: there is one descriptor per process.
 * When the program, or a library found before this one, defines them too
 * (programs that embed LLVM or LuaJIT do; in a static link with LLVM's
 * ORC, its strong definitions win over these weak ones), every reference
 * here binds to that definition, as gdb's does, and the library links its
 * entries into that list and announces them through that function.  The
 * protocol has no lock: the library's changes are serialized with each
 * other (diag's lock), not with the other JIT's, whose lock is its own.
 */
#include "config.h"

#include <elf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diag-gdbjit.h"
#include "diag.h"
#include "internal.h"

struct jit_code_entry {
	struct jit_code_entry *next_entry, *prev_entry;
	const char *symfile_addr;
	uint64_t symfile_size;
};

struct jit_descriptor {
	uint32_t version;
	uint32_t action_flag; /* 0 none, 1 register, 2 unregister */
	struct jit_code_entry *relevant_entry;
	struct jit_code_entry *first_entry;
};

__attribute__((visibility("default"), weak)) struct jit_descriptor __jit_debug_descriptor = {
	1, 0, NULL, NULL
};

__attribute__((visibility("default"), weak, noinline, used)) void __jit_debug_register_code(void);
void __jit_debug_register_code(void)
{
	__asm__ volatile("" ::: "memory"); /* GDB's breakpoint: keep the call */
}

/* A minimal ELF64 file: header, .text (NOBITS), .symtab, .strtab, .shstrtab. */
static char *gdb_symfile(uintptr_t start, size_t size, const char *name, size_t *len)
{
	static const char shstr[] = "\0.text\0.symtab\0.strtab\0.shstrtab";
	size_t nl = strlen(name);
	size_t off_sym = sizeof(Elf64_Ehdr);
	size_t off_str = off_sym + 2 * sizeof(Elf64_Sym);
	size_t off_shstr = off_str + 1 + nl + 1;
	size_t off_sh = (off_shstr + sizeof(shstr) + 7) & ~(size_t)7;
	size_t total = off_sh + 5 * sizeof(Elf64_Shdr);
	char *f = calloc(1, total);

	if (!f)
		return NULL;
	Elf64_Ehdr *eh = (Elf64_Ehdr *)f;

	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_ident[EI_OSABI] = ELFOSABI_SYSV;
	eh->e_type = ET_EXEC;
	eh->e_machine = EP__ARCH_ELF_MACHINE;
	eh->e_version = EV_CURRENT;
	eh->e_ehsize = sizeof(Elf64_Ehdr);
	eh->e_shoff = off_sh;
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shnum = 5;
	eh->e_shstrndx = 4;

	Elf64_Sym *sym = (Elf64_Sym *)(f + off_sym);

	sym[1].st_name = 1;
	sym[1].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
	sym[1].st_shndx = 1;
	sym[1].st_value = start;
	sym[1].st_size = size;
	memcpy(f + off_str + 1, name, nl);
	memcpy(f + off_shstr, shstr, sizeof(shstr));

	Elf64_Shdr *sh = (Elf64_Shdr *)(f + off_sh);

	sh[1] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_NOBITS,
			      .sh_flags = SHF_ALLOC | SHF_EXECINSTR, .sh_addr = start,
			      .sh_size = size, .sh_addralign = 16 };
	sh[2] = (Elf64_Shdr){ .sh_name = 7, .sh_type = SHT_SYMTAB, .sh_offset = off_sym,
			      .sh_size = 2 * sizeof(Elf64_Sym), .sh_link = 3, .sh_info = 1,
			      .sh_addralign = 8, .sh_entsize = sizeof(Elf64_Sym) };
	sh[3] = (Elf64_Shdr){ .sh_name = 15, .sh_type = SHT_STRTAB, .sh_offset = off_str,
			      .sh_size = 1 + nl + 1, .sh_addralign = 1 };
	sh[4] = (Elf64_Shdr){ .sh_name = 23, .sh_type = SHT_STRTAB, .sh_offset = off_shstr,
			      .sh_size = sizeof(shstr), .sh_addralign = 1 };
	*len = total;
	return f;
}

/* diag's lock held for both. */
void ep__gdbjit_unregister(struct jit_code_entry **ep)
{
	struct jit_code_entry *e = *ep;

	if (!e)
		return;
	if (e->prev_entry)
		e->prev_entry->next_entry = e->next_entry;
	else
		__jit_debug_descriptor.first_entry = e->next_entry;
	if (e->next_entry)
		e->next_entry->prev_entry = e->prev_entry;
	__jit_debug_descriptor.relevant_entry = e;
	__jit_debug_descriptor.action_flag = 2;
	__jit_debug_register_code();
	__jit_debug_descriptor.action_flag = 0;
	free((void *)e->symfile_addr);
	free(e);
	*ep = NULL;
}

void ep__gdbjit_register(struct jit_code_entry **ep, void *exec, size_t size, const char *name)
{
	struct jit_code_entry *e = calloc(1, sizeof(*e));
	size_t len = 0;
	char *file = e ? gdb_symfile((uintptr_t)exec, size, name, &len) : NULL;

	if (!file) {
		free(e);
		return; /* no memory: gdb just does not learn this name */
	}
	e->symfile_addr = file;
	e->symfile_size = len;
	e->next_entry = __jit_debug_descriptor.first_entry;
	if (e->next_entry)
		e->next_entry->prev_entry = e;
	__jit_debug_descriptor.first_entry = e;
	__jit_debug_descriptor.relevant_entry = e;
	__jit_debug_descriptor.action_flag = 1;
	__jit_debug_register_code();
	__jit_debug_descriptor.action_flag = 0;
	*ep = e;
}

void ep__gdbjit_hide(const struct jit_code_entry *e)
{
	if (e)
		ep__diag_hide_word(e->symfile_addr, e->symfile_size);
}
