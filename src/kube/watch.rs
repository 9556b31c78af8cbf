//! The API's objects as one stream of updates: a kube-runtime watcher per kind (list, then
//! watch; a watch that expires — 410 Gone — is listed again, which the follower sweeps), each
//! object converted to its [`Fact`] as it arrives. No periodic resync: after the list, only
//! changes travel.

use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::ListParams;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};

use super::convert::{self, PodFacts, PolicyFacts, Refused, ServiceFacts};
use super::crd;
use super::input::{Kind, ObjectRef};
use crate::sdn::policy::admin::AdminPolicy;
use crate::sdn::types::{EgressNetworkPolicy, HostSubnet};
use crate::value::Vnid;

/// What one object is to the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    Namespace(convert::NamespaceFacts),
    NetNamespace(Vnid),
    Pod(PodFacts),
    NetPol(PolicyFacts),
    Service(ServiceFacts),
    HostSubnet(HostSubnet),
    Egress(EgressNetworkPolicy),
    Admin(AdminPolicy),
}

/// One object as it arrived: its name, resourceVersion and what it is to the node (None:
/// nothing — a host-network pod, say; refused: what the node cannot implement).
#[derive(Debug, Clone)]
pub struct Object {
    pub object: ObjectRef,
    pub resource_version: Option<String>,
    pub fact: Result<Option<Fact>, Refused>,
}

/// One update of one kind.
#[derive(Debug)]
pub struct Update {
    pub kind: Kind,
    pub event: Result<Event<Object>, String>,
}

/// A kind the node watches: how its objects are named and what each is.
trait Watched:
    Resource<DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    const KIND: Kind;
    fn key(&self) -> String;
    fn fact(&self) -> Result<Option<Fact>, Refused>;
}

fn name(meta: &kube::api::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

impl Watched for Namespace {
    const KIND: Kind = Kind::Namespace;
    fn key(&self) -> String {
        name(&self.metadata)
    }
    fn fact(&self) -> Result<Option<Fact>, Refused> {
        Ok(Some(Fact::Namespace(convert::namespace_facts(self))))
    }
}

impl Watched for crd::NetNamespace {
    const KIND: Kind = Kind::NetNamespace;
    fn key(&self) -> String {
        name(&self.metadata)
    }
    fn fact(&self) -> Result<Option<Fact>, Refused> {
        convert::netnamespace_vnid(self).map(|vnid| Some(Fact::NetNamespace(vnid)))
    }
}

impl Watched for Pod {
    const KIND: Kind = Kind::Pod;
    fn key(&self) -> String {
        convert::namespaced_key(&self.metadata)
    }
    fn fact(&self) -> Result<Option<Fact>, Refused> {
        Ok(convert::pod_facts(self)?.map(Fact::Pod))
    }
}

impl Watched for NetworkPolicy {
    const KIND: Kind = Kind::NetworkPolicy;
    fn key(&self) -> String {
        convert::namespaced_key(&self.metadata)
    }
    fn fact(&self) -> Result<Option<Fact>, Refused> {
        Ok(Some(Fact::NetPol(convert::policy_facts(self))))
    }
}

impl Watched for Service {
    const KIND: Kind = Kind::Service;
    fn key(&self) -> String {
        convert::namespaced_key(&self.metadata)
    }
    fn fact(&self) -> Result<Option<Fact>, Refused> {
        Ok(convert::service_facts(self)?.map(Fact::Service))
    }
}

impl Watched for crd::HostSubnet {
    const KIND: Kind = Kind::HostSubnet;
    fn key(&self) -> String {
        name(&self.metadata)
    }
    fn fact(&self) -> Result<Option<Fact>, Refused> {
        convert::host_subnet(self).map(|hs| Some(Fact::HostSubnet(hs)))
    }
}

impl Watched for crd::EgressNetworkPolicy {
    const KIND: Kind = Kind::EgressNetworkPolicy;
    fn key(&self) -> String {
        convert::namespaced_key(&self.metadata)
    }
    fn fact(&self) -> Result<Option<Fact>, Refused> {
        convert::egress_policy(self).map(|p| Some(Fact::Egress(p)))
    }
}

impl Watched for crd::AdminNetworkPolicy {
    const KIND: Kind = Kind::AdminNetworkPolicy;
    fn key(&self) -> String {
        name(&self.metadata)
    }
    fn fact(&self) -> Result<Option<Fact>, Refused> {
        convert::admin_policy(Self::KIND.name(), &self.metadata, &self.spec)
            .map(|p| Some(Fact::Admin(p)))
    }
}

impl Watched for crd::BaselineAdminNetworkPolicy {
    const KIND: Kind = Kind::BaselineAdminNetworkPolicy;
    fn key(&self) -> String {
        name(&self.metadata)
    }
    fn fact(&self) -> Result<Option<Fact>, Refused> {
        convert::admin_policy(Self::KIND.name(), &self.metadata, &self.spec)
            .map(|p| Some(Fact::Admin(p)))
    }
}

fn object_of<K: Watched>(object: K) -> Object {
    Object {
        object: ObjectRef::new(K::KIND, object.key()),
        resource_version: object.meta().resource_version.clone(),
        fact: object.fact(),
    }
}

/// An error with its causes (`failed to list: client error (Connect): invalid peer
/// certificate: UnknownIssuer`): the cause is what an operator acts on.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

fn convert_event<K: Watched>(event: Event<K>) -> Event<Object> {
    match event {
        Event::Apply(object) => Event::Apply(object_of(object)),
        Event::Delete(object) => Event::Delete(object_of(object)),
        Event::InitApply(object) => Event::InitApply(object_of(object)),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    }
}

/// The updates of kind `K`, every namespace. Errors are passed on (the follower shows them)
/// and retried with kube-runtime's backoff; a 410 relists.
fn updates<K: Watched>(client: &Client) -> BoxStream<'static, Update>
where
    K::Scope: 'static,
{
    let api: Api<K> = Api::all(client.clone());
    watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .map(|event| Update {
            kind: K::KIND,
            event: event.map(convert_event).map_err(|e| error_chain(&e)),
        })
        .boxed()
}

/// How often a node asks again whether the API server serves an optional kind it did not.
const OPTIONAL_RECHECK: Duration = Duration::from_secs(30);

/// The updates of an optional kind `K` (the admin tiers: many clusters do not install
/// network-policy-api's CRDs). While the API server does not serve it (404), it is listed as
/// empty, once, so the node is synced without it (and sweeps what it held of it), and asked
/// again every [`OPTIONAL_RECHECK`]; once served, its watcher takes over (a list, then changes).
/// An error other than 404 is passed on, as a watcher's would be, and asked again.
fn optional_updates<K: Watched>(client: &Client) -> BoxStream<'static, Update>
where
    K::Scope: 'static,
{
    let api: Api<K> = Api::all(client.clone());
    // (asked before, listed as empty)
    let absent = futures::stream::unfold((false, false), move |(asked, listed)| {
        let api = api.clone();
        async move {
            if asked {
                tokio::time::sleep(OPTIONAL_RECHECK).await;
            }
            let (events, listed) = match api.list_metadata(&ListParams::default().limit(1)).await {
                Ok(_) => return None,
                // A CRD not installed: 404 with a plain-text body (no Status, so no reason to read).
                Err(kube::Error::Api(status)) if status.code == 404 => match listed {
                    false => (vec![Ok(Event::Init), Ok(Event::InitDone)], true),
                    true => (Vec::new(), true),
                },
                Err(e) => (vec![Err(error_chain(&e))], listed),
            };
            let updates = events.into_iter().map(|event| Update {
                kind: K::KIND,
                event,
            });
            Some((futures::stream::iter(updates), (true, listed)))
        }
    });
    absent.flatten().chain(updates::<K>(client)).boxed()
}

/// The updates of `kind`.
pub fn watch(client: &Client, kind: Kind) -> BoxStream<'static, Update> {
    match kind {
        Kind::Namespace => updates::<Namespace>(client),
        Kind::NetNamespace => updates::<crd::NetNamespace>(client),
        Kind::Pod => updates::<Pod>(client),
        Kind::NetworkPolicy => updates::<NetworkPolicy>(client),
        Kind::Service => updates::<Service>(client),
        Kind::HostSubnet => updates::<crd::HostSubnet>(client),
        Kind::EgressNetworkPolicy => updates::<crd::EgressNetworkPolicy>(client),
        Kind::AdminNetworkPolicy => optional_updates::<crd::AdminNetworkPolicy>(client),
        Kind::BaselineAdminNetworkPolicy => {
            optional_updates::<crd::BaselineAdminNetworkPolicy>(client)
        }
    }
}
