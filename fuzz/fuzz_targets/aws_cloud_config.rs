//! libFuzzer entry for `fuzz_targets::aws_cloud_config`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::aws_cloud_config(data));
