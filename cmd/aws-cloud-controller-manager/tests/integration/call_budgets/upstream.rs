//! What upstream's aws-cloud-controller-manager v1.33.4 sends for each
//! piece of work, derived from its code (`pkg/providers/v1/`) and from
//! k8s.io/cloud-provider v0.33.0's controllers; the whole derivation, line
//! by line, is in `docs/benchmarks/upstream-call-budgets.md`. Where the
//! count depends on how events coalesce, the least upstream can send is
//! taken.

use std::time::Duration;

use ccm_test_support::budget::Upstream;

use super::budget::Kind;

/// Upstream registers an NLB's targets 100 at a time
/// (`defaultRegisterTargetsChunkSize`, `ensureTargetGroupTargets`).
fn register_calls(nodes: usize) -> u64 {
    nodes.div_ceil(100) as u64
}

/// `n` nodes registered without `spec.providerID`, initialized by the
/// cloud-node controller.
pub(crate) fn nodes_initialized(n: usize) -> Upstream {
    let n = n as u64;
    Upstream::new(
        format!("{n} nodes initialized"),
        &[
            ("EC2 DescribeInstances", 2 * n),
            ("EC2 DescribeAvailabilityZones", 1),
            ("EC2 DescribeInstanceTopology", 1),
        ],
        "per node: `getProviderID` → `InstanceID` → `getInstanceByNodeName` and \
            `InstanceMetadata` → `getInstanceByID` (1 DescribeInstances each); once: \
            `zoneCache.populate`, `instanceTopologyManager.GetNodeTopology` (one instance type)",
    )
}

pub(crate) fn created(kind: Kind, nodes: usize) -> Upstream {
    let work = format!("one {} Service created", kind.describe());
    match kind {
        Kind::Nlb => Upstream::new(
            work,
            &[
                ("EC2 DescribeInstances", 1),
                ("EC2 DescribeSubnets", 2),
                ("EC2 DescribeRouteTables", 1),
                ("EC2 DescribeSecurityGroups", 3),
                ("EC2 AuthorizeSecurityGroupIngress", 2),
                ("ELBv2 DescribeLoadBalancers", 1),
                ("ELBv2 CreateLoadBalancer", 1),
                ("ELBv2 CreateTargetGroup", 1),
                ("ELBv2 RegisterTargets", register_calls(nodes)),
                ("ELBv2 CreateListener", 1),
                ("ELBv2 DescribeLoadBalancerAttributes", 1),
            ],
            "`EnsureLoadBalancer` → `findInstancesForELB` (cold instance cache), \
                `findSubnets`, `getSubnetCidrs`, `findELBSubnets`, `ensureLoadBalancerv2` \
                (`describeLoadBalancerv2`, `createListenerV2`, `ensureTargetGroupTargets` (100 a call), \
                `reconcileLBAttributes`), `getTaggedSecurityGroups`, \
                `updateInstanceSecurityGroupForNLBTraffic` and `…ForNLBMTU` (a \
                `findSecurityGroup` and an authorize each)",
        ),
        Kind::Classic => classic_created(work),
    }
}

/// A node joins; the one Service is an NLB's.
pub(crate) fn node_joined() -> Upstream {
    Upstream::new(
        "a node joins, one NLB Service",
        &[
            ("EC2 DescribeInstances", 3),
            ("EC2 DescribeSubnets", 2),
            ("EC2 DescribeRouteTables", 1),
            ("EC2 DescribeSecurityGroups", 1),
            ("ELBv2 DescribeLoadBalancers", 3),
            ("ELBv2 DescribeListeners", 1),
            ("ELBv2 DescribeTargetGroups", 1),
            ("ELBv2 DescribeTargetHealth", 1),
            ("ELBv2 RegisterTargets", 1),
            ("ELBv2 DescribeLoadBalancerAttributes", 1),
        ],
        "the node's initialization (2 DescribeInstances, as above), then one \
                `UpdateLoadBalancer` (the least: a second follows when `spec.providerID` is \
                set): `findInstancesForELB` (refresh: a new ID), `describeLoadBalancerv2`, \
                then the whole `EnsureLoadBalancer` with its always-dirty re-describe, \
                `obtainTargetGroupActualTargets`, `ensureTargetGroupTargets`, \
                `reconcileLBAttributes`, `getTaggedSecurityGroups`",
    )
}

pub(crate) fn port_changed(kind: Kind, nodes: usize) -> Upstream {
    let work = format!("its port changed, 80 → 8080 ({})", kind.describe());
    match kind {
        Kind::Nlb => Upstream::new(
            work,
            &[
                ("EC2 DescribeSubnets", 2),
                ("EC2 DescribeRouteTables", 1),
                ("EC2 DescribeSecurityGroups", 1),
                ("ELBv2 DescribeLoadBalancers", 2),
                ("ELBv2 DescribeListeners", 1),
                ("ELBv2 DescribeTargetGroups", 1),
                ("ELBv2 CreateTargetGroup", 1),
                ("ELBv2 RegisterTargets", register_calls(nodes)),
                ("ELBv2 CreateListener", 1),
                ("ELBv2 DeleteListener", 1),
                ("ELBv2 DeleteTargetGroup", 1),
                ("ELBv2 DescribeLoadBalancerAttributes", 1),
            ],
            "`EnsureLoadBalancer` (warm instance cache): `findSubnets`, \
                `getSubnetCidrs`, `findELBSubnets`, `describeLoadBalancerv2` and the dirty \
                re-describe, `createListenerV2` (a new target group: its name hashes the \
                port), `deleteListenerV2`, `reconcileLBAttributes`, `getTaggedSecurityGroups`",
        ),
        Kind::Classic => classic_port_changed(work),
    }
}

pub(crate) fn deleted(kind: Kind) -> Upstream {
    let work = format!("the {} Service deleted", kind.describe());
    match kind {
        Kind::Nlb => Upstream::new(
            work,
            &[
                ("ELBv2 DescribeLoadBalancers", 2),
                ("ELBv2 DescribeTargetGroups", 1),
                ("ELBv2 DeleteLoadBalancer", 1),
                ("ELBv2 DeleteTargetGroup", 1),
                ("EC2 DescribeSecurityGroups", 3),
                ("EC2 RevokeSecurityGroupIngress", 2),
            ],
            "`GetLoadBalancer` and `EnsureLoadBalancerDeleted` (a \
                `describeLoadBalancerv2` each), then `updateInstanceSecurityGroupsForNLB` \
                (`getTaggedSecurityGroups`; the client and MTU rules each found and revoked: \
                no other NLB is left to keep the MTU rule)",
        ),
        Kind::Classic => classic_deleted(work),
    }
}

/// The steady state over `window`, which holds one node-status pass.
pub(crate) fn steady(nodes: usize, services: usize, window: Duration) -> Upstream {
    Upstream::new(
        format!(
            "steady state, {nodes} nodes and {services} Services, {} s (one node-status pass)",
            window.as_secs()
        ),
        &[("EC2 DescribeInstances", nodes as u64)],
        "cloud-node `UpdateNodeStatus`: `InstanceMetadata` → `getInstanceByID` per \
            node; the service controller, all nodes Ready and no routes: 0",
    )
}

fn classic_created(work: String) -> Upstream {
    Upstream::new(
        work,
        &[
            ("EC2 DescribeSubnets", 1),
            ("EC2 DescribeRouteTables", 1),
            ("EC2 DescribeSecurityGroups", 5),
            ("EC2 CreateSecurityGroup", 1),
            ("EC2 AuthorizeSecurityGroupIngress", 2),
            ("ELB DescribeLoadBalancers", 2),
            ("ELB CreateLoadBalancer", 1),
            ("ELB DescribeLoadBalancerAttributes", 1),
            ("ELB ModifyLoadBalancerAttributes", 1),
            ("ELB ConfigureHealthCheck", 1),
            ("ELB RegisterInstancesWithLoadBalancer", 1),
        ],
        "`EnsureLoadBalancer` (warm instance cache): `findSubnets`, `findELBSubnets`, \
         `ensureSecurityGroup` (describe, create), `setSecurityGroupIngress` (describe, \
         authorize), `ensureLoadBalancer` (describe, create; attributes described and always \
         modified: `aws_loadbalancer.go:1386` compares `*T` with `**T`; the dirty \
         re-describe), `ensureLoadBalancerHealthCheck` (AWS's default check differs), \
         `updateInstanceSecurityGroupsForLoadBalancer` (`getTaggedSecurityGroups`, the \
         `ip-permission.group-id` lookup, `addSecurityGroupIngress`), \
         `ensureLoadBalancerInstances`",
    )
}

/// A node leaves; the one Service is a classic ELB's.
pub(crate) fn node_left() -> Upstream {
    Upstream::new(
        "a node leaves, one classic ELB Service",
        &[
            ("ELB DescribeLoadBalancers", 1),
            ("ELB DeregisterInstancesFromLoadBalancer", 1),
            ("EC2 DescribeSecurityGroups", 2),
        ],
        "one classic `UpdateLoadBalancer` (not a whole ensure): `findInstancesForELB` (every \
         ID cached), `describeLoadBalancer`, `ensureLoadBalancerInstances`, \
         `updateInstanceSecurityGroupsForLoadBalancer` (`getTaggedSecurityGroups` and the \
         `ip-permission.group-id` lookup; the rule stays)",
    )
}

fn classic_port_changed(work: String) -> Upstream {
    Upstream::new(
        work,
        &[
            ("EC2 DescribeSubnets", 1),
            ("EC2 DescribeRouteTables", 1),
            ("EC2 DescribeSecurityGroups", 4),
            ("EC2 AuthorizeSecurityGroupIngress", 1),
            ("EC2 RevokeSecurityGroupIngress", 1),
            ("ELB DescribeLoadBalancers", 2),
            ("ELB DeleteLoadBalancerListeners", 1),
            ("ELB CreateLoadBalancerListeners", 1),
            ("ELB DescribeLoadBalancerAttributes", 1),
            ("ELB ModifyLoadBalancerAttributes", 1),
        ],
        "`EnsureLoadBalancer` on the existing ELB: `findSubnets`, `findELBSubnets`, \
         `ensureSecurityGroup`, `setSecurityGroupIngress` (80 revoked, 8080 authorized), \
         `ensureLoadBalancer` (describe; `syncElbListeners`: one listener deleted, one \
         created; attributes described and modified; the dirty re-describe), \
         `updateInstanceSecurityGroupsForLoadBalancer` (two lookups, the rule stays)",
    )
}

fn classic_deleted(work: String) -> Upstream {
    Upstream::new(
        work,
        &[
            ("ELB DescribeLoadBalancers", 2),
            ("ELB DeleteLoadBalancer", 1),
            ("EC2 DescribeSecurityGroups", 4),
            ("EC2 RevokeSecurityGroupIngress", 1),
            ("EC2 DeleteSecurityGroup", 1),
        ],
        "`GetLoadBalancer` and `EnsureLoadBalancerDeleted` (a describe each), the ELB's \
         groups looked up, `updateInstanceSecurityGroupsForLoadBalancer` with no ELB \
         (`getTaggedSecurityGroups`, the `ip-permission.group-id` lookup, \
         `removeSecurityGroupIngress`: a find and a revoke), the delete, then \
         `DeleteSecurityGroup` (once: each `DependencyViolation` adds one every 10 s)",
    )
}
