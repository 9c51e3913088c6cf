// SPDX-License-Identifier: LGPL-2.1-or-later
//! The examples' expression JIT, on execpack: every compiled expression
//! returns what the interpreter says, for many x; and the code is freed
//! as the programs are replaced.
#![cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[path = "../examples/common/expr.rs"]
mod expr;

#[test]
fn compiled_expressions_match_the_interpreter() {
    let pool = execpack::Pool::new().unwrap();
    let sources = [
        "x",
        "42",
        "-x",
        "(2+3)*x-4",
        "x*x*x-2*x+1",
        "-(x-7)*(x+7)",
        "9223372036854775807*x",
        "((((x+1)*2+3)*4+5)*6)-x*x*x*x",
        "1-2-3-x",
        "123456789012*x*-3",
    ];
    for round in 0..3 {
        let mut progs = Vec::new();
        for src in sources {
            let e = expr::parse(src).unwrap();
            let code = expr::compile(&e);
            let mut buf = pool.alloc(code.len()).unwrap();
            buf[..code.len()].copy_from_slice(&code);
            progs.push((e, buf.finalize().unwrap()));
        }
        for (e, prog) in &progs {
            let f: extern "C" fn(i64) -> i64 = unsafe { prog.as_fn() };
            for x in [-1000i64, -3, -1, 0, 1, 2, 10, 99, 1 << 40, i64::MIN, i64::MAX] {
                assert_eq!(f(x), expr::eval(e, x), "round {} x = {}", round, x);
            }
        }
        assert_eq!(pool.stats().live_allocs, sources.len());
    }
    assert_eq!(pool.stats().live_allocs, 0);
    assert!(expr::parse("2+").is_err());
    assert!(expr::parse("(x").is_err());
    assert!(expr::parse("x y").is_err());
}
