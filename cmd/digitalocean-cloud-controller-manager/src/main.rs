//! `digitalocean-cloud-controller-manager`: the CCM for DigitalOcean droplets
//! and load balancers, configured through upstream's environment variables
//! (`DO_ACCESS_TOKEN`, `DO_OVERRIDE_URL`, `DO_CLUSTER_ID`, `REGION`...).

#[cfg(not(feature = "digitalocean"))]
compile_error!("build with the `digitalocean` feature: it selects this binary's provider");

fn main() -> std::process::ExitCode {
    ccm_app::run::<ccm_provider_digitalocean::DigitalOceanProviderFactory>()
}
