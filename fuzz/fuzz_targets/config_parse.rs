//! The zonecfg parser never panics, and whatever it accepts survives a round trip
//! through its own TOML form unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cfg) = warren::config::parse("fuzz", text) {
        let again = warren::config::parse("fuzz", &warren::config::to_toml(&cfg))
            .expect("a config warren wrote must parse");
        assert_eq!(cfg, again);
        let _ = warren::config::check_host("fuzz", &cfg, &[0, 1]);
    }
    // --set values go through the same parser.
    let _ = warren::config::parse_assignment("fuzz", text);
});
