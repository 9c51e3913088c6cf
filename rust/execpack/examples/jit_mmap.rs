// SPDX-License-Identifier: LGPL-2.1-or-later
//! The JIT of examples/jit.rs on bare mmap/mprotect, as memmap2's
//! make_mut/make_exec flips do it (a page per program, W^X by mprotect),
//! for comparing the two in lines.
//!   cargo run --example jit_mmap -- '(2+3)*x-4' 10   # prints 46
#[path = "common/expr.rs"]
mod expr;

use std::os::raw::{c_int, c_long, c_void};

extern "C" {
    fn mmap(addr: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, off: i64) -> *mut c_void;
    fn mprotect(addr: *mut c_void, len: usize, prot: c_int) -> c_int;
    fn munmap(addr: *mut c_void, len: usize) -> c_int;
    fn sysconf(name: c_int) -> c_long;
    #[cfg(target_arch = "aarch64")]
    fn __clear_cache(start: *mut c_void, end: *mut c_void);
}
const PROT_READ: c_int = 1;
const PROT_WRITE: c_int = 2;
const PROT_EXEC: c_int = 4;
const MAP_PRIVATE: c_int = 2;
const MAP_ANONYMOUS: c_int = 0x20;
const SC_PAGESIZE: c_int = 30;

struct Exec {
    ptr: *mut c_void,
    len: usize,
}

impl Exec {
    fn new(code: &[u8]) -> std::io::Result<Exec> {
        let page = unsafe { sysconf(SC_PAGESIZE) } as usize;
        let len = (code.len() + page - 1) / page * page;
        let ptr = unsafe { mmap(std::ptr::null_mut(), len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) };
        if ptr as isize == -1 {
            return Err(std::io::Error::last_os_error());
        }
        let map = Exec { ptr, len };
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), ptr as *mut u8, code.len()) };
        #[cfg(target_arch = "aarch64")]
        unsafe { __clear_cache(ptr, (ptr as *mut u8).add(code.len()) as *mut c_void) };
        if unsafe { mprotect(ptr, len, PROT_READ | PROT_EXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(map)
    }
}

impl Drop for Exec {
    fn drop(&mut self) {
        unsafe { munmap(self.ptr, self.len) };
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (src, x) = expr::args()?;
    let code = expr::compile(&expr::parse(&src)?);
    let prog = Exec::new(&code)?;
    let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(prog.ptr) };
    println!("{}", f(x));
    Ok(())
}
