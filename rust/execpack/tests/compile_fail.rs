// SPDX-License-Identifier: LGPL-2.1-or-later
//! The typestate, checked by the compiler: snippets that must not compile,
//! each for its own reason (the error code and the words of rustc's
//! message), compiled with the rustc that built this crate against this
//! build's rlib.  A snippet that must compile runs first with the same
//! command, so that a failure means the snippet, not the set-up.
use std::path::{Path, PathBuf};
use std::process::Command;

fn deps_dir() -> PathBuf {
    // the test binary lives in target/<profile>/deps, beside the rlibs
    std::env::current_exe().unwrap().parent().unwrap().to_path_buf()
}

/// The newest libexecpack-*.rlib: the one this test was linked with.
fn rlib(deps: &Path) -> PathBuf {
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for e in std::fs::read_dir(deps).unwrap() {
        let p = e.unwrap().path();
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if n.starts_with("libexecpack-") && n.ends_with(".rlib") {
            let t = p.metadata().unwrap().modified().unwrap();
            if best.as_ref().map_or(true, |b| t > b.0) {
                best = Some((t, p));
            }
        }
    }
    best.expect("no libexecpack-*.rlib beside the test binary").1
}

/// Compile `src` as a library; rustc's stderr, or None if it compiled.
fn compile(name: &str, src: &str) -> Option<String> {
    let deps = deps_dir();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("compile-fail");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{}.rs", name));
    std::fs::write(&file, src).unwrap();
    let out = Command::new(env!("EXECPACK_BUILD_RUSTC"))
        .args(["--edition", "2021", "--crate-type", "lib", "--emit", "metadata"])
        .arg("--crate-name")
        .arg(name)
        .arg("--out-dir")
        .arg(&dir)
        .arg("--extern")
        .arg(format!("execpack={}", rlib(&deps).display()))
        .arg("-L")
        .arg(format!("dependency={}", deps.display()))
        .arg(&file)
        .output()
        .expect("running rustc");
    if out.status.success() {
        None
    } else {
        Some(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The snippet must fail with error `code` and a message containing `words`.
fn must_fail(name: &str, src: &str, code: &str, words: &str) {
    match compile(name, src) {
        None => panic!("{} compiled, but must not:\n{}", name, src),
        Some(err) => {
            assert!(
                err.contains(&format!("error[{}]", code)) && err.contains(words),
                "{} failed, but not with {} \"{}\":\n{}",
                name,
                code,
                words,
                err
            );
            let others = err.matches("error[").count();
            assert_eq!(others, 1, "{}: more errors than the one expected:\n{}", name, err);
        }
    }
}

#[test]
fn the_typestate_holds() {
    let rustc = env!("EXECPACK_BUILD_RUSTC");
    if Command::new(rustc).arg("--version").output().is_err() {
        // (the aarch64 stage runs the tests in a guest without a compiler)
        println!("SKIP: {} cannot run here: the typestate is not checked", rustc);
        return;
    }
    // the control: the same uses, in order
    let ok = compile(
        "control",
        r#"
pub fn f(pool: &execpack::Pool) -> execpack::Result<u32> {
    let mut s = pool.alloc(16)?;
    s[0] = 0xc3;
    let code = s.finalize()?;
    let g: extern "C" fn() -> u32 = unsafe { code.as_fn() };
    unsafe { code.write(0, &[0xc3])? };
    Ok(g())
}
"#,
    );
    assert!(ok.is_none(), "the control snippet does not compile:\n{}", ok.unwrap());
    // what a JIT does with its code, which must compile: pool and code side
    // by side in one struct, code returned past its pool's handle, code sent
    // to a spawned thread, the pool dropped first
    let ok = compile(
        "control_owned",
        r#"
pub struct Jit {
    pub pool: execpack::Pool,
    pub funcs: Vec<execpack::Code>,
}
pub fn make() -> execpack::Result<execpack::Code> {
    let pool = execpack::Pool::new()?;
    let code = pool.add(&[0xc3])?;
    Ok(code)
}
pub fn jit() -> execpack::Result<Jit> {
    let pool = execpack::Pool::new()?;
    let funcs = vec![pool.add(&[0xc3])?];
    Ok(Jit { pool, funcs })
}
pub fn elsewhere(code: execpack::Code) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || code.addr())
}
pub fn pool_first(pool: execpack::Pool) -> execpack::Result<usize> {
    let code = pool.add(&[0xc3])?;
    drop(pool);
    Ok(code.addr())
}
"#,
    );
    assert!(ok.is_none(), "the owned-code snippet does not compile:\n{}", ok.unwrap());

    must_fail(
        "write_after_finalize",
        r#"
pub fn f(pool: &execpack::Pool) {
    let mut s = pool.alloc(16).unwrap();
    let code = s.finalize().unwrap();
    s[0] = 0xc3;
    drop(code);
}
"#,
        "E0382",
        "borrow of moved value: `s`",
    );

    must_fail(
        "buffer_kept_across_finalize",
        r#"
pub fn f(pool: &execpack::Pool) {
    let mut s = pool.alloc(16).unwrap();
    let buf: &mut [u8] = &mut s;
    let code = s.finalize().unwrap();
    buf[0] = 0xc3;
    drop(code);
}
"#,
        "E0505",
        "cannot move out of `s` because it is borrowed",
    );

    must_fail(
        "finalize_twice",
        r#"
pub fn f(pool: &execpack::Pool) {
    let s = pool.alloc(16).unwrap();
    let a = s.finalize();
    let b = s.finalize();
    drop((a, b));
}
"#,
        "E0382",
        "use of moved value: `s`",
    );

    must_fail(
        "staging_outlives_pool",
        r#"
pub fn f() -> execpack::Staging<'static> {
    let pool = execpack::Pool::new().unwrap();
    pool.alloc(16).unwrap()
}
"#,
        "E0515",
        "returns a value referencing data owned by the current function",
    );

    must_fail(
        "pool_dropped_under_staging",
        r#"
pub fn f() {
    let pool = execpack::Pool::new().unwrap();
    let s = pool.alloc(16).unwrap();
    drop(pool);
    drop(s);
}
"#,
        "E0505",
        "cannot move out of `pool` because it is borrowed",
    );

    must_fail(
        "scoped_code_outlives_pool",
        r#"
pub fn f() -> execpack::Code<&'static execpack::Pool> {
    let pool = execpack::Pool::new().unwrap();
    let code = pool.alloc(16).unwrap().finalize_scoped().unwrap();
    code
}
"#,
        "E0515",
        "returns a value referencing data owned by the current function",
    );

    must_fail(
        "pool_dropped_under_scoped_code",
        r#"
pub fn f() {
    let pool = execpack::Pool::new().unwrap();
    let code = pool.add_scoped(&[0xc3]).unwrap();
    drop(pool);
    drop(code);
}
"#,
        "E0505",
        "cannot move out of `pool` because it is borrowed",
    );

    must_fail(
        "window_written_after_commit",
        r#"
pub fn f(code: &execpack::Code) {
    let mut w = code.patch(0, 4).unwrap();
    unsafe { w.commit().unwrap() };
    w[0] = 0x90;
}
"#,
        "E0382",
        "borrow of moved value: `w`",
    );

    must_fail(
        "code_freed_under_window",
        r#"
pub fn f(pool: &execpack::Pool) {
    let code = pool.alloc(16).unwrap().finalize().unwrap();
    let w = code.patch(0, 4).unwrap();
    drop(code);
    drop(w);
}
"#,
        "E0505",
        "cannot move out of `code` because it is borrowed",
    );

    must_fail(
        "commit_without_unsafe",
        r#"
pub fn f(code: &execpack::Code) {
    let w = code.patch(0, 4).unwrap();
    let _ = w.commit();
}
"#,
        "E0133",
        "call to unsafe function",
    );

    must_fail(
        "patch_without_unsafe",
        r#"
pub fn f(code: &execpack::Code) {
    let _ = code.write(0, &[0x90]);
}
"#,
        "E0133",
        "call to unsafe function",
    );

    // the bytes shrink gives back may still be run through a pointer that
    // as_fn gave, which borrows nothing: the caller must promise they are not
    must_fail(
        "shrink_without_unsafe",
        r#"
pub fn f(mut code: execpack::Code) -> u32 {
    let g: extern "C" fn() -> u32 = unsafe { code.as_fn() };
    let _ = code.shrink(1);
    g()
}
"#,
        "E0133",
        "call to unsafe function",
    );

    must_fail(
        "call_without_unsafe",
        r#"
pub fn f(code: &execpack::Code) -> u32 {
    let g: extern "C" fn() -> u32 = code.as_fn();
    g()
}
"#,
        "E0133",
        "call to unsafe function",
    );
}
