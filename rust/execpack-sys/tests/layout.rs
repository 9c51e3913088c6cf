// SPDX-License-Identifier: LGPL-2.1-or-later
//! The hand-written declarations against the header: every struct's size
//! and field offsets as a C compiler lays them out, the version and the
//! flag constants.  The header is the crate's copy of the source tree's
//! include/execpack.h (include/execpack.h here), read when the test is
//! built, so that the packaged crate needs nothing outside itself and the
//! test runs where the tree is not, as in the aarch64 stage's guest (the C
//! layout then says SKIP).  In the tree, the copy must be the header.
use std::mem::{size_of, MaybeUninit};
use std::path::PathBuf;
use std::process::Command;
use std::ptr::addr_of;

use execpack_sys::*;

const HEADER: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/include/execpack.h"));

fn include_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include")
}

#[test]
fn header_is_the_trees() {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let tree = here.join("../../include/execpack.h");
    let h = match std::fs::read_to_string(&tree) {
        Ok(h) => h,
        // beside the workspace's manifest, the tree is there: a path gone
        // wrong must not pass for a crate outside it
        Err(e) if !here.join("../Cargo.toml").exists() => {
            println!("SKIP: {} ({}): not in the source tree", tree.display(), e);
            return;
        }
        Err(e) => panic!("{}: {}", tree.display(), e),
    };
    if let Some((n, (a, b))) = h.lines().zip(HEADER.lines()).enumerate().find(|(_, (a, b))| a != b) {
        panic!(
            "include/execpack.h line {}: {:?}\nthe crate's copy: {:?}\n\
             (cp include/execpack.h rust/execpack-sys/include/)",
            n + 1,
            a,
            b
        );
    }
    assert!(h == HEADER, "include/execpack.h and the crate's copy differ in length: copy it again");
}

fn header() -> String {
    HEADER.to_string()
}

fn define(h: &str, name: &str) -> String {
    for line in h.lines() {
        let mut w = line.split_whitespace();
        if w.next() == Some("#define") && w.next() == Some(name) {
            return w.next().unwrap_or("").to_string();
        }
    }
    panic!("execpack.h defines no {}", name)
}

#[test]
fn version_is_the_headers() {
    let h = header();
    let v = format!(
        "{}.{}.{}",
        define(&h, "EP_VERSION_MAJOR"),
        define(&h, "EP_VERSION_MINOR"),
        define(&h, "EP_VERSION_PATCH")
    );
    let ours = format!("{}.{}.{}", EP_VERSION_MAJOR, EP_VERSION_MINOR, EP_VERSION_PATCH);
    assert_eq!(v, ours, "execpack.h's version against execpack-sys's constants");
    assert_eq!(v, env!("CARGO_PKG_VERSION"), "execpack.h's version against Cargo.toml's");
    assert_eq!(define(&h, "EP_CHUNK_SIZE"), EP_CHUNK_SIZE.to_string());
    assert_eq!(define(&h, "EP_NAME_MAX"), EP_NAME_MAX.to_string());
    assert_eq!(define(&h, "EP_STAGE_ALIGN"), EP_STAGE_ALIGN.to_string());
}

/// Fields of a struct as (name, offset) by Rust's layout.
macro_rules! offsets {
    ($t:ty, $($f:ident),*) => {{
        let u = MaybeUninit::<$t>::uninit();
        let base = u.as_ptr() as usize;
        // SAFETY: addr_of! on a field of an uninitialised value reads nothing
        let v: Vec<(&str, usize)> =
            vec![$((stringify!($f), unsafe { addr_of!((*u.as_ptr()).$f) } as usize - base)),*];
        (stringify!($t), size_of::<$t>(), v)
    }};
}

#[test]
fn structs_match_the_c_compilers_layout() {
    let structs = vec![
        offsets!(
            ep_config, sz, backend, pack_size, limit, flags, fill, fill_ctx, path, near,
            code_range, chunk_size
        ),
        offsets!(ep_image, exec, rw, size),
        offsets!(ep_info, pool, exec, size, rw, patch_exec, patch_rw, patch_len, flags, name, reserved),
        offsets!(ep_stats, packs, pack_bytes, used_bytes, live_allocs, large_allocs, large_bytes),
    ];
    // A C program printing what the compiler says, line for line as ours.
    let mut c = String::from("#include <stddef.h>\n#include <stdio.h>\n#include <execpack.h>\nint main(void)\n{\n");
    let mut want = String::new();
    for (name, size, fields) in &structs {
        c += &format!("\tprintf(\"{0} %zu\\n\", sizeof(struct {0}));\n", name);
        want += &format!("{} {}\n", name, size);
        for (f, off) in fields {
            c += &format!("\tprintf(\"{0}.{1} %zu\\n\", offsetof(struct {0}, {1}));\n", name, f);
            want += &format!("{}.{} {}\n", name, f, off);
        }
    }
    for (name, value) in [
        ("EP_F_RANDOMIZE", EP_F_RANDOMIZE),
        ("EP_F_SEAL", EP_F_SEAL),
        ("EP_F_PERFMAP", EP_F_PERFMAP),
        ("EP_F_JITDUMP", EP_F_JITDUMP),
        ("EP_F_NO_PKEY", EP_F_NO_PKEY),
        ("EP_F_BTI", EP_F_BTI),
        ("EP_F_KEEP_STAGING", EP_F_KEEP_STAGING),
        ("EP_INFO_FINALIZED", EP_INFO_FINALIZED),
        ("EP_INFO_LARGE", EP_INFO_LARGE),
        ("EP_INFO_NAMED", EP_INFO_NAMED),
        ("EP_F_ALL", EP_F_ALL),
        ("EP_GUARD_PKEY", EP_GUARD_PKEY),
        ("EP_GUARD_BTI", EP_GUARD_BTI),
        ("EP_BACKEND_AUTO", EP_BACKEND_AUTO),
        ("EP_BACKEND_MEMFD", EP_BACKEND_MEMFD),
        ("EP_BACKEND_HUGETLB", EP_BACKEND_HUGETLB),
        ("EP_BACKEND_KMOD", EP_BACKEND_KMOD),
        ("EP_UNWIND_NAME", EP_UNWIND_NAME as u32),
        ("EP_UNWIND_DWARF_FP", EP_UNWIND_DWARF_FP as u32),
        ("EP_UNWIND_DWARF_SP", EP_UNWIND_DWARF_SP as u32),
        ("sizeof(enum ep_backend)", size_of::<ep_backend>() as u32),
    ] {
        c += &format!("\tprintf(\"{0} %u\\n\", (unsigned)({0}));\n", name);
        want += &format!("{} {}\n", name, value);
    }
    c += "\treturn 0;\n}\n";

    if !include_dir().join("execpack.h").exists() {
        println!("SKIP: {} is not here: layout not compared", include_dir().display());
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("layout");
    if std::fs::create_dir_all(&dir).is_err() {
        println!("SKIP: cannot create {}: layout not compared", dir.display());
        return;
    }
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, c).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let built = match Command::new(&cc)
        .arg("-I")
        .arg(include_dir())
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
    {
        Ok(s) => s,
        Err(e) => {
            // no C compiler: what cannot run here says so
            println!("SKIP: {} not runnable ({}): layout not compared", cc, e);
            return;
        }
    };
    assert!(built.success(), "{} failed on {}", cc, src.display());
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    let got = String::from_utf8(out.stdout).unwrap();
    assert_eq!(got, want, "C's layout (left) against Rust's (right)");
}
