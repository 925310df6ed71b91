//! State files of any content give a value or a `Corrupt` error naming the file, never
//! a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("/var/lib/warren/zones/fuzz/state.json");
    match warren::state::parse_lifecycle(path, data) {
        Ok(lc) => assert!(lc.state <= warren::state::ZoneState::Installed),
        Err(e) => {
            assert!(matches!(e, warren::Error::Corrupt { .. }), "{e}");
            assert!(e.to_string().contains("state.json"));
        }
    }
    let _ = warren::state::parse_json::<warren::state::Runtime>(path, data);
});
