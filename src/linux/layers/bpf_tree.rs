//! The seccomp program's body as a binary search over syscall numbers.
//!
//! seccompiler emits one comparison after another, in syscall-number order, so a call whose
//! decision depends on its arguments (`openat` with a mode, `ioctl`, `socket`, `clone`) runs
//! through every denied number below its own before its arguments are looked at: ~150 of the
//! ~550 instructions for `openat`, on every `openat`. The kernel caches the verdict of calls
//! that never look at arguments, so for those the shape does not matter once loaded; it does
//! at load time, when the kernel converts the program to eBPF, JIT-compiles it and emulates it
//! once per syscall number to fill that cache — all in proportion to the instructions run. A
//! search tree reaches any number's block in ~log2(60) = 6 comparisons.
//!
//! The program is classic BPF: forward jumps only, `jt`/`jf` at most 255 ahead, `ja` for
//! anything farther. Each leaf ends in a `ret`, so no block needs to know where another lies.

use std::collections::BTreeMap;

use seccompiler::sock_filter;
use serde::Serialize;

/// One test of a syscall's argument (its low 32 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Cond {
    pub arg: u8,
    /// Compared as (arg & mask) == (value & mask); with `ne`, arg != value (mask must be all
    /// ones).
    pub mask: u32,
    pub value: u32,
    pub ne: bool,
}

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const ALU_AND_K: u16 = 0x04 | 0x50; // BPF_ALU | BPF_AND | BPF_K
const JA: u16 = 0x05; // BPF_JMP | BPF_JA
const JEQ_K: u16 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x05 | 0x30; // BPF_JMP | BPF_JGE | BPF_K
const JSET_K: u16 = 0x05 | 0x40; // BPF_JMP | BPF_JSET | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

/// offsetof(struct seccomp_data, args): six u64 after nr, arch and instruction_pointer.
const ARGS_OFFSET: u32 = 16;

/// When a syscall is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Whatever its arguments.
    Always,
    /// When every condition of any one of these lists holds.
    AnyOf(Vec<Vec<Cond>>),
}

/// A plan the tree cannot express as seccompiler would have: each is refused rather than
/// compiled into something that decides differently. No plan of jail's makes any of them.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error("a rule of syscall {nr} has {len} instructions, more than a jump can skip")]
    TooLong { nr: u32, len: usize },
    #[error("a rule of syscall {nr} names argument {arg}; there are six")]
    NoSuchArgument { nr: u32, arg: u8 },
    #[error("a rule of syscall {nr} has no condition")]
    EmptyRule { nr: u32 },
    #[error("a rule of syscall {nr} masks an inequality, which has no agreed meaning")]
    MaskedInequality { nr: u32 },
    #[error("the program has {0} instructions; the kernel takes at most 4096")]
    TooBig(usize),
}

/// BPF_MAXINSNS: seccomp refuses a longer program.
const MAX_INSTRUCTIONS: usize = 4096;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The body: expects the syscall number in the accumulator (where the prelude leaves it) and
/// returns `refuse` for what `refused` names, `allow` for everything else.
pub fn compile(
    refused: &BTreeMap<u32, Refusal>,
    refuse: u32,
    allow: u32,
) -> Result<Vec<sock_filter>, CompileError> {
    let entries: Vec<(u32, &Refusal)> = refused.iter().map(|(&nr, r)| (nr, r)).collect();
    if entries.is_empty() {
        return Ok(vec![stmt(RET_K, allow)]);
    }
    let program = subtree(&entries, refuse, allow)?;
    if program.len() > MAX_INSTRUCTIONS {
        return Err(CompileError::TooBig(program.len()));
    }
    Ok(program)
}

/// Numbers below the middle entry's go left, the rest right.
fn subtree(
    entries: &[(u32, &Refusal)],
    refuse: u32,
    allow: u32,
) -> Result<Vec<sock_filter>, CompileError> {
    if let [(nr, refusal)] = entries {
        return leaf(*nr, refusal, refuse, allow);
    }
    let (left, right) = entries.split_at(entries.len() / 2);
    let pivot = right[0].0;
    let left = subtree(left, refuse, allow)?;
    let right = subtree(right, refuse, allow)?;
    let mut out = Vec::with_capacity(left.len() + right.len() + 2);
    match u8::try_from(left.len()) {
        Ok(skip) => out.push(jump(JGE_K, pivot, skip, 0)),
        Err(_) => {
            // Too far for `jt`: true falls onto a `ja` over the left side, false skips it.
            out.push(jump(JGE_K, pivot, 0, 1));
            out.push(stmt(JA, left.len() as u32));
        }
    }
    out.extend(left);
    out.extend(right);
    Ok(out)
}

/// `nr`'s block, behind a comparison that allows every other number that reached it.
fn leaf(
    nr: u32,
    refusal: &Refusal,
    refuse: u32,
    allow: u32,
) -> Result<Vec<sock_filter>, CompileError> {
    let mut out = vec![jump(JEQ_K, nr, 1, 0), stmt(RET_K, allow)];
    let rules = match refusal {
        Refusal::Always => {
            out.push(stmt(RET_K, refuse));
            return Ok(out);
        }
        Refusal::AnyOf(rules) => rules,
    };
    for conds in rules {
        if conds.is_empty() {
            return Err(CompileError::EmptyRule { nr });
        }
        for c in conds {
            if c.arg > 5 {
                return Err(CompileError::NoSuchArgument { nr, arg: c.arg });
            }
            if c.ne && c.mask != u32::MAX {
                return Err(CompileError::MaskedInequality { nr });
            }
        }
    }
    // Rules that each test one bit of one argument (S_ISUID, then S_ISGID, of a mode) are one
    // test of all those bits: three instructions instead of four a bit.
    let one_bit = |conds: &Vec<Cond>| match conds.as_slice() {
        [c] if !c.ne && c.mask == c.value && c.mask.count_ones() == 1 => Some(*c),
        _ => None,
    };
    let mut bits: BTreeMap<u8, u32> = BTreeMap::new();
    for c in rules.iter().filter_map(one_bit) {
        *bits.entry(c.arg).or_default() |= c.mask;
    }
    for (&arg, &mask) in &bits {
        out.push(stmt(LD_W_ABS, ARGS_OFFSET + 8 * u32::from(arg)));
        out.push(jump(JSET_K, mask, 0, 1));
        out.push(stmt(RET_K, refuse));
    }
    for conds in rules.iter().filter(|r| one_bit(r).is_none()) {
        // Each condition: load the argument's low 32 bits (both architectures are little-
        // endian), mask it, compare; a miss jumps past the rest of this rule to the next.
        let block_len: usize = conds
            .iter()
            .map(|c| 2 + usize::from(c.mask != u32::MAX))
            .sum();
        let mut left = block_len + 1; // the conditions still to come, and the `ret`
        for c in conds {
            out.push(stmt(LD_W_ABS, ARGS_OFFSET + 8 * u32::from(c.arg)));
            left -= 1;
            if c.mask != u32::MAX {
                out.push(stmt(ALU_AND_K, c.mask));
                left -= 1;
            }
            left -= 1;
            let miss =
                u8::try_from(left).map_err(|_| CompileError::TooLong { nr, len: block_len })?;
            // As seccompiler: a masked argument is compared with the masked value, so bits of
            // the value outside the mask never decide.
            let value = c.value & c.mask;
            out.push(if c.ne {
                jump(JEQ_K, value, miss, 0)
            } else {
                jump(JEQ_K, value, 0, miss)
            });
        }
        out.push(stmt(RET_K, refuse));
    }
    out.push(stmt(RET_K, allow));
    Ok(out)
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A classic-BPF interpreter for what seccomp programs use, to run both compilers' output
    /// on the same inputs. Panics on an opcode it does not know, so a new one cannot pass
    /// unnoticed.
    pub fn run(program: &[sock_filter], nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        let mut data = Vec::with_capacity(64);
        data.extend_from_slice(&(nr as i32).to_le_bytes());
        data.extend_from_slice(&arch.to_le_bytes());
        data.extend_from_slice(&0u64.to_le_bytes());
        for a in args {
            data.extend_from_slice(&a.to_le_bytes());
        }
        let word = |k: u32| {
            let k = k as usize;
            u32::from_le_bytes(data[k..k + 4].try_into().unwrap())
        };
        let (mut a, mut x, mut mem) = (0u32, 0u32, [0u32; 16]);
        let mut pc = 0usize;
        loop {
            let i = &program[pc];
            pc += 1;
            let k = i.k;
            let (jt, jf) = (i.jt as usize, i.jf as usize);
            let cond = |c: bool| if c { jt } else { jf };
            match i.code {
                0x20 => a = word(k),
                0x00 => a = k,
                0x01 => x = k,
                0x60 => a = mem[k as usize],
                0x61 => x = mem[k as usize],
                0x02 => mem[k as usize] = a,
                0x03 => mem[k as usize] = x,
                0x54 => a &= k,
                0x44 => a |= k,
                0x5c => a &= x,
                0x07 => x = a,
                0x87 => a = x,
                0x05 => pc += k as usize,
                0x15 => pc += cond(a == k),
                0x25 => pc += cond(a > k),
                0x35 => pc += cond(a >= k),
                0x45 => pc += cond(a & k != 0),
                0x1d => pc += cond(a == x),
                0x2d => pc += cond(a > x),
                0x3d => pc += cond(a >= x),
                0x06 => return k,
                code => panic!("opcode {code:#x} at {}", pc - 1),
            }
        }
    }

    /// The body after a prelude that only loads the number, as seccomp.rs's does last.
    fn program(refused: &BTreeMap<u32, Refusal>, refuse: u32, allow: u32) -> Vec<sock_filter> {
        let mut p = vec![stmt(LD_W_ABS, 0)];
        p.extend(compile(refused, refuse, allow).unwrap());
        p
    }

    fn c(arg: u8, mask: u32, value: u32, ne: bool) -> Cond {
        Cond {
            arg,
            mask,
            value,
            ne,
        }
    }

    #[test]
    fn every_number_reaches_its_own_block_and_no_other() {
        let refuse = 0x0005_0001;
        let allow = 0x7fff_0000;
        let refused: BTreeMap<u32, Refusal> = (0..100)
            .filter(|n| n % 3 == 0)
            .map(|n| (n, Refusal::Always))
            .collect();
        let p = program(&refused, refuse, allow);
        for nr in 0..400 {
            let want = if nr < 100 && nr % 3 == 0 {
                refuse
            } else {
                allow
            };
            assert_eq!(run(&p, nr, 0, [0; 6]), want, "nr {nr}");
        }
    }

    #[test]
    fn conditions_and_within_a_rule_or_across_rules() {
        let refused = BTreeMap::from([(
            7,
            Refusal::AnyOf(vec![
                vec![c(1, 0x800, 0x800, false)],
                vec![c(0, u32::MAX, 2, false), c(1, u32::MAX, 1, true)],
            ]),
        )]);
        let p = program(&refused, 1, 2);
        assert_eq!(run(&p, 7, 0, [0, 0x800, 0, 0, 0, 0]), 1);
        assert_eq!(run(&p, 7, 0, [0, 0x7ff, 0, 0, 0, 0]), 2);
        assert_eq!(run(&p, 7, 0, [2, 5, 0, 0, 0, 0]), 1);
        assert_eq!(run(&p, 7, 0, [2, 1, 0, 0, 0, 0]), 2);
        // The low 32 bits only, as seccompiler's Dword comparisons.
        assert_eq!(run(&p, 7, 0, [(1 << 32) | 2, 5, 0, 0, 0, 0]), 1);
        assert_eq!(run(&p, 8, 0, [0, 0x800, 0, 0, 0, 0]), 2);
    }

    #[test]
    fn one_bit_rules_on_an_argument_are_one_test() {
        let refused = BTreeMap::from([(
            90,
            Refusal::AnyOf(vec![
                vec![c(1, 0x800, 0x800, false)],
                vec![c(1, 0x400, 0x400, false)],
                vec![c(0, 0x3, 0x3, false)],
            ]),
        )]);
        let p = program(&refused, 1, 2);
        assert_eq!(p.iter().filter(|i| i.code == JSET_K).count(), 1);
        for (mode, want) in [
            (0o4755, 1),
            (0o2755, 1),
            (0o6755, 1),
            (0o1777, 2),
            (0o755, 2),
        ] {
            assert_eq!(run(&p, 90, 0, [0, mode, 0, 0, 0, 0]), want, "{mode:o}");
        }
        assert_eq!(run(&p, 90, 0, [3, 0, 0, 0, 0, 0]), 1);
        assert_eq!(run(&p, 90, 0, [1, 0, 0, 0, 0, 0]), 2);
    }

    #[test]
    fn a_masked_value_is_compared_masked_and_odd_rules_are_refused() {
        let refused = BTreeMap::from([(5, Refusal::AnyOf(vec![vec![c(0, 0xf, 0x12, false)]]))]);
        let p = program(&refused, 1, 2);
        // As seccompiler: (arg & 0xf) == (0x12 & 0xf).
        assert_eq!(run(&p, 5, 0, [2, 0, 0, 0, 0, 0]), 1);
        assert_eq!(run(&p, 5, 0, [0x12, 0, 0, 0, 0, 0]), 1);
        assert_eq!(run(&p, 5, 0, [3, 0, 0, 0, 0, 0]), 2);
        let one = |conds: Vec<Cond>| BTreeMap::from([(9, Refusal::AnyOf(vec![conds]))]);
        assert_eq!(
            compile(&one(vec![]), 1, 2).unwrap_err(),
            CompileError::EmptyRule { nr: 9 }
        );
        assert_eq!(
            compile(&one(vec![c(6, u32::MAX, 0, false)]), 1, 2).unwrap_err(),
            CompileError::NoSuchArgument { nr: 9, arg: 6 }
        );
        assert_eq!(
            compile(&one(vec![c(0, 0xf, 1, true)]), 1, 2).unwrap_err(),
            CompileError::MaskedInequality { nr: 9 }
        );
    }

    #[test]
    fn a_left_side_longer_than_a_jump_goes_over_a_ja() {
        let rule = vec![c(2, 0x400, 0x400, false); 20];
        let refused: BTreeMap<u32, Refusal> = (0..40)
            .map(|n| (n, Refusal::AnyOf(vec![rule.clone()])))
            .collect();
        let p = program(&refused, 1, 2);
        assert!(p.iter().any(|i| i.code == JA));
        for nr in 0..45 {
            let want = if nr < 40 { 1 } else { 2 };
            assert_eq!(run(&p, nr, 0, [0, 0, 0x400, 0, 0, 0]), want, "nr {nr}");
            assert_eq!(run(&p, nr, 0, [0; 6]), 2, "nr {nr}");
        }
    }
}
