//! Link `warren-init` as a plain static executable (not static-pie): a static-pie
//! relocates itself at start, which writes to its GOT and `.data.rel.ro` pages and so
//! turns ~40 KiB of shared, file-backed pages into private memory in *every* zone. The
//! code is still compiled position-independent; only the link differs, so it needs no
//! other flag. `warren` itself stays a static-pie (its address randomised).
//! docs/scaling.md, "warren-init", has the numbers.

include!("../../build-support/no_pie.rs");

fn main() {
    link_without_pie("warren-init");
}
