//! A Service checked as `ensure_load_balancer` checks it, with no API
//! call: for the fuzz targets, which reach every parser and the request
//! builder from a Service alone.

use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_cloud_provider::{CloudError, LoadBalancerWarning, default_load_balancer_name};

use super::request::{Placement, Plan};
use super::{options, shape, warnings};
use crate::config::LoadBalancerType;

/// Checks `service` as `ensure_load_balancer` does before its first API
/// call, for a new load balancer of type `default_type` when the Service
/// names none, builds the body that would create it and returns the
/// Warnings the Service would get. For the fuzz targets
/// (`testing/fuzz-targets`): not an API.
///
/// # Errors
/// `CloudError::InvalidInput` naming the first malformed annotation or field.
#[doc(hidden)]
pub fn check_service(
    service: &Service,
    default_type: LoadBalancerType,
) -> Result<Vec<LoadBalancerWarning>, CloudError> {
    if options::is_disowned(service)? {
        return Ok(Vec::new());
    }
    let options = options::parse(service)?;
    let shape = shape::resolve(&options, None, default_type, &[])?;
    let name = options
        .identity
        .custom_name
        .clone()
        .unwrap_or_else(|| default_load_balancer_name(service));
    let certificate = options
        .certificate_id
        .clone()
        .or_else(|| options.certificate_name.clone());
    let plan = Plan::new(service, name, options, shape, certificate.as_deref())?;
    let placement = Placement {
        region: "nyc3",
        vpc_uuid: None,
    };
    plan.request(Vec::new(), &placement, Vec::new(), true);
    Ok(warnings::of(service, shape.kind))
}
