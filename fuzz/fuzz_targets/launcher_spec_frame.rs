//! The sandbox launcher's spec frame (crates/sandbox/src/launcher.rs,
//! `read_spec_frame`): what the launcher reads on its stdin before it sets
//! anything up, 8 hexadecimal digits of length, then a `LaunchSpec` as
//! JSON.
//!
//! Input: the bytes on the launcher's stdin.
//!
//! Properties: no panic; a frame is read only when its length is 8
//! hexadecimal digits within `MAX_SPEC_BYTES`, and exactly its bytes are
//! consumed (what follows, the engine's go, is left for the shell's
//! process); a spec read is framed again (`spec_frame`) and read back the
//! same.
#![no_main]

use codemode::sandbox::launcher::{MAX_SPEC_BYTES, read_spec_frame, spec_frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = std::io::Cursor::new(data);
    let Ok(spec) = read_spec_frame(&mut input) else { return };
    let digits = std::str::from_utf8(&data[..8]).expect("the length was read as text");
    let length = usize::from_str_radix(digits, 16).expect("the length was read as a number");
    assert!(length <= MAX_SPEC_BYTES, "a spec of {length} bytes was read");
    assert_eq!(input.position() as usize, 8 + length, "the frame's bytes only are consumed");
    // Read from JSON, its paths are UTF-8: it frames again.
    let again = spec_frame(&spec).expect("a spec read from JSON frames again");
    let back = read_spec_frame(&mut std::io::Cursor::new(&again)).expect("a framed spec reads");
    assert_eq!(
        serde_json::to_value(&back).expect("the spec serialises"),
        serde_json::to_value(&spec).expect("the spec serialises"),
        "a spec framed again reads back the same"
    );
});
