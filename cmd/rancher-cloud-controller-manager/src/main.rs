//! `rancher-cloud-controller-manager`: the CCM for Rancher 1.x, configured
//! as upstream's by `CATTLE_URL`, `CATTLE_ACCESS_KEY` and `CATTLE_SECRET_KEY`.

#[cfg(not(feature = "rancher"))]
compile_error!("build with the `rancher` feature: it selects this binary's provider");

fn main() -> std::process::ExitCode {
    ccm_app::run::<ccm_provider_rancher::RancherProviderFactory>()
}
