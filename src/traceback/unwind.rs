//! Walking a suspended goroutine stack with the binaries' CFI (`.eh_frame`,
//! found through `.eh_frame_hdr` of every loaded object).
//!
//! The walk starts from the context a goroutine recorded when it switched
//! out ([`super::StackHeader`]): an exact PC, SP and frame pointer. Each
//! step looks up the FDE of the PC, evaluates the CFA rule (register plus
//! offset; an expression ends the walk) and reads the return address and the
//! callee-saved registers it tracks from the slots the rules name: RBP and
//! RBX on x86-64; on aarch64 the frame pointer X29 and the link register
//! X30, which is also the return address column (a leaf frame's rule for it
//! is "same value": the return address is still in the register, which the
//! recorded context of a parked goroutine never needs, since it records
//! inside a function that called others). Return addresses read on aarch64
//! have their pointer-authentication bits cleared. Every read is checked
//! to lie inside `[sp, top)` of the goroutine's own stack, so a stale or
//! broken chain ends the walk instead of reading another thread's memory;
//! the walk also ends when the CFA does not grow (no progress), at PC 0, at
//! corosensei's root frame (its CFA is an expression through the parent
//! link) and after [`MAX_FRAMES`].

use std::sync::{Mutex, OnceLock};

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, EndianSlice, NativeEndian, ParsedEhFrameHdr,
    Register, RegisterRule, UnwindContext, UnwindSection,
};

/// The DWARF registers the walk tracks, per architecture.
#[cfg(target_arch = "x86_64")]
mod arch {
    use gimli::{Register, X86_64};
    pub(super) const SP: Register = X86_64::RSP;
    pub(super) const FP: Register = X86_64::RBP;
    /// `Regs::bx`: RBX.
    pub(super) const EXTRA: Register = X86_64::RBX;
    /// The return address column (not a register the walk tracks).
    pub(super) const RA: Register = X86_64::RA;
    /// Return addresses are plain addresses.
    pub(super) fn strip(ra: usize) -> usize {
        ra
    }
}

/// The DWARF registers the walk tracks, per architecture.
#[cfg(target_arch = "aarch64")]
mod arch {
    use gimli::{AArch64, Register};
    pub(super) const SP: Register = AArch64::SP;
    pub(super) const FP: Register = AArch64::X29;
    /// `Regs::bx`: the link register X30.
    pub(super) const EXTRA: Register = AArch64::X30;
    /// The return address column is the link register.
    pub(super) const RA: Register = AArch64::X30;
    /// Clears the pointer-authentication code a signed return address
    /// carries in its upper bits (user addresses fit in 48 bits, the
    /// kernel's default user address space).
    pub(super) fn strip(ra: usize) -> usize {
        ra & ((1 << 48) - 1)
    }
}

/// Frames kept per goroutine (Go keeps 100 too).
pub(crate) const MAX_FRAMES: usize = 100;

type Slice = EndianSlice<'static, NativeEndian>;

/// Where the general registers lie in a `ucontext_t` (`gregs` opens
/// `mcontext_t`).
#[cfg(target_arch = "x86_64")]
const GREGS: usize = std::mem::offset_of!(libc::ucontext_t, uc_mcontext);

/// One loaded object with unwind tables.
struct Module {
    /// Address ranges of its loadable segments.
    segments: Vec<(usize, usize)>,
    hdr: ParsedEhFrameHdr<Slice>,
    eh_frame: EhFrame<Slice>,
    bases: BaseAddresses,
}

// SAFETY: the slices point into mapped, read-only segments of objects that
// stay loaded (we never see a `dlclose`d object: tables are rebuilt only by
// `refresh`, and a dump of code from an unloaded object is unsupported).
unsafe impl Send for Module {}
// SAFETY: see above; everything is read-only.
unsafe impl Sync for Module {}

static MODULES: OnceLock<Mutex<Vec<Module>>> = OnceLock::new();

fn modules() -> &'static Mutex<Vec<Module>> {
    MODULES.get_or_init(|| Mutex::new(load_modules()))
}

/// Reads the program headers of every loaded object.
fn load_modules() -> Vec<Module> {
    let mut out: Vec<Module> = Vec::new();
    unsafe extern "C" fn cb(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `Vec<Module>` passed below; `info` is valid
        // for the call (dl_iterate_phdr's contract).
        let (out, info) = unsafe { (&mut *(data as *mut Vec<Module>), &*info) };
        let bias = info.dlpi_addr as usize;
        let mut segments = Vec::new();
        let mut hdr_addr = None;
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: `dlpi_phdr` points at `dlpi_phnum` headers.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            let start = bias + ph.p_vaddr as usize;
            match ph.p_type {
                libc::PT_LOAD => segments.push((start, start + ph.p_memsz as usize)),
                libc::PT_GNU_EH_FRAME => hdr_addr = Some((start, ph.p_memsz as usize)),
                _ => {}
            }
        }
        if let Some((hdr, len)) = hdr_addr {
            if let Some(m) = module(segments, hdr, len) {
                out.push(m);
            }
        }
        0
    }
    // SAFETY: the callback only reads the headers it is given and writes
    // to `out`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut out as *mut Vec<Module> as *mut libc::c_void) };
    out
}

fn module(segments: Vec<(usize, usize)>, hdr: usize, len: usize) -> Option<Module> {
    // SAFETY: PT_GNU_EH_FRAME names `len` mapped bytes of a loaded object.
    let bytes: &'static [u8] = unsafe { std::slice::from_raw_parts(hdr as *const u8, len) };
    let bases = BaseAddresses::default().set_eh_frame_hdr(hdr as u64);
    let parsed = EhFrameHdr::new(bytes, NativeEndian)
        .parse(&bases, std::mem::size_of::<usize>() as u8)
        .ok()?;
    let eh = match parsed.eh_frame_ptr() {
        gimli::Pointer::Direct(a) => a as usize,
        gimli::Pointer::Indirect(_) => return None,
    };
    // `.eh_frame` runs to the end of its segment at most.
    let &(_, end) = segments.iter().find(|(s, e)| eh >= *s && eh < *e)?;
    // SAFETY: `[eh, end)` lies inside a mapped loadable segment.
    let eh_bytes: &'static [u8] = unsafe { std::slice::from_raw_parts(eh as *const u8, end - eh) };
    let bases = bases.set_eh_frame(eh as u64);
    Some(Module {
        segments,
        hdr: parsed,
        eh_frame: EhFrame::new(eh_bytes, NativeEndian),
        bases,
    })
}

/// The registers the walk tracks.
#[derive(Clone, Copy)]
pub(crate) struct Regs {
    pub(crate) pc: usize,
    pub(crate) sp: usize,
    /// RBP on x86-64, X29 on aarch64.
    pub(crate) fp: usize,
    /// RBX on x86-64, the link register X30 on aarch64 (0: unknown).
    pub(crate) bx: usize,
}

impl Regs {
    fn get(&self, r: Register) -> Option<usize> {
        match r {
            arch::SP => Some(self.sp),
            arch::FP => Some(self.fp),
            arch::EXTRA => Some(self.bx),
            _ => None,
        }
    }
}

/// How to restore a callee-saved register from a frame.
#[derive(Clone, Copy)]
enum Rule {
    Same,
    /// Saved at CFA + offset.
    At(i64),
    /// Equal to CFA + offset.
    Val(i64),
    /// Held in another tracked register.
    Reg(Register),
}

/// One frame's unwind rule at a given PC, decoded once from the CFI.
#[derive(Clone, Copy)]
struct Step {
    cfa_reg: Register,
    cfa_off: i64,
    /// Where the return address is: saved at CFA + offset (`At`), or, on
    /// aarch64, still in the link register (`Same`).
    ra: Rule,
    fp: Rule,
    bx: Rule,
    /// The frame is `asyncpreempt`'s trampoline.
    trampoline: bool,
}

/// Walks many stacks: holds the module table and caches the decoded CFI
/// step of every PC seen, so 100,000 identical stacks decode each PC once.
pub(crate) struct Walker {
    mods: std::sync::MutexGuard<'static, Vec<Module>>,
    ctx: UnwindContext<usize>,
    steps: std::collections::HashMap<usize, Option<Step>>,
}

impl Walker {
    pub(crate) fn new() -> Walker {
        Walker {
            mods: modules().lock().unwrap_or_else(|e| e.into_inner()),
            ctx: UnwindContext::new(),
            steps: std::collections::HashMap::new(),
        }
    }

    /// Makes room for `n` more cached steps, so that up to `n` new PCs are
    /// walked without allocating (the unwind context allocated its storage
    /// when made): SIGQUIT's dump walks stacks while their threads are
    /// held, one of which may hold the allocator's lock.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.steps.reserve(n);
    }

    /// The step at `pc` (an address inside the frame's instruction).
    fn step(&mut self, pc: usize) -> Option<Step> {
        if let Some(s) = self.steps.get(&pc) {
            return *s;
        }
        let s = self.decode(pc);
        self.steps.insert(pc, s);
        s
    }

    fn decode(&mut self, pc: usize) -> Option<Step> {
        let m = self
            .mods
            .iter()
            .find(|m| m.segments.iter().any(|(s, e)| pc >= *s && pc < *e))?;
        let table = m.hdr.table()?;
        let fde = table
            .fde_for_address(&m.eh_frame, &m.bases, pc as u64, EhFrame::cie_from_offset)
            .ok()?;
        let row = fde
            .unwind_info_for_address(&m.eh_frame, &m.bases, &mut self.ctx, pc as u64)
            .ok()?;
        let (cfa_reg, cfa_off) = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => (*register, *offset),
            _ => return None,
        };
        let rule = |r: Register| -> Option<Rule> {
            Some(match row.register(r).unwrap_or(RegisterRule::SameValue) {
                RegisterRule::SameValue | RegisterRule::Undefined => Rule::Same,
                RegisterRule::Offset(o) => Rule::At(o),
                RegisterRule::ValOffset(o) => Rule::Val(o),
                RegisterRule::Register(src) => Rule::Reg(src),
                _ => return None,
            })
        };
        let ra = match row.register(arch::RA) {
            Some(RegisterRule::Offset(o)) => Rule::At(o),
            // No rule: the return address never left its register (aarch64).
            None | Some(RegisterRule::SameValue) if arch::RA == arch::EXTRA => Rule::Same,
            _ => return None,
        };
        Some(Step {
            cfa_reg,
            cfa_off,
            ra,
            fp: rule(arch::FP)?,
            bx: rule(arch::EXTRA)?,
            trampoline: fde.initial_address() as usize == crate::sys::preempt::trampoline_addr(),
        })
    }

    /// Walks the stack `[regs.sp, top)` from `regs`; returns the frames'
    /// *call-site addresses plus one* (return addresses; for the first
    /// frame, its exact PC plus one), innermost first, so that every entry
    /// is symbolised the same way (`addr - 1` lies in the calling
    /// instruction).
    ///
    /// # Safety
    /// `[regs.sp, top)` must be readable and must not change during the
    /// call (the goroutine is pinned: see the module note of `traceback`).
    pub(crate) unsafe fn walk(&mut self, regs: Regs, top: usize) -> Vec<usize> {
        let mut out = Vec::with_capacity(16);
        // SAFETY: the caller's contract.
        unsafe { self.walk_into(regs, top, &mut out) };
        out
    }

    /// [`walk`](Self::walk) into `out` (cleared first), which allocates
    /// nothing when `out` has room for [`MAX_FRAMES`] and the steps met
    /// are cached or reserved ([`reserve`](Self::reserve)).
    ///
    /// # Safety
    /// As for [`walk`](Self::walk).
    pub(crate) unsafe fn walk_into(&mut self, mut regs: Regs, top: usize, out: &mut Vec<usize>) {
        out.clear();
        let lo = regs.sp;
        let read = |a: usize| -> Option<usize> {
            if a < lo || a.checked_add(8)? > top || a % 8 != 0 {
                return None;
            }
            // SAFETY: inside the pinned stack (caller's contract), aligned.
            Some(unsafe { std::ptr::read(a as *const usize) })
        };
        let at = |base: usize, off: i64| (base as i64).wrapping_add(off) as usize;
        let mut exact = true;
        while out.len() < MAX_FRAMES && regs.pc != 0 {
            out.push(if exact { regs.pc + 1 } else { regs.pc });
            let lookup = if exact { regs.pc } else { regs.pc - 1 };
            let first = exact;
            exact = false;
            let Some(step) = self.step(lookup) else { break };
            let Some(base) = regs.get(step.cfa_reg) else {
                break;
            };
            let cfa = at(base, step.cfa_off);
            // No progress ends the walk, except in an interrupted leaf frame
            // on aarch64 that has no frame of its own (its return address is
            // in the link register): there the caller's SP is this SP.
            let leaf = first && matches!(step.ra, Rule::Same);
            if cfa < regs.sp || (cfa == regs.sp && !leaf) {
                break;
            }
            let ra = match step.ra {
                Rule::At(o) => read(at(cfa, o)),
                Rule::Same => Some(regs.bx).filter(|&lr| lr != 0),
                _ => None,
            };
            let Some(ra) = ra.map(arch::strip) else {
                break;
            };
            #[cfg(target_arch = "aarch64")]
            if ra == 0 && step.trampoline {
                // As on x86-64 (below), with the arm64 save area: the
                // trampoline's CFA is its entry SP, the `rt_sigframe`
                // whose ucontext follows the 128-byte siginfo slot
                // (`sys::preempt`'s note, "aarch64").
                let mc = cfa + 128 + std::mem::offset_of!(libc::ucontext_t, uc_mcontext);
                let reg =
                    |n: usize| read(mc + std::mem::offset_of!(libc::mcontext_t, regs) + 8 * n);
                let (Some(pc), Some(sp), Some(fp), Some(lr)) = (
                    read(mc + std::mem::offset_of!(libc::mcontext_t, pc)),
                    read(mc + std::mem::offset_of!(libc::mcontext_t, sp)),
                    reg(29),
                    reg(30),
                ) else {
                    break;
                };
                if sp <= regs.sp {
                    break;
                }
                regs = Regs { pc, sp, fp, bx: lr };
                exact = true;
                continue;
            }
            #[cfg(target_arch = "x86_64")]
            if ra == 0 && step.trampoline {
                // An asynchronously preempted goroutine: the trampoline's
                // zero return address sits right below the save area (a
                // ucontext, `sys::preempt::Interrupted::redirect`), which
                // holds the interrupted registers. Continue from the
                // interrupted PC.
                let greg = |r: libc::c_int| read(cfa + GREGS + 8 * r as usize);
                let (Some(pc), Some(sp), Some(fp), Some(bx)) = (
                    greg(libc::REG_RIP),
                    greg(libc::REG_RSP),
                    greg(libc::REG_RBP),
                    greg(libc::REG_RBX),
                ) else {
                    break;
                };
                if sp <= regs.sp {
                    break;
                }
                regs = Regs { pc, sp, fp, bx };
                exact = true;
                continue;
            }
            let restore = |rule: Rule, cur: usize| -> Option<usize> {
                match rule {
                    Rule::Same => Some(cur),
                    Rule::At(o) => read(at(cfa, o)),
                    Rule::Val(o) => Some(at(cfa, o)),
                    Rule::Reg(r) => regs.get(r),
                }
            };
            let (Some(fp), Some(mut bx)) = (restore(step.fp, regs.fp), restore(step.bx, regs.bx))
            else {
                break;
            };
            if arch::EXTRA == arch::RA {
                // The caller's link register is the return address.
                bx = ra;
            }
            regs = Regs {
                pc: ra,
                sp: cfa,
                fp,
                bx,
            };
            if regs.sp >= top {
                break;
            }
        }
    }
}
