//! The Lease in the Kubernetes API: the [`LeaseStore`] the elector uses
//! outside tests.

use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};

use super::{LeaseApiError, LeaseEvent, LeaseStore};
use crate::{LeaderElectionConfig, LeaseRecord};

/// The Lease in the Kubernetes API, through `coordination.k8s.io/v1`.
#[derive(Debug, Clone)]
pub(crate) struct KubeLeaseStore {
    api: Api<Lease>,
    name: String,
    namespace: String,
}

impl KubeLeaseStore {
    pub(crate) fn new(client: Client, config: &LeaderElectionConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.lease_namespace),
            name: config.lease_name.clone(),
            namespace: config.lease_namespace.clone(),
        }
    }

    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn request_error(&self, verb: &'static str, source: kube::Error) -> LeaseApiError {
        LeaseApiError::Request {
            verb,
            lease: self.key(),
            source,
        }
    }
}

fn is_409(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

impl LeaseStore for KubeLeaseStore {
    async fn get(&self) -> Result<Option<Lease>, LeaseApiError> {
        self.api
            .get_opt(&self.name)
            .await
            .map_err(|source| self.request_error("get", source))
    }

    async fn create(&self, record: &LeaseRecord) -> Result<Lease, LeaseApiError> {
        let mut spec = LeaseSpec::default();
        record.apply_to(&mut spec);
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        };
        self.api
            .create(&PostParams::default(), &lease)
            .await
            .map_err(|source| match is_409(&source) {
                true => LeaseApiError::AlreadyExists { lease: self.key() },
                false => self.request_error("create", source),
            })
    }

    async fn replace(&self, current: &Lease, record: &LeaseRecord) -> Result<Lease, LeaseApiError> {
        // PUT with the resourceVersion as read: the API server refuses it
        // with 409 if anyone wrote the Lease since.
        let mut lease = current.clone();
        record.apply_to(lease.spec.get_or_insert_with(LeaseSpec::default));
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map_err(|source| match is_409(&source) {
                true => LeaseApiError::Conflict { lease: self.key() },
                false => self.request_error("update", source),
            })
    }

    fn watch(&self) -> BoxStream<'static, LeaseEvent> {
        let name = self.name.clone();
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        watcher(self.api.clone(), config)
            .default_backoff()
            .filter_map(move |event| {
                let event = match event {
                    Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => {
                        // Filtered again in case the server ignores the field selector.
                        (lease.metadata.name.as_deref() == Some(&name))
                            .then(|| LeaseEvent::Applied(Box::new(lease)))
                    }
                    Ok(watcher::Event::Delete(lease)) => (lease.metadata.name.as_deref()
                        == Some(&name))
                    .then_some(LeaseEvent::Deleted),
                    Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
                    Err(error) => {
                        tracing::debug!(%error, "Lease watch failed; polling continues");
                        None
                    }
                };
                std::future::ready(event)
            })
            .boxed()
    }
}
