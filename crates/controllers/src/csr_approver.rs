//! The kubelet-serving-csr-approver controller (ours, off unless named in
//! `--controllers`): approves a kubelet's serving certificate request when
//! the cloud confirms every name in it, closing the chicken-and-egg of
//! kubelet TLS bootstrapping with an external CCM (the kubelet cannot know
//! its addresses before the CCM initializes its node).
//!
//! # Guarantees
//! - Only pending requests of signer `kubernetes.io/kubelet-serving` are
//!   decided, each at most once; every other request is never touched.
//! - Approved only when all hold: the requester is `system:node:<name>` in
//!   `system:nodes`; the subject is `CN=system:node:<name>, O=system:nodes`;
//!   the usages are digital signature and server auth (key encipherment
//!   allowed) and nothing else; no e-mail, URI or other alternative names;
//!   at least one DNS name or IP address, each one of the addresses the
//!   cloud reports for the node's instance now (asked of the provider
//!   through a `Batcher`, never read from `node.status`, which a kubelet
//!   can write); the node exists and is initialized; the cloud names the
//!   node's instance after the node (`InstanceMetadata::node_names`) and
//!   no other node carries its `spec.providerID` (a kubelet sets its own).
//! - `spec.request` is read as Go reads it (one PEM block, DER, one
//!   extensionRequest, one subjectAltName read whole), or denied.
//! - Anything else is denied: a `Denied` condition whose reason names the
//!   rule and whose message names the offending value.
//! - A request whose node does not exist or is not initialized yet waits:
//!   it is decided as soon as the node is initialized, or denied
//!   (`NodeNotInitialized`) once it is older than
//!   `ControllerSettings::csr_initialization_wait` (10 minutes).
//! - Every decision: one log line with the request's name, an event on the
//!   Node, and `kubelet_serving_csr_approver_decisions_total{decision, reason}`.
//! - The approval is written through the `approval` subresource with the
//!   resourceVersion it was decided on.

mod request;
mod rules;

use std::collections::{BTreeSet, HashMap};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::{CloudError, CloudProvider, InstanceMetadata};
use ccm_runtime::controller::Triggers;
use ccm_runtime::{Action, Batcher, Context, Events, ReconcileError, WatchEvent};
use futures::StreamExt;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::settings::ControllerSettings;
use crate::{ControllerId, Started, calls, taints};
use rules::{Denial, Reason};

/// How long the first lookup of a burst waits for others to share its call.
const BATCH_WINDOW: Duration = Duration::from_millis(50);
/// The component name of this controller's events.
const EVENT_SOURCE: &str = "kubelet-serving-csr-approver";
/// The condition reason of an approval.
const APPROVED_REASON: &str = "CloudAddressesVerified";

/// Labels of one decision.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    /// `approved` or `denied`.
    decision: String,
    /// The condition's reason.
    reason: String,
}

struct Approver {
    api: Api<CertificateSigningRequest>,
    nodes: Store<Node>,
    batcher: Batcher<InstanceMetadata>,
    events: Events,
    decisions: Family<DecisionLabels, Counter>,
    /// Node name → requests waiting for it to be initialized.
    waiting: Arc<Mutex<HashMap<String, BTreeSet<String>>>>,
    /// How long a request waits for its node.
    initialization_wait: Duration,
}

/// What was decided about one request.
enum Decision {
    Approve(String),
    Deny(Denial),
}

pub(crate) fn start(ctx: &Context, settings: &ControllerSettings) -> Started {
    let Some(instances) = ctx.cloud.instances() else {
        return Started::Off("the cloud provider has no instances capability".into());
    };
    let max_batch = instances.max_batch_size();
    let concurrency =
        NonZeroUsize::new(settings.concurrent_node_syncs.into()).unwrap_or(NonZeroUsize::MIN);
    let decisions = Family::<DecisionLabels, Counter>::default();
    ctx.metrics.register(|registry| {
        registry.register(
            "kubelet_serving_csr_approver_decisions",
            "Kubelet serving certificate requests decided, by decision (approved, denied) and reason",
            decisions.clone(),
        );
    });
    let nodes = ctx.informers.nodes();
    let waiting: Arc<Mutex<HashMap<String, BTreeSet<String>>>> = Arc::default();
    let (trigger, triggered) = futures::channel::mpsc::unbounded();
    let hook = {
        let waiting = waiting.clone();
        move |event: &WatchEvent<Node>| {
            let (WatchEvent::Apply(node) | WatchEvent::InitApply(node)) = event else {
                return;
            };
            if taints::has(node, taints::UNINITIALIZED) {
                return;
            }
            let Some(names) = waiting.lock().remove(&node.name_any()) else {
                return;
            };
            for name in names {
                // The receiver lives as long as the controller.
                let _ = trigger.unbounded_send(ObjectRef::<CertificateSigningRequest>::new(&name));
            }
        }
    };
    if let Err(err) = nodes.on_event(hook) {
        return Started::Off(err.to_string());
    }
    let state = Arc::new(Approver {
        api: Api::all(ctx.client.clone()),
        nodes: nodes.store(),
        batcher: Batcher::spawn(calls::metadata(ctx), max_batch, BATCH_WINDOW, concurrency),
        events: Events::new(ctx.client.clone(), EVENT_SOURCE, Some(ctx.identity.clone())),
        decisions,
        waiting,
        initialization_wait: settings.csr_initialization_wait,
    });
    let informer = ctx.informers.certificate_signing_requests();
    let triggers = Triggers {
        objects: Some(triggered.boxed()),
        all: None,
    };
    crate::run_controller(
        ControllerId::KubeletServingCsrApprover.name(),
        &informer,
        triggers,
        ctx,
        move |csr| state.clone().reconcile(csr),
    )
}

/// `spec.request` read as [`Approver::reconcile`] reads it, for
/// [`crate::fuzzing`].
pub(crate) fn read_request(pem: &[u8]) -> Result<request::Requested, String> {
    request::parse(pem)
}

/// Whether `csr` already carries a decision.
fn decided(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| matches!(c.type_.as_str(), "Approved" | "Denied" | "Failed"))
        })
}

/// How long ago `csr` was made.
fn age(csr: &CertificateSigningRequest) -> Duration {
    csr.metadata
        .creation_timestamp
        .as_ref()
        .and_then(|created| {
            jiff::Timestamp::now()
                .duration_since(created.0)
                .try_into()
                .ok()
        })
        .unwrap_or_default()
}

impl Approver {
    async fn reconcile(
        self: Arc<Self>,
        csr: Arc<CertificateSigningRequest>,
    ) -> Result<Action, ReconcileError> {
        let name = csr.name_any();
        if csr.spec.signer_name != rules::SIGNER
            || decided(&csr)
            || csr.metadata.deletion_timestamp.is_some()
        {
            self.forget(&name);
            return Ok(Action::await_change());
        }
        let requested = request::parse(&csr.spec.request.0);
        let facts = rules::Request {
            username: csr.spec.username.as_deref().unwrap_or_default(),
            groups: csr.spec.groups.as_deref().unwrap_or_default(),
            usages: csr.spec.usages.as_deref().unwrap_or_default(),
        };
        let node_name = match rules::node_of(facts, requested.as_ref().map_err(String::as_str)) {
            Ok(node) => node,
            Err(denial) => {
                // The node the requester claims to be, if it is one.
                let node = facts
                    .username
                    .strip_prefix("system:node:")
                    .and_then(|n| self.nodes.get(&ObjectRef::new(n)));
                self.write(&csr, node.as_deref(), Decision::Deny(denial))
                    .await?;
                return Ok(Action::await_change());
            }
        };
        let Ok(requested) = requested else {
            return Ok(Action::await_change());
        };
        // Registered before looking: an initialization seen by the node
        // hook after this point triggers the request again.
        self.waiting
            .lock()
            .entry(node_name.clone())
            .or_default()
            .insert(name.clone());
        let node = self.nodes.get(&ObjectRef::new(&node_name));
        let initialized = node
            .as_ref()
            .filter(|n| !taints::has(n, taints::UNINITIALIZED));
        let Some(node) = initialized.cloned() else {
            let waited = age(&csr);
            if waited < self.initialization_wait {
                tracing::debug!(csr = %name, node = %node_name, "waiting for the node to be initialized");
                return Ok(Action::requeue(self.initialization_wait - waited));
            }
            self.forget(&name);
            let state = if node.is_some() {
                "was not initialized"
            } else {
                "did not exist"
            };
            let denial = Denial {
                reason: Reason::NodeNotInitialized,
                message: format!(
                    "node {node_name} {state} within {}s of the request",
                    self.initialization_wait.as_secs()
                ),
            };
            self.write(&csr, node.as_deref(), Decision::Deny(denial))
                .await?;
            return Ok(Action::await_change());
        };
        self.forget(&name);
        let decision = match self.batcher.lookup(node.clone()).await {
            Ok(metadata) => {
                let sharing = self.sharing_provider_id(&node);
                match rules::check_instance(&node_name, &metadata, &sharing).and_then(|()| {
                    rules::check_addresses(&node_name, &requested, &metadata.node_addresses)
                }) {
                    Ok(()) => Decision::Approve(format!(
                        "node {node_name} is the cloud's name for its instance, and every name requested is an address the cloud reports for it"
                    )),
                    Err(denial) => Decision::Deny(denial),
                }
            }
            Err(CloudError::InstanceNotFound) => Decision::Deny(Denial {
                reason: Reason::InstanceNotFound,
                message: format!("the cloud has no instance for node {node_name}"),
            }),
            Err(err) => return Err(err.into()),
        };
        self.write(&csr, Some(&node), decision).await?;
        Ok(Action::await_change())
    }

    /// The other nodes whose `spec.providerID` is `node`'s.
    fn sharing_provider_id(&self, node: &Node) -> Vec<String> {
        let Some(id) = provider_id(node) else {
            return Vec::new();
        };
        let name = node.name_any();
        self.nodes
            .state()
            .iter()
            .filter(|other| provider_id(other) == Some(id) && other.name_any() != name)
            .map(|other| other.name_any())
            .collect()
    }

    /// Forgets that `name` waits for a node.
    fn forget(&self, name: &str) {
        let mut waiting = self.waiting.lock();
        waiting.retain(|_, names| {
            names.remove(name);
            !names.is_empty()
        });
    }

    /// Writes `decision` as a condition through the approval subresource,
    /// then logs, records and reports it on the node.
    async fn write(
        &self,
        csr: &CertificateSigningRequest,
        node: Option<&Node>,
        decision: Decision,
    ) -> Result<(), kube::Error> {
        let name = csr.name_any();
        let (kind, reason, message) = match &decision {
            Decision::Approve(message) => ("Approved", APPROVED_REASON, message.clone()),
            Decision::Deny(denial) => ("Denied", denial.reason.as_str(), denial.message.clone()),
        };
        let now = Time(jiff::Timestamp::now());
        let mut updated = csr.clone();
        updated
            .status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(CertificateSigningRequestCondition {
                type_: kind.to_owned(),
                status: "True".to_owned(),
                reason: Some(reason.to_owned()),
                message: Some(message.clone()),
                last_update_time: Some(now.clone()),
                last_transition_time: Some(now),
            });
        self.api
            .replace_subresource("approval", &name, &PostParams::default(), &updated)
            .await?;
        let decision_label = match decision {
            Decision::Approve(_) => "approved",
            Decision::Deny(_) => "denied",
        };
        self.decisions
            .get_or_create(&DecisionLabels {
                decision: decision_label.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
        let note = format!("CertificateSigningRequest {name}: {message}");
        match decision {
            Decision::Approve(_) => {
                tracing::info!(csr = %name, %reason, "approved: {message}");
                if let Some(node) = node {
                    self.events
                        .normal(&node_ref(node), "KubeletServingCertificateApproved", note)
                        .await;
                }
            }
            Decision::Deny(_) => {
                tracing::info!(csr = %name, %reason, "denied: {message}");
                let object = match node {
                    Some(node) => node_ref(node),
                    None => csr.object_ref(&()),
                };
                self.events
                    .warning(&object, "KubeletServingCertificateDenied", note)
                    .await;
            }
        }
        Ok(())
    }
}

/// A node's `spec.providerID`, when set.
fn provider_id(node: &Node) -> Option<&str> {
    node.spec
        .as_ref()
        .and_then(|spec| spec.provider_id.as_deref())
        .filter(|id| !id.is_empty())
}

fn node_ref(node: &Node) -> ObjectReference {
    node.object_ref(&())
}
