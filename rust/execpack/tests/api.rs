// SPDX-License-Identifier: LGPL-2.1-or-later
//! The safe layer against the library: a program's life, patches, drop
//! order, names, shrink, errors for bad input, the version check.
#![cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod common;

use common::*;
use execpack::{errno, Backend, Fill, Flags, Pool};

#[test]
fn alloc_finalize_call() {
    // all defaults: whatever backend AUTO picks here
    let pool = Pool::new().unwrap();
    let mut s = pool.alloc(64).unwrap();
    assert!(s.len() >= 64);
    let exec = s.exec_addr();
    assert_eq!(exec % 16, 0);
    // the staging buffer is trap-filled, not zeroed
    #[cfg(target_arch = "x86_64")]
    assert!(s.iter().all(|&b| b == 0xcc), "staging not filled with INT3");
    let code = ret_imm(0x1234_5678);
    s[..code.len()].copy_from_slice(&code);
    let c = s.finalize().unwrap();
    assert_eq!(c.addr(), exec, "code runs where the staging said");
    assert_eq!(call(&c), 0x1234_5678);
    // the executable view holds what was written
    let live = unsafe { std::slice::from_raw_parts(c.as_ptr(), code.len()) };
    assert_eq!(live, &code[..]);
    assert_eq!(pool.stats().live_allocs, 1);
    drop(c);
    assert_eq!(pool.stats().live_allocs, 0);
}

#[test]
fn many_programs_each_its_own() {
    let pool = pool();
    let codes: Vec<_> = (0..500u32).map(|i| put(&pool, &ret_imm(i * 7 + 1))).collect();
    assert_eq!(pool.stats().live_allocs, 500);
    for (i, c) in codes.iter().enumerate() {
        assert_eq!(call(c), i as u32 * 7 + 1);
    }
    let mut addrs: Vec<usize> = codes.iter().map(|c| c.addr()).collect();
    addrs.sort_unstable();
    addrs.dedup();
    assert_eq!(addrs.len(), 500);
}

#[test]
fn dropping_staging_frees_it() {
    let pool = pool();
    {
        let s = pool.alloc(100).unwrap();
        assert_eq!(pool.stats().live_allocs, 1);
        assert!(pool.stats().used_bytes >= 100);
        drop(s);
    }
    assert_eq!(pool.stats().live_allocs, 0);
    assert_eq!(pool.stats().used_bytes, 0);
}

#[test]
fn patch_live_code() {
    let pool = pool();
    let c = put(&pool, &ret_imm(1));
    assert_eq!(call(&c), 1);
    let (off, bytes) = patch_imm(0xdead_beef);
    unsafe { c.write(off, &bytes) }.unwrap();
    assert_eq!(call(&c), 0xdead_beef);
    // past the end: refused, nothing written
    let e = unsafe { c.write(c.len(), &[0x90]) }.unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    assert_eq!(call(&c), 0xdead_beef);
}

#[test]
fn shrink_gives_back_chunks() {
    let pool = pool();
    let mut s = pool.alloc(1024).unwrap();
    let code = ret_imm(5);
    s[..code.len()].copy_from_slice(&code);
    let used = pool.stats().used_bytes;
    let mut c = s.finalize_size(code.len()).unwrap();
    assert!(pool.stats().used_bytes < used, "finalize_size gave nothing back");
    assert_eq!(c.len(), execpack::sys::EP_CHUNK_SIZE, "one chunk kept");
    assert_eq!(call(&c), 5);
    // SAFETY: refused (the allocation is unchanged), and nothing runs past
    // the program
    let e = unsafe { c.shrink(4096) }.unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    let e = unsafe { c.shrink(0) }.unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
}

#[test]
fn shrink_live_code() {
    let pool = pool();
    let code = ret_imm(6);
    let mut s = pool.alloc(1024).unwrap();
    s[..code.len()].copy_from_slice(&code);
    let mut c = s.finalize().unwrap();
    assert!(c.len() >= 1024);
    let used = pool.stats().used_bytes;
    // SAFETY: nothing runs past the program's bytes
    unsafe { c.shrink(code.len()) }.unwrap();
    assert_eq!(c.len(), execpack::sys::EP_CHUNK_SIZE, "one chunk kept");
    assert!(pool.stats().used_bytes < used, "shrink gave nothing back");
    assert_eq!(call(&c), 6);
    // the bytes given back are no longer this code's
    assert_eq!(c.patch(c.len(), 1).unwrap_err().errno(), errno::EINVAL);
}

#[test]
fn names_reach_symbolize() {
    let pool = pool();
    let c = put(&pool, &ret_imm(9));
    assert!(execpack::symbolize(c.addr()).is_none());
    c.set_name("rust_jit_answer").unwrap();
    let (name, off) = execpack::symbolize(c.addr() + 2).unwrap();
    assert_eq!(name, "rust_jit_answer");
    assert_eq!(off, 2);
    c.set_unwind(execpack::Unwind::Name, 0, 0).unwrap();
    // bad names
    assert_eq!(c.set_name("a\0b").unwrap_err().errno(), errno::EINVAL);
    assert_eq!(c.set_name("").unwrap_err().errno(), errno::EINVAL);
    assert_eq!(c.set_name("two\nlines").unwrap_err().errno(), errno::EINVAL);
    let long = "x".repeat(execpack::sys::EP_NAME_MAX + 1);
    assert_eq!(c.set_name(&long).unwrap_err().errno(), errno::ENAMETOOLONG);
    c.set_name(&long[1..]).unwrap();
    let addr = c.addr();
    drop(c);
    assert!(execpack::symbolize(addr).is_none(), "a freed program keeps its name");
}

#[test]
fn backtrace_to_a_borrowed_fd() {
    // (the run's own temporary directory: the tests also run in a guest
    // where the build's paths do not exist)
    let path = std::env::temp_dir().join(format!("execpack-backtrace-{}.txt", std::process::id()));
    let f = std::fs::File::create(&path).unwrap();
    let n = execpack::backtrace(&f).expect("ep_backtrace");
    assert!(n >= 1);
    drop(f);
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(text.lines().count(), n, "{}", text);
    assert!(text.starts_with("#0 0x"), "{}", text);
}

#[test]
fn any_rc_is_an_error() {
    for rc in [i32::MIN, i32::MIN + 1, -1, 0, 1, i32::MAX, -errno::EINVAL, errno::EINVAL] {
        let e = execpack::Error::from_rc(rc);
        assert!(e.errno() >= 0, "from_rc({}) gives errno {}", rc, e.errno());
        assert!(!e.strerror().is_empty());
        assert!(!e.to_string().is_empty());
        assert!(format!("{:?}", e).contains(&e.errno().to_string()));
        assert_eq!(e.to_io_error().raw_os_error(), Some(e.errno()));
        let _ = std::io::Error::from(e);
    }
    assert_eq!(execpack::Error::from_rc(-errno::EINVAL).errno(), errno::EINVAL);
    assert_eq!(execpack::Error::from_rc(errno::EINVAL).errno(), errno::EINVAL);
    let e = execpack::Error::from_rc(i32::MIN);
    assert_eq!(e.errno(), i32::MAX);
    assert_eq!(e.strerror(), "Unknown error");
}

#[test]
fn errors_for_bad_input() {
    let pool = pool();
    let e = pool.alloc(0).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    assert!(!e.strerror().is_empty());
    assert_eq!(e.to_string(), e.strerror());
    assert_eq!(e.to_io_error().raw_os_error(), Some(errno::EINVAL));
    let io: std::io::Error = e.clone().into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
    let _: &dyn std::error::Error = &e;

    assert_eq!(pool.alloc(usize::MAX).unwrap_err().errno(), errno::ENOMEM);

    let bad = Pool::builder().flags(Flags::from_bits(1 << 30)).build().unwrap_err();
    assert_eq!(bad.errno(), errno::EINVAL);
    let bad = Pool::builder().pack_size(12345).build().unwrap_err();
    assert_eq!(bad.errno(), errno::EINVAL);
    let bad = Pool::builder().path("/dev/\0null").build().unwrap_err();
    assert_eq!(bad.errno(), errno::EINVAL);
    assert!(bad.detail().unwrap().contains("NUL"));

    // a limit: what would exceed it is EPERM, and the pool still works
    let small = Pool::builder().backend(Backend::Memfd).limit(4096).build().unwrap();
    let a = small.alloc(4096).unwrap();
    assert_eq!(small.alloc(64).unwrap_err().errno(), errno::EPERM);
    drop(a);
    let c = put(&small, &ret_imm(3));
    assert_eq!(call(&c), 3);
}

#[test]
fn config_fields_reach_the_pool() {
    let pool = Pool::builder()
        .backend(Backend::Memfd)
        .pack_size(256 << 10)
        .fill(Fill::X86Int3)
        .flags(Flags::RANDOMIZE)
        .build()
        .unwrap();
    assert_eq!(pool.backend(), "memfd");
    let s = pool.alloc(64).unwrap();
    assert!(s.iter().all(|&b| b == 0xcc), "the x86 fill was not used");
    drop(s);
    let c = put(&pool, &ret_imm(77));
    assert_eq!(call(&c), 77);
    let st = pool.stats();
    assert_eq!(st.packs, 1);
    assert_eq!(st.pack_bytes % 4096, 0);
    assert!(st.pack_bytes <= 256 << 10);
    let arm = Pool::builder().fill(Fill::Arm64Brk).build().unwrap();
    let s = arm.alloc(64).unwrap();
    assert_eq!(&s[..4], &0xd420_7d00u32.to_le_bytes());
    // near: every pack within rel32 of a function of this program
    let here = config_fields_reach_the_pool as *const u8;
    let near = Pool::builder().near(here).build().unwrap();
    let c = put(&near, &ret_imm(1));
    let d = (c.addr() as i64 - here as i64).abs();
    assert!(d < (1i64 << 31), "near: {:#x} is {} bytes from {:p}", c.addr(), d, here);
}

#[test]
fn guards_probe_reasons() {
    let pool = pool();
    let g = pool.pool_guards();
    assert_eq!(g, pool.guards());
    assert_eq!(g.pkey, g.bits & execpack::sys::EP_GUARD_PKEY != 0);
    assert!(g.bti == false || cfg!(target_arch = "aarch64"));
    // a guard not in force says why
    if !g.pkey && cfg!(target_arch = "x86_64") {
        assert!(g.why.contains("pkey"), "{:?}", g.why);
    }
    let auto = execpack::probe(Backend::Auto).unwrap();
    assert!(["memfd", "hugetlb", "kmod"].contains(&auto.as_str()), "{}", auto);
    assert!(execpack::probe(Backend::Memfd).is_ok());
    let _ = pool.reasons();
}

#[test]
fn version_checked() {
    assert_eq!(execpack::version(), execpack::BINDING_VERSION);
    execpack::check_version().unwrap();
    use execpack::version_compatible as ok;
    assert!(ok("0.1.0", "0.1.0"));
    assert!(ok("0.1.3", "0.1.0"));
    assert!(!ok("0.1.0", "0.1.1"));
    assert!(!ok("0.2.0", "0.1.0"), "0.x: a new minor may break");
    assert!(ok("1.4.0", "1.2.5"));
    assert!(!ok("2.0.0", "1.2.5"));
    assert!(!ok("1.2", "1.2.0"));
    assert!(!ok("garbage", "0.1.0"));
}

#[test]
fn into_raw_from_raw() {
    let pool = pool();
    let c = put(&pool, &ret_imm(11));
    let p = c.into_raw();
    assert_eq!(pool.stats().live_allocs, 1);
    let c = unsafe { execpack::Code::from_raw(&pool, p) };
    assert_eq!(call(&c), 11);
    drop(c);
    assert_eq!(pool.stats().live_allocs, 0);
}

#[test]
fn raw_pool_for_sys_calls() {
    let pool = pool();
    let mut st = execpack::sys::ep_stats::default();
    assert_eq!(unsafe { execpack::sys::ep_pool_stats(pool.as_raw(), &mut st) }, 0);
    assert_eq!(st.live_allocs, 0);
}

#[test]
fn code_range_holds_every_allocation() {
    let range = 4 << 20;
    let pool = Pool::builder().backend(Backend::Memfd).pack_size(1 << 20).code_range(range).build().unwrap();
    let mut codes = Vec::new();
    // packed and large allocations, until the range is full
    let err = loop {
        let len = if codes.len() % 7 == 6 { (1 << 20) + 4096 } else { 2000 };
        match pool.alloc(len) {
            Ok(mut s) => {
                let c = ret_imm(codes.len() as u32);
                s[..c.len()].copy_from_slice(&c);
                codes.push(s.finalize().unwrap());
            }
            Err(e) => break e,
        }
        assert!(codes.len() < 20_000, "the range never filled");
    };
    assert_eq!(err.errno(), errno::ENOMEM, "{}", err);
    let lo = codes.iter().map(|c| c.addr()).min().unwrap();
    let hi = codes.iter().map(|c| c.addr() + c.len()).max().unwrap();
    assert!(hi - lo <= range, "{:#x}..{:#x} is wider than the range", lo, hi);
    for (i, c) in codes.iter().enumerate() {
        assert_eq!(call(c), i as u32);
    }
    // freed space is reused
    codes.truncate(codes.len() / 2);
    let c = put(&pool, &ret_imm(7));
    assert!(c.addr() >= lo && c.addr() < lo + range);
    assert_eq!(call(&c), 7);
    // less than one pack
    let e = Pool::builder().backend(Backend::Memfd).pack_size(1 << 20).code_range(64 << 10).build().unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
}

#[test]
#[should_panic(expected = "F must be a function pointer")]
fn as_fn_refuses_what_is_not_pointer_sized() {
    let pool = pool();
    let c = put(&pool, &ret_imm(1));
    let _: u32 = unsafe { c.as_fn() };
}

#[test]
fn chunk_size_grain() {
    // 16-byte chunks: a 15-byte thunk takes 16 bytes
    let small = Pool::builder().backend(Backend::Memfd).chunk_size(16).build().unwrap();
    let thunks: Vec<_> = (0..100).map(|_| small.alloc(15).unwrap()).collect();
    for t in &thunks {
        assert_eq!(t.exec_addr() % 16, 0);
    }
    assert_eq!(small.stats().used_bytes, 100 * 16);
    drop(thunks);
    assert_eq!(small.stats().used_bytes, 0);
    let e = Pool::builder().chunk_size(48).build().unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
}

#[test]
fn scoped_code_borrows_the_pool() {
    let pool = pool();
    let mut s = pool.alloc(64).unwrap();
    let code = ret_imm(21);
    s[..code.len()].copy_from_slice(&code);
    let a: execpack::Code<&Pool> = s.finalize_scoped().unwrap();
    let mut s = pool.alloc(256).unwrap();
    s[..code.len()].copy_from_slice(&ret_imm(22));
    let b = s.finalize_size_scoped(code.len()).unwrap();
    let c = pool.add_scoped(&ret_imm(23)).unwrap();
    assert_eq!((call(&a), call(&b), call(&c)), (21, 22, 23));
    assert!(a.pool().same(&pool));
    assert!(b.len() < 256, "finalize_size_scoped kept {} bytes", b.len());
    assert_eq!(pool.stats().live_allocs, 3);
    // the raw form of either kind comes back as either kind
    let p = c.into_raw();
    let c = unsafe { execpack::Code::from_raw(pool.clone(), p) };
    assert_eq!(call(&c), 23);
    drop((a, b, c));
    assert_eq!(pool.stats().live_allocs, 0);
    // a failed finalize frees the allocation, scoped or not
    let s = pool.alloc(64).unwrap();
    let e = s.finalize_size_scoped(0).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    assert_eq!(pool.stats().live_allocs, 0);
}

#[test]
fn default_pool_shared_and_kept() {
    let pool = Pool::default_pool().unwrap();
    assert!(pool.same(&Pool::default_pool().unwrap()));
    assert_eq!(pool.as_raw(), unsafe { execpack_sys::ep_default_pool() });
    assert!(!pool.same(&Pool::new().unwrap()));
    let mut s = pool.alloc(64).unwrap();
    let code = ret_imm(77);
    s[..code.len()].copy_from_slice(&code);
    let c = s.finalize().unwrap();
    let raw = pool.as_raw();
    drop(pool); // (not the last handle: the crate keeps one)
    assert_eq!(call(&c), 77);
    let again = Pool::default_pool().unwrap();
    assert_eq!(again.as_raw(), raw, "the same pool, never destroyed");
    let live = again.stats().live_allocs;
    drop(c);
    assert_eq!(again.stats().live_allocs, live - 1);
}
