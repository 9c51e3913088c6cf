// SPDX-License-Identifier: LGPL-2.1-or-later
//! Pools and their configuration.
use std::ffi::{CStr, CString};
use std::mem::MaybeUninit;
use std::ops::{BitOr, BitOrAssign};
use std::os::raw::{c_char, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex};

use execpack_sys as sys;

use crate::code::{Code, Staging};
use crate::error::{check, errno, Error, Result};

/// Where a pool's memory comes from (`enum ep_backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The best available; the `EXECPACK_BACKEND` environment variable overrides.
    Auto,
    /// memfd dual mapping: a writable alias and an executable view.
    Memfd,
    /// memfd or hugetlbfs on 2 MiB pages, dual-mapped.
    Hugetlb,
    /// `/dev/execpack`: no writable mapping at all.
    Kmod,
}

impl Backend {
    pub(crate) fn raw(self) -> sys::ep_backend {
        match self {
            Backend::Auto => sys::EP_BACKEND_AUTO,
            Backend::Memfd => sys::EP_BACKEND_MEMFD,
            Backend::Hugetlb => sys::EP_BACKEND_HUGETLB,
            Backend::Kmod => sys::EP_BACKEND_KMOD,
        }
    }
}

/// `ep_config.flags`: `EP_F_*`, combined with `|`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags(u32);

impl Flags {
    /// No flag.
    pub const NONE: Flags = Flags(0);
    /// A random 16-byte-aligned offset in each allocation's slack.
    pub const RANDOMIZE: Flags = Flags(sys::EP_F_RANDOMIZE);
    /// mseal() the executable views (kept until exit).
    pub const SEAL: Flags = Flags(sys::EP_F_SEAL);
    /// Write /tmp/perf-<pid>.map for named code.
    pub const PERFMAP: Flags = Flags(sys::EP_F_PERFMAP);
    /// Write perf's jitdump, jit-<pid>.dump, for named code.
    pub const JITDUMP: Flags = Flags(sys::EP_F_JITDUMP);
    /// No protection key on the writable alias.
    pub const NO_PKEY: Flags = Flags(sys::EP_F_NO_PKEY);
    /// arm64: map code PROT_BTI.
    pub const BTI: Flags = Flags(sys::EP_F_BTI);
    /// The staging buffer outlives finalize: every patch window of the code
    /// opens there, at the offset from the code it had
    /// ([`Code::patch`](crate::Code::patch)).
    pub const KEEP_STAGING: Flags = Flags(sys::EP_F_KEEP_STAGING);

    /// The raw `EP_F_*` bits.
    pub const fn bits(self) -> u32 {
        self.0
    }
    /// Any bits, the library's checks included (an unknown bit is its -EINVAL).
    pub const fn from_bits(bits: u32) -> Flags {
        Flags(bits)
    }
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for Flags {
    type Output = Flags;
    fn bitor(self, o: Flags) -> Flags {
        Flags(self.0 | o.0)
    }
}

impl BitOrAssign for Flags {
    fn bitor_assign(&mut self, o: Flags) {
        self.0 |= o.0;
    }
}

/// The trap fill of staging buffers, new packs and freed ranges.  Only the
/// library's own fills: a fill must never fail, and runs under the pool's
/// locks, so arbitrary Rust closures are not offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fill {
    /// The fill of the architecture the library runs on (`fill = NULL`).
    Native,
    /// INT3 in every byte.
    X86Int3,
    /// BRK #0x3e8 in every aligned 32-bit word.
    Arm64Brk,
    /// c.ebreak at every 2-byte boundary.
    RiscvEbreak,
}

/// A pool's configuration: `struct ep_config`, as a builder.
///
/// ```no_run
/// # fn main() -> execpack::Result<()> {
/// use execpack::{Backend, Flags, Pool};
/// let pool = Pool::builder()
///     .backend(Backend::Memfd)
///     .flags(Flags::PERFMAP | Flags::RANDOMIZE)
///     .limit(64 << 20)
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PoolBuilder {
    backend: Backend,
    pack_size: usize,
    limit: usize,
    flags: Flags,
    fill: Fill,
    path: Option<CString>,
    near: usize,
    code_range: usize,
    chunk_size: usize,
}

impl Default for PoolBuilder {
    fn default() -> Self {
        PoolBuilder {
            backend: Backend::Auto,
            pack_size: 0,
            limit: 0,
            flags: Flags::NONE,
            fill: Fill::Native,
            path: None,
            near: 0,
            code_range: 0,
            chunk_size: 0,
        }
    }
}

impl PoolBuilder {
    /// All defaults: what `ep_pool_create(NULL, ...)` does.
    pub fn new() -> PoolBuilder {
        PoolBuilder::default()
    }
    pub fn backend(mut self, b: Backend) -> Self {
        self.backend = b;
        self
    }
    /// Bytes per pack; 0: the backend's default (2 MiB).
    pub fn pack_size(mut self, bytes: usize) -> Self {
        self.pack_size = bytes;
        self
    }
    /// Bytes that may be handed out; 0: no limit.
    pub fn limit(mut self, bytes: usize) -> Self {
        self.limit = bytes;
        self
    }
    pub fn flags(mut self, f: Flags) -> Self {
        self.flags = f;
        self
    }
    pub fn fill(mut self, f: Fill) -> Self {
        self.fill = f;
        self
    }
    /// A hugetlbfs mount or the kmod device.  A path with a NUL byte makes
    /// `build` fail with EINVAL.
    pub fn path<P: AsRef<Path>>(mut self, p: P) -> Self {
        // an interior NUL is kept as an empty, invalid marker: build() refuses it
        self.path = Some(
            CString::new(p.as_ref().as_os_str().as_bytes()).unwrap_or_else(|_| CString::default()),
        );
        self
    }
    /// Every pack within rel32 reach (x86-64) of this address; null: anywhere.
    pub fn near<T>(mut self, addr: *const T) -> Self {
        self.near = addr as usize;
        self
    }
    /// The grain of packs: 0 (64 bytes), 16 or 32 for tiny code; anything
    /// else makes `build` fail with EINVAL.
    pub fn chunk_size(mut self, bytes: usize) -> Self {
        self.chunk_size = bytes;
        self
    }

    /// Reserve one contiguous range of `bytes` at creation that holds every
    /// pack and large mapping of the pool: any two of its allocations are
    /// then less than `bytes` apart (a rel32 call on x86-64 for up to 2 GiB,
    /// a BL on arm64 for up to 128 MiB).  A full range is ENOMEM at alloc;
    /// less than one pack, EINVAL at build.  0: none.
    pub fn code_range(mut self, bytes: usize) -> Self {
        self.code_range = bytes;
        self
    }

    /// The `ep_config` this builder stands for; `path` points into `self`.
    pub fn to_raw(&self) -> sys::ep_config {
        let mut c = sys::ep_config::default();
        c.backend = self.backend.raw();
        c.pack_size = self.pack_size;
        c.limit = self.limit;
        c.flags = self.flags.bits();
        c.fill = match self.fill {
            Fill::Native => None,
            Fill::X86Int3 => Some(sys::ep_fill_x86_int3),
            Fill::Arm64Brk => Some(sys::ep_fill_arm64_brk),
            Fill::RiscvEbreak => Some(sys::ep_fill_riscv_ebreak),
        };
        c.path = self.path.as_ref().map_or(ptr::null(), |p| p.as_ptr());
        c.near = self.near as *const _;
        c.code_range = self.code_range;
        c.chunk_size = self.chunk_size;
        c
    }

    fn check_path(&self) -> Result<()> {
        match &self.path {
            Some(p) if p.as_bytes().is_empty() => Err(Error::with_detail(
                errno::EINVAL,
                "the path has a NUL byte or is empty".to_string(),
            )),
            _ => Ok(()),
        }
    }

    /// `ep_pool_create`.  Checks the loaded library's version first.
    pub fn build(&self) -> Result<Pool> {
        crate::check_version()?;
        self.check_path()?;
        let cfg = self.to_raw();
        let mut raw = ptr::null_mut();
        // SAFETY: cfg and the path it points to live across the call
        check(unsafe { sys::ep_pool_create(&cfg, &mut raw) })?;
        let raw = NonNull::new(raw).expect("ep_pool_create returned 0 and no pool");
        Ok(Pool { inner: Arc::new(Inner { raw }) })
    }

    /// `ep_backend_probe`: can `backend` be used with this configuration
    /// here?  Ok(what the library says: for [`Backend::Auto`] the name of
    /// the backend it would pick), or the error with its one-line reason as
    /// the detail.
    pub fn probe(&self, backend: Backend) -> Result<String> {
        self.check_path()?;
        let cfg = self.to_raw();
        let mut why = [0 as c_char; 256];
        // SAFETY: why is writable for its length; cfg lives across the call
        let rc = unsafe { sys::ep_backend_probe(backend.raw(), &cfg, why.as_mut_ptr(), why.len()) };
        let text = cstr_buf(&why);
        if rc == 0 {
            Ok(text)
        } else {
            Err(Error::with_detail(rc.wrapping_abs(), text))
        }
    }
}

pub(crate) fn cstr_buf(buf: &[c_char]) -> String {
    // SAFETY: the library NUL-terminates within the buffer; the last byte is
    // zeroed here too in case it did not
    let mut v: Vec<u8> = buf.iter().map(|&c| c as u8).collect();
    if let Some(l) = v.last_mut() {
        *l = 0;
    }
    let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
    v.truncate(end);
    String::from_utf8_lossy(&v).into_owned()
}

/// A pool of executable memory (`struct ep_pool`): a handle that clones
/// cheaply (a reference count), like an `Arc`.  Every [`Code`] holds one, so
/// the pool is destroyed, and its memory unmapped, when the last handle and
/// the last `Code` are gone, whatever the order they are dropped in: a JIT
/// keeps its pool and its code side by side in one struct, sends code to
/// other threads, or drops the pool first.  A [`Staging`] buffer borrows
/// the pool instead (it never outlives the call that fills it).  All calls
/// on one pool are thread-safe: it is `Send` and `Sync`.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

/// The `ep_pool` itself, destroyed with the last handle.
struct Inner {
    raw: NonNull<sys::ep_pool>,
}

// SAFETY: every call on one pool is thread-safe (execpack.h), and the pool
// is not tied to the thread that created it
unsafe impl Send for Inner {}
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: the last handle is gone: every Code held one and every
        // Staging borrowed one, so no allocation is reachable from safe code
        unsafe { sys::ep_pool_destroy(self.raw.as_ptr()) }
    }
}

/// `struct ep_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packs mapped, the empty ones kept included.
    pub packs: usize,
    /// Their total size.
    pub pack_bytes: usize,
    /// Chunks in use in packs, in bytes.
    pub used_bytes: usize,
    /// Live allocations, packed and large.
    pub live_allocs: usize,
    /// Allocations bigger than a pack (their own mapping).
    pub large_allocs: usize,
    /// Their mapped size.
    pub large_bytes: usize,
}

/// `ep_pool_guards`: the hardware protections of a pool's code.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Guards {
    /// The raw `EP_GUARD_*` bits.
    pub bits: u32,
    /// x86-64: the writable alias is under an access-disabled protection key.
    pub pkey: bool,
    /// arm64: the code is mapped PROT_BTI.
    pub bti: bool,
    /// For each guard not in force, "name: reason", joined by "; ".
    pub why: String,
}

/// The handle of `ep_default_pool()`, once one was had (every call of
/// [`Pool::default_pool`] returns a clone: [`Pool::same`] holds).
static DEFAULT_POOL: Mutex<Option<Pool>> = Mutex::new(None);

impl Pool {
    /// A pool with all defaults.
    pub fn new() -> Result<Pool> {
        PoolBuilder::new().build()
    }

    /// `ep_default_pool`: the process-wide pool that every library of the
    /// process without an allocator hook of its own may share (a regex
    /// JIT through the sljit adapter, the program's own JIT).  All calls
    /// return handles of the same pool.  It is never destroyed (a handle
    /// is kept here for good, and `ep_pool_destroy` does nothing on the
    /// default pool anyway), so code another library holds there stays
    /// when the program's handles are dropped.  ENOMEM
    /// when no pool can be made now (no executable memory here); a later
    /// call tries again.
    ///
    /// ```
    /// # use execpack::Pool;
    /// let a = Pool::default_pool().unwrap();
    /// let b = Pool::default_pool().unwrap();
    /// assert!(a.same(&b));
    /// ```
    pub fn default_pool() -> Result<Pool> {
        crate::check_version()?;
        let mut slot = DEFAULT_POOL.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pool) = slot.as_ref() {
            return Ok(pool.clone());
        }
        // SAFETY: no arguments; the pool lives as long as the process
        let raw = NonNull::new(unsafe { sys::ep_default_pool() })
            .ok_or_else(|| Error::from_rc(-errno::ENOMEM))?;
        let pool = Pool { inner: Arc::new(Inner { raw }) };
        *slot = Some(pool.clone());
        Ok(pool)
    }

    /// A configuration to build a pool from.
    pub fn builder() -> PoolBuilder {
        PoolBuilder::new()
    }

    /// The `struct ep_pool *`, for calls through `execpack-sys`.  It stays
    /// valid while `self` (or any clone, or any [`Code`] of the pool) lives;
    /// do not destroy it.
    #[inline]
    pub fn as_raw(&self) -> *mut sys::ep_pool {
        self.inner.raw.as_ptr()
    }

    /// Whether `self` and `other` are handles of the same pool.
    pub fn same(&self, other: &Pool) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// `ep_alloc`: `len` bytes of code to be, as a staging buffer to write
    /// and then [`Staging::finalize`].
    #[inline]
    pub fn alloc(&self, len: usize) -> Result<Staging<'_>> {
        let mut img = MaybeUninit::<sys::ep_image>::uninit();
        // SAFETY: the pool is live; img is written on success
        check(unsafe { sys::ep_alloc(self.as_raw(), len, img.as_mut_ptr()) })?;
        // SAFETY: ep_alloc returned 0, so it filled img
        let img = unsafe { img.assume_init() };
        // SAFETY: a successful ep_alloc gives non-null exec and rw of img.size bytes
        Ok(unsafe { Staging::from_image(self, img) })
    }

    /// `ep_add`: finished code (position-independent, or linked against
    /// nothing) copied into the pool and made executable in one call, with
    /// no staging buffer.  Its address is `EP_STAGE_ALIGN`-aligned.
    #[inline]
    pub fn add(&self, code: &[u8]) -> Result<Code> {
        let exec = self.add_raw(code)?;
        // SAFETY: a successful ep_add
        Ok(unsafe { Code::from_add(self.clone(), exec) })
    }

    /// [`add`](Pool::add), giving code that borrows the pool instead of
    /// holding a handle (as [`Staging::finalize_scoped`] does).
    #[inline]
    pub fn add_scoped(&self, code: &[u8]) -> Result<Code<&Pool>> {
        let exec = self.add_raw(code)?;
        // SAFETY: a successful ep_add
        Ok(unsafe { Code::from_add(self, exec) })
    }

    #[inline(always)]
    fn add_raw(&self, code: &[u8]) -> Result<*mut c_void> {
        let mut exec = ptr::null_mut();
        // SAFETY: code is readable for its length
        check(unsafe { sys::ep_add(self.as_raw(), code.as_ptr() as *const c_void, code.len(), &mut exec) })?;
        Ok(exec)
    }

    /// `ep_pool_trim`: give back now what the pool keeps for reuse (empty
    /// packs, the committed tail of packs, stashed staging buffers); the
    /// bytes given back.
    pub fn trim(&self) -> Result<usize> {
        let mut released = 0usize;
        // SAFETY: a live pool and a valid out pointer
        check(unsafe { sys::ep_pool_trim(self.as_raw(), &mut released) })?;
        Ok(released)
    }

    /// `ep_pool_stats`.
    pub fn stats(&self) -> Stats {
        let mut s = sys::ep_stats::default();
        // SAFETY: a live pool and a valid out pointer: cannot fail
        unsafe { sys::ep_pool_stats(self.as_raw(), &mut s) };
        Stats {
            packs: s.packs,
            pack_bytes: s.pack_bytes,
            used_bytes: s.used_bytes,
            live_allocs: s.live_allocs,
            large_allocs: s.large_allocs,
            large_bytes: s.large_bytes,
        }
    }

    /// `ep_pool_backend`: "memfd", "hugetlb" or "kmod".
    pub fn backend(&self) -> &str {
        // SAFETY: a static string for a live pool
        unsafe { CStr::from_ptr(sys::ep_pool_backend(self.as_raw())) }.to_str().unwrap_or("")
    }

    /// `ep_pool_reasons`: why [`Backend::Auto`] passed over the backends it
    /// did not choose ("" when it took the first).
    pub fn reasons(&self) -> &str {
        // SAFETY: valid while the pool lives, which &self outlives
        unsafe { CStr::from_ptr(sys::ep_pool_reasons(self.as_raw())) }.to_str().unwrap_or("")
    }

    /// `ep_pool_guards`: which hardware protections guard the pool's code,
    /// and why each missing one is missing.
    pub fn pool_guards(&self) -> Guards {
        self.guards()
    }

    /// The same as [`pool_guards`](Pool::pool_guards).
    pub fn guards(&self) -> Guards {
        let mut why = [0 as c_char; 512];
        // SAFETY: why is writable for its length
        let bits = unsafe { sys::ep_pool_guards(self.as_raw(), why.as_mut_ptr(), why.len()) };
        Guards {
            bits,
            pkey: bits & sys::EP_GUARD_PKEY != 0,
            bti: bits & sys::EP_GUARD_BTI != 0,
            why: cstr_buf(&why),
        }
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("raw", &self.inner.raw)
            .field("backend", &self.backend())
            .finish()
    }
}
