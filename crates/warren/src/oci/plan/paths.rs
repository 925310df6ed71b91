//! Paths inside a container's rootfs, resolved on the host before the clone.

use super::*;

/// `root` joined with the container path `path`, following symlinks as if `root`
/// were `/` (an absolute link restarts at `root`, `..` stops at it). Components that
/// do not exist yet are taken as they are.
pub fn secure_join(root: &Path, path: &Path) -> PathBuf {
    let mut todo: Vec<std::ffi::OsString> = path
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    let mut cur: Vec<std::ffi::OsString> = Vec::new();
    let mut links = 0;
    while let Some(part) = todo.pop() {
        if part == ".." {
            cur.pop();
            continue;
        }
        cur.push(part);
        let host: PathBuf = cur.iter().fold(root.to_path_buf(), |p, c| p.join(c));
        let Ok(target) = std::fs::read_link(&host) else {
            continue;
        };
        links += 1;
        if links > 40 {
            break;
        }
        cur.pop();
        if target.is_absolute() {
            cur.clear();
        }
        for c in target.components().rev() {
            match c {
                Component::Normal(n) => todo.push(n.to_os_string()),
                Component::ParentDir => todo.push("..".into()),
                _ => {}
            }
        }
    }
    cur.iter().fold(root.to_path_buf(), |p, c| p.join(c))
}

/// The mount point in `mountinfo` (the text of /proc/self/mountinfo) that holds
/// `path`: the longest one that is a prefix of it (pure).
pub fn mount_holding(mountinfo: &str, path: &Path) -> Option<PathBuf> {
    let unescape = |s: &str| {
        s.replace("\\040", " ")
            .replace("\\011", "\t")
            .replace("\\012", "\n")
            .replace("\\134", "\\")
    };
    mountinfo
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .map(|m| PathBuf::from(unescape(m)))
        .filter(|m| path.starts_with(m))
        .max_by_key(|m| m.as_os_str().len())
}

/// Find `program` the way execvp would, looking at paths inside `root`. Returns the
/// path as the container sees it.
pub fn resolve_exec(root: &Path, program: &str, path_env: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &str| {
        std::fs::metadata(secure_join(root, Path::new(p)))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(program).then(|| program.to_string());
    }
    path_env
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| format!("{}/{program}", d.trim_end_matches('/')))
        .find(|p| executable(p))
}
