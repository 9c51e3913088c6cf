// SPDX-License-Identifier: LGPL-2.1-or-later
//! Drop order: code keeps its pool's memory mapped past every other handle
//! of the pool, and the last of them, whichever it is, destroys the pool
//! (its executable mappings gone from /proc/self/maps).  The tests of this
//! file take turns, so that no other pool of the process maps the same
//! addresses in between.
#![cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod common;

use std::sync::Mutex;

use common::*;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Whether an executable mapping of this process holds `addr`.
fn mapped_exec(addr: usize) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().any(|l| {
        let mut f = l.split_whitespace();
        let range = f.next().unwrap();
        let perms = f.next().unwrap();
        let (a, b) = range.split_once('-').unwrap();
        let a = usize::from_str_radix(a, 16).unwrap();
        let b = usize::from_str_radix(b, 16).unwrap();
        a <= addr && addr < b && perms.as_bytes()[2] == b'x'
    })
}

#[test]
fn pool_dropped_before_its_code() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let pool = pool();
    let c1 = put(&pool, &ret_imm(1));
    let c2 = pool.add(&ret_imm(2)).unwrap();
    let other = pool.clone();
    assert!(other.same(&pool) && c1.pool().same(&pool));
    let addr = c2.addr();
    drop(pool);
    drop(other);
    // no handle but the code's: still mapped, still running, still a pool
    assert!(mapped_exec(addr));
    assert_eq!(call(&c1), 1);
    assert_eq!(call(&c2), 2);
    assert_eq!(c1.pool().stats().live_allocs, 2);
    let c3 = c1.pool().add(&ret_imm(3)).unwrap();
    assert_eq!(call(&c3), 3);
    drop(c1);
    drop(c3);
    assert!(mapped_exec(addr), "the pool went before its last code");
    assert_eq!(call(&c2), 2);
    drop(c2);
    assert!(!mapped_exec(addr), "the last code dropped, the pool is still mapped");
}

/// A JIT's usual shape: the pool first, so it drops first.
struct Jit {
    pool: execpack::Pool,
    funcs: Vec<execpack::Code>,
}

#[test]
fn jit_struct_holds_pool_and_code() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let pool = pool();
    let funcs = (0..50u32).map(|i| put(&pool, &ret_imm(i))).collect();
    let jit = Jit { pool, funcs };
    assert_eq!(jit.pool.stats().live_allocs, 50);
    assert!(jit.funcs.iter().enumerate().all(|(i, c)| call(c) == i as u32));
    let addr = jit.funcs[49].addr();
    drop(jit);
    assert!(!mapped_exec(addr));
}

#[test]
fn code_outlives_its_pool_on_another_thread() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let pool = pool();
    let code = put(&pool, &ret_imm(77));
    let addr = code.addr();
    let h = std::thread::spawn(move || {
        rx.recv().unwrap(); // until the pool's handle is gone
        let r = call(&code);
        drop(code);
        r
    });
    drop(pool);
    tx.send(()).unwrap();
    assert_eq!(h.join().unwrap(), 77);
    assert!(!mapped_exec(addr));
}

#[test]
fn into_raw_keeps_code_until_the_pool_goes() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let pool = pool();
    let p = put(&pool, &ret_imm(5)).into_raw();
    assert_eq!(pool.stats().live_allocs, 1);
    // SAFETY: p is live code of pool, owned by nobody
    let again = unsafe { execpack::Code::from_raw(&pool, p) };
    assert_eq!(call(&again), 5);
    let p = again.into_raw() as usize;
    drop(pool); // the raw code goes with it
    assert!(!mapped_exec(p));
}
