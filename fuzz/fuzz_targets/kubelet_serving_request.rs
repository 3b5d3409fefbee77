//! libFuzzer entry for `ccm_fuzz_targets::kubelet_serving_request`; with
//! `CCM_FUZZ_GO_REFEREE=1` every request the approver would judge is read by
//! Go too.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccm_fuzz_targets::kubelet_serving_request(data));
