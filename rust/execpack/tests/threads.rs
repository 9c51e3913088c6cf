// SPDX-License-Identifier: LGPL-2.1-or-later
//! Code made on one thread, called and freed on another; a pool shared by
//! threads through scoped threads and through a &'static Pool.
#![cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod common;

use std::sync::mpsc;

use common::*;

#[test]
fn code_moved_and_freed_across_threads() {
    let pool = pool();
    let n = 2000u32;
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::sync_channel::<(u32, execpack::Code<'_>)>(64);
        for t in 0..4u32 {
            let tx = tx.clone();
            let pool = &pool;
            s.spawn(move || {
                for i in 0..n / 4 {
                    let imm = t << 24 | i;
                    tx.send((imm, put(pool, &ret_imm(imm)))).unwrap();
                }
            });
        }
        drop(tx);
        // the consumer calls and frees what the producers made
        let consumer = s.spawn(move || {
            let mut got = 0;
            for (imm, code) in rx {
                assert_eq!(call(&code), imm);
                got += 1;
            }
            got
        });
        assert_eq!(consumer.join().unwrap(), n);
    });
    assert_eq!(pool.stats().live_allocs, 0);
}

#[test]
fn static_pool_and_shared_code() {
    let pool: &'static execpack::Pool = Box::leak(Box::new(pool()));
    let code = std::sync::Arc::new(put(pool, &ret_imm(42)));
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let c = code.clone();
            std::thread::spawn(move || (0..1000).all(|_| call(&c) == 42))
        })
        .collect();
    for h in hs {
        assert!(h.join().unwrap());
    }
    // freed by the last thread to drop it
    let h = std::thread::spawn(move || drop(code));
    h.join().unwrap();
    assert_eq!(pool.stats().live_allocs, 0);
}

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn send_and_sync() {
    assert_send_sync::<execpack::Pool>();
    assert_send_sync::<execpack::Code<'static>>();
    assert_send_sync::<execpack::Staging<'static>>();
    assert_send_sync::<execpack::Error>();
}
