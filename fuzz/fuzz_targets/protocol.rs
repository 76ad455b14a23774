//! RESP decoder + command parser (+ engine) on arbitrary bytes.
//! The properties live in `solid_engine::fuzzing::check`, shared with the
//! stable-Rust fallback fuzzer.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    solid_engine::fuzzing::check(data);
});
