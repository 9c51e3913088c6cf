// SPDX-License-Identifier: LGPL-2.1-or-later
//! JIT functions named for perf: with Flags::PERFMAP every named program is
//! a line of /tmp/perf-<pid>.map (Flags::JITDUMP: a record of jit-<pid>.dump
//! with its code bytes, for `perf inject --jit`), so `perf report` shows
//! "jit_square" rather than an address.  The names also reach
//! execpack::symbolize, gdb and libunwind.
//!
//!   cargo build --example perf_names
//!   perf record -g target/debug/examples/perf_names --keep 2
//!   perf report                    # the jit_* rows are the JIT code
//!
//! Without --keep the map is removed at exit; the argument is how many
//! seconds to run the functions (0.1 by default).
#[path = "common/expr.rs"]
mod expr;

use std::time::{Duration, Instant};

use execpack::{Flags, Pool};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let keep = std::env::args().any(|a| a == "--keep");
    let secs: f64 = std::env::args().skip(1).find(|a| a != "--keep").map_or(Ok(0.1), |s| s.parse())?;
    let pool = Pool::builder().flags(Flags::PERFMAP).build()?;

    let sources = [("jit_square", "x*x"), ("jit_cubic", "x*x*x-2*x+1"), ("jit_linear", "3*x+4")];
    let mut funcs = Vec::new();
    for (name, src) in sources {
        let code = expr::compile(&expr::parse(src)?);
        let mut buf = pool.alloc(code.len())?;
        buf[..code.len()].copy_from_slice(&code);
        let prog = buf.finalize()?;
        prog.set_name(name)?;
        funcs.push((name, prog));
    }

    // run them, so that perf has samples in each
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let (mut sum, mut calls) = (0i64, 0u64);
    while Instant::now() < end {
        for (_, prog) in &funcs {
            let f: extern "C" fn(i64) -> i64 = unsafe { prog.as_fn() };
            for x in 0..10_000 {
                sum = sum.wrapping_add(f(x));
            }
            calls += 10_000;
        }
    }
    println!("{} calls (sum {})", calls, sum);

    // what perf will read: each name at its address and size
    let map_path = format!("/tmp/perf-{}.map", std::process::id());
    let map = std::fs::read_to_string(&map_path)?;
    for (name, prog) in &funcs {
        let line = format!("{:x} {:x} {}", prog.addr(), prog.len(), name);
        let found = map.lines().any(|l| l == line);
        let (sym, off) = execpack::symbolize(prog.addr() + 1).ok_or("symbolize found nothing")?;
        println!("{}: {} in {}; symbolize: {}+{}", name, if found { "listed" } else { "NOT listed" }, map_path, sym, off);
        if !found || sym != *name || off != 1 {
            return Err(format!("{} is not named as it should be:\n{}", name, map).into());
        }
    }
    if !keep {
        drop(funcs);
        std::fs::remove_file(&map_path)?;
    }
    Ok(())
}
