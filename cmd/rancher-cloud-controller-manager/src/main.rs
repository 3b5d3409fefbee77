//! `rancher-cloud-controller-manager`: the CCM for Rancher, configured by
//! its `--cloud-config` file and `RANCHER_API_TOKEN`.

#[cfg(not(feature = "rancher"))]
compile_error!("build with the `rancher` feature: it selects this binary's provider");

fn main() -> std::process::ExitCode {
    ccm_app::run::<provider_rancher::RancherProviderFactory>()
}
