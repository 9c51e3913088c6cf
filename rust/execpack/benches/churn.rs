// SPDX-License-Identifier: LGPL-2.1-or-later
//! The safe layer's overhead on workload 1's churn (tests/bench-suite.cc):
//! 10,000 live programs of log-uniform sizes (16-2048 bytes), each op frees
//! a random one and JITs a new one (alloc + write + finalize, timed), then
//! calls it (not timed; "with call" is the whole cycle).  Run in one
//! process on the same sequence, taking turns 500 ops at a time:
//!   C     the C calls through execpack-sys (ep_alloc, copy, ep_finalize, ep_free)
//!   Rust  the safe layer (Pool::alloc, DerefMut copy, Staging::finalize, Code's drop)
//! ratio = Rust / C per round; the medians are printed.  The TSC counts
//! the time other processes took the CPU too; the thread's CPU time
//! (CLOCK_THREAD_CPUTIME_ID, around each 500-op slice, the calls
//! included) does not, which on a loaded machine makes it the steadier.
//!
//!   cargo bench --offline --bench churn [-- ROUNDS [OPS]]      (7 rounds, 20000 ops)
use std::os::raw::c_void;
use std::time::Instant;

use execpack::sys;
use execpack::{Code, Pool};

const LIVE: usize = 10_000;
const MAX_PROG: usize = 4096;

/// The suite's generator (struct Rng), so the sequences are the same.
struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(1))
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u32) -> u32 {
        (((self.next() >> 32) * n as u64) >> 32) as u32
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / 9007199254740992.0
    }
    fn size(&mut self) -> usize {
        ((16.0 * (7.0 * self.unit()).exp2()) as usize).clamp(16, 2048)
    }
}

struct Seq {
    init: Vec<(usize, u32)>,
    ops: Vec<(usize, usize, u32)>, // victim, len, imm
}

impl Seq {
    fn new(seed: u64, n: usize) -> Seq {
        let mut r = Rng::new(seed);
        let init = (0..LIVE).map(|_| {
            let imm = r.next() as u32;
            (r.size(), imm)
        });
        let init: Vec<_> = init.collect();
        let ops = (0..n)
            .map(|_| {
                let v = r.below(LIVE as u32) as usize;
                let len = r.size();
                (v, len, r.next() as u32)
            })
            .collect();
        Seq { init, ops }
    }
}

/// A program of up to MAX_PROG bytes returning imm: "mov eax, imm32; ret"
/// and NOPs (x86-64), "movz w0; movk w0; ret" and NOPs (arm64).
struct Template([u8; MAX_PROG]);

impl Template {
    fn new() -> Template {
        let mut t = [0u8; MAX_PROG];
        if cfg!(target_arch = "aarch64") {
            for w in t.chunks_mut(4) {
                w.copy_from_slice(&0xd503_201fu32.to_le_bytes());
            }
            t[8..12].copy_from_slice(&0xd65f_03c0u32.to_le_bytes());
        } else {
            t.fill(0x90);
            t[0] = 0xb8;
            t[5] = 0xc3;
        }
        Template(t)
    }
    #[inline(always)]
    fn emit(&self, dst: &mut [u8], imm: u32) {
        let len = dst.len();
        dst.copy_from_slice(&self.0[..len]);
        if cfg!(target_arch = "aarch64") {
            let movz = 0x5280_0000u32 | ((imm & 0xffff) << 5);
            let movk = 0x72a0_0000u32 | ((imm >> 16) << 5);
            dst[0..4].copy_from_slice(&movz.to_le_bytes());
            dst[4..8].copy_from_slice(&movk.to_le_bytes());
        } else {
            dst[1..5].copy_from_slice(&imm.to_le_bytes());
        }
    }
}

#[inline(always)]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no preconditions on x86-64
    unsafe {
        std::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // elsewhere the clock, in ns (it costs more than the TSC: the ratio
        // is diluted, not biased)
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        t.as_nanos() as u64
    }
}

#[inline(always)]
fn call(addr: *const c_void, imm: u32, who: &str) {
    // SAFETY: every program is an extern "C" fn() -> u32
    let f: extern "C" fn() -> u32 = unsafe { std::mem::transmute(addr) };
    let got = f();
    if got != imm {
        panic!("{}: program at {:p} returned {:#x}, expected {:#x}", who, addr, got, imm);
    }
}

/// The C side: the pool and its live programs, through execpack-sys.
struct CSide {
    pool: *mut sys::ep_pool,
    live: Vec<(*mut c_void, u32)>,
}

impl CSide {
    #[inline(always)]
    unsafe fn put(pool: *mut sys::ep_pool, t: &Template, len: usize, imm: u32) -> *mut c_void {
        let mut img = std::mem::MaybeUninit::<sys::ep_image>::uninit();
        let rc = sys::ep_alloc(pool, len, img.as_mut_ptr());
        assert_eq!(rc, 0, "ep_alloc");
        let img = img.assume_init();
        t.emit(std::slice::from_raw_parts_mut(img.rw as *mut u8, len), imm);
        let rc = sys::ep_finalize(pool, img.exec);
        assert_eq!(rc, 0, "ep_finalize");
        img.exec
    }

    fn new(q: &Seq, t: &Template) -> CSide {
        let cfg = sys::ep_config::default();
        let mut pool = std::ptr::null_mut();
        // SAFETY: plain C calls on a pool of our own, until drop
        unsafe {
            assert_eq!(sys::ep_pool_create(&cfg, &mut pool), 0);
            let live = q.init.iter().map(|&(len, imm)| (CSide::put(pool, t, len, imm), imm)).collect();
            CSide { pool, live }
        }
    }

    /// The ops: TSC ticks in the timed segments.  (Not inlined: callgrind
    /// counts each side's instructions by this function.)
    #[inline(never)]
    fn ops(&mut self, ops: &[(usize, usize, u32)], t: &Template) -> u64 {
        let mut acc = 0u64;
        for &(v, len, imm) in ops {
            // SAFETY: live[v] is a live program of this pool
            unsafe {
                let c0 = ticks();
                let rc = sys::ep_free(self.pool, self.live[v].0);
                assert_eq!(rc, 0, "ep_free");
                let p = CSide::put(self.pool, t, len, imm);
                acc += ticks() - c0;
                self.live[v] = (p, imm);
                call(p, imm, "C");
            }
        }
        acc
    }
}

impl Drop for CSide {
    fn drop(&mut self) {
        // SAFETY: the pool and its programs are ours
        unsafe {
            for &(p, imm) in &self.live {
                call(p, imm, "C");
                assert_eq!(sys::ep_free(self.pool, p), 0);
            }
            sys::ep_pool_destroy(self.pool);
        }
    }
}

/// The Rust side: the safe layer.
struct RustSide<'p> {
    pool: &'p Pool,
    live: Vec<(Option<Code<'p>>, u32)>,
}

impl<'p> RustSide<'p> {
    #[inline(always)]
    fn put(pool: &'p Pool, t: &Template, len: usize, imm: u32) -> Code<'p> {
        let mut s = pool.alloc(len).expect("alloc");
        t.emit(&mut s[..len], imm);
        s.finalize().expect("finalize")
    }

    fn new(pool: &'p Pool, q: &Seq, t: &Template) -> RustSide<'p> {
        let live = q.init.iter().map(|&(len, imm)| (Some(RustSide::put(pool, t, len, imm)), imm)).collect();
        RustSide { pool, live }
    }

    #[inline(never)]
    fn ops(&mut self, ops: &[(usize, usize, u32)], t: &Template) -> u64 {
        let mut acc = 0u64;
        for &(v, len, imm) in ops {
            let slot = &mut self.live[v];
            let c0 = ticks();
            slot.0 = None; // free first, as the C side does
            let c = RustSide::put(self.pool, t, len, imm);
            acc += ticks() - c0;
            call(c.as_ptr() as *const c_void, imm, "Rust");
            *slot = (Some(c), imm);
        }
        acc
    }
}

impl Drop for RustSide<'_> {
    fn drop(&mut self) {
        for (c, imm) in &self.live {
            call(c.as_ref().unwrap().as_ptr() as *const c_void, *imm, "Rust");
        }
    }
}

/// Ops per slice: the two sides take turns a slice at a time, so that a
/// change in the machine's load falls on both alike.
const SLICE: usize = 500;

/// One round: (C ticks/op, Rust ticks/op, C CPU ns/op, Rust CPU ns/op,
/// the call included);
/// each pair of neighbouring slices' Rust / C ratio goes to `pairs`.
fn round(q: &Seq, t: &Template, rust_first: bool, pairs: &mut Vec<f64>) -> (f64, f64, f64, f64) {
    let pool = Pool::new().expect("pool");
    let mut c = CSide::new(q, t);
    let mut r = RustSide::new(&pool, q, t);
    let (mut ct, mut rt, mut cw, mut rw) = (0u64, 0u64, 0f64, 0f64);
    for (i, s) in q.ops.chunks(SLICE).enumerate() {
        let (mut a, mut b) = (0u64, 0u64);
        for side in 0..2 {
            let w0 = thread_ns();
            if (side == 0) == (rust_first ^ (i % 2 == 1)) {
                b = r.ops(s, t);
                rw += thread_ns() - w0;
            } else {
                a = c.ops(s, t);
                cw += thread_ns() - w0;
            }
        }
        ct += a;
        rt += b;
        pairs.push(b as f64 / a as f64);
    }
    let n = q.ops.len() as f64;
    (ct as f64 / n, rt as f64 / n, cw / n, rw / n)
}

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

/// The calling thread's CPU time in ns: what a slice cost, less the time
/// other processes of a loaded machine had the CPU.
fn thread_ns() -> f64 {
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: ts is writable
    unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.sec as f64 * 1e9 + ts.nsec as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let nums: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let rounds = *nums.first().unwrap_or(&7);
    let n = *nums.get(1).unwrap_or(&20_000);
    let t = Template::new();

    // ticks per ns, for the printout (the ratios need none)
    let (c0, w0) = (ticks(), Instant::now());
    std::thread::sleep(std::time::Duration::from_millis(50));
    let per_ns = (ticks() - c0) as f64 / w0.elapsed().as_nanos() as f64;

    let (mut c, mut r, mut ratio, mut ratio_wall) = (vec![], vec![], vec![], vec![]);
    let (mut cw, mut rw, mut pairs) = (vec![], vec![], vec![]);
    for k in 0..rounds {
        let q = Seq::new(1000 + k as u64, n);
        let (a, b, aw, bw) = round(&q, &t, k % 2 == 1, &mut pairs);
        c.push(a / per_ns);
        r.push(b / per_ns);
        cw.push(aw);
        rw.push(bw);
        ratio.push(b / a);
        ratio_wall.push(bw / aw);
    }
    println!("workload 1's churn: {} live programs, {} ops a round, {} rounds (median)", LIVE, n, rounds);
    println!("                     TSC ns/op   CPU ns/op with call (the thread's CPU time)");
    println!("  C (execpack-sys)    {:9.1}   {:9.1}", median(c), median(cw));
    println!("  Rust (safe layer)   {:9.1}   {:9.1}", median(r), median(rw));
    let m = median(ratio.clone());
    println!("  ratio Rust / C      {:9.3}   {:9.3}   (target <= 1.03)", m, median(ratio_wall.clone()));
    let np = pairs.len();
    println!("  ratio Rust / C, the median of {} pairs of neighbouring {}-op slices: {:.3}", np, SLICE, median(pairs));
    println!("  per-round ratios (CPU time): {:?}", ratio_wall.iter().map(|x| (x * 1000.0).round() / 1000.0).collect::<Vec<_>>());
    println!("  per-round ratios (TSC): {:?}", ratio.iter().map(|x| (x * 1000.0).round() / 1000.0).collect::<Vec<_>>());
}
