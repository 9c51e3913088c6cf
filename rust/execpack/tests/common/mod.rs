// SPDX-License-Identifier: LGPL-2.1-or-later
//! What the tests share: a program returning a constant, per architecture.
#![allow(dead_code)]

/// Machine code of `extern "C" fn() -> u32 { imm }`.
#[cfg(target_arch = "x86_64")]
pub fn ret_imm(imm: u32) -> Vec<u8> {
    let mut v = vec![0xb8]; // mov eax, imm32
    v.extend_from_slice(&imm.to_le_bytes());
    v.push(0xc3); // ret
    v
}

#[cfg(target_arch = "aarch64")]
pub fn ret_imm(imm: u32) -> Vec<u8> {
    let movz = 0x5280_0000u32 | ((imm & 0xffff) << 5); // movz w0, #lo
    let movk = 0x72a0_0000u32 | ((imm >> 16) << 5); // movk w0, #hi, lsl 16
    let ret = 0xd65f_03c0u32;
    [movz, movk, ret].iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Offset and bytes that change the constant of ret_imm's code to `imm`.
#[cfg(target_arch = "x86_64")]
pub fn patch_imm(imm: u32) -> (usize, Vec<u8>) {
    (1, imm.to_le_bytes().to_vec())
}

#[cfg(target_arch = "aarch64")]
pub fn patch_imm(imm: u32) -> (usize, Vec<u8>) {
    (0, ret_imm(imm)[..8].to_vec())
}

/// A memfd pool: what the tests check does not depend on the backend, and
/// AUTO would take hugetlb where huge pages are reserved (as the test
/// stages do), whose few pages parallel tests would contend for.
pub fn pool() -> execpack::Pool {
    execpack::Pool::builder().backend(execpack::Backend::Memfd).build().expect("a memfd pool")
}

/// alloc + copy + finalize.
pub fn put(pool: &execpack::Pool, code: &[u8]) -> execpack::Code {
    let mut s = pool.alloc(code.len()).expect("alloc");
    s[..code.len()].copy_from_slice(code);
    s.finalize().expect("finalize")
}

pub fn call<P: std::borrow::Borrow<execpack::Pool>>(code: &execpack::Code<P>) -> u32 {
    // SAFETY: every code of these tests is an extern "C" fn() -> u32
    let f: extern "C" fn() -> u32 = unsafe { code.as_fn() };
    f()
}
