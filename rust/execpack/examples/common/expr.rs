// SPDX-License-Identifier: LGPL-2.1-or-later
//! The expression compiler the two JIT examples share (examples/jit.rs on
//! execpack, examples/jit_mmap.rs on bare mmap/mprotect): integers, `x`,
//! `+ - *`, unary minus and parentheses, compiled to a function
//! `extern "C" fn(x: i64) -> i64` for x86-64 or arm64, as a stack machine.
#![allow(dead_code)]

pub enum Expr {
    Num(i64),
    X,
    Neg(Box<Expr>),
    Bin(u8, Box<Expr>, Box<Expr>),
}

/// `expr` and `x` from the command line.
pub fn args() -> Result<(String, i64), String> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 3 {
        return Err(format!("usage: {} EXPRESSION X   (e.g. '(2+3)*x-4' 10)", a[0]));
    }
    let x = a[2].parse().map_err(|e| format!("{}: {}", a[2], e))?;
    Ok((a[1].clone(), x))
}

pub fn parse(src: &str) -> Result<Expr, String> {
    let s: Vec<u8> = src.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let mut at = 0;
    let e = sum(&s, &mut at)?;
    if at != s.len() {
        return Err(format!("unexpected {:?} at {}", s[at] as char, at));
    }
    Ok(e)
}

fn sum(s: &[u8], at: &mut usize) -> Result<Expr, String> {
    let mut e = product(s, at)?;
    while *at < s.len() && (s[*at] == b'+' || s[*at] == b'-') {
        *at += 1;
        e = Expr::Bin(s[*at - 1], Box::new(e), Box::new(product(s, at)?));
    }
    Ok(e)
}

fn product(s: &[u8], at: &mut usize) -> Result<Expr, String> {
    let mut e = factor(s, at)?;
    while *at < s.len() && s[*at] == b'*' {
        *at += 1;
        e = Expr::Bin(b'*', Box::new(e), Box::new(factor(s, at)?));
    }
    Ok(e)
}

fn factor(s: &[u8], at: &mut usize) -> Result<Expr, String> {
    let c = *s.get(*at).ok_or("unexpected end")?;
    *at += 1;
    match c {
        b'x' => Ok(Expr::X),
        b'-' => Ok(Expr::Neg(Box::new(factor(s, at)?))),
        b'(' => {
            let e = sum(s, at)?;
            if s.get(*at) != Some(&b')') {
                return Err(format!("')' expected at {}", at));
            }
            *at += 1;
            Ok(e)
        }
        b'0'..=b'9' => {
            let mut n = (c - b'0') as i64;
            while *at < s.len() && s[*at].is_ascii_digit() {
                n = n.checked_mul(10).and_then(|n| n.checked_add((s[*at] - b'0') as i64)).ok_or("too big")?;
                *at += 1;
            }
            Ok(Expr::Num(n))
        }
        _ => Err(format!("unexpected {:?} at {}", c as char, *at - 1)),
    }
}

/// x86-64: x in rdi, each value in rax, the left operand saved on the stack.
#[cfg(target_arch = "x86_64")]
pub fn compile(e: &Expr) -> Vec<u8> {
    fn gen(e: &Expr, c: &mut Vec<u8>) {
        match e {
            Expr::Num(n) => {
                c.extend_from_slice(&[0x48, 0xb8]); // mov rax, imm64
                c.extend_from_slice(&n.to_le_bytes());
            }
            Expr::X => c.extend_from_slice(&[0x48, 0x89, 0xf8]), // mov rax, rdi
            Expr::Neg(a) => {
                gen(a, c);
                c.extend_from_slice(&[0x48, 0xf7, 0xd8]); // neg rax
            }
            Expr::Bin(op, a, b) => {
                gen(a, c);
                c.push(0x50); // push rax
                gen(b, c);
                c.extend_from_slice(&[0x48, 0x89, 0xc1, 0x58]); // mov rcx, rax; pop rax
                c.extend_from_slice(match op {
                    b'+' => &[0x48, 0x01, 0xc8][..],       // add rax, rcx
                    b'-' => &[0x48, 0x29, 0xc8][..],       // sub rax, rcx
                    _ => &[0x48, 0x0f, 0xaf, 0xc1][..],    // imul rax, rcx
                });
            }
        }
    }
    let mut c = Vec::new();
    gen(e, &mut c);
    c.push(0xc3); // ret
    c
}

/// arm64: x in x0, each value in x9, the left operand saved on the stack.
#[cfg(target_arch = "aarch64")]
pub fn compile(e: &Expr) -> Vec<u8> {
    fn gen(e: &Expr, c: &mut Vec<u32>) {
        match e {
            Expr::Num(n) => {
                c.push(0xd280_0009 | ((*n as u64 & 0xffff) as u32) << 5); // movz x9, #lo
                for hw in 1..4u32 {
                    let part = ((*n as u64 >> (16 * hw)) & 0xffff) as u32;
                    c.push(0xf280_0009 | hw << 21 | part << 5); // movk x9, #part, lsl 16*hw
                }
            }
            Expr::X => c.push(0xaa00_03e9), // mov x9, x0
            Expr::Neg(a) => {
                gen(a, c);
                c.push(0xcb09_03e9); // neg x9, x9
            }
            Expr::Bin(op, a, b) => {
                gen(a, c);
                c.push(0xf81f_0fe9); // str x9, [sp, #-16]!
                gen(b, c);
                c.push(0xf841_07ea); // ldr x10, [sp], #16
                c.push(match op {
                    b'+' => 0x8b09_0149, // add x9, x10, x9
                    b'-' => 0xcb09_0149, // sub x9, x10, x9
                    _ => 0x9b09_7d49,    // mul x9, x10, x9
                });
            }
        }
    }
    let mut c = Vec::new();
    gen(e, &mut c);
    c.push(0xaa09_03e0); // mov x0, x9
    c.push(0xd65f_03c0); // ret
    c.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// What the compiled code must return: the same expression, interpreted.
pub fn eval(e: &Expr, x: i64) -> i64 {
    match e {
        Expr::Num(n) => *n,
        Expr::X => x,
        Expr::Neg(a) => eval(a, x).wrapping_neg(),
        Expr::Bin(b'+', a, b) => eval(a, x).wrapping_add(eval(b, x)),
        Expr::Bin(b'-', a, b) => eval(a, x).wrapping_sub(eval(b, x)),
        Expr::Bin(_, a, b) => eval(a, x).wrapping_mul(eval(b, x)),
    }
}
