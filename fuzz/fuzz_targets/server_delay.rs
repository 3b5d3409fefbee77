//! libFuzzer entry for `fuzz_targets::server_delay`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::server_delay(data));
