//! What every controller gets: clients, shared informers, the metered cloud,
//! metrics and the shutdown signal.

use std::sync::{Arc, OnceLock};

use futures::future::join4;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Service};
use tokio_util::sync::CancellationToken;

use crate::cloud::MeteredCloud;
use crate::informer::Informer;
use crate::metrics::Metrics;

/// The shared informers of this process, created on first use: a kind no
/// controller asks for is never watched.
pub struct Informers {
    client: kube::Client,
    nodes: OnceLock<Arc<Informer<Node>>>,
    services: OnceLock<Arc<Informer<Service>>>,
    persistent_volumes: OnceLock<Arc<Informer<PersistentVolume>>>,
    csrs: OnceLock<Arc<Informer<CertificateSigningRequest>>>,
}

impl std::fmt::Debug for Informers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informers")
            .field("nodes", &self.nodes.get())
            .field("services", &self.services.get())
            .field("persistent_volumes", &self.persistent_volumes.get())
            .field("csrs", &self.csrs.get())
            .finish()
    }
}

impl Informers {
    /// The client the informers list and watch with.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// No informers yet; they will use `client`. Give them one that does
    /// not retry 504s itself: kube's default retry layer would hide
    /// "too large resource version" from the watch for minutes (15 tries,
    /// growing delays) before the informer could relist.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            nodes: OnceLock::new(),
            services: OnceLock::new(),
            persistent_volumes: OnceLock::new(),
            csrs: OnceLock::new(),
        }
    }

    /// Each started informer whose watch cannot make progress, as
    /// `(kind, its last error)`.
    pub fn watch_errors(&self) -> Vec<(&'static str, String)> {
        [
            ("Node", self.nodes.get().and_then(|i| i.watch_error())),
            ("Service", self.services.get().and_then(|i| i.watch_error())),
            (
                "PersistentVolume",
                self.persistent_volumes.get().and_then(|i| i.watch_error()),
            ),
            (
                "CertificateSigningRequest",
                self.csrs.get().and_then(|i| i.watch_error()),
            ),
        ]
        .into_iter()
        .filter_map(|(kind, error)| error.map(|error| (kind, error)))
        .collect()
    }

    /// The Node informer.
    pub fn nodes(&self) -> Arc<Informer<Node>> {
        self.nodes
            .get_or_init(|| Arc::new(Informer::new(self.client.clone())))
            .clone()
    }

    /// The Service informer (all namespaces).
    pub fn services(&self) -> Arc<Informer<Service>> {
        self.services
            .get_or_init(|| Arc::new(Informer::new(self.client.clone())))
            .clone()
    }

    /// The PersistentVolume informer (a cluster-scoped kind).
    pub fn persistent_volumes(&self) -> Arc<Informer<PersistentVolume>> {
        self.persistent_volumes
            .get_or_init(|| Arc::new(Informer::new(self.client.clone())))
            .clone()
    }

    /// The CertificateSigningRequest informer (a cluster-scoped kind).
    pub fn certificate_signing_requests(&self) -> Arc<Informer<CertificateSigningRequest>> {
        self.csrs
            .get_or_init(|| Arc::new(Informer::new(self.client.clone())))
            .clone()
    }

    /// Runs every informer a controller asked for, until `shutdown`.
    ///
    /// # Errors
    /// When an informer was already started.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), crate::InformerError> {
        let nodes = self.nodes.get().cloned();
        let services = self.services.get().cloned();
        let nodes = async {
            match nodes {
                Some(informer) => informer.run(shutdown.clone()).await,
                None => Ok(()),
            }
        };
        let services = async {
            match services {
                Some(informer) => informer.run(shutdown.clone()).await,
                None => Ok(()),
            }
        };
        let volumes = self.persistent_volumes.get().cloned();
        let volumes = async {
            match volumes {
                Some(informer) => informer.run(shutdown.clone()).await,
                None => Ok(()),
            }
        };
        let csrs = self.csrs.get().cloned();
        let csrs = async {
            match csrs {
                Some(informer) => informer.run(shutdown.clone()).await,
                None => Ok(()),
            }
        };
        // Boxed: four informers' futures side by side are large.
        let (a, b, c, d) = Box::pin(join4(nodes, services, volumes, csrs)).await;
        a.and(b).and(c).and(d)
    }

    /// Waits until every started informer has its first full list.
    pub async fn wait_until_ready(&self) {
        if let Some(nodes) = self.nodes.get() {
            nodes.wait_until_ready().await;
        }
        if let Some(services) = self.services.get() {
            services.wait_until_ready().await;
        }
        if let Some(volumes) = self.persistent_volumes.get() {
            volumes.wait_until_ready().await;
        }
        if let Some(csrs) = self.csrs.get() {
            csrs.wait_until_ready().await;
        }
    }
}

/// Everything a controller needs from the process it runs in.
#[derive(Clone)]
pub struct Context {
    /// The Kubernetes client (rate-limited by `--kube-api-qps`).
    pub client: kube::Client,
    /// The provider, metered and fenced.
    pub cloud: Arc<MeteredCloud>,
    /// The process's metrics.
    pub metrics: Metrics,
    /// `--cluster-name`.
    pub cluster_name: String,
    /// This process's identity (pod name), for events.
    pub identity: String,
    /// The shared informers.
    pub informers: Arc<Informers>,
    /// Cancelled when the process stops.
    pub shutdown: CancellationToken,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("cloud", &self.cloud)
            .field("cluster_name", &self.cluster_name)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}
