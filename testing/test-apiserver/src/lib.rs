//! An in-memory Kubernetes API server for tests, the sandbox and benchmarks.
//!
//! Start with [`TestApiServer`]: it listens on 127.0.0.1 over plain HTTP and
//! speaks the real REST and watch protocol, so the real `kube` client,
//! kube-runtime's watcher and `kubectl` talk to it as to a cluster.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::Node;
//! use kube::Api;
//! use ccm_test_apiserver::{Failure, RequestMatch, TestApiServer, Verb};
//!
//! let server = TestApiServer::builder().seed_nodes(3).start().await?;
//! let nodes: Api<Node> = Api::all(server.client());
//! assert_eq!(nodes.list(&Default::default()).await?.items.len(), 3);
//! assert_eq!(server.stats().count(Verb::List, "nodes"), 1);
//!
//! // The next PATCH of a node fails with 500 InternalError.
//! server.fail_next(RequestMatch::verb(Verb::Patch).resource("nodes"), Failure::internal_error(), 1);
//! # Ok(())
//! # }
//! ```
//!
//! Its whole worth is fidelity to the Kubernetes API conventions. What it
//! does not implement, it refuses loudly (404, 406, 415, 422 or 501 with a
//! `Status` body saying so); it never approximates silently. It answers as
//! the newest supported release, kube-apiserver 1.37, does (`/version`
//! says so); the contract suite (`tests/`) holds it to v1.37 and runs the
//! same tests against v1.35, expecting 1.35's words where they differ.
//!
//! # Starting
//!
//! [`TestApiServer::start`] (ephemeral port, defaults) or
//! [`TestApiServer::builder`]: [`Builder::bind`], [`Builder::kubeconfig_path`],
//! [`Builder::bookmark_interval`], [`Builder::history_limit`],
//! [`Builder::request_log_limit`], [`Builder::seed_nodes`],
//! [`Builder::seed_services`], [`Builder::token_auth_file`],
//! [`Builder::anonymous_auth`], [`Builder::authorization_mode`],
//! [`Builder::client_ca_file`], then [`Builder::start`]. A running server
//! gives its [`url`](TestApiServer::url), a ready
//! [`client`](TestApiServer::client) and a
//! [`kubeconfig_path`](TestApiServer::kubeconfig_path) (a temporary file
//! removed when the server is dropped, unless the builder chose the path).
//! The `test-apiserver` binary does the same from the command line:
//! `test-apiserver [--bind 127.0.0.1:PORT] [--kubeconfig PATH] [--nodes N]
//! [--services M] [--token-auth-file FILE] [--anonymous-auth=BOOL]
//! [--authorization-mode=AlwaysAllow|RBAC] [--client-ca-file FILE]` prints
//! the URL on its first line of output and runs until interrupted; bad
//! flags (and a malformed token file) exit 64 with one line.
//!
//! Seeded nodes `node-1..node-N` look like fresh kubelet registrations under
//! `--cloud-provider=external`: the [`UNINITIALIZED_TAINT`]`=true:NoSchedule`
//! taint, Ready=True, a Hostname address, and pod CIDR [`pod_cidr`]`(i)`
//! (`10.244.<i>.0/24` for i < 256, then on through `10.245.0.0/16`...).
//! Seeded Services `lb-1..lb-M` in `default` are LoadBalancers with one TCP
//! port 80 and an allocated nodePort.
//!
//! # Accounting and faults
//!
//! [`TestApiServer::stats`] counts requests by verb × group × resource ×
//! subresource and the watches open now (total and per resource);
//! [`TestApiServer::requests`] is the request log (verb, method, path,
//! query, group, resource, subresource, namespace, name, user agent,
//! response status, and the authenticated user when authentication is on),
//! bounded by [`Builder::request_log_limit`]. Another
//! process reads them as JSON: `GET /testapi/stats` ([`Stats`]),
//! `GET /testapi/requests` (`{"records": [RequestRecord...], "dropped": n}`),
//! and `DELETE /testapi/stats` resets both. `/testapi/` requests are not
//! counted.
//!
//! [`TestApiServer::fail_next`] answers the next N requests a
//! [`RequestMatch`] selects with a [`Failure`] (500, 503, 429 with
//! `Retry-After`, 410 — on a watch sent as an `ERROR` event, as
//! kube-apiserver does); [`TestApiServer::set_latency`] delays every request;
//! [`TestApiServer::close_all_watches`] ends every open watch;
//! [`TestApiServer::compact_history`] forgets the watch history like an etcd
//! compaction. Note that the kube client retries 429, 503 and 504 itself.
//!
//! # Authentication and authorization
//!
//! By default nothing is authenticated and every request is an
//! administrator. With [`Builder::token_auth_file`] (`--token-auth-file`,
//! kube-apiserver's CSV `token,user,uid[,"group1,group2"]`) requests are
//! authenticated as kube-apiserver does: a bearer token from the file, or
//! one TokenRequest issued, is its user plus `system:authenticated`; any
//! other bearer token is 401 `Unauthorized`; a request without one is
//! `system:anonymous` in `system:unauthenticated` (kube-apiserver's
//! `--anonymous-auth=true` default; [`Builder::anonymous_auth`]`(false)`
//! makes it 401). The kubeconfig and [`TestApiServer::client`] then send the
//! file's first `system:masters` token (or, when it has none, a random one
//! minted at start for `system:apiserver` in `system:masters`);
//! [`TestApiServer::client_with_token`] makes a client for any other token.
//!
//! [`Builder::authorization_mode`]`(`[`AuthorizationMode::Rbac`]`)` decides
//! requests with kube-apiserver's RBAC authorizer over the stored Roles,
//! ClusterRoles and bindings (verbs and `*`, API groups, resources with
//! subresources and `*/sub`, resource names, non-resource URLs with a
//! trailing `*`; User, Group and ServiceAccount subjects; no aggregation);
//! `system:masters` may do anything. Requests are authorized before they
//! are routed, from the attributes kube-apiserver derives from the URL, and
//! refused with its 403 `Status`. kube-apiserver's bootstrap policy objects
//! that charts and clients rely on exist from the start: `cluster-admin`
//! (bound to `system:masters`), `system:discovery`, `system:basic-user`,
//! `system:public-info-viewer`, `system:auth-delegator`, and in
//! `kube-system` the Role `extension-apiserver-authentication-reader`.
//!
//! `POST .../serviceaccounts/<name>/token` (TokenRequest:
//! `expirationSeconds` 3600 by default, at least 600, audiences defaulting
//! to `https://kubernetes.default.svc.cluster.local`) issues random opaque
//! tokens that authenticate as `system:serviceaccount:<ns>:<name>` (groups
//! `system:serviceaccounts`, `system:serviceaccounts:<ns>`) until they
//! expire or the account is deleted; since no test can wait 10 minutes,
//! [`TestApiServer::expire_service_account_tokens`] (and `POST
//! /testapi/serviceaccounts/<ns>/<name>/expire-tokens`) expires them now.
//! TokenReview answers from the same tokens whether or not requests are
//! authenticated; SubjectAccessReview and SelfSubjectAccessReview from the
//! same authorizer (allowed under AlwaysAllow). [`Builder::client_ca_file`]
//! publishes a CA bundle in `kube-system/extension-apiserver-authentication`
//! (key `client-ca-file`); the server speaks plain HTTP and verifies no
//! client certificates.
//!
//! # Resources
//!
//! Discovery-complete (`/version`, `/api`, `/api/v1`, `/apis`,
//! `/apis/<group>`, `/apis/<group>/<version>`, in the legacy format, which
//! clients fall back to):
//!
//! - core/v1: Namespace (+status, +finalize), Node (+status), Service
//!   (+status), Endpoints, ConfigMap, Secret, Event, Pod (+status),
//!   PersistentVolume (+status), ServiceAccount (+token);
//! - rbac.authorization.k8s.io/v1 Role, ClusterRole, RoleBinding,
//!   ClusterRoleBinding, defaulted and validated as kube-apiserver does (a
//!   binding's `roleRef` cannot change);
//! - authentication.k8s.io/v1 TokenReview and authorization.k8s.io/v1
//!   SubjectAccessReview and SelfSubjectAccessReview (create only);
//! - coordination.k8s.io/v1 Lease; events.k8s.io/v1 Event (a second view of
//!   the core/v1 Events storage, converted field by field as Kubernetes
//!   does, so kube-runtime's `Recorder` and `kubectl get events` agree);
//!   discovery.k8s.io/v1 EndpointSlice;
//! - admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration, with
//!   the v1 defaults and kube-apiserver's validation of its webhooks (CEL
//!   match conditions are not compiled, and no webhook is ever called); a
//!   PUT must carry a resourceVersion, as kube-apiserver requires of it.
//!
//! `/apis` lists the groups in kube-apiserver's order (its aggregator's
//! group priorities): kubectl resolves a resource name to the first group
//! serving it.
//!
//! Namespaces `default`, `kube-system`, `kube-public` and `kube-node-lease`
//! and the Service `default/kubernetes` (10.96.0.1:443) exist from the start.
//!
//! # Objects
//!
//! - Bodies are decoded as the k8s-openapi (Kubernetes 1.35) type of their
//!   kind and encoded again, as kube-apiserver decodes them: wrong types are
//!   400; unknown fields are dropped with a `Warning` header, or refused with
//!   400 under `fieldValidation=Strict`. Bodies are JSON, or protobuf
//!   (`application/vnd.kubernetes.protobuf`, k8s-pb's messages) for every
//!   served kind, the reviews, `TokenRequest` and `DeleteOptions`: YAML and
//!   CBOR are 415. A client that ranks protobuf first (client-go's typed
//!   clients: `kubectl create service|secret|configmap|namespace`,
//!   `kubectl describe`) gets objects and lists as protobuf; errors and
//!   watch streams are JSON, and a watch accepting protobuf only is 406.
//! - uid, creationTimestamp, `generateName` (five-character suffix), and one
//!   global, monotonically increasing resourceVersion. `generation` is kept
//!   where Kubernetes keeps it: on Pods (1 on create, +1 on spec changes
//!   only), EndpointSlices (+1 on any change outside metadata) and
//!   ValidatingWebhookConfigurations (+1 when the webhooks change); the
//!   other kinds served have none in Kubernetes either.
//! - Create of an existing name is 409 AlreadyExists; PUT or PATCH carrying
//!   a stale `metadata.resourceVersion` (or another uid) is 409 Conflict;
//!   404 comes with a `Status` naming the object. A write that changes
//!   nothing is not written (no new resourceVersion, no event), as in
//!   Kubernetes.
//! - Writes to `/status` never change `.spec` (metadata may change, as with
//!   kube-apiserver's status strategies for core kinds); writes to the main
//!   resource leave `.status` as it was. Nodes may carry status on create;
//!   the other kinds' status is reset on create.
//! - The registry strategies' rules: Services get their defaults, a cluster
//!   IP from 10.96.0.0/12 and node ports from 30000-32767 (a taken or
//!   out-of-range port is 422); Namespaces get `spec.finalizers:
//!   [kubernetes]` and phase Active; Pods get phase Pending and their QoS
//!   class; Secrets' `stringData` lands in `data`; a node's pod CIDRs cannot
//!   change once set. Names are validated (422), and so, in kube-apiserver's
//!   words (422 `Invalid`, one cause each), are: label keys and values and
//!   annotation keys and total size (`validation/metadata.rs`); Service
//!   ports (range, protocol, names, (protocol, port) pairs), type,
//!   `externalTrafficPolicy` and `loadBalancerClass`
//!   (`kinds/service/checks.rs`); Node taints and pod CIDRs and Lease fields
//!   (`kinds/node.rs`); events.k8s.io notes. The contract suites
//!   (`tests/validation*.rs`) pin each against kube-apiserver v1.37 and
//!   v1.35; refused values are shown as they show them, lists and structs
//!   as JSON (`validation/bad_value.rs`). Other
//!   validation of specs is not done: an object a real server would find
//!   invalid may still be stored. Service `status.conditions` are decoded
//!   as Go reads `metav1.Condition` (a field left out is its zero value, the
//!   time `null`) and, as kube-apiserver 1.35-1.37 do, not validated
//!   (`kinds/service/conditions.rs`).
//! - `managedFields` are not maintained.
//!
//! # Patches
//!
//! `application/json-patch+json` (RFC 6902, with Go's rule that `test` of a
//! missing member against `null` passes, which kube-runtime's finalizer
//! helper relies on), `application/merge-patch+json` (RFC 7386) and
//! `application/strategic-merge-patch+json` with the
//! `patchStrategy`/`patchMergeKey` tags of k8s.io/api for every list of the
//! kinds served: `metadata.finalizers` (union), `metadata.ownerReferences`
//! (uid), Node `spec.podCIDRs` (union), `status.conditions` and
//! `status.addresses` (by type), Service `spec.ports` (by port) and
//! `status.conditions` (by type), Namespace `status.conditions`, and the
//! Pod lists (containers, volumes, env, ports...). Lists without a tag are
//! atomic, in Kubernetes as here: a strategic patch of Node `spec.taints` or
//! Service `status.loadBalancer.ingress` replaces the whole list. The
//! directives `$patch` (replace, delete, merge), `$retainKeys`,
//! `$deleteFromPrimitiveList/` and `$setElementOrder/` are honoured. A list
//! the object lacks is taken as the patch has it, less the items carrying
//! `$patch`: as in Kubernetes, nothing is merged, so repeated merge keys stay.
//!
//! `application/apply-patch+yaml` (server-side apply) is refused with 415:
//! without `managedFields` there are no field managers whose conflicts it
//! could detect, and applying as a merge would be a silent approximation.
//!
//! # Deletion
//!
//! An object with finalizers gets `deletionTimestamp` and stays until an
//! update removes its last finalizer, which deletes it; no finalizer can be
//! added meanwhile (422). Preconditions (uid, resourceVersion) are 409 when
//! they fail. `propagationPolicy` Background is what happens; Foreground and
//! Orphan are accepted for objects without dependents and refused with 501
//! for objects with dependents, since they need the garbage collector, which
//! does not run here (nor is any dependent ever deleted). No controllers
//! run: a scheduled, running Pod stays (graceful deletion) until deleted
//! with `gracePeriodSeconds=0`, as if its kubelet never confirmed, and a
//! deleted Namespace stays Terminating until `spec.finalizers` is emptied
//! through `namespaces/<name>/finalize`; new objects in it are 403.
//!
//! # Lists
//!
//! `labelSelector` (`=`, `==`, `!=`, `in`, `notin`, exists, `!`exists, `>`,
//! `<`), `fieldSelector` on `metadata.name` and `metadata.namespace` and the
//! fields Kubernetes makes selectable per kind (Pod `spec.nodeName`,
//! `status.phase`...; Node `spec.unschedulable`; core Event
//! `involvedObject.*`, `reason`, `type`...; Secret `type`; Namespace
//! `status.phase`), any other field being 400, `limit` + `continue` (every page read at the first page's
//! resourceVersion; `remainingItemCount` without selectors), and
//! resourceVersion / resourceVersionMatch as the API concepts table says,
//! including `Exact` reads of past states (410 Expired when older than the
//! history or the last compaction) and 504 for a resourceVersion never
//! issued.
//!
//! # Watches
//!
//! From a resourceVersion, a watch replays the bounded per-resource history
//! ([`Builder::history_limit`]); older than that (or than the last
//! compaction), its stream's first event is a 410 `ERROR` (reason Expired),
//! as kube-apiserver sends it, and a watch that falls further behind than
//! the history while open is ended the same way. Without a resourceVersion
//! (or with `0`) a watch starts with synthetic ADDED events.
//! `allowWatchBookmarks` brings BOOKMARK events every
//! [`Builder::bookmark_interval`]; `timeoutSeconds` ends the stream (30
//! minutes without it); selectors turn updates that enter or leave the
//! selection into ADDED and DELETED. Streaming lists
//! (`sendInitialEvents=true` with `resourceVersionMatch=NotOlderThan`,
//! kube-runtime's `watcher::Config::streaming_lists`) end their initial
//! events with the `k8s.io/initial-events-end` bookmark. kube-runtime 5's
//! watcher uses paged lists by default (`limit=500`, then a watch with
//! bookmarks and `timeoutSeconds=290`); both modes work.
//!
//! `Accept: application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`
//! (kube's metadata API and metadata watcher) is served, and so is
//! `as=Table;g=meta.k8s.io;v=v1`, server-side printing as `kubectl get`
//! asks for it: kube-apiserver's printers' columns for every kind served
//! (wide ones at priority 1), `includeObject=None|Metadata|Object`, lists,
//! and watches whose first event alone carries the column definitions.
//! The contract suite checks the columns and cells against a real
//! kube-apiserver.
//!
//! # kubectl
//!
//! kubectl 1.20 (Debian bookworm's) and 1.32 work for `get` (with the
//! server's tables, `-o wide` included), `get -w`,
//! `describe`, `create -f`, `patch` (`--type merge|json|strategic`) and
//! `delete`, and the generators that send protobuf (`create service`,
//! `create secret`, ...). OpenAPI v3 is served
//! (`/openapi/v3` and a document per group-version, generated from the
//! k8s-openapi types' schemas, every write taking `fieldValidation`), so
//! kubectl 1.27 and newer validate on the server (`create`, `apply` and
//! `replace` need no `--validate=false`; this server does its own decoding,
//! see Objects) and `kubectl explain` works; so is OpenAPI v2
//! (`/openapi/v2`, made from the v3 documents, as JSON or gnostic's
//! protobuf), which `kubectl explain --output=plaintext-openapiv2` and older
//! clients read.
//!
//! # Not implemented
//!
//! Client-certificate, OIDC and webhook authentication, impersonation, the
//! Node authorizer, ClusterRole aggregation and RBAC's escalation checks,
//! bound (`boundObjectRef`) and JWT service-account tokens,
//! LocalSubjectAccessReview, SelfSubjectRulesReview and SelfSubjectReview,
//! admission, validation beyond
//! names and the rules above, `managedFields` and server-side apply, YAML,
//! CBOR bodies, protobuf watch streams and errors, `meta.k8s.io/v1beta1` Tables, aggregated discovery, OpenAPI v2's ETags,
//! subresources other than `status`, `namespaces/finalize` and
//! `serviceaccounts/token`, and the
//! controllers (garbage collector, namespace controller, kubelet, node
//! lifecycle) whose work some semantics wait for.
//!
//! # Scale
//!
//! Objects are serialized once, when written; GET, lists and every watch
//! share those bytes. Updates are worked out outside the store's lock and
//! committed only if the object did not change meanwhile. The
//! `benches/throughput.rs` benchmark (`cargo bench -p ccm-test-apiserver`)
//! loads 10,000 nodes, 2,000 services and 50 open watches.

mod api;
mod auth;
mod error;
mod faults;
mod kinds;
mod kubeconfig;
mod meta;
mod patch;
mod protobuf;
mod registry;
mod resources;
mod seed;
mod selector;
mod server;
mod shared;
mod stats;
mod status;
mod store;
mod user;
mod validation;

/// The parsers behind `labelSelector` and strategic merge patches, for the
/// fuzz targets (`testing/fuzz-targets`): not an API.
#[doc(hidden)]
pub mod fuzzing {
    use serde_json::{Map, Value};

    use crate::patch::{self, PatchType};
    use crate::resources::RESOURCES;
    use crate::selector::LabelSelector;

    /// Whether `selector`, a `labelSelector`, selects an object labelled
    /// `labels`; the 400's message when it does not parse.
    pub fn label_selector_matches(
        selector: &str,
        labels: &Map<String, Value>,
    ) -> Result<bool, String> {
        LabelSelector::parse(selector)
            .map(|s| s.matches(Some(labels)))
            .map_err(|e| e.message)
    }

    /// `body`, a strategic merge patch, applied to `current`, an object of
    /// `kind` (`Node`, `Service`, `Pod`...); the error's message when it does
    /// not apply. `None` for a kind not served.
    pub fn strategic_merge_patch(
        kind: &str,
        current: Value,
        body: &[u8],
    ) -> Option<Result<Value, String>> {
        let kind = RESOURCES.iter().find(|r| r.kind == kind)?.kind_id;
        Some(patch::apply(kind, PatchType::Strategic, current, body).map_err(|e| e.message))
    }
}

pub use auth::AuthorizationMode;
pub use error::Error;
pub use faults::{Failure, RequestMatch};
pub use seed::{UNINITIALIZED_TAINT, node as seed_node, pod_cidr};
pub use server::{Builder, RequestLog, TestApiServer};
pub use stats::{RequestCount, RequestKey, RequestRecord, Stats, Verb};
