//! Link `warren-init` as a plain static executable (not static-pie): a static-pie
//! relocates itself at start, which writes to its GOT and `.data.rel.ro` pages and so
//! turns ~40 KiB of shared, file-backed pages into private memory in *every* zone. The
//! code is still compiled position-independent; only the link differs, so it needs no
//! other flag. `warren` itself stays a static-pie (its address randomised).
//! docs/scaling.md, "warren-init", has the numbers.

fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    let static_crt = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .unwrap_or_default()
        .split(',')
        .any(|f| f == "crt-static");
    if target.contains("linux-gnu") && static_crt {
        println!("cargo:rustc-link-arg-bin=warren-init=-no-pie");
        println!("cargo:rustc-link-arg-bin=warren-init=-static");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
