//! A Service checked as `ensure_load_balancer` checks it, with no API
//! call: for the provider's `check_service` and the fuzz targets, which
//! reach every annotation parser from a Service alone.

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;

use super::classic::ClassicSpec;
use super::spec::{Kind, LoadBalancerSpec, kind};

/// Reads and validates everything `service` asks of its load balancer, as
/// `ensure_load_balancer` does before its first call to AWS. For the fuzz
/// targets (`testing/fuzz-targets`): not an API.
///
/// # Errors
/// `CloudError::ImplementedElsewhere` for a Service another controller
/// owns; `CloudError::InvalidInput` naming the annotation or field at fault.
#[doc(hidden)]
pub fn check_service(service: &Service) -> Result<(), CloudError> {
    match kind(service)? {
        Kind::Network => LoadBalancerSpec::from_service(service).map(drop),
        Kind::Classic => ClassicSpec::under(service, None).map(drop),
    }
}
