//! An in-memory {{Camel}} cloud behind [`Api`]: what the tests and the
//! provider conformance suite run against (feature `test-util`).
//!
//! It counts every request, can answer all of them as rate limited, and
//! behaves as the real cloud is documented to: make it more faithful as the
//! real API's behaviour becomes known, and the conformance suite holds the
//! provider to it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ccm_cloud_provider::CloudError;
//@if routes
use ccm_cloud_provider::ipnet::IpNet;
//@end
use parking_lot::Mutex;

use crate::api::*;

/// The delay a rate-limited answer asks for.
const RETRY_AFTER: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
struct State {
    next_id: u64,
//@if instances
    instances: BTreeMap<String, CloudInstance>,
//@end
//@if load-balancers
    load_balancers: BTreeMap<String, CloudLoadBalancer>,
//@end
//@if routes
    routes: BTreeMap<String, CloudRoute>,
//@end
}

impl State {
    fn id(&mut self, kind: &str) -> String {
        self.next_id += 1;
        format!("{kind}-{}", self.next_id)
    }
}

/// The in-memory cloud.
#[derive(Debug, Default)]
pub struct InMemoryCloud {
    state: Mutex<State>,
    requests: AtomicU64,
    throttled: AtomicBool,
}

impl InMemoryCloud {
    /// An empty cloud.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many requests it has received.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// While `on`, every request is answered as rate limited.
    pub fn set_throttled(&self, on: bool) {
        self.throttled.store(on, Ordering::SeqCst);
    }

    /// How many instances, load balancers and routes it holds, by kind.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        // One guard: the lock is not reentrant.
        let state = self.state.lock();
        BTreeMap::from([
//@if instances
            ("instances".to_owned(), state.instances.len()),
//@end
//@if load-balancers
            ("load-balancers".to_owned(), state.load_balancers.len()),
//@end
//@if routes
            ("routes".to_owned(), state.routes.len()),
//@end
        ])
    }

    /// Every request starts here: counted, and refused while throttled.
    fn enter(&self) -> Result<(), CloudError> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        if self.throttled.load(Ordering::SeqCst) {
            return Err(CloudError::Throttled {
                retry_after: RETRY_AFTER,
            });
        }
        Ok(())
    }
//@if instances

    /// Starts a running instance called `name`; its ID.
    pub fn add_instance(&self, name: &str) -> String {
        let mut state = self.state.lock();
        let id = state.id("i");
        let n = state.next_id;
        state.instances.insert(
            id.clone(),
            CloudInstance {
                id: id.clone(),
                name: name.to_owned(),
                instance_type: "standard-2".into(),
                zone: "zone-a".into(),
                private_ip: format!("10.0.{}.{}", n / 250, n % 250 + 2),
                public_ip: None,
                stopped: false,
            },
        );
        id
    }

    /// Stops instance `id`.
    pub fn stop_instance(&self, id: &str) {
        if let Some(instance) = self.state.lock().instances.get_mut(id) {
            instance.stopped = true;
        }
    }

    /// Terminates instance `id`: it is gone.
    pub fn remove_instance(&self, id: &str) {
        self.state.lock().instances.remove(id);
    }
//@end
}

#[async_trait]
impl Api for InMemoryCloud {
//@if instances
    async fn describe_instances(
        &self,
        ids: &[String],
        names: &[String],
    ) -> Result<Vec<CloudInstance>, CloudError> {
        self.enter()?;
        let state = self.state.lock();
        Ok(state
            .instances
            .values()
            .filter(|i| ids.contains(&i.id) || names.contains(&i.name))
            .cloned()
            .collect())
    }

//@end
//@if load-balancers
    async fn find_load_balancer(
        &self,
        name: &str,
    ) -> Result<Option<CloudLoadBalancer>, CloudError> {
        self.enter()?;
        let state = self.state.lock();
        Ok(state.load_balancers.values().find(|lb| lb.spec.name == name).cloned())
    }

    async fn create_load_balancer(
        &self,
        spec: &LoadBalancerSpec,
    ) -> Result<CloudLoadBalancer, CloudError> {
        self.enter()?;
        let mut state = self.state.lock();
        if state.load_balancers.values().any(|lb| lb.spec.name == spec.name) {
            return Err(CloudError::msg(format!("a load balancer named {} exists", spec.name)));
        }
        let id = state.id("lb");
        let lb = CloudLoadBalancer {
            id: id.clone(),
            address: format!("192.0.2.{}", state.next_id % 250 + 1),
            spec: spec.clone(),
        };
        state.load_balancers.insert(id, lb.clone());
        Ok(lb)
    }

    async fn update_load_balancer(
        &self,
        id: &str,
        spec: &LoadBalancerSpec,
    ) -> Result<CloudLoadBalancer, CloudError> {
        self.enter()?;
        let mut state = self.state.lock();
        let lb = state
            .load_balancers
            .get_mut(id)
            .ok_or_else(|| CloudError::msg(format!("no load balancer {id}")))?;
        lb.spec = spec.clone();
        Ok(lb.clone())
    }

    async fn delete_load_balancer(&self, id: &str) -> Result<(), CloudError> {
        self.enter()?;
        self.state.lock().load_balancers.remove(id);
        Ok(())
    }

//@end
//@if routes
    async fn list_routes(&self) -> Result<Vec<CloudRoute>, CloudError> {
        self.enter()?;
        let state = self.state.lock();
        Ok(state
            .routes
            .values()
            .map(|r| CloudRoute {
                blackhole: !state.instances.contains_key(&r.target),
                ..r.clone()
            })
            .collect())
    }

    async fn create_route(
        &self,
        cluster: &str,
        destination: IpNet,
        target: &str,
    ) -> Result<(), CloudError> {
        self.enter()?;
        let mut state = self.state.lock();
        if !state.instances.contains_key(target) {
            return Err(CloudError::InstanceNotFound);
        }
        if state.routes.values().any(|r| r.destination == destination) {
            return Err(CloudError::msg(format!("a route to {destination} exists")));
        }
        let id = state.id("r");
        state.routes.insert(
            id.clone(),
            CloudRoute {
                id,
                destination,
                target: target.to_owned(),
                cluster: cluster.to_owned(),
                blackhole: false,
            },
        );
        Ok(())
    }

    async fn delete_route(&self, id: &str) -> Result<(), CloudError> {
        self.enter()?;
        self.state.lock().routes.remove(id);
        Ok(())
    }

//@end
}
