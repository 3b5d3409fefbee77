//! libFuzzer entry for `fuzz_targets::digitalocean_annotations`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::digitalocean_annotations(data));
