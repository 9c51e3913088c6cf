/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-unwind.c - describing JIT code to unwinders: libunwind's dynamic
 * registry, either by name (libunwind's dynamic "procedure info") or by
 * .eh_frame-format CFI generated for the code's prologue, so that
 * libunwind steps through JIT frames (ep_set_unwind(3)); and libgcc's
 * (__register_frame), with the same CFI, so that C++ exceptions and
 * glibc's backtrace() pass through them too.  Both registrations go before
 * the chunks are reused (ep_free, and ep_shrink, which registers again)
 * or the code is described differently.
 */
#include "config.h"
#include "atomic.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diag-unwind.h"
#include "diag.h"
#include "execpack.h"
#include "internal.h"

int ep__unwind_default_kind(void)
{
	static _Atomic int kind = -1;
	int k = ep__load_relaxed(&kind);

	if (k < 0) {
		const char *e = secure_getenv("EXECPACK_UNWIND");

		k = e && !strcmp(e, "dwarf") ? EP_UNWIND_DWARF_FP : EP_UNWIND_NAME;
		ep__store_relaxed(&kind, k);
	}
	return k;
}

int ep__unwind_check(int kind, size_t prologue, size_t frame, size_t size)
{
	switch (kind) {
	case EP_UNWIND_NAME:
	case EP_UNWIND_DWARF_FP:
		if (prologue || frame)
			return -EINVAL;
		break;
	case EP_UNWIND_DWARF_SP:
		if (prologue > size || frame > ((size_t)1 << 30) || frame % 8)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
#if !EP__UNWIND_REGISTRY
	return kind == EP_UNWIND_NAME ? 0 : -EOPNOTSUPP;
#else
	return 0;
#endif
}

#if EP__UNWIND_REGISTRY
static size_t put_uleb(unsigned char *p, size_t v)
{
	size_t n = 0;

	do {
		unsigned char b = v & 0x7f;

		v >>= 7;
		p[n++] = b | (v ? 0x80 : 0);
	} while (v);
	return n;
}

static size_t put_advance(unsigned char *p, size_t delta)
{
	if (delta < 0x40) {
		p[0] = (unsigned char)(0x40 | delta); /* DW_CFA_advance_loc */
		return 1;
	}
	if (delta <= 0xffff) {
		uint16_t v = (uint16_t)delta;

		p[0] = 0x03; /* DW_CFA_advance_loc2 */
		memcpy(p + 1, &v, 2);
		return 3;
	}
	uint32_t v = (uint32_t)delta;

	p[0] = 0x04; /* DW_CFA_advance_loc4 */
	memcpy(p + 1, &v, 4);
	return 5;
}

/*
 * .eh_frame-format CFI for one procedure, laid out as libunwind's
 * UNW_INFO_FORMAT_IP_OFFSET expects: a one-entry search table (start offset
 * from start_ip, FDE offset from segbase), then the CIE and the FDE;
 * segbase is the start of the buffer.  A zero length word follows the FDE:
 * from the CIE on, the buffer is an .eh_frame section as libgcc's
 * __register_frame() takes it (EH_FRAME() below).
 */
static uint64_t *cfi_build(uintptr_t start, size_t size, int kind, size_t prologue,
			   size_t frame)
{
	unsigned char b[128];
	size_t n = 8, cie = 8, fde, len_at;

	memset(b, 0, sizeof(b));
	/* CIE: version 1, "zR", code align 1, data align -8, the RA column */
	n += 4;                            /* length, below */
	memset(b + n, 0, 4), n += 4;       /* CIE id */
	b[n++] = 1;
	memcpy(b + n, "zR", 3), n += 3;
	b[n++] = 1;    /* code alignment */
	b[n++] = 0x78; /* data alignment -8 */
	b[n++] = EP__DW_RA; /* return address column (arch.h) */
	b[n++] = 1;    /* augmentation data length */
	b[n++] = 0x00; /* FDE pointers: DW_EH_PE_absptr */
	b[n++] = 0x0c, b[n++] = EP__DW_SP, b[n++] = EP__CFA_AT_ENTRY; /* DW_CFA_def_cfa */
	if (EP__CFA_AT_ENTRY) /* x86: call pushed the return address */
		b[n++] = 0x80 | EP__DW_RA, b[n++] = 1; /* DW_CFA_offset RA at cfa-8 */
	n = (n + 7) & ~(size_t)7;              /* DW_CFA_nop padding */
	uint32_t l32 = (uint32_t)(n - cie - 4);

	memcpy(b + cie, &l32, 4);

	fde = n;
	n += 4; /* length */
	l32 = (uint32_t)(n - cie);
	memcpy(b + n, &l32, 4), n += 4; /* CIE pointer: back to the CIE */
	uint64_t v = start;

	memcpy(b + n, &v, 8), n += 8;
	v = size;
	memcpy(b + n, &v, 8), n += 8;
	b[n++] = 0; /* augmentation data length */
	len_at = n;
	if (kind == EP_UNWIND_DWARF_FP) {
		/* the frame record's prologue (arch.h: push rbp; mov rbp, rsp on
		 * x86-64, stp x29, x30, [sp, #-16]!; mov x29, sp on arm64) */
		n += put_advance(b + n, EP__FP_GROW);
		b[n++] = 0x0e, b[n++] = EP__CFA_AT_ENTRY + 16; /* DW_CFA_def_cfa_offset */
		if (EP__FP_SAVED > EP__FP_GROW)
			n += put_advance(b + n, EP__FP_SAVED - EP__FP_GROW);
		b[n++] = 0x80 | EP__DW_FP, b[n++] = 2; /* DW_CFA_offset fp at cfa-16 */
		if (!EP__CFA_AT_ENTRY)
			b[n++] = 0x80 | EP__DW_RA, b[n++] = 1; /* RA at cfa-8 */
		n += put_advance(b + n, EP__FP_SET - EP__FP_SAVED);
		b[n++] = 0x0c, b[n++] = EP__DW_FP, b[n++] = EP__FP_CFA_OFF; /* DW_CFA_def_cfa */
	} else if (frame) {
		if (prologue)
			n += put_advance(b + n, prologue);
		b[n++] = 0x0e; /* DW_CFA_def_cfa_offset: what the prologue took */
		n += put_uleb(b + n, EP__CFA_AT_ENTRY + frame);
		if (!EP__CFA_AT_ENTRY) /* the prologue stored the link register */
			b[n++] = 0x80 | EP__DW_RA, b[n++] = 1; /* RA at cfa-8 */
	}
	(void)len_at;
	n = (n + 7) & ~(size_t)7;
	l32 = (uint32_t)(n - fde - 4);
	memcpy(b + fde, &l32, 4);

	uint64_t *out = malloc(n + 8);

	if (!out)
		return NULL;
	int32_t ent[2] = { 0, (int32_t)fde }; /* table: start offset 0, FDE */

	memcpy(b, ent, sizeof(ent));
	memcpy(out, b, n);
	memset((unsigned char *)out + n, 0, 8); /* the section's terminator */
	return out;
}

/* The .eh_frame section in a cfi_build() buffer: past the search table. */
#define EH_FRAME(cfi) ((void *)((unsigned char *)(cfi) + 8))
#endif /* EP__UNWIND_REGISTRY */

#ifdef EP__LIBGCC_FRAMES
/*
 * libgcc's unwinder (unwind-dw2-fde.c), which C++ exceptions and glibc's
 * backtrace() use: it looks registered sections up before the loaded
 * objects' own.  The section's address is the key; __deregister_frame()
 * of one never registered aborts.
 */
void __register_frame(void *begin);
void __deregister_frame(void *begin);
#endif

#ifdef HAVE_LIBUNWIND

/*
 * libunwind caches what it learnt about an address (unw_backtrace()'s frame
 * cache is not invalidated by _U_dyn_register/_U_dyn_cancel): after the range
 * is described differently, or freed for reuse, drop what it knew.
 */
static void flush_unwind_caches(struct ep__unwind *u)
{
	unw_flush_cache(unw_local_addr_space, u->di.start_ip, u->di.end_ip);
}
#endif

void ep__unwind_unregister(struct ep__unwind *u)
{
#ifdef EP__LIBGCC_FRAMES
	if (u->gcc_registered)
		__deregister_frame(EH_FRAME(u->cfi));
	u->gcc_registered = false;
#endif
#ifdef HAVE_LIBUNWIND
	if (u->registered) {
		_U_dyn_cancel(&u->di);
		flush_unwind_caches(u);
	}
	u->registered = false;
#endif
	free(u->cfi);
	u->cfi = NULL;
}

/* Register a finalized allocation.  diag's lock held. */
void ep__unwind_register(struct ep__unwind *u, void *exec, size_t size, int kind,
			 size_t prologue, size_t frame, const char *name)
{
#if EP__UNWIND_REGISTRY
	if (kind != EP_UNWIND_NAME) {
		u->cfi = cfi_build((uintptr_t)exec, size, kind, prologue, frame);
		if (!u->cfi)
			return; /* no memory: the code is simply not described */
	}
#endif
#ifdef HAVE_LIBUNWIND
	memset(&u->di, 0, sizeof(u->di));
	u->di.start_ip = (unw_word_t)(uintptr_t)exec;
	u->di.end_ip = (unw_word_t)(uintptr_t)exec + size;
	if (kind == EP_UNWIND_NAME) {
		u->di.format = UNW_INFO_FORMAT_DYNAMIC;
		u->di.u.pi.name_ptr = (unw_word_t)(uintptr_t)name;
	} else {
		u->di.format = UNW_INFO_FORMAT_IP_OFFSET;
		u->di.u.rti.name_ptr = (unw_word_t)(uintptr_t)(name ? name : "");
		u->di.u.rti.segbase = (unw_word_t)(uintptr_t)u->cfi;
		u->di.u.rti.table_len = 1; /* in words: one 8-byte entry */
		u->di.u.rti.table_data = (unw_word_t)(uintptr_t)u->cfi;
	}
	_U_dyn_register(&u->di);
	flush_unwind_caches(u);
	u->registered = true;
#else
	(void)exec, (void)size, (void)prologue, (void)frame, (void)name;
#endif
#ifdef EP__LIBGCC_FRAMES
	if (u->cfi) {
		__register_frame(EH_FRAME(u->cfi));
		u->gcc_registered = true;
	}
#endif
}

void ep__unwind_hide(struct ep__unwind *u)
{
#ifdef EP__LIBGCC_FRAMES
	/* libgcc's copy of the range lives in memory it allocated */
	if (u->gcc_registered)
		__deregister_frame(EH_FRAME(u->cfi));
	u->gcc_registered = false;
#endif
#ifdef HAVE_LIBUNWIND
	ep__diag_hide_word(&u->di.start_ip, sizeof(u->di.start_ip));
	ep__diag_hide_word(&u->di.end_ip, sizeof(u->di.end_ip));
#endif
	if (u->cfi) {
		int32_t fde;

		memcpy(&fde, (unsigned char *)u->cfi + 4, sizeof(fde));
		ep__diag_hide_word((unsigned char *)u->cfi + fde + 8, 8); /* its pc_begin */
	}
}
