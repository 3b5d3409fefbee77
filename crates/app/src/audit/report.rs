//! The audit's output: a table for people, or JSON (`--output=json`).

use super::classify::Findings;
use super::options::Output;

/// Prints one line to standard output.
#[allow(clippy::print_stdout, reason = "the audit reports to the terminal")]
pub(crate) fn line(text: &str) {
    println!("{text}");
}

/// Prints `findings` in `output`'s form.
pub(crate) fn print(findings: &Findings, output: Output) {
    match output {
        Output::Json => line(&serde_json::to_string_pretty(findings).unwrap_or_default()),
        Output::Table => {
            for text in table(findings) {
                line(&text);
            }
        }
    }
}

/// The table's lines, columns padded as kubectl pads them.
fn table(findings: &Findings) -> Vec<String> {
    let mut lines = Vec::new();
    if findings.leaked.is_empty() {
        lines.push("No leaked cloud resources.".to_owned());
    } else {
        let rows: Vec<[&str; 4]> = std::iter::once(["KIND", "ID", "NAME", "WHY LEAKED"])
            .chain(findings.leaked.iter().map(|l| {
                [
                    l.kind.as_str(),
                    l.id.as_str(),
                    l.name.as_str(),
                    l.reason.as_str(),
                ]
            }))
            .collect();
        lines.extend(columns(&rows));
    }
    if !findings.missing.is_empty() {
        lines.push(String::new());
        let rows: Vec<[String; 3]> = std::iter::once([
            "NAMESPACE".to_owned(),
            "SERVICE".to_owned(),
            "RECORDED INGRESS (LOAD BALANCER GONE)".to_owned(),
        ])
        .chain(
            findings
                .missing
                .iter()
                .map(|m| [m.namespace.clone(), m.name.clone(), m.ingress.join(",")]),
        )
        .collect();
        let rows: Vec<[&str; 3]> = rows
            .iter()
            .map(|r| [r[0].as_str(), r[1].as_str(), r[2].as_str()])
            .collect();
        lines.extend(columns(&rows));
    }
    if findings.routes_not_audited > 0 {
        lines.push(format!(
            "({} routes outside --cluster-cidr not audited)",
            findings.routes_not_audited
        ));
    }
    lines
}

fn columns<const N: usize>(rows: &[[&str; N]]) -> Vec<String> {
    let mut widths = [0_usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if i + 1 == N {
                        (*cell).to_owned()
                    } else {
                        format!("{cell:<w$}")
                    }
                })
                .collect();
            cells.join("   ")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::classify::{Leak, Missing};
    use ccm_cloud_provider::{OwnedResource, Owner};

    #[test]
    fn the_table_aligns_its_columns_and_lists_missing_load_balancers() {
        let resource = OwnedResource {
            kind: "load-balancer".into(),
            id: "a1".into(),
            name: "a1 (default/web)".into(),
            owner: Owner::LoadBalancerName("a1".into()),
            cidr: None,
            provider_id: None,
        };
        let findings = Findings {
            leaked: vec![Leak {
                kind: resource.kind.clone(),
                id: resource.id.clone(),
                name: resource.name.clone(),
                reason: "no Service's load balancer is named a1".into(),
                resource,
            }],
            missing: vec![Missing {
                namespace: "default".into(),
                name: "db".into(),
                ingress: vec!["100.64.0.9".into()],
            }],
            routes_not_audited: 0,
        };
        let lines = table(&findings);
        assert_eq!(
            lines[0],
            "KIND            ID   NAME               WHY LEAKED"
        );
        assert_eq!(
            lines[1],
            "load-balancer   a1   a1 (default/web)   no Service's load balancer is named a1"
        );
        assert_eq!(
            lines[3],
            "NAMESPACE   SERVICE   RECORDED INGRESS (LOAD BALANCER GONE)"
        );
        assert_eq!(lines[4], "default     db        100.64.0.9");
    }
}
