// SPDX-License-Identifier: LGPL-2.1-or-later
//! Finds libexecpack: EXECPACK_LIB_DIR (a directory holding
//! libexecpack.so, such as an uninstalled build's libexecpack/.libs) wins;
//! otherwise `pkg-config --libs execpack` (PKG_CONFIG_PATH and PKG_CONFIG
//! are honoured), and failing that a plain `-lexecpack`.
//!
//! EXECPACK_STATIC=1 links libexecpack.a instead (from EXECPACK_LIB_DIR),
//! with the libraries `pkg-config --static --libs execpack` names beside it
//! (libunwind, ...), or -lpthread when pkg-config says nothing: for fully
//! static programs (`-C target-feature=+crt-static`), such as the tests the
//! aarch64 stage runs in a guest with no libc.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=EXECPACK_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    println!("cargo:rerun-if-env-changed=EXECPACK_STATIC");
    println!("cargo:rerun-if-changed=build.rs");
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());

    if env::var("EXECPACK_STATIC").map_or(false, |v| !v.is_empty() && v != "0") {
        if let Some(dir) = env::var_os("EXECPACK_LIB_DIR") {
            let dir = dir.to_string_lossy().into_owned();
            println!("cargo:rustc-link-search=native={}", dir);
            // the archive is copied into this crate's rlib: a new one must
            // rebuild it
            println!("cargo:rerun-if-changed={}/libexecpack.a", dir);
        }
        println!("cargo:rustc-link-lib=static=execpack");
        let libs = Command::new(&pkg_config)
            .args(["--static", "--libs", "execpack"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_else(|| "-lpthread".to_string());
        for word in libs.split_whitespace() {
            if let Some(dir) = word.strip_prefix("-L") {
                println!("cargo:rustc-link-search=native={}", dir);
            } else if let Some(lib) = word.strip_prefix("-l") {
                // static too, found by the linker at the final link
                // (-bundle: not copied into this crate's rlib)
                if lib != "execpack" {
                    println!("cargo:rustc-link-lib=static:-bundle={}", lib);
                }
            }
        }
        return;
    }

    if let Some(dir) = env::var_os("EXECPACK_LIB_DIR") {
        let dir = dir.to_string_lossy().into_owned();
        println!("cargo:rustc-link-search=native={}", dir);
        println!("cargo:rustc-link-lib=dylib=execpack");
        // for crates that link to us (links = "execpack"): DEP_EXECPACK_LIB_DIR
        println!("cargo:lib_dir={}", dir);
        return;
    }

    let out = Command::new(&pkg_config)
        .args(["--libs", "execpack"])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let libs = String::from_utf8_lossy(&o.stdout).into_owned();
            let mut linked = false;
            for word in libs.split_whitespace() {
                if let Some(dir) = word.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={}", dir);
                    println!("cargo:lib_dir={}", dir);
                } else if let Some(lib) = word.strip_prefix("-l") {
                    println!("cargo:rustc-link-lib={}", lib);
                    linked |= lib == "execpack";
                }
            }
            if !linked {
                println!("cargo:rustc-link-lib=dylib=execpack");
            }
        }
        _ => {
            println!(
                "cargo:warning=pkg-config found no execpack.pc; linking -lexecpack \
                 (set EXECPACK_LIB_DIR or PKG_CONFIG_PATH)"
            );
            println!("cargo:rustc-link-lib=dylib=execpack");
        }
    }
}
