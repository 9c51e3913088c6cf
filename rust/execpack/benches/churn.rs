// SPDX-License-Identifier: LGPL-2.1-or-later
//! The safe layer's overhead on workload 1's churn (tests/bench-suite.cc):
//! 10,000 live programs of log-uniform sizes (16-2048 bytes), each op frees
//! a random one and JITs a new one (alloc + write + finalize, timed), then
//! calls it (not timed; "with call" is the whole cycle).  Run in one
//! process on the same sequence, taking turns 500 ops at a time:
//!   C                   the C calls through execpack-sys (ep_alloc, copy,
//!                       ep_finalize, ep_free)
//!   C + a count         the same, each program holding a reference of a
//!                       count of the pool's holders (what Code does)
//!   Rust, Code          the safe layer (Pool::alloc, DerefMut copy,
//!                       Staging::finalize, Code's drop: a handle of the
//!                       pool taken and dropped, two atomic operations)
//!   Rust, Code<&Pool>   the same with Staging::finalize_scoped (no count)
//! ratio = Rust / C per round; the medians are printed.  The TSC counts
//! the time other processes took the CPU too; the thread's CPU time
//! (CLOCK_THREAD_CPUTIME_ID, around each 500-op slice, the calls
//! included) does not, which on a loaded machine makes it the steadier.
//!
//!   cargo bench --offline --bench churn [-- ROUNDS [OPS]]      (7 rounds, 20000 ops)
use std::os::raw::c_void;
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::time::Instant;

use execpack::sys;
use std::borrow::Borrow;

use execpack::{Code, Pool, Staging};

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
/// COUNTED: each program also takes a reference of a count of the pool's
/// holders, and gives it back after ep_free, as `Arc` does (an atomic
/// increment, relaxed; a release decrement and, at zero, an acquire fence):
/// what a C caller does for code that may outlive its other holders.
struct CSide<const COUNTED: bool> {
    pool: *mut sys::ep_pool,
    live: Vec<(*mut c_void, u32)>,
    holders: Box<AtomicUsize>,
}

impl<const COUNTED: bool> CSide<COUNTED> {
    #[inline(always)]
    fn hold(&self) {
        if COUNTED {
            self.holders.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[inline(always)]
    fn release(&self) {
        if COUNTED && self.holders.fetch_sub(1, Ordering::Release) == 1 {
            fence(Ordering::Acquire);
            panic!("the pool's creator holds a reference throughout");
        }
    }

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

    fn new(q: &Seq, t: &Template) -> CSide<COUNTED> {
        let cfg = sys::ep_config::default();
        let mut pool = std::ptr::null_mut();
        // SAFETY: plain C calls on a pool of our own, until drop
        unsafe {
            assert_eq!(sys::ep_pool_create(&cfg, &mut pool), 0);
            let holders = Box::new(AtomicUsize::new(1 + if COUNTED { q.init.len() } else { 0 }));
            let live = q.init.iter().map(|&(len, imm)| (Self::put(pool, t, len, imm), imm)).collect();
            CSide { pool, live, holders }
        }
    }

    /// The ops: TSC ticks in the timed segments.
    #[inline(always)]
    fn ops(&mut self, ops: &[(usize, usize, u32)], t: &Template) -> u64 {
        let mut acc = 0u64;
        for &(v, len, imm) in ops {
            // SAFETY: live[v] is a live program of this pool
            unsafe {
                let c0 = ticks();
                let rc = sys::ep_free(self.pool, self.live[v].0);
                assert_eq!(rc, 0, "ep_free");
                self.release();
                self.hold();
                let p = Self::put(self.pool, t, len, imm);
                acc += ticks() - c0;
                self.live[v] = (p, imm);
                call(p, imm, "C");
            }
        }
        acc
    }
}

impl<const COUNTED: bool> Drop for CSide<COUNTED> {
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

/// How a Rust side finalizes: code holding a handle of the pool (`Code`,
/// one reference count each) or borrowing it (`Code<&Pool>`).
trait Fin<'p>: Borrow<Pool> + Sized {
    fn fin(s: Staging<'p>) -> Code<Self>;
}

impl<'p> Fin<'p> for Pool {
    #[inline(always)]
    fn fin(s: Staging<'p>) -> Code<Pool> {
        s.finalize().expect("finalize")
    }
}

impl<'p> Fin<'p> for &'p Pool {
    #[inline(always)]
    fn fin(s: Staging<'p>) -> Code<&'p Pool> {
        s.finalize_scoped().expect("finalize")
    }
}

/// A Rust side: the safe layer.
struct RustSide<'p, P: Fin<'p>> {
    pool: &'p Pool,
    live: Vec<(Option<Code<P>>, u32)>,
}

impl<'p, P: Fin<'p>> RustSide<'p, P> {
    #[inline(always)]
    fn put(pool: &'p Pool, t: &Template, len: usize, imm: u32) -> Code<P> {
        let mut s = pool.alloc(len).expect("alloc");
        t.emit(&mut s[..len], imm);
        P::fin(s)
    }

    fn new(pool: &'p Pool, q: &Seq, t: &Template) -> RustSide<'p, P> {
        let live = q.init.iter().map(|&(len, imm)| (Some(Self::put(pool, t, len, imm)), imm)).collect();
        RustSide { pool, live }
    }

    #[inline(always)]
    fn ops(&mut self, ops: &[(usize, usize, u32)], t: &Template) -> u64 {
        let mut acc = 0u64;
        for &(v, len, imm) in ops {
            let slot = &mut self.live[v];
            let c0 = ticks();
            slot.0 = None; // free first, as the C side does
            let c = Self::put(self.pool, t, len, imm);
            acc += ticks() - c0;
            call(c.as_ptr() as *const c_void, imm, "Rust");
            *slot = (Some(c), imm);
        }
        acc
    }
}

// Each side's ops loop under a name of its own, which callgrind counts by
// (benches/instructions.sh).
#[inline(never)]
fn ops_c(c: &mut CSide<false>, ops: &[(usize, usize, u32)], t: &Template) -> u64 {
    c.ops(ops, t)
}

#[inline(never)]
fn ops_c_counted(c: &mut CSide<true>, ops: &[(usize, usize, u32)], t: &Template) -> u64 {
    c.ops(ops, t)
}

#[inline(never)]
fn ops_owned(r: &mut RustSide<'_, Pool>, ops: &[(usize, usize, u32)], t: &Template) -> u64 {
    r.ops(ops, t)
}

#[inline(never)]
fn ops_scoped<'p>(r: &mut RustSide<'p, &'p Pool>, ops: &[(usize, usize, u32)], t: &Template) -> u64 {
    r.ops(ops, t)
}

impl<'p, P: Fin<'p>> Drop for RustSide<'p, P> {
    fn drop(&mut self) {
        for (c, imm) in &self.live {
            call(c.as_ref().unwrap().as_ptr() as *const c_void, *imm, "Rust");
        }
    }
}

/// Ops per slice: the sides take turns a slice at a time, so that a change
/// in the machine's load falls on all alike.
const SLICE: usize = 500;

/// One side's totals in a round: TSC ticks of the timed segments, and the
/// thread's CPU ns of whole slices (the call included).
#[derive(Clone, Copy, Default)]
struct Tot {
    ticks: u64,
    cpu: f64,
}

/// One round of the four sides (C, C with a count, Rust with `Code`, Rust
/// with `Code<&Pool>`), starting with a different side each round and
/// rotating each slice; each slice's ratios of the RATIOS pairs go to
/// `pairs`.
fn round(q: &Seq, t: &Template, first: usize, pairs: &mut [Vec<f64>; 3]) -> [Tot; 4] {
    // a pool each, as alike as the C sides'
    let (pool1, pool2) = (Pool::new().expect("pool"), Pool::new().expect("pool"));
    let mut c = CSide::<false>::new(q, t);
    let mut cc = CSide::<true>::new(q, t);
    let mut owned = RustSide::<Pool>::new(&pool1, q, t);
    let mut scoped = RustSide::<&Pool>::new(&pool2, q, t);
    let mut tot = [Tot::default(); 4];
    for (i, s) in q.ops.chunks(SLICE).enumerate() {
        let mut ticks = [0u64; 4];
        for k in 0..4 {
            let side = (first + i + k) % 4;
            let w0 = thread_ns();
            ticks[side] = match side {
                0 => ops_c(&mut c, s, t),
                1 => ops_c_counted(&mut cc, s, t),
                2 => ops_owned(&mut owned, s, t),
                _ => ops_scoped(&mut scoped, s, t),
            };
            tot[side].cpu += thread_ns() - w0;
            tot[side].ticks += ticks[side];
        }
        for (k, &(a, b)) in RATIOS.iter().enumerate() {
            pairs[k].push(ticks[a] as f64 / ticks[b] as f64);
        }
    }
    tot
}

/// The ratios printed: the safe layer against the C calls that do the same
/// work (the count for `Code`), and `Code` against the bare C calls.
const RATIOS: [(usize, usize); 3] = [(2, 1), (3, 0), (2, 0)];

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

    let names = ["C (execpack-sys)", "C + a count", "Rust, Code", "Rust, Code<&Pool>"];
    let mut ns: [Vec<f64>; 4] = Default::default();
    let mut cpu: [Vec<f64>; 4] = Default::default();
    let mut ratio: [Vec<f64>; 3] = Default::default();
    let mut ratio_cpu: [Vec<f64>; 3] = Default::default();
    let mut pairs: [Vec<f64>; 3] = Default::default();
    for k in 0..rounds {
        let q = Seq::new(1000 + k as u64, n);
        let tot = round(&q, &t, k % 4, &mut pairs);
        for s in 0..4 {
            ns[s].push(tot[s].ticks as f64 / n as f64 / per_ns);
            cpu[s].push(tot[s].cpu / n as f64);
        }
        for (r, &(a, b)) in RATIOS.iter().enumerate() {
            ratio[r].push(tot[a].ticks as f64 / tot[b].ticks as f64);
            ratio_cpu[r].push(tot[a].cpu / tot[b].cpu);
        }
    }
    let r3 = |v: &[f64]| v.iter().map(|x| (x * 1000.0).round() / 1000.0).collect::<Vec<_>>();
    println!("workload 1's churn: {} live programs, {} ops a round, {} rounds (median)", LIVE, n, rounds);
    println!("                       TSC ns/op   CPU ns/op with call (the thread's CPU time)");
    for s in 0..4 {
        println!("  {:20} {:9.1}   {:9.1}", names[s], median(ns[s].clone()), median(cpu[s].clone()));
    }
    for (r, &(a, b)) in RATIOS.iter().enumerate() {
        let target = if r < 2 { "   (target <= 1.03)" } else { "" };
        println!(
            "  ratio {} / {}: {:.3} (TSC), {:.3} (CPU time), {:.3} (the median of {} slices){}",
            names[a],
            names[b],
            median(ratio[r].clone()),
            median(ratio_cpu[r].clone()),
            median(pairs[r].clone()),
            pairs[r].len(),
            target
        );
        println!("    per-round ratios (CPU time): {:?}", r3(&ratio_cpu[r]));
        println!("    per-round ratios (TSC): {:?}", r3(&ratio[r]));
    }
}
