// SPDX-License-Identifier: LGPL-2.1-or-later
//! Patch windows on live code (commit, abort by drop, one at a time, the
//! kept staging buffer) and lookup from an address to its allocation.
#![cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod common;

use common::*;
use execpack::{errno, Flags, Pool};

#[test]
fn window_commit_and_abort() {
    let pool = pool();
    let code = ret_imm(1);
    let c = put(&pool, &code);
    let (off, bytes) = patch_imm(2);
    {
        let mut w = c.patch(0, code.len()).unwrap();
        assert_eq!(&w[..], &code[..], "the window holds the live bytes");
        assert_eq!(w.exec_addr(), c.addr());
        assert_eq!((w.as_ptr() as usize).wrapping_sub(w.exec_addr()) % 64, 0, "rw == exec (mod 64)");
        w[off..off + bytes.len()].copy_from_slice(&bytes);
        // one window per allocation
        assert_eq!(c.patch(0, 4).unwrap_err().errno(), errno::EBUSY);
        unsafe { w.commit() }.unwrap();
    }
    assert_eq!(call(&c), 2);
    {
        // dropped without commit: nothing written
        let (off, bytes) = patch_imm(3);
        let mut w = c.patch(off, bytes.len()).unwrap();
        w.copy_from_slice(&bytes);
    }
    assert_eq!(call(&c), 2);
    let w = c.patch(off, bytes.len()).unwrap();
    w.abort();
    // bad ranges
    assert_eq!(c.patch(0, 0).unwrap_err().errno(), errno::EINVAL);
    assert_eq!(c.patch(c.len(), 1).unwrap_err().errno(), errno::EINVAL);
    assert_eq!(c.patch(1, c.len()).unwrap_err().errno(), errno::EINVAL);
}

#[test]
fn kept_staging_is_where_windows_open() {
    let pool = Pool::builder().flags(Flags::KEEP_STAGING).build().unwrap();
    let code = ret_imm(10);
    let mut s = pool.alloc(256).unwrap();
    s[..code.len()].copy_from_slice(&code);
    let delta = (s.as_ptr() as usize).wrapping_sub(s.exec_addr());
    let c = s.finalize().unwrap();
    let (off, bytes) = patch_imm(11);
    let mut w = c.patch(off, bytes.len()).unwrap();
    assert_eq!((w.as_ptr() as usize).wrapping_sub(w.exec_addr()), delta, "not the staging buffer's offset");
    w.copy_from_slice(&bytes);
    unsafe { w.commit() }.unwrap();
    assert_eq!(call(&c), 11);
    let info = execpack::lookup(c.addr()).unwrap();
    let p = info.patch.expect("the kept staging buffer");
    assert_eq!(p.rw.wrapping_sub(p.exec), delta);
}

#[test]
fn lookup_finds_staging_code_and_windows() {
    let pool = pool();
    let other = Pool::new().unwrap();
    let code = ret_imm(5);
    let mut s = pool.alloc(100).unwrap();
    s[..code.len()].copy_from_slice(&code);
    let exec = s.exec_addr();
    let i = execpack::lookup(exec + 10).unwrap();
    assert_eq!(i.exec, exec);
    assert!(i.size >= 100);
    assert!(!i.finalized);
    assert_eq!(i.staging, None, "by an executable address: no buffer");
    assert!(i.is_in(&pool) && !i.is_in(&other));
    // by an address in the staging buffer: the buffer too
    let i = execpack::lookup(s.as_ptr() as usize + 3).unwrap();
    assert_eq!((i.exec, i.staging), (exec, Some(s.as_ptr() as usize)));
    let c = s.finalize().unwrap();
    let i = execpack::lookup(exec).unwrap();
    assert!(i.finalized && !i.large);
    assert_eq!(i.staging, None);
    assert_eq!(i.name, None);
    c.set_name("looked_up").unwrap();
    assert_eq!(execpack::lookup(exec + 1).unwrap().name.as_deref(), Some("looked_up"));
    {
        let w = c.patch(0, code.len()).unwrap();
        let p = execpack::lookup(exec).unwrap().patch.unwrap();
        assert_eq!((p.exec, p.rw, p.len), (exec, w.as_ptr() as usize, code.len()));
        assert_eq!(execpack::lookup(w.as_ptr() as usize).unwrap().exec, exec);
    }
    assert_eq!(execpack::lookup(exec).unwrap().patch, None);
    let local = 0u8;
    assert!(execpack::lookup(&local as *const u8 as usize).is_none());
    drop(c);
    assert!(execpack::lookup(exec).is_none(), "a freed allocation is found");
}

#[test]
fn ranges_stay_inside_the_code() {
    let pool = pool();
    let code = ret_imm(7);
    let a = put(&pool, &code);
    let b = put(&pool, &ret_imm(8));
    // b's start as an offset from a (wrapping: b may lie below a), so that
    // the library, which checks a range against the allocation holding
    // its first byte, would take it as a range of b
    let to_b = b.addr().wrapping_sub(a.addr());
    assert!(execpack::lookup(a.addr().wrapping_add(to_b)).is_some());
    let e = a.patch(to_b, 4).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL, "a window of a opened on b: {}", e);
    assert_eq!(execpack::lookup(b.addr()).unwrap().patch, None);
    let (off, bytes) = patch_imm(9);
    let e = unsafe { a.write(to_b.wrapping_add(off), &bytes) }.unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    assert_eq!(call(&b), 8, "a's write reached b");
    // past the end, and off + len overflowing
    let n = a.len();
    assert!(n >= code.len());
    for (off, len) in [(n, 1), (n - 1, 2), (0, n + 1), (usize::MAX, 1), (1, usize::MAX), (usize::MAX, usize::MAX)] {
        let e = a.patch(off, len).unwrap_err();
        assert_eq!(e.errno(), errno::EINVAL, "patch({}, {})", off, len);
        assert!(e.detail().unwrap().contains("not inside"), "{}", e);
    }
    let e = unsafe { a.write(usize::MAX, &[0; 2]) }.unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    // the last byte, and the whole of it, are inside
    a.patch(n - 1, 1).unwrap().abort();
    a.patch(0, n).unwrap().abort();
    assert_eq!((call(&a), call(&b)), (7, 8));
}
