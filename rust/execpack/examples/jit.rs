// SPDX-License-Identifier: LGPL-2.1-or-later
//! A tiny JIT on execpack: compile an expression of x, run it.
//!   cargo run --example jit -- '(2+3)*x-4' 10        # prints 46
#[path = "common/expr.rs"]
mod expr;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (src, x) = expr::args()?;
    let code = expr::compile(&expr::parse(&src)?);
    let pool = execpack::Pool::new()?;
    let prog = pool.add(&code)?; // copied in, executable, freed on drop
    let f: extern "C" fn(i64) -> i64 = unsafe { prog.as_fn() };
    println!("{}", f(x));
    Ok(())
}
