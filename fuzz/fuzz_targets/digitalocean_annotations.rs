//! libFuzzer entry for `ccm_fuzz_targets::digitalocean_annotations`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccm_fuzz_targets::digitalocean_annotations(data));
