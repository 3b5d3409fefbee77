//! libFuzzer entry for `ccm_fuzz_targets::fake_cloud_config`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccm_fuzz_targets::fake_cloud_config(data));
