//! The release binary is linked with identical code folding: one copy of
//! each function whose machine code is the same as another's (Rust makes
//! many: the drop glue and the generic code of types laid out alike). It
//! is what quorum copies to every host an agent runs on, so its size is
//! paid on the wire too (docs/development.md has the figures).
//!
//! Only where the linker is known to be LLD, which takes `--icf`: rustc's
//! own on x86_64 Linux from 1.90 on, when no other linker is set. Any
//! other build links as it always did.

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    if env::var("PROFILE").as_deref() == Ok("release") && links_with_rust_lld() {
        println!("cargo:rustc-link-arg-bins=-Wl,--icf=all");
    }
}

/// Whether the final link is rustc's own LLD: its default on x86_64
/// Linux from 1.90, unless a linker (or linker flavour) is chosen.
fn links_with_rust_lld() -> bool {
    if env::var("TARGET").as_deref() != Ok("x86_64-unknown-linux-gnu") {
        return false;
    }
    if env::var_os("RUSTC_LINKER").is_some() {
        return false;
    }
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let chosen = ["linker", "link-self-contained", "fuse-ld", "link-arg"];
    if chosen.iter().any(|c| flags.contains(c)) {
        return false;
    }
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = Command::new(rustc).arg("--version").output() else {
        return false;
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let version = String::from_utf8_lossy(&out.stdout);
    let minor = version
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').nth(1))
        .and_then(|m| m.parse::<u32>().ok());
    minor.is_some_and(|m| m >= 90)
}
