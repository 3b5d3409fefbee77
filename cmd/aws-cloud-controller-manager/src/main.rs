//! `aws-cloud-controller-manager`: the CCM with the AWS provider (EC2
//! instances, VPC routes, Network Load Balancers). Flags are upstream's; the
//! cloud config is upstream's INI file (`--cloud-config`).

#[cfg(not(feature = "aws"))]
compile_error!("build with the `aws` feature: it selects this binary's provider");

fn main() -> std::process::ExitCode {
    ccm_app::run::<ccm_provider_aws::AwsProviderFactory>()
}
