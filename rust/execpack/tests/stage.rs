// SPDX-License-Identifier: LGPL-2.1-or-later
//! Finished code in one call (Pool::add), finalize_size, trim, and the
//! staging buffer aligned to the code.
#![cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod common;

use common::*;
use execpack::{errno, sys, Pool};

#[test]
fn add_finished_code() {
    let pool = pool();
    let codes: Vec<_> = (0..300u32).map(|i| pool.add(&ret_imm(i + 1000)).unwrap()).collect();
    for (i, c) in codes.iter().enumerate() {
        assert_eq!(c.addr() % sys::EP_STAGE_ALIGN, 0);
        assert_eq!(call(c), i as u32 + 1000);
        let want = ret_imm(i as u32 + 1000);
        let live = unsafe { std::slice::from_raw_parts(c.as_ptr(), c.len()) };
        assert_eq!(&live[..want.len()], &want[..]);
        #[cfg(target_arch = "x86_64")]
        assert!(live[want.len()..].iter().all(|&b| b == 0xcc), "the rest is not trap fill");
    }
    assert_eq!(pool.stats().live_allocs, 300);
    drop(codes);
    assert_eq!(pool.stats().live_allocs, 0);
    assert_eq!(pool.add(&[]).unwrap_err().errno(), errno::EINVAL);
    // a large one (its own mapping)
    let mut big = vec![0u8; 3 << 20];
    let code = ret_imm(77);
    big[..code.len()].copy_from_slice(&code);
    let c = pool.add(&big).unwrap();
    assert_eq!(call(&c), 77);
    assert_eq!(pool.stats().large_allocs, 1);
}

#[test]
fn staging_lines_up_with_the_code() {
    let pool = pool();
    for len in [1usize, 17, 64, 100, 1000, 4000] {
        let s = pool.alloc(len).unwrap();
        let d = (s.as_ptr() as usize).wrapping_sub(s.exec_addr());
        assert_eq!(d % sys::EP_STAGE_ALIGN, 0, "len {}: rw - exec = {:#x}", len, d);
    }
}

#[test]
fn finalize_size_keeps_what_it_is_told() {
    let pool = pool();
    let code = ret_imm(8);
    let mut s = pool.alloc(2048).unwrap();
    s[..code.len()].copy_from_slice(&code);
    let c = s.finalize_size(code.len()).unwrap();
    assert_eq!(c.len(), execpack::sys::EP_CHUNK_SIZE, "one chunk kept");
    assert_eq!(pool.stats().used_bytes, 64);
    assert_eq!(call(&c), 8);
    // more than it has: refused, and the allocation freed
    let s = pool.alloc(64).unwrap();
    assert_eq!(s.finalize_size(4096).unwrap_err().errno(), errno::EINVAL);
    assert_eq!(pool.stats().live_allocs, 1);
}

#[test]
fn trim_gives_back_what_is_kept() {
    let pool = Pool::builder().backend(execpack::Backend::Memfd).pack_size(256 << 10).build().unwrap();
    // 1 MiB of code: several packs
    let codes: Vec<_> = (0..2000)
        .map(|i| {
            let mut c = ret_imm(i);
            c.resize(500, 0);
            pool.add(&c).unwrap()
        })
        .collect();
    let full = pool.stats();
    assert!(full.packs > 1);
    drop(codes);
    let released = pool.trim().unwrap();
    let after = pool.stats();
    assert!(released > 0, "trim gave nothing back");
    assert!(after.pack_bytes < full.pack_bytes, "{:?} then {:?}", full, after);
    let c = pool.add(&ret_imm(3)).unwrap();
    assert_eq!(call(&c), 3);
}
