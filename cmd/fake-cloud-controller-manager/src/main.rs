//! `fake-cloud-controller-manager`: the CCM with the in-memory fake cloud.

#[cfg(not(feature = "fake"))]
compile_error!("build with the `fake` feature: it selects this binary's provider");

fn main() -> std::process::ExitCode {
    ccm_app::run::<ccm_provider_fake::FakeProviderFactory>()
}
