// SPDX-License-Identifier: LGPL-2.1-or-later
//! The error type: the library's negative errno, and its text from
//! `ep_strerror`.
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_int;

use execpack_sys as sys;

/// Linux errno values the library documents (the same on x86-64, arm64 and
/// riscv64), for comparing with [`Error::errno`].
pub mod errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const E2BIG: i32 = 7;
    pub const EBADF: i32 = 9;
    pub const ENOMEM: i32 = 12;
    pub const EBUSY: i32 = 16;
    pub const ENODEV: i32 = 19;
    pub const EINVAL: i32 = 22;
    pub const ERANGE: i32 = 34;
    pub const EDEADLK: i32 = 35;
    pub const ENAMETOOLONG: i32 = 36;
    pub const ENOSYS: i32 = 38;
    pub const EOPNOTSUPP: i32 = 95;
    pub const EADDRNOTAVAIL: i32 = 99;
}

/// A failed call: the errno (positive) and what `ep_strerror` says of it,
/// with, for errors the binding finds itself, a detail.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    // 0..=i32::MAX, so that -errno never overflows
    errno: i32,
    detail: Option<Box<str>>,
}

/// `std::result::Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// From a call's negative return (or a positive errno).  Any `rc` is
    /// taken: `i32::MIN`, whose negation is no `i32` (and no errno), gives
    /// `i32::MAX` ("Unknown error").
    pub fn from_rc(rc: c_int) -> Error {
        Error { errno: rc.saturating_abs(), detail: None }
    }

    pub(crate) fn with_detail(errno: i32, detail: String) -> Error {
        Error { errno, detail: Some(detail.into_boxed_str()) }
    }

    /// The errno, positive (`errno::EINVAL`, ...).
    pub fn errno(&self) -> i32 {
        self.errno
    }

    /// `ep_strerror`'s text for it.
    pub fn strerror(&self) -> &'static str {
        // SAFETY: ep_strerror never returns NULL; its strings are static
        unsafe { CStr::from_ptr(sys::ep_strerror(-self.errno)) }
            .to_str()
            .unwrap_or("(not UTF-8)")
    }

    /// What the binding adds to `ep_strerror`'s text, if anything.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// The same as an `std::io::Error`.
    pub fn to_io_error(&self) -> std::io::Error {
        std::io::Error::from_raw_os_error(self.errno)
    }
}

/// `rc` (0 or a negative errno) as a `Result`.
#[inline]
pub(crate) fn check(rc: c_int) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::from_rc(rc))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.detail {
            Some(d) => write!(f, "{}: {}", d, self.strerror()),
            None => f.write_str(self.strerror()),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error {{ errno: {}, message: {:?} }}", self.errno, self.to_string())
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        std::io::Error::new(e.to_io_error().kind(), e)
    }
}
