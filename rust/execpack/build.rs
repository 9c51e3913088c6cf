// SPDX-License-Identifier: LGPL-2.1-or-later
//! Hands the tests the compiler that builds the crate: tests/compile_fail.rs
//! compiles snippets against this build's rlib, which only the same rustc
//! can read.
fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    println!("cargo:rustc-env=EXECPACK_BUILD_RUSTC={}", rustc);
    println!("cargo:rerun-if-changed=build.rs");
}
