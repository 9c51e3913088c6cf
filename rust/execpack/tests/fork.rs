// SPDX-License-Identifier: LGPL-2.1-or-later
//! A child of fork(): the parent's code runs, the child JITs and frees its
//! own, and the parent's code is what the parent wrote whatever the child
//! patched.
#![cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod common;

use std::os::raw::c_int;

use common::*;

extern "C" {
    fn fork() -> c_int;
    fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
    fn _exit(code: c_int) -> !;
}

#[test]
fn fork_child() {
    let pool = pool();
    let parent = put(&pool, &ret_imm(100));
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // the child: no panics across this frame, an exit code per check
        let r = std::panic::catch_unwind(|| {
            if call(&parent) != 100 {
                return 1;
            }
            let mine = put(&pool, &ret_imm(200));
            if call(&mine) != 200 {
                return 2;
            }
            let (off, b) = patch_imm(300);
            if unsafe { parent.write(off, &b) }.is_err() || call(&parent) != 300 {
                return 3;
            }
            drop(mine);
            if pool.stats().live_allocs != 1 {
                return 4;
            }
            0
        });
        unsafe { _exit(r.unwrap_or(9)) };
    }
    let mut status = 0;
    assert_eq!(unsafe { waitpid(pid, &mut status, 0) }, pid);
    // WIFEXITED and WEXITSTATUS
    assert_eq!(status & 0x7f, 0, "the child died of signal {}", status & 0x7f);
    assert_eq!((status >> 8) & 0xff, 0, "the child's check {} failed", (status >> 8) & 0xff);
    assert_eq!(call(&parent), 100, "the child's patch reached the parent");
}
