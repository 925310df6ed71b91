//! The name validator never panics and accepts exactly `[a-z0-9][a-z0-9-]{0,62}`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fn spec(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

fuzz_target!(|data: &[u8]| {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    assert_eq!(warren::names::problem(name).is_none(), spec(name), "{name:?}");
    assert_eq!(warren::names::zone(name).is_ok(), spec(name));
});
