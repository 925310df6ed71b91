// Included by the build scripts of crates/warren (for warren-init) and
// crates/containerd-shim-warren (for containerd-shim-warren-v1): one way to link a
// binary as a plain static executable instead of a static-pie. Why, per binary, in
// each build.rs.

/// Link binary `bin` of this crate with `-no-pie -static` when the target is
/// linux-gnu with a static C runtime (`crt-static`, as .cargo/config.toml sets);
/// whether it did.
fn link_without_pie(bin: &str) -> bool {
    let target = std::env::var("TARGET").unwrap_or_default();
    let static_crt = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .unwrap_or_default()
        .split(',')
        .any(|f| f == "crt-static");
    if target.contains("linux-gnu") && static_crt {
        println!("cargo:rustc-link-arg-bin={bin}=-no-pie");
        println!("cargo:rustc-link-arg-bin={bin}=-static");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../../build-support/no_pie.rs");
    target.contains("linux-gnu") && static_crt
}
