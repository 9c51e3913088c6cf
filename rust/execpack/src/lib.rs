// SPDX-License-Identifier: LGPL-2.1-or-later
//! Executable memory for JIT compilers, on libexecpack.
//!
//! Many small programs share one large pack of executable memory, kept W^X
//! (code is written in a private staging buffer and copied into place, never
//! written through an executable mapping), refilled with traps when freed,
//! named for perf, gdb and unwinders, and safe across `fork()`.
//!
//! The staging contract is in the types:
//!
//! - [`Pool::alloc`] gives a [`Staging`] buffer that dereferences to
//!   `[u8]`; code is linked against [`Staging::exec_addr`], where it will run;
//! - [`Staging::finalize`] consumes the buffer and gives [`Code`]: once code
//!   can run, nothing can write its buffer (a compile error, not a check);
//! - [`Code`] frees itself on drop, and holds a handle of its [`Pool`] (a
//!   reference count, like `Arc`): the pool's memory stays mapped until the
//!   last handle and the last code are gone, in any order, so a JIT keeps
//!   its pool and its code in one struct, or sends code to another thread.
//!   `Pool`, `Staging` and `Code` are `Send` and `Sync`; `Pool` clones
//!   cheaply to share it between threads.
//!
//! ```no_run
//! # fn main() -> execpack::Result<()> {
//! let pool = execpack::Pool::new()?;
//! let mut buf = pool.alloc(6)?;
//! buf[..6].copy_from_slice(&[0xb8, 42, 0, 0, 0, 0xc3]); // x86-64: mov eax, 42; ret
//! let code = buf.finalize()?;
//! let f: extern "C" fn() -> u32 = unsafe { code.as_fn() };
//! assert_eq!(f(), 42);
//! # Ok(()) }
//! ```
//!
//! Errors are [`Error`]: the errno the C call returned and `ep_strerror`'s
//! text.  The crate's version is the library's (`EP_VERSION_*`), and the
//! first pool checks that the library loaded is at least that version.
#![warn(missing_debug_implementations)]

mod code;
mod error;
mod pool;

use std::ffi::CStr;
use std::os::unix::io::{AsFd, AsRawFd};
use std::os::raw::{c_char, c_void};
use std::sync::atomic::{AtomicU8, Ordering};

pub use execpack_sys as sys;

pub use crate::code::{Code, Patch, Staging, Unwind};
pub use crate::error::{errno, Error, Result};
pub use crate::pool::{Backend, Fill, Flags, Guards, Pool, PoolBuilder, Stats};

/// The version of the library actually loaded (`ep_version`), "0.1.0".
pub fn version() -> &'static str {
    // SAFETY: a static string
    unsafe { CStr::from_ptr(sys::ep_version()) }.to_str().unwrap_or("")
}

/// The version this crate was written for: the library's own at the time.
pub const BINDING_VERSION: &str = env!("CARGO_PKG_VERSION");

fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let mut it = v.trim().split('.').map(|p| p.parse::<u32>().ok());
    let r = (it.next()??, it.next()??, it.next()??);
    if it.next().is_some() {
        return None;
    }
    Some(r)
}

/// Whether `loaded` may stand in for `wanted`: the same major version (for
/// 0.x, the same minor too), and not older.
pub fn version_compatible(loaded: &str, wanted: &str) -> bool {
    match (parse_version(loaded), parse_version(wanted)) {
        (Some(l), Some(w)) => {
            l.0 == w.0 && (w.0 != 0 || l.1 == w.1) && (l.1, l.2) >= (w.1, w.2)
        }
        _ => false,
    }
}

static VERSION_STATE: AtomicU8 = AtomicU8::new(0); // 0 unchecked, 1 good, 2 bad

/// Check that the library loaded is one this crate can use.  [`PoolBuilder::build`]
/// calls it; the answer is kept.
pub fn check_version() -> Result<()> {
    let good = match VERSION_STATE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let g = version_compatible(version(), BINDING_VERSION);
            VERSION_STATE.store(if g { 1 } else { 2 }, Ordering::Relaxed);
            g
        }
    };
    if good {
        Ok(())
    } else {
        Err(Error::with_detail(
            errno::ENOSYS,
            format!(
                "libexecpack {} is loaded, this binding needs {} or a later compatible one",
                version(),
                BINDING_VERSION
            ),
        ))
    }
}

/// `ep_symbolize`: the name of the named, live JIT code holding `addr` (any
/// pool), and `addr`'s offset in it; None when it is not named JIT code.
/// Async-signal-safe in the library; this wrapper allocates the String.
pub fn symbolize(addr: usize) -> Option<(String, usize)> {
    let mut buf = [0 as c_char; sys::EP_NAME_MAX + 1];
    let mut off = 0usize;
    // SAFETY: buf is writable for its length
    let rc = unsafe { sys::ep_symbolize(addr as *const c_void, buf.as_mut_ptr(), buf.len(), &mut off) };
    if rc == 0 {
        Some((pool::cstr_buf(&buf), off))
    } else {
        None
    }
}

/// An open patch window, as [`lookup`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatchInfo {
    /// Its first executable byte.
    pub exec: usize,
    /// Its buffer.
    pub rw: usize,
    /// Its length.
    pub len: usize,
}

/// What [`lookup`] says of an allocation (`struct ep_info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    /// The `struct ep_pool *` it belongs to, as an address: compare with
    /// [`Info::is_in`].
    pub pool: usize,
    /// Where it runs (its `image.exec`).
    pub exec: usize,
    /// Its usable bytes from exec.
    pub size: usize,
    /// Before finalize, looked up by an address in its staging buffer: the
    /// buffer (None for an executable address: the lock-free path does not
    /// read it).
    pub staging: Option<usize>,
    /// An open patch window, or the staging buffer kept by
    /// [`Flags::KEEP_STAGING`].
    pub patch: Option<PatchInfo>,
    /// Finalized: the code is live.
    pub finalized: bool,
    /// A large allocation (its own mapping).
    pub large: bool,
    /// Its name ([`Code::set_name`]); None when unnamed.
    pub name: Option<String>,
}

impl Info {
    /// Whether it belongs to `pool`.
    pub fn is_in(&self, pool: &Pool) -> bool {
        self.pool == pool.as_raw() as usize
    }
}

/// `ep_lookup_rw`: the live allocation holding `addr` (any executable byte
/// of it, of any pool, or a byte of its staging buffer or patch window);
/// None when no live allocation holds it.  This wrapper takes locks for a
/// staging buffer and allocates (the name): a signal handler calls
/// `sys::ep_lookup`, lock-free and async-signal-safe for every address,
/// instead.
pub fn lookup(addr: usize) -> Option<Info> {
    let mut i = std::mem::MaybeUninit::<sys::ep_info>::uninit();
    // SAFETY: out points to writable memory of the right type
    if unsafe { sys::ep_lookup_rw(addr as *const c_void, i.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: written on success
    let i = unsafe { i.assume_init() };
    let named = i.flags & sys::EP_INFO_NAMED != 0;
    Some(Info {
        pool: i.pool as usize,
        exec: i.exec as usize,
        size: i.size,
        staging: if i.rw.is_null() { None } else { Some(i.rw as usize) },
        patch: if i.patch_exec.is_null() {
            None
        } else {
            Some(PatchInfo { exec: i.patch_exec as usize, rw: i.patch_rw as usize, len: i.patch_len })
        },
        finalized: i.flags & sys::EP_INFO_FINALIZED != 0,
        large: i.flags & sys::EP_INFO_LARGE != 0,
        name: if named { Some(pool::cstr_buf(&i.name)) } else { None },
    })
}

/// `ep_backtrace`: write the calling thread's backtrace to `fd`, JIT frames
/// named; the number of frames written.  `fd` is anything that lends a
/// descriptor (`&File`, `std::io::stderr()`, a `BorrowedFd`), so that it
/// is open for the whole call and no raw number can name a descriptor that
/// another part of the program closed and reopened meanwhile.
pub fn backtrace<F: AsFd>(fd: F) -> Result<usize> {
    // SAFETY: the descriptor is borrowed, open, for the call
    let rc = unsafe { sys::ep_backtrace(fd.as_fd().as_raw_fd()) };
    if rc < 0 {
        Err(Error::from_rc(rc))
    } else {
        Ok(rc as usize)
    }
}

/// `ep_backend_probe` with all defaults; see [`PoolBuilder::probe`].
pub fn probe(backend: Backend) -> Result<String> {
    PoolBuilder::new().probe(backend)
}
