//! libFuzzer entry for `fuzz_targets::label_selector`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::label_selector(data));
