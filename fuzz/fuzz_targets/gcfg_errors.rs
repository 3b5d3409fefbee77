//! libFuzzer entry for `fuzz_targets::gcfg_errors`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::gcfg_errors(data));
