//! The configuration file parser (crates/codemode/src/config/read.rs) and
//! rules (crates/codemode/src/rule.rs): `codemode.toml` text, then every
//! line as a rule, matched against itself.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = codemode::config::ConfigFile::from_toml(text, None);
    for line in text.lines() {
        if let Ok(rule) = codemode::policy::Rule::parse(line) {
            let shown = rule.to_string();
            // A rule's display parses back to the same rule.
            assert_eq!(codemode::policy::Rule::parse(&shown).as_ref(), Ok(&rule), "rule {line:?} shows as {shown:?}");
            let _ = rule.matches(&rule.tool, Some(line));
        }
    }
});
