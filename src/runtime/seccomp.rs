//! The sandbox's seccomp filter: what a sandboxed process may not ask the
//! kernel for, whatever it can see. Compiled to BPF here (`seccompiler`)
//! and handed to bubblewrap (`--seccomp FD`), which installs it on the
//! command just before it runs, as codex's Linux sandbox does.
//!
//! Refused, with `EPERM`:
//! - `socket(AF_UNIX, …)`: a Unix socket reaches past every mount and
//!   network namespace (systemd's user manager, D-Bus, ssh-agent,
//!   gpg-agent, docker, a tmux server, and abstract sockets, which belong
//!   to the network namespace an agent shares to reach its model). A
//!   `socketpair` (a private pair, connected to nothing) stays, as in
//!   Anthropic's sandbox-runtime. An agent given `unix_sockets` gets a
//!   filter without this rule ([`Filter::unix_sockets`]).
//! - `ptrace`, `process_vm_readv`, `process_vm_writev`: reading or
//!   steering another process.
//! - `keyctl`, `add_key`, `request_key`: the kernel keyrings, which hold
//!   credentials of the person's session.
//! - `bpf`, `perf_event_open`, `userfaultfd`: kernel surfaces no agent's
//!   work needs.
//! - new user namespaces: `unshare` and `clone` with `CLONE_NEWUSER` (a way
//!   to gain capabilities inside, and the kernel's largest attack surface
//!   for an unprivileged process); `clone3`, whose flags live in memory a
//!   filter cannot read, answers `ENOSYS`, so the C library falls back to
//!   `clone`, whose flags it can. An agent whose own sandbox nests
//!   bubblewrap (codex's) is allowed them by `user_namespaces = true`
//!   ([`Filter::user_namespaces`]): the mounts it inherits stay locked in
//!   the namespaces it makes, and the rest of this filter goes with it.
//!
//! On x86_64 the x32 numbers of the same calls are refused too. A process
//! of another architecture (a 32-bit program through `int 0x80`) is killed
//! by the filter's first check. Where no filter can be built (another
//! architecture than x86_64 and aarch64, or not Linux) [`program`] says
//! so, and the sandbox says so in the box: it never pretends.

use std::collections::BTreeMap;

/// Which filter a sandboxed process gets: everything above refused
/// ([`Filter::default`]), but what it is allowed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Filter {
    /// `socket(AF_UNIX)` allowed: for a process given Unix sockets by
    /// name (`unix_sockets`), whose mounts then decide which it can reach.
    pub unix_sockets: bool,
    /// New user namespaces allowed (`user_namespaces`): for an agent
    /// whose own sandbox makes them.
    pub user_namespaces: bool,
}

/// Why there is no filter here.
#[derive(Debug, Clone, thiserror::Error)]
#[error("no seccomp filter on this machine ({0}): sandboxed commands may open Unix sockets")]
pub struct Unavailable(pub String);

/// The filter as the raw BPF program bubblewrap reads (`struct
/// sock_filter` entries, 8 bytes each, in the machine's byte order).
pub fn program(filter: Filter) -> Result<Vec<u8>, Unavailable> {
    imp::program(filter)
}

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod imp {
    use super::*;
    use nix::libc;
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    /// The x32 ABI's syscall numbers on x86_64: the same calls with this
    /// bit set, under the same audit architecture.
    #[cfg(target_arch = "x86_64")]
    const X32: i64 = 0x4000_0000;

    fn arch() -> TargetArch {
        #[cfg(target_arch = "x86_64")]
        {
            TargetArch::x86_64
        }
        #[cfg(target_arch = "aarch64")]
        {
            TargetArch::aarch64
        }
    }

    /// A rule that holds when argument `arg` has all of `bits` set.
    fn has_bits(arg: u8, bits: u64) -> Result<SeccompRule, seccompiler::BackendError> {
        SeccompRule::new(vec![SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(bits),
            bits,
        )?])
    }

    fn rules(filter: Filter) -> Result<BTreeMap<i64, Vec<SeccompRule>>, seccompiler::BackendError> {
        let mut refused: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        // Refused outright (an empty chain matches every call).
        for nr in [
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_bpf,
            libc::SYS_perf_event_open,
            libc::SYS_userfaultfd,
        ] {
            refused.insert(nr, Vec::new());
        }
        if !filter.user_namespaces {
            let newuser = libc::CLONE_NEWUSER as u64;
            refused.insert(libc::SYS_unshare, vec![has_bits(0, newuser)?]);
            // x86_64 and aarch64 alike take clone's flags first.
            refused.insert(libc::SYS_clone, vec![has_bits(0, newuser)?]);
        }
        if !filter.unix_sockets {
            refused.insert(
                libc::SYS_socket,
                vec![SeccompRule::new(vec![SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    libc::AF_UNIX as u64,
                )?])?],
            );
        }
        #[cfg(target_arch = "x86_64")]
        {
            let x32: Vec<(i64, Vec<SeccompRule>)> = refused
                .iter()
                .map(|(nr, chain)| (nr | X32, chain.clone()))
                .collect();
            refused.extend(x32);
        }
        Ok(refused)
    }

    pub(super) fn program(filter: Filter) -> Result<Vec<u8>, Unavailable> {
        let bad = |e: &dyn std::fmt::Display| Unavailable(e.to_string());
        let refused = rules(filter).map_err(|e| bad(&e))?;
        let eperm = SeccompAction::Errno(libc::EPERM as u32);
        let main: BpfProgram = SeccompFilter::new(refused, SeccompAction::Allow, eperm, arch())
            .map_err(|e| bad(&e))?
            .try_into()
            .map_err(|e: seccompiler::BackendError| bad(&e))?;
        // clone3 alone answers ENOSYS (the C library then uses clone):
        // one filter has one action for its matches, so it is a second,
        // checked first by the kernel (filters run newest first, and the
        // strictest answer wins; both allow everything else).
        let mut clone3 = BTreeMap::new();
        if !filter.user_namespaces {
            clone3.insert(libc::SYS_clone3, Vec::new());
            #[cfg(target_arch = "x86_64")]
            clone3.insert(libc::SYS_clone3 | X32, Vec::new());
        }
        let enosys = SeccompAction::Errno(libc::ENOSYS as u32);
        let clone3: BpfProgram = SeccompFilter::new(clone3, SeccompAction::Allow, enosys, arch())
            .map_err(|e| bad(&e))?
            .try_into()
            .map_err(|e: seccompiler::BackendError| bad(&e))?;
        Ok(join(&main, &clone3))
    }

    /// One program from two whose only non-allowing answers differ: the
    /// second's checks run first, and where it would allow, the first's
    /// run. Each program ends every path with a `RET`; the second's
    /// `RET ALLOW`s become jumps to the start of the first.
    fn join(first: &BpfProgram, second: &BpfProgram) -> Vec<u8> {
        const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
        const BPF_JA: u16 = 0x05; // BPF_JMP | BPF_JA
        const ALLOW: u32 = 0x7fff_0000; // SECCOMP_RET_ALLOW
        let mut out = Vec::with_capacity((first.len() + second.len()) * 8);
        let n = second.len();
        for (i, ins) in second.iter().enumerate() {
            let (code, k) = if ins.code == BPF_RET_K && ins.k == ALLOW {
                // Jump to the first program, just past this one's end.
                (BPF_JA, (n - i - 1) as u32)
            } else {
                (ins.code, ins.k)
            };
            push(&mut out, code, ins.jt, ins.jf, k);
        }
        for ins in first {
            push(&mut out, ins.code, ins.jt, ins.jf, ins.k);
        }
        out
    }

    fn push(out: &mut Vec<u8>, code: u16, jt: u8, jf: u8, k: u32) {
        out.extend_from_slice(&code.to_ne_bytes());
        out.push(jt);
        out.push(jf);
        out.extend_from_slice(&k.to_ne_bytes());
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
mod imp {
    use super::*;

    pub(super) fn program(_: Filter) -> Result<Vec<u8>, Unavailable> {
        Err(Unavailable(format!(
            "{} on {} has none built in",
            std::env::consts::OS,
            std::env::consts::ARCH
        )))
    }
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// The program is whole instructions, and the strict one is longer by
    /// the rules the others leave out.
    #[test]
    fn the_strict_filter_refuses_more_than_the_others() {
        let strict = program(Filter::default()).unwrap();
        assert_eq!(strict.len() % 8, 0);
        assert!(strict.len() / 8 < 4096, "BPF programs hold 4096 at most");
        for allowed in [
            Filter {
                unix_sockets: true,
                user_namespaces: false,
            },
            Filter {
                unix_sockets: false,
                user_namespaces: true,
            },
        ] {
            let program = program(allowed).unwrap();
            assert_eq!(program.len() % 8, 0);
            assert!(strict.len() > program.len(), "{allowed:?}");
        }
    }
}
