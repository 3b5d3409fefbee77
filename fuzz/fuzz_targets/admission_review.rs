//! libFuzzer entry for `ccm_fuzz_targets::admission_review`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccm_fuzz_targets::admission_review(data));
