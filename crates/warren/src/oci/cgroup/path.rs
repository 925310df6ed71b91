//! `linux.cgroupsPath` → a cgroup [`Place`] (pure): as the runtime spec and runc read
//! it, in its systemd form with `--systemd-cgroup`, or nested beneath the runtime's own
//! cgroup with `--cgroup-nest` (see [`super`]).

use std::path::{Path, PathBuf};

use crate::cgroups::Place;

/// The group all nested containers' cgroups live in, beneath the runtime's own cgroup.
pub const GROUP: &str = "warren-oci";

/// The global flag that turns nesting on (`warren oci --cgroup-nest create ...`;
/// podman: `--runtime-flag cgroup-nest`).
pub const NEST_FLAG: &str = "--cgroup-nest";

/// The environment variable that turns nesting on (`1`/`true`), for callers that pass
/// no flags of their own: containerd's runc shim runs the runtime with containerd's
/// environment.
pub const NEST_ENV: &str = "WARREN_OCI_CGROUP_NEST";

/// The directories of a systemd slice, as systemd lays them out (`a-b.slice` is
/// `a.slice/a-b.slice`; `-.slice` is the root).
fn expand_slice(slice: &str) -> std::result::Result<Vec<String>, String> {
    let bad = || {
        format!("linux.cgroupsPath slice {slice:?}: expected a systemd slice name such as \"system.slice\" or \"kubepods-besteffort.slice\"")
    };
    let name = slice
        .strip_suffix(".slice")
        .filter(|n| !n.is_empty() && !slice.contains('/'))
        .ok_or_else(bad)?;
    if name == "-" {
        return Ok(Vec::new());
    }
    let mut dirs = Vec::new();
    let mut prefix = String::new();
    for part in name.split('-') {
        if part.is_empty() {
            return Err(bad());
        }
        dirs.push(format!("{prefix}{part}.slice"));
        prefix.push_str(part);
        prefix.push('-');
    }
    Ok(dirs)
}

/// The cgroupfs path of the systemd form `slice:prefix:name` (absolute).
fn systemd_path(path: &str) -> std::result::Result<Vec<String>, String> {
    let parts: Vec<&str> = path.split(':').collect();
    let [slice, prefix, name] = parts.as_slice() else {
        return Err(format!(
            "linux.cgroupsPath {path:?}: with --systemd-cgroup it must be \"slice:prefix:name\", e.g. \"system.slice:runc:c1\""
        ));
    };
    if name.is_empty() || name.contains('/') {
        return Err(format!(
            "linux.cgroupsPath {path:?}: the name after the last ':' must be a non-empty unit name"
        ));
    }
    let mut dirs = expand_slice(if slice.is_empty() {
        "system.slice"
    } else {
        slice
    })?;
    // As runc: a name that is a slice is the unit itself, anything else a scope.
    dirs.push(if name.ends_with(".slice") {
        name.to_string()
    } else {
        format!("{prefix}-{name}.scope")
    });
    Ok(dirs)
}

/// The components of `path` cleaned as runc cleans it: empty parts and `.` dropped,
/// `..` taking the previous part away but never climbing above the start.
fn clean(path: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p.to_string()),
        }
    }
    parts
}

/// Where the container `id`'s cgroups go (pure): `cgroups_path` as the runtime spec
/// reads it, in its systemd form with `systemd`, or beneath [`GROUP`] with `nest`.
pub fn place(
    cgroups_path: Option<&str>,
    id: &str,
    systemd: bool,
    nest: bool,
) -> std::result::Result<Place, String> {
    let given = cgroups_path.filter(|p| !p.is_empty());
    let (absolute, parts) = match given {
        None if systemd => (true, systemd_path(&format!("system.slice:runc:{id}"))?),
        None => (false, vec![id.to_string()]),
        Some(p) if systemd => (true, systemd_path(p)?),
        Some(p) => (p.starts_with('/'), clean(p)),
    };
    if parts.is_empty() {
        let which = if absolute {
            "the root cgroup"
        } else {
            "the runtime's own cgroup"
        };
        return Err(format!(
            "linux.cgroupsPath {:?} names {which} itself; name a cgroup for the container, such as \"/mygroup/{id}\"",
            given.unwrap_or_default()
        ));
    }
    let rel: PathBuf = parts.iter().collect();
    Ok(if nest {
        Place::FromOwn(Path::new(GROUP).join(rel))
    } else if absolute {
        Place::FromRoot(rel)
    } else {
        Place::FromOwn(rel)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_root(p: &str) -> Place {
        Place::FromRoot(p.into())
    }
    fn from_own(p: &str) -> Place {
        Place::FromOwn(p.into())
    }

    #[test]
    fn cgroups_path_is_read_as_the_runtime_spec_says() {
        // Absolute: from the root, kept as given (podman: <parent>/libpod-<id>;
        // containerd: /<namespace>/<id>).
        assert_eq!(
            place(Some("/t/sub/libpod-abc"), "abc", false, false),
            Ok(from_root("t/sub/libpod-abc"))
        );
        assert_eq!(
            place(Some("/default/c1"), "c1", false, false),
            Ok(from_root("default/c1"))
        );
        // Relative: beneath the runtime's own cgroup.
        assert_eq!(
            place(Some("pods/c1"), "c1", false, false),
            Ok(from_own("pods/c1"))
        );
        // None: runc's default, <own>/<id>.
        assert_eq!(place(None, "c1", false, false), Ok(from_own("c1")));
        assert_eq!(place(Some(""), "c1", false, false), Ok(from_own("c1")));
        // Cleaned as runc cleans: never above the anchor.
        assert_eq!(
            place(Some("/a//./b/../c"), "c", false, false),
            Ok(from_root("a/c"))
        );
        assert_eq!(place(Some("../../x"), "c", false, false), Ok(from_own("x")));
        // A name with spaces or colons is a name.
        assert_eq!(
            place(Some("/a b/m:n"), "c", false, false),
            Ok(from_root("a b/m:n"))
        );
        // The root or our own cgroup itself: refused, with the fix.
        let e = place(Some("/"), "c1", false, false).unwrap_err();
        assert!(
            e.contains("the root cgroup") && e.contains("/mygroup/c1"),
            "{e}"
        );
        let e = place(Some("a/.."), "c1", false, false).unwrap_err();
        assert!(e.contains("the runtime's own cgroup"), "{e}");
    }

    #[test]
    fn systemd_form_becomes_the_slice_path_and_a_scope() {
        assert_eq!(
            place(Some("machine.slice:libpod:abc"), "abc", true, false),
            Ok(from_root("machine.slice/libpod-abc.scope"))
        );
        assert_eq!(
            place(
                Some("kubepods-besteffort-pod1.slice:cri-containerd:c1"),
                "c1",
                true,
                false
            ),
            Ok(from_root(
                "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-c1.scope"
            ))
        );
        assert_eq!(
            place(Some(":runc:c1"), "c1", true, false),
            Ok(from_root("system.slice/runc-c1.scope"))
        );
        assert_eq!(
            place(None, "c1", true, false),
            Ok(from_root("system.slice/runc-c1.scope"))
        );
        assert_eq!(
            place(Some("-.slice:x:my.slice"), "c1", true, false),
            Ok(from_root("my.slice"))
        );
        for bad in [
            "/a/b",
            "a:b",
            "system:runc:c1",
            "a--b.slice:x:y",
            "a.slice:x:",
        ] {
            assert!(place(Some(bad), "c1", true, false).is_err(), "{bad}");
        }
        // Without --systemd-cgroup a colon is part of a name, as in runc.
        assert_eq!(
            place(Some("machine.slice:libpod:abc"), "abc", false, false),
            Ok(from_own("machine.slice:libpod:abc"))
        );
    }

    #[test]
    fn nesting_keeps_the_path_beneath_the_group() {
        assert_eq!(
            place(Some("/default/c1"), "c1", false, true),
            Ok(from_own("warren-oci/default/c1"))
        );
        assert_eq!(
            place(Some("pods/c1"), "c1", false, true),
            Ok(from_own("warren-oci/pods/c1"))
        );
        assert_eq!(
            place(None, "c1", false, true),
            Ok(from_own("warren-oci/c1"))
        );
        assert_eq!(
            place(Some("machine.slice:libpod:abc"), "abc", true, true),
            Ok(from_own("warren-oci/machine.slice/libpod-abc.scope"))
        );
    }
}
