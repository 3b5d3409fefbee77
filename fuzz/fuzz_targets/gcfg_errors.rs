//! libFuzzer entry for `ccm_fuzz_targets::gcfg_errors`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccm_fuzz_targets::gcfg_errors(data));
