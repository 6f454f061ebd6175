//! Asynchronous preemption of preemptible regions (`goroutine::preemptible`;
//! design in docs/preemption.md): Go's TestAsyncPreempt and
//! TestPingPongHog, the hog-fairness probe, a stress test that checks every
//! result across thousands of preemptions (allocation, `sync::Mutex`,
//! channels, scalar f64, AVX and AVX-512 register state), and the negative
//! cases: no preemption inside a runtime call, none at a PC in libc or the
//! vDSO.
//!
//! Every test runs in its own process (`isolated_test!`): GOMAXPROCS and
//! the preemption counters are per process. Each child arms a watchdog
//! thread: without preemption these tests would hang, not fail.
//!
//! Not built in sanitizer builds (`--cfg goroutine_sanitize`), where
//! `preemptible` does not enable asynchronous preemption (see its docs).
#![cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64"),
    not(any(goroutine_sanitize = "address", goroutine_sanitize = "thread"))
))]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goroutine::__test::{async_preempt_stats, AsyncPreemptStats};
use goroutine::{go, preemptible, run, select};

/// Ends the (child) process with a message if it is still running after
/// `secs`: a missing preemption shows up as a hang.
fn watchdog(secs: u64, what: &'static str) {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(secs));
        eprintln!(
            "watchdog: {what} still running after {secs} s: {:?}",
            async_preempt_stats()
        );
        std::process::exit(101);
    });
}

fn report(what: &str, s: &AsyncPreemptStats) {
    let avg_us = if s.preemptions == 0 {
        0.0
    } else {
        s.latency_total_ns as f64 / s.preemptions as f64 / 1e3
    };
    eprintln!(
        "{what}: {} signals, {} preemptions, refused: {} in runtime, {} by PC, {} other; \
         signal-to-trampoline latency avg {avg_us:.1} us, max {:.1} us",
        s.signals,
        s.preemptions,
        s.refused_in_runtime,
        s.refused_pc,
        s.refused_other,
        s.latency_max_ns as f64 / 1e3
    );
}

#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    // A frameless leaf loop that keeps data in the red zone (the 128 bytes
    // below RSP that x86-64 leaf code may use without moving RSP) and
    // checks it every iteration, until the byte at [rdi] is non-zero.
    // Returns the iteration count, or u64::MAX if the red zone changed
    // under it (a save area written over it).
    ".globl aptest_frameless_spin",
    "aptest_frameless_spin:",
    "xor eax, eax",
    "2:",
    "mov qword ptr [rsp - 8], rax",
    "mov qword ptr [rsp - 64], rax",
    "mov qword ptr [rsp - 128], rax",
    "imul rcx, rax, 7",
    "add rcx, 3",
    "xor rcx, rax",
    "cmp qword ptr [rsp - 8], rax",
    "jne 4f",
    "cmp qword ptr [rsp - 64], rax",
    "jne 4f",
    "cmp qword ptr [rsp - 128], rax",
    "jne 4f",
    "add rax, 1",
    "cmp byte ptr [rdi], 0",
    "je 2b",
    "ret",
    "4:",
    "mov rax, -1",
    "ret",
    // aptest_gpr_spin(n, out: 13 x u64): every general register counts
    // with its own step; each iteration also carries a CF from an `add` into
    // an `adc`, and reads back DF between `std` and `cld`: a preemption
    // between those instructions must restore the flags too.
    ".globl aptest_gpr_spin",
    "aptest_gpr_spin:",
    "push rbx",
    "push rbp",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "push rsi",
    "mov rcx, rdi",
    "mov eax, 1",
    "mov ebx, 2",
    "mov edx, 3",
    "mov esi, 4",
    "mov edi, 5",
    "mov ebp, 6",
    "mov r8d, 7",
    "mov r9d, 8",
    "mov r10d, 9",
    "mov r11d, 10",
    "mov r12d, 11",
    "xor r13d, r13d",
    "xor r15d, r15d",
    "test rcx, rcx",
    "jz 3f",
    "2:",
    "add rax, 1",
    "add rbx, 2",
    "add rdx, 3",
    "add rsi, 4",
    "add rdi, 5",
    "add rbp, 6",
    "add r8, 7",
    "add r9, 8",
    "add r10, 9",
    "add r11, 10",
    "add r12, 11",
    "mov r14, -1",
    "add r14, 1",
    "adc r15, 0",
    "std",
    "pushfq",
    "pop r14",
    "cld",
    "shr r14, 10",
    "and r14, 1",
    "add r13, r14",
    "dec rcx",
    "jnz 2b",
    "3:",
    "pop rcx",
    "mov [rcx], rax",
    "mov [rcx + 8], rbx",
    "mov [rcx + 16], rdx",
    "mov [rcx + 24], rsi",
    "mov [rcx + 32], rdi",
    "mov [rcx + 40], rbp",
    "mov [rcx + 48], r8",
    "mov [rcx + 56], r9",
    "mov [rcx + 64], r10",
    "mov [rcx + 72], r11",
    "mov [rcx + 80], r12",
    "mov [rcx + 88], r13",
    "mov [rcx + 96], r15",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbp",
    "pop rbx",
    "ret",
    // SIMD register loops: every vector register accumulates its own
    // distinct values for n iterations, then all are stored. A register (or
    // lane, or opmask) lost or swapped by a preemption changes the result.
    // aptest_avx512_spin(n, table: 32 x 8 f64, out: 31 x 8 f64, kout: 7 x u16)
    // aptest_avx_spin(n, table: 16 x 4 f64, out: 15 x 4 f64)
    ".globl aptest_avx512_spin",
    "aptest_avx512_spin:",
    "vmovupd zmm0, [rsi + 0]",
    "vmovupd zmm1, [rsi + 64]",
    "vmovupd zmm2, [rsi + 128]",
    "vmovupd zmm3, [rsi + 192]",
    "vmovupd zmm4, [rsi + 256]",
    "vmovupd zmm5, [rsi + 320]",
    "vmovupd zmm6, [rsi + 384]",
    "vmovupd zmm7, [rsi + 448]",
    "vmovupd zmm8, [rsi + 512]",
    "vmovupd zmm9, [rsi + 576]",
    "vmovupd zmm10, [rsi + 640]",
    "vmovupd zmm11, [rsi + 704]",
    "vmovupd zmm12, [rsi + 768]",
    "vmovupd zmm13, [rsi + 832]",
    "vmovupd zmm14, [rsi + 896]",
    "vmovupd zmm15, [rsi + 960]",
    "vmovupd zmm16, [rsi + 1024]",
    "vmovupd zmm17, [rsi + 1088]",
    "vmovupd zmm18, [rsi + 1152]",
    "vmovupd zmm19, [rsi + 1216]",
    "vmovupd zmm20, [rsi + 1280]",
    "vmovupd zmm21, [rsi + 1344]",
    "vmovupd zmm22, [rsi + 1408]",
    "vmovupd zmm23, [rsi + 1472]",
    "vmovupd zmm24, [rsi + 1536]",
    "vmovupd zmm25, [rsi + 1600]",
    "vmovupd zmm26, [rsi + 1664]",
    "vmovupd zmm27, [rsi + 1728]",
    "vmovupd zmm28, [rsi + 1792]",
    "vmovupd zmm29, [rsi + 1856]",
    "vmovupd zmm30, [rsi + 1920]",
    "vmovupd zmm31, [rsi + 1984]",
    "mov eax, 4369",
    "kmovw k1, eax",
    "mov eax, 8738",
    "kmovw k2, eax",
    "mov eax, 13107",
    "kmovw k3, eax",
    "mov eax, 17476",
    "kmovw k4, eax",
    "mov eax, 21845",
    "kmovw k5, eax",
    "mov eax, 26214",
    "kmovw k6, eax",
    "mov eax, 30583",
    "kmovw k7, eax",
    "test rdi, rdi",
    "jz 3f",
    "2:",
    "vaddpd zmm0, zmm0, zmm31",
    "vaddpd zmm1, zmm1, zmm31",
    "vaddpd zmm2, zmm2, zmm31",
    "vaddpd zmm3, zmm3, zmm31",
    "vaddpd zmm4, zmm4, zmm31",
    "vaddpd zmm5, zmm5, zmm31",
    "vaddpd zmm6, zmm6, zmm31",
    "vaddpd zmm7, zmm7, zmm31",
    "vaddpd zmm8, zmm8, zmm31",
    "vaddpd zmm9, zmm9, zmm31",
    "vaddpd zmm10, zmm10, zmm31",
    "vaddpd zmm11, zmm11, zmm31",
    "vaddpd zmm12, zmm12, zmm31",
    "vaddpd zmm13, zmm13, zmm31",
    "vaddpd zmm14, zmm14, zmm31",
    "vaddpd zmm15, zmm15, zmm31",
    "vaddpd zmm16, zmm16, zmm31",
    "vaddpd zmm17, zmm17, zmm31",
    "vaddpd zmm18, zmm18, zmm31",
    "vaddpd zmm19, zmm19, zmm31",
    "vaddpd zmm20, zmm20, zmm31",
    "vaddpd zmm21, zmm21, zmm31",
    "vaddpd zmm22, zmm22, zmm31",
    "vaddpd zmm23, zmm23, zmm31",
    "vaddpd zmm24, zmm24, zmm31",
    "vaddpd zmm25, zmm25, zmm31",
    "vaddpd zmm26, zmm26, zmm31",
    "vaddpd zmm27, zmm27, zmm31",
    "vaddpd zmm28, zmm28, zmm31",
    "vaddpd zmm29, zmm29, zmm31",
    "vaddpd zmm30, zmm30, zmm31",
    "knotw k1, k1",
    "knotw k2, k2",
    "knotw k3, k3",
    "knotw k4, k4",
    "knotw k5, k5",
    "knotw k6, k6",
    "knotw k7, k7",
    "dec rdi",
    "jnz 2b",
    "3:",
    "vmovupd [rdx + 0], zmm0",
    "vmovupd [rdx + 64], zmm1",
    "vmovupd [rdx + 128], zmm2",
    "vmovupd [rdx + 192], zmm3",
    "vmovupd [rdx + 256], zmm4",
    "vmovupd [rdx + 320], zmm5",
    "vmovupd [rdx + 384], zmm6",
    "vmovupd [rdx + 448], zmm7",
    "vmovupd [rdx + 512], zmm8",
    "vmovupd [rdx + 576], zmm9",
    "vmovupd [rdx + 640], zmm10",
    "vmovupd [rdx + 704], zmm11",
    "vmovupd [rdx + 768], zmm12",
    "vmovupd [rdx + 832], zmm13",
    "vmovupd [rdx + 896], zmm14",
    "vmovupd [rdx + 960], zmm15",
    "vmovupd [rdx + 1024], zmm16",
    "vmovupd [rdx + 1088], zmm17",
    "vmovupd [rdx + 1152], zmm18",
    "vmovupd [rdx + 1216], zmm19",
    "vmovupd [rdx + 1280], zmm20",
    "vmovupd [rdx + 1344], zmm21",
    "vmovupd [rdx + 1408], zmm22",
    "vmovupd [rdx + 1472], zmm23",
    "vmovupd [rdx + 1536], zmm24",
    "vmovupd [rdx + 1600], zmm25",
    "vmovupd [rdx + 1664], zmm26",
    "vmovupd [rdx + 1728], zmm27",
    "vmovupd [rdx + 1792], zmm28",
    "vmovupd [rdx + 1856], zmm29",
    "vmovupd [rdx + 1920], zmm30",
    "kmovw eax, k1",
    "mov word ptr [rcx + 0], ax",
    "kmovw eax, k2",
    "mov word ptr [rcx + 2], ax",
    "kmovw eax, k3",
    "mov word ptr [rcx + 4], ax",
    "kmovw eax, k4",
    "mov word ptr [rcx + 6], ax",
    "kmovw eax, k5",
    "mov word ptr [rcx + 8], ax",
    "kmovw eax, k6",
    "mov word ptr [rcx + 10], ax",
    "kmovw eax, k7",
    "mov word ptr [rcx + 12], ax",
    "vzeroupper",
    "ret",
    ".globl aptest_avx_spin",
    "aptest_avx_spin:",
    "vmovupd ymm0, [rsi + 0]",
    "vmovupd ymm1, [rsi + 32]",
    "vmovupd ymm2, [rsi + 64]",
    "vmovupd ymm3, [rsi + 96]",
    "vmovupd ymm4, [rsi + 128]",
    "vmovupd ymm5, [rsi + 160]",
    "vmovupd ymm6, [rsi + 192]",
    "vmovupd ymm7, [rsi + 224]",
    "vmovupd ymm8, [rsi + 256]",
    "vmovupd ymm9, [rsi + 288]",
    "vmovupd ymm10, [rsi + 320]",
    "vmovupd ymm11, [rsi + 352]",
    "vmovupd ymm12, [rsi + 384]",
    "vmovupd ymm13, [rsi + 416]",
    "vmovupd ymm14, [rsi + 448]",
    "vmovupd ymm15, [rsi + 480]",
    "test rdi, rdi",
    "jz 3f",
    "2:",
    "vaddpd ymm0, ymm0, ymm15",
    "vaddpd ymm1, ymm1, ymm15",
    "vaddpd ymm2, ymm2, ymm15",
    "vaddpd ymm3, ymm3, ymm15",
    "vaddpd ymm4, ymm4, ymm15",
    "vaddpd ymm5, ymm5, ymm15",
    "vaddpd ymm6, ymm6, ymm15",
    "vaddpd ymm7, ymm7, ymm15",
    "vaddpd ymm8, ymm8, ymm15",
    "vaddpd ymm9, ymm9, ymm15",
    "vaddpd ymm10, ymm10, ymm15",
    "vaddpd ymm11, ymm11, ymm15",
    "vaddpd ymm12, ymm12, ymm15",
    "vaddpd ymm13, ymm13, ymm15",
    "vaddpd ymm14, ymm14, ymm15",
    "dec rdi",
    "jnz 2b",
    "3:",
    "vmovupd [rdx + 0], ymm0",
    "vmovupd [rdx + 32], ymm1",
    "vmovupd [rdx + 64], ymm2",
    "vmovupd [rdx + 96], ymm3",
    "vmovupd [rdx + 128], ymm4",
    "vmovupd [rdx + 160], ymm5",
    "vmovupd [rdx + 192], ymm6",
    "vmovupd [rdx + 224], ymm7",
    "vmovupd [rdx + 256], ymm8",
    "vmovupd [rdx + 288], ymm9",
    "vmovupd [rdx + 320], ymm10",
    "vmovupd [rdx + 352], ymm11",
    "vmovupd [rdx + 384], ymm12",
    "vmovupd [rdx + 416], ymm13",
    "vmovupd [rdx + 448], ymm14",
    "vzeroupper",
    "ret",
);

// The aarch64 versions of the frameless loop and the general-register
// loop, with the same contracts. aarch64 has no red zone: the frameless
// loop keeps its data in scratch registers and checks them every
// iteration. The register loop counts in x2..x12 (steps 1..11), carries a
// C flag from an `adds` across a `mov` into an `adc` (x13), and checks
// that Z from a `cmp` survives two flag-free instructions (x14): a
// preemption between those must restore NZCV too.
#[cfg(target_arch = "aarch64")]
std::arch::global_asm!(
    ".globl aptest_frameless_spin",
    "aptest_frameless_spin:",
    "mov x9, #0",
    "2:",
    "mov x10, x9",
    "mvn x11, x9",
    "add x12, x9, #3",
    "cmp x10, x9",
    "b.ne 4f",
    "mvn x13, x11",
    "cmp x13, x9",
    "b.ne 4f",
    "sub x13, x12, #3",
    "cmp x13, x9",
    "b.ne 4f",
    "add x9, x9, #1",
    "ldrb w13, [x0]",
    "cbz w13, 2b",
    "mov x0, x9",
    "ret",
    "4:",
    "mov x0, #-1",
    "ret",
    ".globl aptest_gpr_spin",
    "aptest_gpr_spin:",
    "mov x2, #1",
    "mov x3, #2",
    "mov x4, #3",
    "mov x5, #4",
    "mov x6, #5",
    "mov x7, #6",
    "mov x8, #7",
    "mov x9, #8",
    "mov x10, #9",
    "mov x11, #10",
    "mov x12, #11",
    "mov x13, #0",
    "mov x14, #0",
    "mov x17, x0",
    "cbz x17, 3f",
    "2:",
    "add x2, x2, #1",
    "add x3, x3, #2",
    "add x4, x4, #3",
    "add x5, x5, #4",
    "add x6, x6, #5",
    "add x7, x7, #6",
    "add x8, x8, #7",
    "add x9, x9, #8",
    "add x10, x10, #9",
    "add x11, x11, #10",
    "add x12, x12, #11",
    "mov x15, #-1",
    "adds x15, x15, #1",
    "mov x16, #0",
    "adc x13, x13, x16",
    "cmp x17, x17",
    "add x15, x2, x3",
    "add x16, x4, x5",
    "cset x16, eq",
    "add x14, x14, x16",
    "subs x17, x17, #1",
    "b.ne 2b",
    "3:",
    "stp x2, x3, [x1]",
    "stp x4, x5, [x1, #16]",
    "stp x6, x7, [x1, #32]",
    "stp x8, x9, [x1, #48]",
    "stp x10, x11, [x1, #64]",
    "stp x12, x13, [x1, #80]",
    "str x14, [x1, #96]",
    "ret",
);

extern "C" {
    fn aptest_frameless_spin(stop: *const AtomicBool) -> u64;
    #[cfg(target_arch = "x86_64")]
    fn aptest_avx512_spin(n: u64, table: *const f64, out: *mut f64, kout: *mut u16);
    #[cfg(target_arch = "x86_64")]
    fn aptest_avx_spin(n: u64, table: *const f64, out: *mut f64);
    fn aptest_gpr_spin(n: u64, out: *mut u64);
}

// Go's TestAsyncPreempt: at GOMAXPROCS=1, goroutines that never reach a
// scheduling point (a loop with no calls, an empty loop, a frameless leaf
// loop using the red zone) must let main run and stop the world. Without
// asynchronous preemption main would never run again.
isolated_test! {
    fn test_async_preempt() ["GOMAXPROCS" = "1"] {
        watchdog(60, "TestAsyncPreempt");
        static STOP: AtomicBool = AtomicBool::new(false);
        static READY: [AtomicBool; 3] = [const { AtomicBool::new(false) }; 3];
        let stats = run(|| {
            let no_calls = go(|| {
                preemptible(|| {
                    let mut x = 1u64;
                    while !STOP.load(Relaxed) {
                        READY[0].store(true, Relaxed);
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    }
                    std::hint::black_box(x);
                })
            });
            let empty = go(|| {
                preemptible(|| {
                    READY[1].store(true, Relaxed);
                    // Go's empty loop: nothing but the load and the branch.
                    #[allow(clippy::missing_spin_loop)]
                    while !STOP.load(Relaxed) {}
                })
            });
            let frameless = go(|| {
                preemptible(|| {
                    READY[2].store(true, Relaxed);
                    // SAFETY: a leaf function reading one byte of STOP.
                    unsafe { aptest_frameless_spin(&STOP) }
                })
            });
            while !READY.iter().all(|r| r.load(Relaxed)) {
                goroutine::yield_now();
            }
            // Go runs a GC here: a stop-the-world has to stop them all.
            assert_eq!(goroutine::set_max_procs(2), 1);
            assert_eq!(goroutine::set_max_procs(1), 2);
            STOP.store(true, Relaxed);
            no_calls.join().unwrap();
            empty.join().unwrap();
            let iters = frameless.join().unwrap();
            assert_ne!(iters, u64::MAX, "the frameless loop's red zone or registers changed");
            assert!(iters > 0);
            async_preempt_stats()
        });
        report("TestAsyncPreempt", &stats);
        assert!(stats.preemptions >= 3, "{stats:?}");
    }
}

// Go's TestPingPongHog at GOMAXPROCS=1, with the hogs' counting loops in
// preemptible regions: two hog goroutines hand a token back and forth,
// counting 1e6 per turn; two light ones do the same with 1e3. Both pairs
// must make progress within a factor of 20 (Go's bound): the hog pair's
// slice ends (by signal, inside its loop) and the light pair gets the P.
isolated_test! {
    // Go skips it under -race too: the randomized scheduler sends readied
    // goroutines to the global queue, so the light pair loses the slice it
    // should inherit through runnext (golang/go#38266).
    #[cfg_attr(goroutine_randomize, ignore = "checks the exact runnext policy")]
    fn test_ping_pong_hog() ["GOMAXPROCS" = "1"] {
        watchdog(60, "TestPingPongHog");
        let (hog, light) = run(|| {
            let (done_tx, done_rx) = goroutine::chan::<()>(0);
            let (hog_tx, hog_rx) = goroutine::chan::<bool>(0);
            let (light_tx, light_rx) = goroutine::chan::<bool>(0);
            let hog_count = Arc::new(AtomicU64::new(0));
            let light_count = Arc::new(AtomicU64::new(0));
            let run_pair = |limit: u64,
                            counter: &Arc<AtomicU64>,
                            tx: &goroutine::Sender<bool>,
                            rx: &goroutine::Receiver<bool>,
                            region: bool| {
                let (counter, tx, rx, done) =
                    (counter.clone(), tx.clone(), rx.clone(), done_rx.clone());
                go(move || loop {
                    select! {
                        recv(done) -> _ => return,
                        recv(rx) -> _ => {
                            let count = || {
                                for _ in 0..limit {
                                    counter.store(counter.load(Relaxed) + 1, Relaxed);
                                }
                            };
                            if region {
                                preemptible(count);
                            } else {
                                count();
                            }
                            if tx.send(true).is_err() {
                                return;
                            }
                        }
                    }
                })
            };
            let mut hs = Vec::new();
            for _ in 0..2 {
                hs.push(run_pair(1_000_000, &hog_count, &hog_tx, &hog_rx, true));
            }
            for _ in 0..2 {
                hs.push(run_pair(1_000, &light_count, &light_tx, &light_rx, false));
            }
            hog_tx.send(true).unwrap();
            light_tx.send(true).unwrap();
            goroutine::time::sleep(Duration::from_millis(100));
            drop(done_tx);
            hog_rx.recv().unwrap();
            light_rx.recv().unwrap();
            for h in hs {
                h.join().unwrap();
            }
            (hog_count.load(Relaxed), light_count.load(Relaxed))
        });
        report("TestPingPongHog", &async_preempt_stats());
        eprintln!("TestPingPongHog: hog {hog}, light {light}");
        const FACTOR: u64 = 20;
        assert!(
            hog / FACTOR <= light && light / FACTOR <= hog,
            "want hog/light in [1/{FACTOR}, {FACTOR}]; got {hog}/{light} = {}",
            hog as f64 / light as f64
        );
    }
}

// The hog_fairness probe as a behaviour check: as many hogs in regions as
// Ps, and a goroutine sleeping 1 ms in a loop. Without asynchronous
// preemption the sleeper never runs again; with it, each wakeup is late by
// about 0.1 ms (sysmon preempts a hog that has run 100 us for a due timer).
// The bounds are generous (a loaded 2-CPU machine);
// the lateness is printed, and measured properly by the benchmark tool.
isolated_test! {
    fn hog_fairness_sleeper_keeps_running() ["GOMAXPROCS" = "2"] {
        watchdog(120, "hog_fairness");
        static STOP: AtomicBool = AtomicBool::new(false);
        let mut late = run(|| {
            let hogs: Vec<_> = (0..goroutine::max_procs())
                .map(|_| {
                    go(|| {
                        preemptible(|| {
                            let mut x = 0u64;
                            while !STOP.load(Relaxed) {
                                x = x.wrapping_add(1);
                            }
                            x
                        })
                    })
                })
                .collect();
            // Let the hogs take every P first.
            std::thread::sleep(Duration::from_millis(20));
            let sleeper = go(|| {
                let mut late = Vec::with_capacity(100);
                for _ in 0..100 {
                    let t = Instant::now();
                    goroutine::time::sleep(Duration::from_millis(1));
                    late.push(t.elapsed().saturating_sub(Duration::from_millis(1)));
                }
                late
            });
            let late = sleeper.join().unwrap();
            STOP.store(true, Relaxed);
            for h in hogs {
                assert!(h.join().unwrap() > 0);
            }
            late
        });
        late.sort();
        let (p50, p99, max) = (late[50], late[98], late[99]);
        report("hog_fairness", &async_preempt_stats());
        eprintln!("hog_fairness: 1 ms sleeps late by p50 {p50:?}, p99 {p99:?}, max {max:?}");
        assert!(async_preempt_stats().preemptions > 0);
        assert!(p50 < Duration::from_millis(250), "p50 lateness {p50:?}");
        assert!(max < Duration::from_secs(3), "max lateness {max:?}");
    }
}

// A goroutine in a region that blocks in the kernel loses its P to
// sysmon (`runtime::retake`), as any blocked goroutine; when it then
// computes in the same region, never calling the runtime, a signal brings
// it back under a P (`asyncpreempt::preempt_revoked`): the thread without
// a P goes away while the loop still runs, and a dump shows its frames.
// Before, it ran on beside the Ps, without one, for as long as it looped.
isolated_test! {
    fn a_region_that_blocked_and_computes_gets_its_p_back() ["GOMAXPROCS" = "1"] {
        watchdog(120, "region_revoked");
        static STOP: AtomicBool = AtomicBool::new(false);
        static LOOPS: AtomicU64 = AtomicU64::new(0);
        run(|| {
            let h = go(|| preemptible(|| blocked_then_computing(&STOP, &LOOPS)));
            let deadline = Instant::now() + common::scaled(Duration::from_secs(30));
            while goroutine::stats().blocked_handoffs == 0 {
                assert!(Instant::now() < deadline, "the sleeping region kept its P");
                goroutine::time::sleep(Duration::from_millis(5));
            }
            // The region computes now, or soon: it must come back under a P
            // (no thread left without one) while it still loops.
            while LOOPS.load(Relaxed) == 0 || goroutine::stats().blocked_threads != 0 {
                assert!(
                    Instant::now() < deadline,
                    "the region computes without a P: {:?}, {:?}",
                    goroutine::stats(),
                    async_preempt_stats()
                );
                goroutine::time::sleep(Duration::from_millis(5));
            }
            let before = LOOPS.load(Relaxed);
            let mut dump = String::new();
            while !dump.contains("asyncpreempt::blocked_then_computing") {
                assert!(Instant::now() < deadline, "no frames for the region: {dump}");
                let mut out = Vec::new();
                goroutine::dump(&mut out).unwrap();
                dump = String::from_utf8_lossy(&out).into_owned();
                // At GOMAXPROCS=1 beside the looping region: sysmon must
                // preempt it for this timer. (It once slept through the
                // dump's stop-the-world and on for up to a minute.)
                goroutine::time::sleep(Duration::from_millis(5));
            }
            assert!(Instant::now() < deadline, "a 5 ms sleep waited past the deadline");
            STOP.store(true, Relaxed);
            h.join().unwrap();
            assert!(LOOPS.load(Relaxed) >= before);
        });
        let s = async_preempt_stats();
        report("region_revoked", &s);
        assert!(s.preemptions > 0);
    }
}

/// Blocks in the kernel, then loops without runtime calls until `stop`.
#[inline(never)]
fn blocked_then_computing(stop: &AtomicBool, loops: &AtomicU64) {
    std::thread::sleep(Duration::from_millis(300));
    while !stop.load(Relaxed) {
        loops.fetch_add(1, Relaxed);
    }
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// Builds and checks a few hundred strings and a map: allocation-heavy code
/// (the system allocator, whose code in libc is never interrupted).
fn alloc_round(seed: u64) -> bool {
    let mut rng = seed | 1;
    let mut v: Vec<String> = Vec::new();
    let mut expect = 0u64;
    let mut map = std::collections::BTreeMap::new();
    for i in 0..300u64 {
        rng = xorshift(rng);
        let k = rng % 100_000;
        expect += k;
        let mut s = String::with_capacity(4);
        s.push_str(&k.to_string());
        s.push('x');
        v.push(s);
        map.insert(i, vec![k; (k % 7) as usize + 1]);
    }
    let sum: u64 = v
        .iter()
        .map(|s| s.trim_end_matches('x').parse::<u64>().unwrap())
        .sum();
    let joined = v.concat();
    let map_sum: u64 = map.values().map(|vs| vs[0]).sum();
    sum == expect && map_sum == expect && joined.len() == v.iter().map(|s| s.len()).sum::<usize>()
}

/// Scalar f64 work the compiler keeps in XMM registers: deterministic, so
/// the result in a region (preempted many times) must equal, bit for bit,
/// the one computed outside any region.
#[inline(never)]
fn fp_kernel(seed: u64, n: u32) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut x = (seed % 1000) as f64 * 1e-3 + 0.5;
    for i in 0..n {
        x = x * 1.000_000_1 + 0.25;
        if x > 1e6 {
            x -= 999_999.0;
        }
        acc[(i & 7) as usize] += x.sqrt() * 0.5 + (i as f64) * 1e-9;
    }
    acc.iter().sum()
}

/// Runs the AVX-512 register loop for `n` iterations and checks all 31
/// accumulators (every lane) and the 7 opmask registers.
#[cfg(target_arch = "x86_64")]
fn avx512_round(n: u64) -> bool {
    let mut table = [0.0f64; 32 * 8];
    for (i, t) in table.iter_mut().enumerate() {
        *t = if i >= 31 * 8 { 1.0 } else { i as f64 };
    }
    let mut out = [0.0f64; 31 * 8];
    let mut kout = [0u16; 7];
    // SAFETY: the function reads 32 x 64 bytes of `table`, writes 31 x 64
    // bytes of `out` and 7 u16 of `kout`; AVX-512F was detected.
    unsafe { aptest_avx512_spin(n, table.as_ptr(), out.as_mut_ptr(), kout.as_mut_ptr()) };
    let regs_ok = out
        .iter()
        .enumerate()
        .all(|(i, &v)| v == i as f64 + n as f64);
    let k_ok = kout.iter().enumerate().all(|(k, &v)| {
        let init = (0x1111u32 * (k as u32 + 1)) as u16;
        v == if n % 2 == 0 { init } else { !init }
    });
    regs_ok && k_ok
}

/// Runs the general-register loop and checks every register, the carries
/// and the direction-flag readings.
fn gpr_round(n: u64) -> bool {
    let mut out = [0u64; 13];
    // SAFETY: the function writes 13 u64 to `out` and restores the
    // callee-saved registers it uses.
    unsafe { aptest_gpr_spin(n, out.as_mut_ptr()) };
    let regs_ok = (0..11).all(|i| out[i] == (i as u64 + 1) * (n + 1));
    regs_ok && out[11] == n && out[12] == n
}

/// The same with the 16 YMM registers (AVX).
#[cfg(target_arch = "x86_64")]
fn avx_round(n: u64) -> bool {
    let mut table = [0.0f64; 16 * 4];
    for (i, t) in table.iter_mut().enumerate() {
        *t = if i >= 15 * 4 { 1.0 } else { i as f64 };
    }
    let mut out = [0.0f64; 15 * 4];
    // SAFETY: reads 16 x 32 bytes, writes 15 x 32 bytes; AVX was detected.
    unsafe { aptest_avx_spin(n, table.as_ptr(), out.as_mut_ptr()) };
    out.iter()
        .enumerate()
        .all(|(i, &v)| v == i as f64 + n as f64)
}

// Thousands of preemptions per second (the slice shortened to 250 us
// through the test-only knob; 4 Ps on however many CPUs: about 1,000 per
// second on a loaded 2-CPU machine, where the OS often has the target thread
// descheduled) across allocation-heavy,
// mutex-heavy, channel, general-register and flags, scalar floating-point
// and SIMD region code. Every
// result is checked; any register, flag or red-zone byte lost or corrupted
// by a save/restore, or a runtime call interrupted, shows up as a wrong
// result, a hang (watchdog) or a crash.
isolated_test! {
    fn stress_preemption_preserves_every_result() ["GOMAXPROCS" = "4", "GOROUTINE_DEBUG_FORCEPREEMPTNS" = "250000"] {
        watchdog(180, "stress");
        static STOP: AtomicBool = AtomicBool::new(false);
        // Wrong results per kind of work (see KINDS).
        static FAILURES: [AtomicUsize; 6] = [const { AtomicUsize::new(0) }; 6];
        const KINDS: [&str; 6] = ["alloc", "chan", "f64", "gpr+flags", "avx512", "avx"];
        let secs: u64 = std::env::var("APTEST_STRESS_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(4);
        let fp_ref: Vec<f64> = (0..8).map(|s| fp_kernel(s, 200_000)).collect();
        #[cfg(target_arch = "x86_64")]
        let avx512 = is_x86_feature_detected!("avx512f");
        #[cfg(target_arch = "x86_64")]
        let avx = is_x86_feature_detected!("avx");
        let start = Instant::now();
        let (rounds, stats) = run(move || {
            let mut hs: Vec<goroutine::JoinHandle<(&'static str, u64)>> = Vec::new();
            // Allocation-heavy.
            for w in 0..4u64 {
                hs.push(go(move || {
                    preemptible(|| {
                        let mut n = 0;
                        while !STOP.load(Relaxed) {
                            if !alloc_round(w * 1_000_003 + n) {
                                FAILURES[0].fetch_add(1, Relaxed);
                            }
                            n += 1;
                        }
                        ("alloc", n)
                    })
                }));
            }
            // goroutine::sync::Mutex-heavy: lock, update, unlock in a loop.
            let shared = Arc::new(goroutine::sync::Mutex::new((0u64, Vec::<u64>::new())));
            for _ in 0..4 {
                let shared = shared.clone();
                hs.push(go(move || {
                    preemptible(|| {
                        let mut n = 0u64;
                        let mut x = 1u64;
                        while !STOP.load(Relaxed) {
                            for _ in 0..50 {
                                x = xorshift(x);
                            }
                            let mut g = shared.lock();
                            g.0 += 1;
                            g.1.push(x & 0xff);
                            if g.1.len() > 1000 {
                                g.1.clear();
                            }
                            drop(g);
                            n += 1;
                        }
                        ("mutex", n)
                    })
                }));
            }
            // A channel pipeline between two regions.
            let (tx, rx) = goroutine::chan::<u64>(16);
            hs.push(go(move || {
                preemptible(|| {
                    let mut n = 0u64;
                    while !STOP.load(Relaxed) {
                        tx.send(n).unwrap();
                        n += 1;
                    }
                    ("chan send", n)
                })
            }));
            hs.push(go(move || {
                preemptible(|| {
                    let (mut n, mut sum) = (0u64, 0u64);
                    for v in rx.iter() {
                        sum += v;
                        n += 1;
                    }
                    if sum != n * n.saturating_sub(1) / 2 {
                        FAILURES[1].fetch_add(1, Relaxed);
                    }
                    ("chan recv", n)
                })
            }));
            // Scalar floating point.
            for w in 0..4u64 {
                let fp_ref = fp_ref.clone();
                hs.push(go(move || {
                    preemptible(|| {
                        let mut n = 0;
                        while !STOP.load(Relaxed) {
                            let s = (w + n) % 8;
                            let got = fp_kernel(s, 200_000);
                            if got.to_bits() != fp_ref[s as usize].to_bits() {
                                FAILURES[2].fetch_add(1, Relaxed);
                            }
                            n += 1;
                        }
                        ("f64", n)
                    })
                }));
            }
            // General registers and flags.
            for w in 0..2u64 {
                hs.push(go(move || {
                    preemptible(|| {
                        let mut n = 0;
                        while !STOP.load(Relaxed) {
                            if !gpr_round(100_000 + w + n % 5) {
                                FAILURES[3].fetch_add(1, Relaxed);
                            }
                            n += 1;
                        }
                        ("gpr+flags", n)
                    })
                }));
            }
            // SIMD register files (x86-64; aarch64's FP/SIMD registers are
            // checked by the f64 kernel above, compiled to NEON code).
            #[cfg(target_arch = "x86_64")]
            for w in 0..2u64 {
                if avx512 {
                    hs.push(go(move || {
                        preemptible(|| {
                            let mut n = 0;
                            while !STOP.load(Relaxed) {
                                if !avx512_round(300_000 + w + n % 2) {
                                    FAILURES[4].fetch_add(1, Relaxed);
                                }
                                n += 1;
                            }
                            ("avx512", n)
                        })
                    }));
                }
                if avx {
                    hs.push(go(move || {
                        preemptible(|| {
                            let mut n = 0;
                            while !STOP.load(Relaxed) {
                                if !avx_round(500_000 + n % 3) {
                                    FAILURES[5].fetch_add(1, Relaxed);
                                }
                                n += 1;
                            }
                            ("avx", n)
                        })
                    }));
                }
            }
            goroutine::time::sleep(Duration::from_secs(secs));
            STOP.store(true, Relaxed);
            let mut rounds = Vec::new();
            for h in hs {
                rounds.push(h.join().unwrap());
            }
            let g = shared.lock();
            let mutex_total: u64 = rounds.iter().filter(|r| r.0 == "mutex").map(|r| r.1).sum();
            assert_eq!(g.0, mutex_total, "mutex-protected count");
            (rounds, async_preempt_stats())
        });
        let took = start.elapsed().as_secs_f64();
        report("stress", &stats);
        eprintln!(
            "stress: {:.0} preemptions/s over {took:.1} s; rounds: {rounds:?}",
            stats.preemptions as f64 / took
        );
        let failed: Vec<(&str, usize)> = KINDS
            .iter()
            .zip(&FAILURES)
            .map(|(k, f)| (*k, f.load(Relaxed)))
            .filter(|(_, f)| *f > 0)
            .collect();
        assert!(failed.is_empty(), "wrong results under preemption: {failed:?}");
        for (what, n) in &rounds {
            assert!(*n > 0, "{what} made no progress");
        }
        assert!(stats.preemptions >= 1000, "too few preemptions: {stats:?}");
    }
}

/// Spins for about `iters` cheap steps: region code between runtime calls,
/// where the signals land.
fn spin_some(iters: u64) -> u64 {
    let mut x = iters | 1;
    for _ in 0..iters {
        x = xorshift(x);
    }
    std::hint::black_box(x)
}

/// One pass over the runtime's API from inside a region; returns a checksum
/// that depends only on `i`.
fn api_tour(i: u64) -> u64 {
    use goroutine::sync::{Condvar, Mutex, Once, RwLock, Semaphore, WaitGroup};
    let mut sum = 0u64;
    // Long enough to outlast a 250 us slice: a signal lands here.
    spin_some(300_000);
    // Spawn and join, from inside the region and from a region inside it.
    sum += go(move || preemptible(|| i + 1)).join().unwrap();
    spin_some(2_000);
    // Channels: buffered, select, try_*, len, close, iteration.
    let (tx, rx) = goroutine::chan::<u64>(4);
    tx.send(i).unwrap();
    assert_eq!(tx.len(), 1);
    assert!(tx.try_send(i + 1).is_ok());
    select! {
        recv(rx) -> v => sum += v.unwrap(),
        default => unreachable!("a value was ready"),
    }
    sum += rx.try_recv().unwrap();
    tx.close().unwrap();
    assert!(rx.is_closed());
    assert_eq!(rx.iter().count(), 0);
    drop((tx, rx));
    spin_some(2_000);
    // Timers.
    goroutine::time::sleep(Duration::from_micros(50));
    let t = goroutine::time::Timer::new(Duration::from_secs(60));
    assert!(t.stop());
    drop(t);
    let _ = goroutine::time::after(Duration::from_micros(10))
        .recv()
        .unwrap();
    let tick = goroutine::time::Ticker::new(Duration::from_micros(100));
    let _ = tick.c().recv().unwrap();
    tick.stop();
    drop(tick);
    spin_some(2_000);
    // sync.
    let m = Arc::new(Mutex::new(0u64));
    let cv = Arc::new(Condvar::new());
    let wg = WaitGroup::new();
    wg.add(1);
    let (m2, cv2, wg2) = (m.clone(), cv.clone(), wg.clone());
    go(move || {
        preemptible(|| {
            *m2.lock() = 1;
            cv2.notify_all();
            wg2.done();
        })
    });
    let mut g = m.lock();
    while *g == 0 {
        g = cv.wait(g);
    }
    drop(g);
    wg.wait();
    let rw = RwLock::new(i);
    sum += *rw.read();
    *rw.write() += 1;
    if let Some(mut w) = rw.try_write() {
        *w += 1;
    }
    sum += *rw.read();
    let sem = Semaphore::new(2);
    sem.acquire(2);
    assert!(!sem.try_acquire(1));
    sem.release(2);
    let once = Once::new();
    once.call_once(|| sum += 1);
    once.call_once(|| sum += 1000);
    spin_some(2_000);
    // Scheduling calls.
    goroutine::yield_now();
    goroutine::preempt_point();
    assert_ne!(goroutine::current_id(), 0);
    sum += goroutine::syscall(|| i % 3);
    goroutine::lock_os_thread();
    spin_some(2_000);
    goroutine::unlock_os_thread();
    sum
}

fn api_tour_expected(i: u64) -> u64 {
    (i + 1) + i + (i + 1) + i + (i + 2) + 1 + i % 3
}

// Every public runtime call made from inside regions while signals arrive
// every 250 us. Debug builds assert at every switch and runtime lock that a
// goroutine in a region is inside a runtime call (a missing guard fails
// here); every result is checked.
isolated_test! {
    fn runtime_api_inside_regions() ["GOMAXPROCS" = "2", "GOROUTINE_DEBUG_FORCEPREEMPTNS" = "250000"] {
        watchdog(180, "API tour");
        let stats = run(|| {
            let hs: Vec<_> = (0..4u64)
                .map(|w| {
                    go(move || {
                        preemptible(|| {
                            let t = Instant::now();
                            let mut i = w * 1000;
                            while t.elapsed() < Duration::from_secs(2) {
                                assert_eq!(api_tour(i), api_tour_expected(i), "tour {i}");
                                i += 1;
                            }
                            i - w * 1000
                        })
                    })
                })
                .collect();
            for h in hs {
                assert!(h.join().unwrap() > 0);
            }
            async_preempt_stats()
        });
        report("API tour", &stats);
        assert!(stats.preemptions > 0, "{stats:?}");
    }
}

// A region's runtime calls are never interrupted: a goroutine in a region
// that spends 300 ms inside a (test-hook) runtime call at GOMAXPROCS=1 is
// not stopped there (the other goroutine cannot run meanwhile) although
// sysmon keeps signalling it; once back in its own code it is preempted.
isolated_test! {
    fn no_preemption_inside_runtime_calls() ["GOMAXPROCS" = "1"] {
        watchdog(60, "runtime-call refusal");
        static TICKS: AtomicU64 = AtomicU64::new(0);
        static STOP: AtomicBool = AtomicBool::new(false);
        let (during, stats) = run(|| {
            let ticker = go(|| {
                while !STOP.load(Relaxed) {
                    TICKS.fetch_add(1, Relaxed);
                    goroutine::yield_now();
                }
            });
            // Let the ticker start, then hog the only P.
            goroutine::yield_now();
            let hog = go(|| {
                preemptible(|| {
                    let during = goroutine::__test::as_runtime_call(|| {
                        let before = TICKS.load(Relaxed);
                        let t = Instant::now();
                        while t.elapsed() < Duration::from_millis(300) {
                            std::hint::spin_loop();
                        }
                        TICKS.load(Relaxed) - before
                    });
                    // Own code again: preemptible; the ticker must advance.
                    let t = TICKS.load(Relaxed);
                    #[allow(clippy::missing_spin_loop)]
                    while TICKS.load(Relaxed) == t {}
                    during
                })
            });
            let during = hog.join().unwrap();
            STOP.store(true, Relaxed);
            ticker.join().unwrap();
            (during, async_preempt_stats())
        });
        report("runtime-call refusal", &stats);
        assert_eq!(during, 0, "the goroutine was switched out inside a runtime call");
        assert!(stats.refused_in_runtime >= 1, "{stats:?}");
        assert!(stats.preemptions >= 1, "{stats:?}");
    }
}

// PCs in libc and the vDSO are refused: a region spinning on getpid() and
// clock_gettime() (nearly all its time in libc, the kernel or the vDSO) is
// preempted only between the calls, and still makes progress.
isolated_test! {
    fn libc_and_vdso_pcs_are_refused() ["GOMAXPROCS" = "1"] {
        watchdog(120, "libc refusal");
        static GO_ON: AtomicBool = AtomicBool::new(false);
        let stats = run(|| {
            let spinner = go(|| {
                preemptible(|| {
                    let mut calls = 0u64;
                    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
                    while !GO_ON.load(Relaxed) {
                        // SAFETY: plain libc calls with a valid out-pointer.
                        unsafe {
                            std::hint::black_box(libc::getpid());
                            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
                        }
                        // Some of the loop's own time is spent in its own
                        // code, where the signals that do preempt land.
                        spin_some(100);
                        calls += 1;
                    }
                    calls
                })
            });
            // Runs only when the spinner is preempted; releases it once a
            // signal has been refused for landing in libc or the vDSO.
            loop {
                goroutine::yield_now();
                if async_preempt_stats().refused_pc >= 1 {
                    break;
                }
                goroutine::time::sleep(Duration::from_millis(1));
            }
            GO_ON.store(true, Relaxed);
            assert!(spinner.join().unwrap() > 0);
            async_preempt_stats()
        });
        report("libc refusal", &stats);
        assert!(stats.refused_pc >= 1, "{stats:?}");
        assert!(stats.preemptions >= 1, "{stats:?}");
    }
}

// A panic inside a region (after it was preempted a few times) comes back
// through join like any other, and the runtime keeps working.
isolated_test! {
    fn panic_in_region_after_preemptions() ["GOMAXPROCS" = "1"] {
        watchdog(60, "panic in region");
        std::panic::set_hook(Box::new(|_| {}));
        run(|| {
            let h = go(|| {
                preemptible(|| {
                    while async_preempt_stats().preemptions < 3 {
                        std::hint::spin_loop();
                    }
                    let v: Vec<u8> = Vec::new();
                    std::hint::black_box(&v)[1]
                })
            });
            let other = go(|| {
                for _ in 0..100 {
                    goroutine::yield_now();
                }
                7
            });
            assert_eq!(other.join().unwrap(), 7);
            let e = h.join().unwrap_err();
            assert!(e.is_panic());
            assert!(e.message().contains("index out of bounds"), "{}", e.message());
            // Still schedules and still preempts.
            let n = go(|| preemptible(|| (0..1000u64).sum::<u64>())).join().unwrap();
            assert_eq!(n, 499_500);
        });
        assert!(async_preempt_stats().preemptions >= 3);
    }
}

// Outside a goroutine a region is a plain call, and regions nest.
#[test]
fn region_outside_goroutine_and_nested() {
    assert_eq!(preemptible(|| preemptible(|| 6) * 7), 42);
    let v = run(|| preemptible(|| preemptible(|| go(|| 5).join().unwrap()) + 1));
    assert_eq!(v, 6);
}
