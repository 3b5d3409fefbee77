//! libFuzzer entry for `fuzz_targets::admission_review`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::admission_review(data));
