//! Syscall numbers by name for each [`Arch`], looked up by binary search in the
//! generated [`super::tables`] (scripts/gen-syscalls.sh; the tests below check them
//! against this machine's kernel headers).

use super::profile::Arch;
use super::tables;

/// The sorted (name, number) table of an architecture.
pub fn table(arch: Arch) -> &'static [(&'static str, u32)] {
    match arch {
        Arch::X86_64 => tables::X86_64,
        Arch::X86 => tables::I386,
        Arch::X32 => tables::X32,
    }
}

/// The number of `name` in `arch` (x32's with `X32_SYSCALL_BIT`), if it has the call.
pub fn number(arch: Arch, name: &str) -> Option<u32> {
    let t = table(arch);
    t.binary_search_by(|(n, _)| n.cmp(&name))
        .ok()
        .map(|i| t[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::seccomp::profile::X32_SYSCALL_BIT;

    const INCLUDE: &str = "/usr/include/x86_64-linux-gnu/asm";

    /// (name, number) of every `#define __NR_name nr` line of a kernel header, x32's
    /// `(__X32_SYSCALL_BIT + nr)` included.
    fn header(file: &str) -> Vec<(String, u32)> {
        let path = format!("{INCLUDE}/{file}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!("{path}: {e}: the table check needs the kernel headers (apt-get install linux-libc-dev)")
        });
        text.lines()
            .filter_map(|l| {
                let rest = l.strip_prefix("#define __NR_")?;
                let (name, value) = rest.split_once(' ')?;
                let value = value.trim_matches(|c| c == '(' || c == ')');
                let nr = match value.strip_prefix("__X32_SYSCALL_BIT + ") {
                    Some(n) => X32_SYSCALL_BIT + n.parse::<u32>().ok()?,
                    None => value.parse().ok()?,
                };
                Some((name.to_string(), nr))
            })
            .collect()
    }

    #[test]
    fn tables_are_sorted_unique_and_agree_with_the_kernel_headers() {
        for (arch, file, at_least) in [
            (Arch::X86_64, "unistd_64.h", 350),
            (Arch::X86, "unistd_32.h", 420),
            (Arch::X32, "unistd_x32.h", 340),
        ] {
            let t = table(arch);
            assert!(
                t.windows(2).all(|w| w[0].0 < w[1].0),
                "{arch:?}: not sorted"
            );
            let defs = header(file);
            assert!(
                defs.len() >= at_least,
                "{file}: only {} entries",
                defs.len()
            );
            for (name, nr) in &defs {
                assert_eq!(number(arch, name), Some(*nr), "{arch:?} {name} ({file})");
            }
            // What the table has beyond the header: only the newer calls of the script.
            for (name, nr) in t {
                if !defs.iter().any(|(n, _)| n == name) {
                    assert!(
                        nr & !X32_SYSCALL_BIT > 450,
                        "{arch:?} {name} {nr}: not in {file}"
                    );
                }
            }
        }
    }

    #[test]
    fn spot_checks_of_the_three_abis() {
        assert_eq!(number(Arch::X86_64, "read"), Some(0));
        assert_eq!(number(Arch::X86_64, "getpid"), Some(39));
        assert_eq!(number(Arch::X86_64, "kexec_load"), Some(246));
        assert_eq!(number(Arch::X86_64, "openat2"), Some(437));
        assert_eq!(number(Arch::X86_64, "mseal"), Some(462));
        assert_eq!(number(Arch::X86, "getpid"), Some(20));
        assert_eq!(number(Arch::X86, "socketcall"), Some(102));
        assert_eq!(number(Arch::X86_64, "socketcall"), None);
        assert_eq!(number(Arch::X32, "getpid"), Some(X32_SYSCALL_BIT | 39));
        // x32's own entry points for calls whose structures differ (512 and up).
        assert_eq!(
            number(Arch::X32, "rt_sigaction"),
            Some(X32_SYSCALL_BIT | 512)
        );
        assert_eq!(number(Arch::X86_64, "no_such_call"), None);
    }
}
