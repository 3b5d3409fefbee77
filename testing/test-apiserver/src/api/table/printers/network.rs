//! Printers of Services, Endpoints and EndpointSlices.

use serde_json::Value;

use super::{AGE, NAME, age_of, col, format_labels, items, name, text};
use crate::api::table::Column;

pub(in crate::api::table) const SERVICE: &[Column] = &[
    NAME,
    col("Type", "string", 0, "The Service's type."),
    col("Cluster-IP", "string", 0, "The Service's cluster IP."),
    col(
        "External-IP",
        "string",
        0,
        "Where the Service is reached from outside the cluster.",
    ),
    col(
        "Port(s)",
        "string",
        0,
        "The Service's ports (port:nodePort/protocol).",
    ),
    AGE,
    col(
        "Selector",
        "string",
        1,
        "The pods the Service sends traffic to.",
    ),
];

fn strings(v: &Value, pointer: &str) -> Vec<String> {
    items(v, pointer)
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// EXTERNAL-IP: the load balancer's ingress points and any external IPs,
/// `<pending>` for a LoadBalancer Service that has neither.
fn external_ip(v: &Value) -> String {
    let external = strings(v, "/spec/externalIPs");
    match text(v, "/spec/type") {
        "ClusterIP" | "NodePort" | "" if external.is_empty() => "<none>".to_owned(),
        "ClusterIP" | "NodePort" | "" => external.join(","),
        "LoadBalancer" => {
            let mut points: Vec<String> = items(v, "/status/loadBalancer/ingress")
                .iter()
                .filter_map(|i| {
                    i["ip"]
                        .as_str()
                        .filter(|s| !s.is_empty())
                        .or_else(|| i["hostname"].as_str().filter(|s| !s.is_empty()))
                })
                .map(str::to_owned)
                .collect();
            points.extend(external);
            if points.is_empty() {
                "<pending>".to_owned()
            } else {
                points.join(",")
            }
        }
        "ExternalName" => text(v, "/spec/externalName").to_owned(),
        _ => "<unknown>".to_owned(),
    }
}

fn ports(v: &Value) -> String {
    let ports: Vec<String> = items(v, "/spec/ports")
        .iter()
        .map(|p| {
            let port = p["port"].as_i64().unwrap_or_default();
            let protocol = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64().filter(|n| *n > 0) {
                Some(node_port) => format!("{port}:{node_port}/{protocol}"),
                None => format!("{port}/{protocol}"),
            }
        })
        .collect();
    if ports.is_empty() {
        "<none>".to_owned()
    } else {
        ports.join(",")
    }
}

pub(super) fn service(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let cluster_ip = match text(v, "/spec/clusterIP") {
        "" => "<none>",
        ip => ip,
    };
    vec![
        name(v),
        Value::from(text(v, "/spec/type")),
        Value::from(cluster_ip),
        Value::from(external_ip(v)),
        Value::from(ports(v)),
        age_of(v, now),
        format_labels(v.pointer("/spec/selector")),
    ]
}

/// At most three `address:port` entries, then how many more.
fn first_three(all: &[String]) -> String {
    const SHOWN: usize = 3;
    if all.len() > SHOWN {
        format!("{} + {} more...", all[..SHOWN].join(","), all.len() - SHOWN)
    } else {
        all.join(",")
    }
}

pub(in crate::api::table) const ENDPOINTS: &[Column] = &[
    NAME,
    col("Endpoints", "string", 0, "The ready addresses and ports."),
    AGE,
];

pub(super) fn endpoints(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let mut all = Vec::new();
    for subset in items(v, "/subsets") {
        let addresses = items(subset, "/addresses");
        let ports = items(subset, "/ports");
        let ip = |a: &Value| a["ip"].as_str().unwrap_or_default().to_owned();
        if ports.is_empty() {
            // A headless Service's endpoints may have no ports.
            all.extend(addresses.iter().map(ip));
        }
        // Port by port, as kube-apiserver lists them.
        for port in ports {
            let port = port["port"].as_i64().unwrap_or_default();
            for address in addresses {
                let ip = ip(address);
                all.push(if ip.contains(':') {
                    format!("[{ip}]:{port}")
                } else {
                    format!("{ip}:{port}")
                });
            }
        }
    }
    let shown = if all.is_empty() {
        "<none>".to_owned()
    } else {
        first_three(&all)
    };
    vec![name(v), Value::from(shown), age_of(v, now)]
}

pub(in crate::api::table) const ENDPOINT_SLICE: &[Column] = &[
    NAME,
    col("AddressType", "string", 0, "IPv4, IPv6 or FQDN."),
    col("Ports", "string", 0, "The slice's ports."),
    col("Endpoints", "string", 0, "The slice's endpoint addresses."),
    AGE,
];

pub(super) fn endpoint_slice(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let ports: Vec<String> = items(v, "/ports")
        .iter()
        .map(|p| {
            p["port"]
                .as_i64()
                .map_or_else(|| "<unset>".to_owned(), |p| p.to_string())
        })
        .collect();
    let addresses: Vec<String> = items(v, "/endpoints")
        .iter()
        .flat_map(|e| items(e, "/addresses"))
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    vec![
        name(v),
        Value::from(text(v, "/addressType")),
        Value::from(if ports.is_empty() {
            "<unset>".to_owned()
        } else {
            ports.join(",")
        }),
        Value::from(if addresses.is_empty() {
            "<unset>".to_owned()
        } else {
            first_three(&addresses)
        }),
        age_of(v, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lb(status: &Value, external: &Value) -> Value {
        json!({
            "metadata": { "name": "web" },
            "spec": { "type": "LoadBalancer", "clusterIP": "10.96.0.10", "externalIPs": external,
                      "ports": [{ "port": 80, "nodePort": 30080, "protocol": "TCP" }, { "port": 53, "protocol": "UDP" }],
                      "selector": { "app": "web" } },
            "status": status,
        })
    }

    #[test]
    fn a_load_balancer_is_pending_until_it_has_an_ingress_then_shows_it() {
        let now = jiff::Timestamp::now();
        let pending = service(&lb(&json!({}), &json!(null)), now);
        assert_eq!(
            pending[1..5],
            [
                json!("LoadBalancer"),
                json!("10.96.0.10"),
                json!("<pending>"),
                json!("80:30080/TCP,53/UDP")
            ]
        );
        assert_eq!(pending[6], "app=web");
        let ready = service(
            &lb(
                &json!({ "loadBalancer": { "ingress": [{ "ip": "203.0.113.7" }, { "hostname": "lb.example" }] } }),
                &json!(["198.51.100.1"]),
            ),
            now,
        );
        assert_eq!(ready[3], "203.0.113.7,lb.example,198.51.100.1");
    }

    #[test]
    fn cluster_ip_services_show_none_and_external_names_their_name() {
        let now = jiff::Timestamp::now();
        let plain = json!({ "metadata": { "name": "a" }, "spec": { "type": "ClusterIP", "clusterIP": "None" } });
        assert_eq!(service(&plain, now)[3], "<none>");
        assert_eq!(service(&plain, now)[4], "<none>");
        let external = json!({ "metadata": { "name": "b" }, "spec": { "type": "ExternalName", "externalName": "db.example" } });
        assert_eq!(service(&external, now)[2], "<none>");
        assert_eq!(service(&external, now)[3], "db.example");
    }

    #[test]
    fn endpoints_show_three_addresses_then_how_many_more() {
        let now = jiff::Timestamp::now();
        let ep = json!({ "metadata": { "name": "e" }, "subsets": [{
            "addresses": [{ "ip": "10.0.0.1" }, { "ip": "10.0.0.2" }],
            "ports": [{ "port": 80 }, { "port": 443 }],
        }]});
        assert_eq!(
            endpoints(&ep, now)[1],
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."
        );
        assert_eq!(endpoints(&json!({ "metadata": {} }), now)[1], "<none>");
    }
}
