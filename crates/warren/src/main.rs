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
    if name == warren::oci::cli::ARGV0 {
        std::process::exit(warren::oci::cli::main_with(std::env::args_os().collect()));
    }
    // `warren oci ...`: the same command line, named warren-oci in its help.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "oci") {
        args.remove(1);
        args[0] = "warren oci".into();
        std::process::exit(warren::oci::cli::main_with(args));
    }
    std::process::exit(warren::cli::main());
}
