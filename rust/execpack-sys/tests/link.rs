// SPDX-License-Identifier: LGPL-2.1-or-later
//! The declarations link and run against the library: a whole program's
//! life through the raw calls.
use std::ffi::CStr;
use std::ptr;

use execpack_sys::*;

#[test]
fn raw_alloc_finalize_call_free() {
    unsafe {
        let v = CStr::from_ptr(ep_version()).to_str().unwrap();
        assert_eq!(v, env!("CARGO_PKG_VERSION"));
        let cfg = ep_config::default();
        let mut pool = ptr::null_mut();
        let rc = ep_pool_create(&cfg, &mut pool);
        assert_eq!(rc, 0, "{:?}", CStr::from_ptr(ep_strerror(rc)));
        let mut img = ep_image { exec: ptr::null_mut(), rw: ptr::null_mut(), size: 0 };
        assert_eq!(ep_alloc(pool, 16, &mut img), 0);
        assert!(img.size >= 16);
        let mut st = ep_stats::default();
        assert_eq!(ep_pool_stats(pool, &mut st), 0);
        assert_eq!(st.live_allocs, 1);
        // return 42: x86-64 "mov eax, 42; ret", arm64 "mov w0, #42; ret"
        #[cfg(target_arch = "x86_64")]
        let code: &[u8] = &[0xb8, 42, 0, 0, 0, 0xc3];
        #[cfg(target_arch = "aarch64")]
        let code: &[u8] = &[0x40, 0x05, 0x80, 0x52, 0xc0, 0x03, 0x5f, 0xd6];
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        {
            ptr::copy_nonoverlapping(code.as_ptr(), img.rw as *mut u8, code.len());
            assert_eq!(ep_finalize(pool, img.exec), 0);
            let f: extern "C" fn() -> u32 = std::mem::transmute(img.exec);
            assert_eq!(f(), 42);
        }
        assert_eq!(ep_free(pool, img.exec), 0);
        assert!(ep_free(pool, img.exec) < 0);
        ep_pool_destroy(pool);
    }
}

#[test]
fn raw_group_and_kept_staging() {
    unsafe {
        let cfg = ep_config::default();
        let mut pool = ptr::null_mut();
        assert_eq!(ep_pool_create(&cfg, &mut pool), 0);
        let mut imgs = [ep_image { exec: ptr::null_mut(), rw: ptr::null_mut(), size: 0 }; 2];
        for img in imgs.iter_mut() {
            assert_eq!(ep_alloc(pool, 64, img), 0);
            ptr::write_bytes(img.rw as *mut u8, 0x5a, 64);
        }
        assert_eq!(ep_keep_staging(pool, imgs[0].exec), 0);
        let execs = [imgs[0].exec, imgs[1].exec];
        assert!(ep_finalize_group(pool, execs.as_ptr(), 0) < 0);
        assert_eq!(ep_finalize_group(pool, execs.as_ptr(), execs.len()), 0);
        assert!(ep_finalize(pool, imgs[1].exec) < 0); // finalized by the group
        // the kept staging still holds what was written
        assert_eq!(*(imgs[0].rw as *const u8).add(63), 0x5a);
        assert_eq!(ep_release_staging(pool, imgs[0].exec), 0);
        assert!(ep_release_staging(pool, imgs[0].exec) < 0);
        for img in imgs.iter() {
            assert_eq!(ep_free(pool, img.exec), 0);
        }
        ep_pool_destroy(pool);
    }
}
