// SPDX-License-Identifier: LGPL-2.1-or-later
//! Finds libexecpack: EXECPACK_LIB_DIR (a directory holding
//! libexecpack.so, such as an uninstalled build's libexecpack/.libs) wins;
//! otherwise `pkg-config --libs execpack` (PKG_CONFIG_PATH and PKG_CONFIG
//! are honoured), and failing that a plain `-lexecpack`.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=EXECPACK_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    println!("cargo:rerun-if-changed=build.rs");

    if let Some(dir) = env::var_os("EXECPACK_LIB_DIR") {
        let dir = dir.to_string_lossy().into_owned();
        println!("cargo:rustc-link-search=native={}", dir);
        println!("cargo:rustc-link-lib=dylib=execpack");
        // for crates that link to us (links = "execpack"): DEP_EXECPACK_LIB_DIR
        println!("cargo:lib_dir={}", dir);
        return;
    }

    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
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
