//! libFuzzer entry for `ccm_fuzz_targets::strategic_merge_patch`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccm_fuzz_targets::strategic_merge_patch(data));
