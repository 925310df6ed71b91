//! Link `containerd-shim-warren-v1` as a plain static executable (not static-pie), as
//! `warren-init` is (crates/warren/build.rs): a static-pie relocates itself at start,
//! writing to its GOT and `.data.rel.ro` (~330 KiB in this binary), so every shim —
//! one per pod — held that much private anonymous memory, 40% of its own. Linked
//! without PIE there is nothing to relocate and those pages stay file-backed, one copy
//! for every shim in the page cache. The code is still compiled position-independent;
//! only the link differs. The image's address is then fixed, as it is for
//! containerd's Go shims (Go links non-PIE by default on linux/amd64); the stack,
//! heap and mappings are still randomised. docs/kubernetes.md, "Memory beyond the
//! containers", has the numbers.

include!("../../build-support/no_pie.rs");

fn main() {
    link_without_pie("containerd-shim-warren-v1");
}
