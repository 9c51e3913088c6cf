// SPDX-License-Identifier: LGPL-2.1-or-later
//! Code made on one thread, called and freed on another: through spawned
//! threads (code owns a handle of its pool, so it may go anywhere) and
//! through scoped threads borrowing one pool.
#![cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod common;

use std::sync::mpsc;

use common::*;

#[test]
fn code_moved_and_freed_across_threads() {
    let pool = pool();
    let n = 2000u32;
    let (tx, rx) = mpsc::sync_channel::<(u32, execpack::Code)>(64);
    let producers: Vec<_> = (0..4u32)
        .map(|t| {
            let tx = tx.clone();
            let pool = pool.clone();
            std::thread::spawn(move || {
                for i in 0..n / 4 {
                    let imm = t << 24 | i;
                    tx.send((imm, put(&pool, &ret_imm(imm)))).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    // the consumer calls and frees what the producers made
    let consumer = std::thread::spawn(move || {
        let mut got = 0;
        for (imm, code) in rx {
            assert_eq!(call(&code), imm);
            got += 1;
        }
        got
    });
    for p in producers {
        p.join().unwrap();
    }
    assert_eq!(consumer.join().unwrap(), n);
    assert_eq!(pool.stats().live_allocs, 0);
}

#[test]
fn scoped_threads_share_one_pool() {
    let pool = pool();
    std::thread::scope(|s| {
        let pool = &pool;
        let hs: Vec<_> = (0..4u32)
            .map(|t| {
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..300u32 {
                        mine.push((t * 1000 + i, put(pool, &ret_imm(t * 1000 + i))));
                        if i % 3 == 0 {
                            mine.swap_remove(i as usize % mine.len());
                        }
                    }
                    mine.iter().all(|(imm, c)| call(c) == *imm)
                })
            })
            .collect();
        for h in hs {
            assert!(h.join().unwrap());
        }
    });
    assert_eq!(pool.stats().live_allocs, 0);
}

#[test]
fn shared_code_freed_by_the_last_thread() {
    let pool = pool();
    let code = std::sync::Arc::new(put(&pool, &ret_imm(42)));
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let c = code.clone();
            std::thread::spawn(move || (0..1000).all(|_| call(&c) == 42))
        })
        .collect();
    for h in hs {
        assert!(h.join().unwrap());
    }
    // freed by the thread that drops it last
    let h = std::thread::spawn(move || drop(code));
    h.join().unwrap();
    assert_eq!(pool.stats().live_allocs, 0);
}

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn send_and_sync() {
    assert_send_sync::<execpack::Pool>();
    assert_send_sync::<execpack::Code>();
    assert_send_sync::<execpack::Staging<'static>>();
    assert_send_sync::<execpack::Patch<'static>>();
    assert_send_sync::<execpack::Error>();
}
