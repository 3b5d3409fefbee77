//! libFuzzer entry for `fuzz_targets::flags`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::flags(data));
