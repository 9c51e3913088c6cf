// SPDX-License-Identifier: LGPL-2.1-or-later
//! Raw declarations of libexecpack's C interface (`include/execpack.h`),
//! written by hand: one `extern "C"` item per EP_API call, `#[repr(C)]`
//! structs laid out as the header's (tests/layout.rs compares them with a
//! C compiler's view).  Everything here is `unsafe` and unchecked; the
//! `execpack` crate is the safe layer.
//!
//! Every int-returning call returns 0 or a negative errno; `ep_strerror`
//! turns it into text.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_long, c_uint, c_void};

/// The library version these declarations were written for (`EP_VERSION_*`).
pub const EP_VERSION_MAJOR: u32 = 0;
pub const EP_VERSION_MINOR: u32 = 1;
pub const EP_VERSION_PATCH: u32 = 0;

/// Allocation granularity inside a pack, in bytes.
pub const EP_CHUNK_SIZE: usize = 64;
/// `ep_alloc`'s staging buffer and the code are equal modulo this.
pub const EP_STAGE_ALIGN: usize = 64;
/// Longest name `ep_set_name` takes, without the NUL.
pub const EP_NAME_MAX: usize = 255;
/// `ep_alloc_data` kinds: read-only after `ep_finalize`, or read-write; never executable.
pub const EP_DATA_RO: c_uint = 1;
pub const EP_DATA_RW: c_uint = 2;

/// Opaque pool.
#[repr(C)]
pub struct ep_pool {
    _private: [u8; 0],
}

/// `enum ep_backend` (an int-sized C enum).
pub type ep_backend = c_uint;
pub const EP_BACKEND_AUTO: ep_backend = 0;
pub const EP_BACKEND_MEMFD: ep_backend = 1;
pub const EP_BACKEND_HUGETLB: ep_backend = 2;
pub const EP_BACKEND_KMOD: ep_backend = 3;

pub type ep_fill_fn = Option<unsafe extern "C" fn(dst: *mut c_void, len: usize, ctx: *mut c_void)>;

/// `ep_config.purge_delay_ms`: nothing given back but by `ep_pool_trim`.
pub const EP_PURGE_NEVER: c_long = -1;

pub const EP_F_RANDOMIZE: c_uint = 1 << 0;
pub const EP_F_SEAL: c_uint = 1 << 1;
pub const EP_F_PERFMAP: c_uint = 1 << 2;
pub const EP_F_JITDUMP: c_uint = 1 << 3;
pub const EP_F_NO_PKEY: c_uint = 1 << 4;
pub const EP_F_BTI: c_uint = 1 << 5;
pub const EP_F_KEEP_STAGING: c_uint = 1 << 6;
pub const EP_F_ALL: c_uint = EP_F_RANDOMIZE
    | EP_F_SEAL
    | EP_F_PERFMAP
    | EP_F_JITDUMP
    | EP_F_NO_PKEY
    | EP_F_BTI
    | EP_F_KEEP_STAGING;

/// `struct ep_config`; set `sz` to `size_of::<ep_config>()`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ep_config {
    pub sz: usize,
    pub backend: ep_backend,
    pub pack_size: usize,
    pub limit: usize,
    pub flags: c_uint,
    pub fill: ep_fill_fn,
    pub fill_ctx: *mut c_void,
    pub path: *const c_char,
    pub near: *const c_void,
    /// One range of this many bytes holding every pack of the pool; 0: none.
    pub code_range: usize,
    pub chunk_size: usize,
    /// Milliseconds an emptied pack keeps its committed tail; 0: the
    /// default (10, or EXECPACK_PURGE_DELAY_MS), `EP_PURGE_NEVER`: only
    /// `ep_pool_trim` gives it back.
    pub purge_delay_ms: c_long,
}

impl Default for ep_config {
    fn default() -> Self {
        ep_config {
            sz: std::mem::size_of::<ep_config>(),
            backend: EP_BACKEND_AUTO,
            pack_size: 0,
            limit: 0,
            flags: 0,
            fill: None,
            fill_ctx: std::ptr::null_mut(),
            path: std::ptr::null(),
            near: std::ptr::null(),
            code_range: 0,
            chunk_size: 0,
            purge_delay_ms: 0,
        }
    }
}

/// What `ep_alloc` hands out.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ep_image {
    pub exec: *mut c_void,
    pub rw: *mut c_void,
    pub size: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ep_stats {
    pub packs: usize,
    pub pack_bytes: usize,
    pub used_bytes: usize,
    pub live_allocs: usize,
    pub large_allocs: usize,
    pub large_bytes: usize,
}

pub const EP_GUARD_PKEY: c_uint = 1 << 0;
pub const EP_GUARD_BTI: c_uint = 1 << 1;

pub const EP_INFO_FINALIZED: c_uint = 1 << 0;
pub const EP_INFO_LARGE: c_uint = 1 << 1;
pub const EP_INFO_NAMED: c_uint = 1 << 2;

/// One named part of an allocation (`ep_set_symbols`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ep_symbol {
    pub offset: usize,
    pub size: usize,
    pub name: *const c_char,
}

/// What `ep_lookup` says of an allocation.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ep_info {
    pub pool: *mut ep_pool,
    pub exec: *mut c_void,
    pub size: usize,
    pub rw: *mut c_void,
    pub patch_exec: *mut c_void,
    pub patch_rw: *mut c_void,
    pub patch_len: usize,
    pub flags: c_uint,
    pub name: [c_char; EP_NAME_MAX + 1],
    pub reserved: [*mut c_void; 4],
}

pub const EP_UNWIND_NAME: c_int = 0;
pub const EP_UNWIND_DWARF_FP: c_int = 1;
pub const EP_UNWIND_DWARF_SP: c_int = 2;

extern "C" {
    pub fn ep_fill_x86_int3(dst: *mut c_void, len: usize, ctx: *mut c_void);
    pub fn ep_fill_arm64_brk(dst: *mut c_void, len: usize, ctx: *mut c_void);
    pub fn ep_fill_riscv_ebreak(dst: *mut c_void, len: usize, ctx: *mut c_void);

    pub fn ep_pool_create(cfg: *const ep_config, out: *mut *mut ep_pool) -> c_int;
    pub fn ep_pool_destroy(pool: *mut ep_pool);
    pub fn ep_default_pool() -> *mut ep_pool;
    pub fn ep_alloc(pool: *mut ep_pool, size: usize, out: *mut ep_image) -> c_int;
    pub fn ep_alloc_aligned(
        pool: *mut ep_pool,
        size: usize,
        align: usize,
        out: *mut ep_image,
    ) -> c_int;
    pub fn ep_alloc_data(
        pool: *mut ep_pool,
        size: usize,
        align: usize,
        kind: c_uint,
        out: *mut ep_image,
    ) -> c_int;
    pub fn ep_write(pool: *mut ep_pool, dst: *mut c_void, src: *const c_void, len: usize) -> c_int;
    pub fn ep_finalize(pool: *mut ep_pool, exec: *mut c_void) -> c_int;
    pub fn ep_finalize_group(pool: *mut ep_pool, execs: *const *mut c_void, n: usize) -> c_int;
    pub fn ep_keep_staging(pool: *mut ep_pool, exec: *mut c_void) -> c_int;
    pub fn ep_release_staging(pool: *mut ep_pool, exec: *mut c_void) -> c_int;
    pub fn ep_add(pool: *mut ep_pool, code: *const c_void, len: usize, exec: *mut *mut c_void)
        -> c_int;
    pub fn ep_finalize_size(pool: *mut ep_pool, exec: *mut c_void, size: usize) -> c_int;
    pub fn ep_pool_trim(pool: *mut ep_pool, released: *mut usize) -> c_int;
    pub fn ep_free(pool: *mut ep_pool, exec: *mut c_void) -> c_int;
    pub fn ep_shrink(pool: *mut ep_pool, exec: *mut c_void, size: usize) -> c_int;
    pub fn ep_pool_stats(pool: *const ep_pool, out: *mut ep_stats) -> c_int;
    pub fn ep_pool_backend(pool: *const ep_pool) -> *const c_char;
    pub fn ep_pool_reasons(pool: *const ep_pool) -> *const c_char;
    pub fn ep_pool_guards(pool: *const ep_pool, why: *mut c_char, whylen: usize) -> c_uint;
    pub fn ep_backend_probe(
        backend: ep_backend,
        cfg: *const ep_config,
        why: *mut c_char,
        whylen: usize,
    ) -> c_int;

    pub fn ep_set_name(pool: *mut ep_pool, exec: *mut c_void, name: *const c_char) -> c_int;
    pub fn ep_set_name_size(
        pool: *mut ep_pool,
        exec: *mut c_void,
        name: *const c_char,
        size: usize,
    ) -> c_int;
    pub fn ep_set_symbols(
        pool: *mut ep_pool,
        exec: *mut c_void,
        syms: *const ep_symbol,
        n: usize,
    ) -> c_int;
    pub fn ep_set_unwind(
        pool: *mut ep_pool,
        exec: *mut c_void,
        kind: c_int,
        prologue: usize,
        frame: usize,
    ) -> c_int;
    pub fn ep_symbolize(addr: *const c_void, buf: *mut c_char, len: usize, offset: *mut usize)
        -> c_int;
    pub fn ep_backtrace(fd: c_int) -> c_int;

    pub fn ep_patch_begin(
        pool: *mut ep_pool,
        exec: *mut c_void,
        len: usize,
        rw: *mut *mut c_void,
    ) -> c_int;
    pub fn ep_patch_commit(pool: *mut ep_pool, exec: *mut c_void) -> c_int;
    pub fn ep_patch_abort(pool: *mut ep_pool, exec: *mut c_void) -> c_int;
    pub fn ep_lookup(addr: *const c_void, out: *mut ep_info) -> c_int;
    pub fn ep_lookup_rw(addr: *const c_void, out: *mut ep_info) -> c_int;

    pub fn ep_strerror(err: c_int) -> *const c_char;
    pub fn ep_version() -> *const c_char;
}
