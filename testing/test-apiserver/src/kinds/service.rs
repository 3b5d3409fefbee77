//! Services: decoding (`status.conditions` as Go reads them), the defaults
//! of `SetDefaults_Service`, and cluster IPs and node ports allocated as
//! kube-apiserver's allocators do (service CIDR 10.96.0.0/12, node ports
//! 30000-32767).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::validation::bad_value;

mod checks;
mod conditions;

const NODE_PORTS: std::ops::RangeInclusive<u16> = 30000..=32767;
/// 10.96.0.0/12; .1 is the `kubernetes` Service.
const SERVICE_CIDR_BASE: u32 = (10 << 24) | (96 << 16);
const SERVICE_CIDR_SIZE: u32 = 1 << 20;

/// The cluster IPs and node ports in use, kept in step with stored Services.
#[derive(Debug, Default)]
pub(crate) struct ServiceIndex {
    node_ports: BTreeMap<u16, u32>,
    cluster_ips: BTreeSet<u32>,
}

impl ServiceIndex {
    /// No allocations.
    pub(crate) const EMPTY: Self = Self {
        node_ports: BTreeMap::new(),
        cluster_ips: BTreeSet::new(),
    };

    /// Records what a stored Service holds.
    pub(crate) fn add(&mut self, service: &Value) {
        for port in node_ports_of(service) {
            *self.node_ports.entry(port).or_default() += 1;
        }
        if let Some(ip) = cluster_ip_of(service) {
            self.cluster_ips.insert(ip);
        }
    }

    /// Forgets what a Service that is replaced or removed held.
    pub(crate) fn release(&mut self, service: &Value) {
        for port in node_ports_of(service) {
            if let Some(count) = self.node_ports.get_mut(&port) {
                *count -= 1;
                if *count == 0 {
                    self.node_ports.remove(&port);
                }
            }
        }
        if let Some(ip) = cluster_ip_of(service) {
            self.cluster_ips.remove(&ip);
        }
    }

    fn free_node_port(&self, taken: &BTreeSet<u16>) -> Option<u16> {
        NODE_PORTS
            .clone()
            .find(|p| !self.node_ports.contains_key(p) && !taken.contains(p))
    }

    fn free_cluster_ip(&self) -> Option<u32> {
        (10..SERVICE_CIDR_SIZE - 1)
            .map(|offset| SERVICE_CIDR_BASE + offset)
            .find(|ip| !self.cluster_ips.contains(ip))
    }
}

fn node_ports_of(service: &Value) -> Vec<u16> {
    let mut ports: Vec<u16> = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort")?.as_u64()?.try_into().ok())
        .collect();
    if let Some(hc) = service
        .pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_u64)
    {
        ports.extend(u16::try_from(hc).ok());
    }
    ports.sort_unstable();
    ports.dedup();
    ports
}

fn cluster_ip_of(service: &Value) -> Option<u32> {
    let ip: std::net::Ipv4Addr = service.pointer("/spec/clusterIP")?.as_str()?.parse().ok()?;
    Some(u32::from(ip))
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

type Causes = Vec<(String, String)>;

/// Decodes a Service as kube-apiserver does: as its k8s-openapi type, but
/// `status.conditions` as Go reads `metav1.Condition`, whose fields
/// k8s-openapi requires and Go does not.
pub(crate) fn normalize(value: &Value) -> Result<Value, serde_json::Error> {
    if value.pointer("/status/conditions").is_none() {
        return super::roundtrip::<k8s_openapi::api::core::v1::Service>(value);
    }
    let mut value = value.clone();
    let taken = conditions::take(&mut value);
    let mut decoded = super::roundtrip::<k8s_openapi::api::core::v1::Service>(&value)?;
    if let Some(taken) = taken {
        conditions::restore(&mut decoded, taken)?;
    }
    Ok(decoded)
}

/// Applies defaults and allocations to a new or updated Service; `old` is
/// the stored version on update, whose allocations carry over.
pub(crate) fn prepare(
    service: &mut Value,
    old: Option<&Value>,
    index: &ServiceIndex,
) -> Result<(), Causes> {
    let mut causes = Causes::new();
    if !service.get("spec").is_some_and(Value::is_object) {
        service["spec"] = json!({});
    }
    let spec = &mut service["spec"];
    checks::check_type(spec, &mut causes);
    let service_type = str_at(spec, "/type").unwrap_or("ClusterIP").to_owned();
    spec["type"] = json!(service_type);
    default(spec, "sessionAffinity", json!("None"));
    let external = matches!(service_type.as_str(), "NodePort" | "LoadBalancer");
    if let Some(old_spec) = old.and_then(|o| o.get("spec")) {
        drop_type_dependent_fields(spec, old_spec, external, service_type == "LoadBalancer");
    }
    if service_type != "ExternalName" {
        default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if external {
        default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if service_type == "LoadBalancer" {
        default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut() {
            default(port, "protocol", json!("TCP"));
            if port
                .get("targetPort")
                .is_none_or(|t| t == &json!(0) || t == &json!(""))
            {
                port["targetPort"] = port.get("port").cloned().unwrap_or(json!(0));
            }
        }
    }
    checks::check_ports(spec, &mut causes);
    checks::check_traffic_policy(spec, &mut causes);
    checks::check_load_balancer_class(spec, old.and_then(|o| o.get("spec")), &mut causes);
    if !causes.is_empty() {
        return Err(causes);
    }
    let old_spec = old.and_then(|o| o.get("spec"));
    if service_type != "ExternalName" {
        assign_cluster_ip(spec, old_spec, index, &mut causes);
    }
    // kube-apiserver allocates node ports only once it has the cluster IP,
    // and stops at the first allocation that fails.
    if !causes.is_empty() {
        return Err(causes);
    }
    let needs_node_ports = service_type == "NodePort"
        || (service_type == "LoadBalancer"
            && spec.get("allocateLoadBalancerNodePorts") != Some(&json!(false)));
    assign_node_ports(
        spec,
        old_spec,
        index,
        needs_node_ports,
        &service_type,
        &mut causes,
    );
    if causes.is_empty() {
        Ok(())
    } else {
        Err(causes)
    }
}

fn default(obj: &mut Value, field: &str, value: Value) {
    if obj
        .get(field)
        .is_none_or(|v| v.is_null() || v == &json!(""))
    {
        obj[field] = value;
    }
}

/// When a Service stops being external, fields only external Services may
/// have are cleared if the update left them as they were.
fn drop_type_dependent_fields(spec: &mut Value, old: &Value, external: bool, load_balancer: bool) {
    let Some(map) = spec.as_object_mut() else {
        return;
    };
    let unchanged =
        |map: &serde_json::Map<String, Value>, field: &str| map.get(field) == old.get(field);
    if !external {
        for field in ["externalTrafficPolicy", "healthCheckNodePort"] {
            if unchanged(map, field) {
                map.remove(field);
            }
        }
        if old.get("ports") == map.get("ports")
            && let Some(ports) = map.get_mut("ports").and_then(Value::as_array_mut)
        {
            for port in ports {
                if let Some(p) = port.as_object_mut() {
                    p.remove("nodePort");
                }
            }
        }
    }
    if !load_balancer {
        for field in ["allocateLoadBalancerNodePorts", "loadBalancerClass"] {
            if unchanged(map, field) {
                map.remove(field);
            }
        }
    }
}

fn assign_cluster_ip(
    spec: &mut Value,
    old: Option<&Value>,
    index: &ServiceIndex,
    causes: &mut Causes,
) {
    let old_ip = old.and_then(|o| str_at(o, "/clusterIP")).map(str::to_owned);
    let new_ip = str_at(spec, "/clusterIP").map(str::to_owned);
    let ip = match (new_ip, old_ip) {
        (None, Some(old_ip)) => old_ip,
        (Some(new_ip), Some(old_ip)) if new_ip != old_ip => {
            causes.push((
                "spec.clusterIPs[0]".into(),
                format!(
                    "Invalid value: {}: may not change once set",
                    bad_value::strings(&[&new_ip])
                ),
            ));
            return;
        }
        (Some(new_ip), None) if new_ip != "None" && old.is_none() => {
            match new_ip.parse::<std::net::Ipv4Addr>() {
                Ok(addr) if index.cluster_ips.contains(&u32::from(addr)) => {
                    causes.push(("spec.clusterIPs".into(), format!("Invalid value: {}: failed to allocate IP {new_ip}: provided IP is already allocated", bad_value::strings(&[&new_ip]))));
                    return;
                }
                Ok(_) => new_ip,
                Err(_) => {
                    causes.push((
                        "spec.clusterIPs[0]".into(),
                        format!(
                            "Invalid value: {new_ip:?}: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
                        ),
                    ));
                    return;
                }
            }
        }
        (Some(new_ip), _) => new_ip,
        (None, None) => match index.free_cluster_ip() {
            Some(ip) => std::net::Ipv4Addr::from(ip).to_string(),
            None => {
                causes.push((
                    "spec.clusterIPs".into(),
                    "Internal error: range is full".into(),
                ));
                return;
            }
        },
    };
    spec["clusterIP"] = json!(ip);
    default(spec, "clusterIPs", json!([ip]));
    default(spec, "ipFamilies", json!(["IPv4"]));
    default(spec, "ipFamilyPolicy", json!("SingleStack"));
}

fn assign_node_ports(
    spec: &mut Value,
    old: Option<&Value>,
    index: &ServiceIndex,
    needed: bool,
    service_type: &str,
    causes: &mut Causes,
) {
    let old_ports: Vec<Value> = old
        .and_then(|o| o.get("ports"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let owned: BTreeSet<u16> = old
        .map(|o| node_ports_of(&json!({"spec": o})).into_iter().collect())
        .unwrap_or_default();
    let mut taken = BTreeSet::new();
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return;
    };
    for (i, port) in ports.iter_mut().enumerate() {
        let mut node_port = port
            .get("nodePort")
            .and_then(Value::as_u64)
            .filter(|p| *p != 0);
        if node_port.is_none() && needed {
            node_port = old_ports
                .iter()
                .find(|o| {
                    o.get("port") == port.get("port") && o.get("protocol") == port.get("protocol")
                })
                .and_then(|o| o.get("nodePort")?.as_u64());
        }
        let field = format!("spec.ports[{i}].nodePort");
        match node_port {
            Some(p) if !needed => causes.push((
                field,
                format!(
                    "Forbidden: may not be used when `type` is '{service_type}' (nodePort {p})"
                ),
            )),
            Some(p) => match u16::try_from(p).ok().filter(|p| NODE_PORTS.contains(p)) {
                None => {
                    causes.push((field, format!("Invalid value: {p}: provided port is not in the valid range. The range of valid ports is 30000-32767")));
                    return;
                }
                Some(p)
                    if index.node_ports.contains_key(&p)
                        && !owned.contains(&p)
                        && !taken.contains(&p) =>
                {
                    causes.push((
                        field,
                        format!("Invalid value: {p}: provided port is already allocated"),
                    ));
                    return;
                }
                Some(p) => {
                    taken.insert(p);
                    port["nodePort"] = json!(p);
                }
            },
            None if needed => match index.free_node_port(&taken) {
                Some(p) => {
                    taken.insert(p);
                    port["nodePort"] = json!(p);
                }
                None => {
                    causes.push((field, "Internal error: range is full".into()));
                    return;
                }
            },
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lb(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}})
    }

    #[test]
    fn load_balancers_get_defaults_a_cluster_ip_and_a_node_port() {
        let mut svc = lb("a");
        prepare(&mut svc, None, &ServiceIndex::default()).expect("valid");
        let spec = &svc["spec"];
        assert_eq!(spec["ports"][0]["protocol"], "TCP");
        assert_eq!(spec["ports"][0]["targetPort"], 80);
        assert_eq!(spec["ports"][0]["nodePort"], 30000);
        assert_eq!(spec["clusterIP"], "10.96.0.10");
        assert_eq!(spec["externalTrafficPolicy"], "Cluster");
        assert_eq!(spec["allocateLoadBalancerNodePorts"], true);
    }

    #[test]
    fn allocations_never_collide_and_taken_ports_are_refused() {
        let mut index = ServiceIndex::default();
        let mut a = lb("a");
        prepare(&mut a, None, &index).expect("valid");
        index.add(&a);
        let mut b = lb("b");
        prepare(&mut b, None, &index).expect("valid");
        assert_ne!(
            a["spec"]["ports"][0]["nodePort"],
            b["spec"]["ports"][0]["nodePort"]
        );
        assert_ne!(a["spec"]["clusterIP"], b["spec"]["clusterIP"]);
        let mut clash = lb("c");
        clash["spec"]["ports"][0]["nodePort"] = a["spec"]["ports"][0]["nodePort"].clone();
        let causes = prepare(&mut clash, None, &index).expect_err("taken");
        assert!(causes[0].1.contains("already allocated"), "{causes:?}");
    }

    #[test]
    fn updates_keep_allocations_and_type_change_clears_node_ports() {
        let mut index = ServiceIndex::default();
        let mut old = lb("a");
        prepare(&mut old, None, &index).expect("valid");
        index.add(&old);
        let mut same = lb("a");
        prepare(&mut same, Some(&old), &index).expect("valid");
        assert_eq!(same["spec"], old["spec"]);
        let mut cluster_ip = old.clone();
        cluster_ip["spec"]["type"] = json!("ClusterIP");
        prepare(&mut cluster_ip, Some(&old), &index).expect("valid");
        assert_eq!(cluster_ip["spec"]["ports"][0].get("nodePort"), None);
        assert_eq!(cluster_ip["spec"].get("externalTrafficPolicy"), None);
    }
}
