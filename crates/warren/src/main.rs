//! The `warren` binary. When started as `warren-init` (a zone's PID 1) it runs the
//! tiny init and nothing else; otherwise the command line.

fn main() {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let name = std::path::Path::new(&argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name == warren::runtime::init::ARGV0 {
        warren::runtime::init::main();
    }
    std::process::exit(warren::cli::main());
}
