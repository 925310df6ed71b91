//! Link `warren-init` as a plain static executable (not static-pie): a static-pie
//! relocates itself at start, which writes to its GOT and `.data.rel.ro` pages and so
//! turns ~40 KiB of shared, file-backed pages into private memory in *every* zone. The
//! code is still compiled position-independent; only the link differs, so it needs no
//! other flag. `warren` itself stays a static-pie (its address randomised).
//!
//! With a static C runtime on x86_64 or aarch64 Linux, `warren-init` also starts at its
//! own entry point (`--entry=warren_init_start`, and `cfg(bare_start)` for its source)
//! instead of the C runtime's `_start`: no C library or Rust start-up runs in a zone's
//! PID 1. docs/scaling.md, "warren-init", has the numbers.

include!("../../build-support/no_pie.rs");

fn main() {
    println!("cargo:rustc-check-cfg=cfg(bare_start)");
    if link_without_pie("warren-init") {
        let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
        if arch == "x86_64" || arch == "aarch64" {
            println!("cargo:rustc-cfg=bare_start");
            println!("cargo:rustc-link-arg-bin=warren-init=-Wl,--entry=warren_init_start");
        }
    }
}
