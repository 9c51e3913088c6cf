// SPDX-License-Identifier: LGPL-2.1-or-later
//! The two states of an allocation: a [`Staging`] buffer being written, and
//! the finished, executable [`Code`].  `Staging::finalize` consumes the
//! buffer, so nothing can write it once the code runs.
use std::borrow::Borrow;
use std::ffi::CString;
use std::mem::{self, ManuallyDrop};
use std::ops::{Deref, DerefMut};
use std::os::raw::{c_int, c_void};
use std::ptr::NonNull;
use std::slice;

use execpack_sys as sys;

use crate::error::{check, errno, Error, Result};
use crate::pool::Pool;

/// An allocation before `ep_finalize`: a private, writable staging buffer
/// (trap-filled) for code that will run at [`exec_addr`](Staging::exec_addr).
/// It dereferences to `[u8]`.  Dropped without [`finalize`](Staging::finalize),
/// the allocation is freed.
pub struct Staging<'p> {
    pool: &'p Pool,
    exec: NonNull<u8>,
    rw: NonNull<u8>,
    size: usize,
}

// SAFETY: the buffer is owned by this value alone; the pool is Sync
unsafe impl Send for Staging<'_> {}
unsafe impl Sync for Staging<'_> {}

impl<'p> Staging<'p> {
    /// # Safety
    /// `img` is what a successful `ep_alloc` on `pool` returned.
    #[inline]
    pub(crate) unsafe fn from_image(pool: &'p Pool, img: sys::ep_image) -> Staging<'p> {
        Staging {
            pool,
            exec: NonNull::new_unchecked(img.exec as *mut u8),
            rw: NonNull::new_unchecked(img.rw as *mut u8),
            size: img.size,
        }
    }

    /// Where the code will run: compute every address (branch targets,
    /// rip-relative data) against this, not against the buffer.
    #[inline]
    pub fn exec_addr(&self) -> usize {
        self.exec.as_ptr() as usize
    }

    /// The same as a pointer.
    #[inline]
    pub fn exec_ptr(&self) -> *const u8 {
        self.exec.as_ptr()
    }

    /// The pool it came from.
    pub fn pool(&self) -> &'p Pool {
        self.pool
    }

    /// The pool and the address, as the C calls take them.
    #[inline(always)]
    fn raw(&self) -> (*mut sys::ep_pool, *mut c_void) {
        (self.pool.as_raw(), self.exec.as_ptr() as *mut c_void)
    }

    /// `ep_shrink` before finalizing: keep only the first `size` bytes.
    pub fn shrink(&mut self, size: usize) -> Result<()> {
        // SAFETY: a live allocation of this pool
        let (pool, exec) = self.raw();
        check(unsafe { sys::ep_shrink(pool, exec, size) })?;
        self.size = size.min(self.size);
        Ok(())
    }

    /// `ep_finalize`: copy the buffer into place and make it executable.
    /// The buffer is gone afterwards; on failure the allocation is freed.
    /// The [`Code`] holds a handle of the pool (one reference count).
    #[inline]
    pub fn finalize(self) -> Result<Code> {
        let pool = self.pool.clone();
        self.finish(pool, None)
    }

    /// `ep_finalize_size`: copy only the first `size` bytes into place,
    /// give back the whole chunks past them, and make it executable.  On
    /// failure the allocation is freed.
    pub fn finalize_size(self, size: usize) -> Result<Code> {
        let pool = self.pool.clone();
        self.finish(pool, Some(size))
    }

    /// [`finalize`](Staging::finalize), giving code that borrows the pool
    /// instead of holding a handle: no reference count, and the compiler
    /// keeps it from outliving the pool (`std::thread::scope` moves it
    /// between threads).
    #[inline]
    pub fn finalize_scoped(self) -> Result<Code<&'p Pool>> {
        let pool = self.pool;
        self.finish(pool, None)
    }

    /// [`finalize_size`](Staging::finalize_size), borrowing the pool as
    /// [`finalize_scoped`](Staging::finalize_scoped) does.
    pub fn finalize_size_scoped(self, size: usize) -> Result<Code<&'p Pool>> {
        let pool = self.pool;
        self.finish(pool, Some(size))
    }

    #[inline(always)]
    fn finish<P: Borrow<Pool>>(self, pool: P, size: Option<usize>) -> Result<Code<P>> {
        let s = ManuallyDrop::new(self);
        let exec = s.exec.as_ptr() as *mut c_void;
        // SAFETY: a live, unfinalized allocation of this pool
        let rc = unsafe {
            match size {
                None => sys::ep_finalize(s.pool.as_raw(), exec),
                Some(n) => sys::ep_finalize_size(s.pool.as_raw(), exec, n),
            }
        };
        if rc != 0 {
            // SAFETY: still live: give it back
            unsafe { sys::ep_free(s.pool.as_raw(), exec) };
            return Err(Error::from_rc(rc));
        }
        Ok(Code { pool, exec: s.exec })
    }
}

impl Deref for Staging<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: size initialised (trap-filled) bytes, owned by self
        unsafe { slice::from_raw_parts(self.rw.as_ptr(), self.size) }
    }
}

impl DerefMut for Staging<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as deref, and &mut self is the only way in
        unsafe { slice::from_raw_parts_mut(self.rw.as_ptr(), self.size) }
    }
}

impl Drop for Staging<'_> {
    #[inline]
    fn drop(&mut self) {
        let (pool, exec) = self.raw();
        // SAFETY: a live allocation of this pool, not finalized
        unsafe { sys::ep_free(pool, exec) };
    }
}

impl std::fmt::Debug for Staging<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staging")
            .field("exec", &self.exec)
            .field("rw", &self.rw)
            .field("size", &self.size)
            .finish()
    }
}

/// What unwinders are told about a piece of code (`ep_set_unwind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unwind {
    /// The name only; stepping by the frame pointer.
    Name,
    /// CFI for a frame-record prologue at offset 0 of `prologue` bytes.
    DwarfFp,
    /// CFI for code without a frame pointer that lowers sp by `frame` bytes
    /// in its first `prologue` bytes.
    DwarfSp,
}

/// Finished, executable code: freed (and refilled with traps) on drop.
///
/// `Code` (that is, `Code<Pool>`) holds a handle of its [`Pool`], so the
/// pool's memory stays mapped while it lives, even past the pool's other
/// handles: it may be kept beside its pool in one struct, returned, or sent
/// to any thread.  `Code<&'p Pool>`, from
/// [`finalize_scoped`](Staging::finalize_scoped) or
/// [`Pool::add_scoped`], borrows the pool instead: no reference count, and
/// the compiler keeps it from outliving the pool.  Either is `Send` and
/// `Sync`, and may be dropped on any thread.  Two words: the pool and the
/// address (the library knows the length, and checks every range).
pub struct Code<P: Borrow<Pool> = Pool> {
    pool: P,
    exec: NonNull<u8>,
}

impl<P: Borrow<Pool>> Code<P> {
    /// # Safety
    /// `exec` is what a successful `ep_add` on `pool` gave.
    #[inline]
    pub(crate) unsafe fn from_add(pool: P, exec: *mut c_void) -> Code<P> {
        Code { pool, exec: NonNull::new_unchecked(exec as *mut u8) }
    }
}

// SAFETY: the allocation belongs to this value alone, every call on it is
// thread-safe, and the pool (Pool or &Pool) is Send and Sync
unsafe impl<P: Borrow<Pool> + Send> Send for Code<P> {}
unsafe impl<P: Borrow<Pool> + Sync> Sync for Code<P> {}

impl<P: Borrow<Pool>> Code<P> {
    /// Where it runs.
    #[inline]
    pub fn addr(&self) -> usize {
        self.exec.as_ptr() as usize
    }

    /// The same as a pointer.
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.exec.as_ptr()
    }

    /// Usable bytes from [`addr`](Code::addr) (what `shrink` left), as
    /// [`lookup`](crate::lookup) says (lock-free, but not free: keep it if
    /// it is needed often).
    pub fn len(&self) -> usize {
        crate::lookup(self.addr()).map_or(0, |i| i.size)
    }

    /// Never: an allocation has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pool it lives in.
    pub fn pool(&self) -> &Pool {
        self.pool.borrow()
    }

    /// The pool and the address, as the C calls take them.
    #[inline(always)]
    fn raw(&self) -> (*mut sys::ep_pool, *mut c_void) {
        (self.pool().as_raw(), self.exec.as_ptr() as *mut c_void)
    }

    /// The code's address as a function pointer type `F`, for instance
    /// `extern "C" fn(i64) -> i64`.
    ///
    /// # Safety
    /// The code must be a function with exactly `F`'s signature and ABI, and
    /// the returned value must not be called after `self` is dropped, nor
    /// run bytes that [`shrink`](Code::shrink) gave back.
    ///
    /// # Panics
    /// If `F` is not pointer-sized.
    #[inline]
    pub unsafe fn as_fn<F: Copy>(&self) -> F {
        assert_eq!(
            mem::size_of::<F>(),
            mem::size_of::<usize>(),
            "as_fn: F must be a function pointer"
        );
        let p = self.exec.as_ptr();
        mem::transmute_copy::<*mut u8, F>(&p)
    }

    /// `ep_write`: patch `bytes` into the live code at offset `off`.
    ///
    /// # Safety
    /// It changes code that may be running: a thread executing it sees the
    /// old or the new instruction only for the single stores of ep_write(3)
    /// (one aligned 8-byte word on x86-64, one 32-bit instruction word on
    /// arm64); anything else must be done with the executors stopped.
    /// A range not inside this code's [`len`](Code::len) bytes is EINVAL
    /// (checked here: the library only checks that the range lies within
    /// some live allocation, which a neighbour is).
    pub unsafe fn write(&self, off: usize, bytes: &[u8]) -> Result<()> {
        let at = self.at(off, bytes.len(), "write")?;
        check(sys::ep_write(
            self.pool().as_raw(),
            at as *mut c_void,
            bytes.as_ptr() as *const c_void,
            bytes.len(),
        ))
    }

    /// The address of `off`, if `off..off + len` lies within this code's
    /// usable bytes; EINVAL otherwise (overflow included).  The library
    /// checks a range against the allocation holding its first byte, so an
    /// offset past this code would reach its neighbour: a window or write
    /// on code that this `Code` does not own, and that may be freed (and
    /// its address reused) while the window is open.
    fn at(&self, off: usize, len: usize, what: &str) -> Result<*mut u8> {
        let size = self.len();
        match off.checked_add(len) {
            Some(end) if end <= size => Ok(self.exec.as_ptr().wrapping_add(off)),
            _ => Err(Error::with_detail(
                errno::EINVAL,
                format!("{}: {} bytes at offset {} are not inside the code's {}", what, len, off, size),
            )),
        }
    }

    /// `ep_set_name`: name the code for perf, gdb, libunwind and
    /// [`symbolize`](crate::symbolize).
    pub fn set_name(&self, name: &str) -> Result<()> {
        let n = c_name(name)?;
        let (pool, exec) = self.raw();
        // SAFETY: a live allocation of this pool; n lives across the call
        check(unsafe { sys::ep_set_name(pool, exec, n.as_ptr()) })
    }

    /// `ep_set_name_size`: the name covers only the first `size` bytes.
    pub fn set_name_size(&self, name: &str, size: usize) -> Result<()> {
        let n = c_name(name)?;
        let (pool, exec) = self.raw();
        // SAFETY: as set_name
        check(unsafe { sys::ep_set_name_size(pool, exec, n.as_ptr(), size) })
    }

    /// `ep_set_unwind`.
    pub fn set_unwind(&self, kind: Unwind, prologue: usize, frame: usize) -> Result<()> {
        let k: c_int = match kind {
            Unwind::Name => sys::EP_UNWIND_NAME,
            Unwind::DwarfFp => sys::EP_UNWIND_DWARF_FP,
            Unwind::DwarfSp => sys::EP_UNWIND_DWARF_SP,
        };
        let (pool, exec) = self.raw();
        // SAFETY: a live allocation of this pool
        check(unsafe { sys::ep_set_unwind(pool, exec, k, prologue, frame) })
    }

    /// `ep_shrink`: keep only the first `size` bytes; the whole chunks past
    /// them are refilled with traps and go back to the pool, where the next
    /// allocation may put other code.
    ///
    /// # Safety
    /// No thread runs, or will jump to, the bytes given back (those past
    /// the chunk holding byte `size - 1`): a function pointer from
    /// [`as_fn`](Code::as_fn) may still be called only if the code it runs
    /// lies in the first `size` bytes.  `&mut self` cannot promise this:
    /// the pointers [`as_fn`](Code::as_fn) gives do not borrow the code,
    /// so safe code could shrink under one and then call it into whatever
    /// the pool put there next.  ([`Staging::shrink`], before anything can
    /// run, and [`Staging::finalize_size`] are safe.)
    pub unsafe fn shrink(&mut self, size: usize) -> Result<()> {
        let (pool, exec) = self.raw();
        check(sys::ep_shrink(pool, exec, size))
    }

    /// Give up ownership: the code is never freed by the binding, and lives
    /// until its pool is destroyed (for code that must live as long as its
    /// pool).  The pool's handle this `Code` held, if any, is dropped: keep
    /// another for as long as the code may run.  [`Code::from_raw`] takes
    /// it back.
    pub fn into_raw(self) -> *const u8 {
        let mut me = ManuallyDrop::new(self);
        let p = me.exec.as_ptr();
        // SAFETY: the handle is dropped once, here; the allocation is kept
        unsafe { std::ptr::drop_in_place(&mut me.pool) };
        p
    }

    /// Own again what [`into_raw`](Code::into_raw) gave up.
    ///
    /// # Safety
    /// `exec` is a finalized, live allocation of `pool`, owned by no other
    /// `Code`.  `pool` is a handle (`pool.clone()`) or a borrow (`&pool`).
    pub unsafe fn from_raw(pool: P, exec: *const u8) -> Code<P> {
        Code { pool, exec: NonNull::new(exec as *mut u8).expect("Code::from_raw: null") }
    }
}

pub(crate) fn c_name(name: &str) -> Result<CString> {
    CString::new(name)
        .map_err(|_| Error::with_detail(errno::EINVAL, format!("the name {:?} has a NUL byte", name)))
}

impl<P: Borrow<Pool>> Drop for Code<P> {
    #[inline]
    fn drop(&mut self) {
        let (pool, exec) = self.raw();
        // SAFETY: a live allocation of this pool, owned by self; the pool's
        // handle is dropped after this (and destroys it if it is the last)
        unsafe { sys::ep_free(pool, exec) };
    }
}

impl<P: Borrow<Pool>> std::fmt::Debug for Code<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Code").field("exec", &self.exec).finish()
    }
}

/// A patch window on live code ([`Code::patch`]): a private writable copy
/// of part of it, holding the live bytes, that dereferences to `[u8]`.  Run
/// the emitter over it (linking against [`exec_addr`](Patch::exec_addr)),
/// then [`commit`](Patch::commit) writes the words that changed; dropped
/// without commit, nothing is written.  It borrows the code: the code
/// cannot be freed while a window is open.
pub struct Patch<'c> {
    pool: &'c Pool,
    exec: NonNull<u8>,
    rw: NonNull<u8>,
    len: usize,
}

// SAFETY: the window's buffer belongs to this value alone; the pool is Sync
unsafe impl Send for Patch<'_> {}
unsafe impl Sync for Patch<'_> {}

impl<P: Borrow<Pool>> Code<P> {
    /// `ep_patch_begin`: open a window on `len` bytes at offset `off`.  One
    /// window per allocation at a time (EBUSY); a range not inside this
    /// code's [`len`](Code::len) bytes (or an empty one) is EINVAL.
    pub fn patch(&self, off: usize, len: usize) -> Result<Patch<'_>> {
        let mut rw = std::ptr::null_mut();
        // checked here: the window must be on this code, which it borrows,
        // never on a neighbour that may be freed while it is open
        let exec = self.at(off, len, "patch")?;
        check(unsafe { sys::ep_patch_begin(self.pool().as_raw(), exec as *mut c_void, len, &mut rw) })?;
        Ok(Patch {
            pool: self.pool(),
            // SAFETY: non-null: begin accepted it as inside the allocation
            exec: unsafe { NonNull::new_unchecked(exec) },
            rw: NonNull::new(rw as *mut u8).expect("ep_patch_begin returned 0 and no buffer"),
            len,
        })
    }
}

impl Patch<'_> {
    /// Where the window's first byte runs: link against this.
    pub fn exec_addr(&self) -> usize {
        self.exec.as_ptr() as usize
    }

    /// `ep_patch_commit`: write the words that differ from the live code,
    /// each in one store, and synchronise the instruction caches.  On
    /// failure nothing more is written and the window is closed.
    ///
    /// # Safety
    /// It changes code that may be running: a thread executing it sees
    /// each aligned word old or new, never torn, but a change spanning
    /// several words may be seen half done (ep_patch_begin(3)).
    pub unsafe fn commit(self) -> Result<()> {
        let rc = sys::ep_patch_commit(self.pool.as_raw(), self.exec.as_ptr() as *mut c_void);
        if rc == 0 {
            mem::forget(self);
            return Ok(());
        }
        Err(Error::from_rc(rc)) // self drops: aborted
    }

    /// `ep_patch_abort`: close the window, writing nothing (what dropping
    /// it does).
    pub fn abort(self) {}
}

impl Deref for Patch<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: len bytes copied from the live code, owned by the window
        unsafe { slice::from_raw_parts(self.rw.as_ptr(), self.len) }
    }
}

impl DerefMut for Patch<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as deref; &mut self is the only way in
        unsafe { slice::from_raw_parts_mut(self.rw.as_ptr(), self.len) }
    }
}

impl Drop for Patch<'_> {
    fn drop(&mut self) {
        // SAFETY: the window opened at exec is still open
        unsafe { sys::ep_patch_abort(self.pool.as_raw(), self.exec.as_ptr() as *mut c_void) };
    }
}

impl std::fmt::Debug for Patch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Patch")
            .field("exec", &self.exec)
            .field("rw", &self.rw)
            .field("len", &self.len)
            .finish()
    }
}
