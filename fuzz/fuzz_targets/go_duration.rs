//! libFuzzer entry for `fuzz_targets::go_duration`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::go_duration(data));
