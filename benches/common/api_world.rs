//! A store world (`store_world.rs`) built on a real node through its API, as benches/scale.rs
//! and benches/audit.rs use it: the namespaces, `LOCAL_PODS` veths on br0 added as pods, and
//! the rest of the pods as other nodes' (`POST /v1/remote-pods`), many requests in flight.

use std::net::Ipv4Addr;
use std::sync::Arc;

use ofnode::api::client::{Client, ClientError};
use ofnode::api::wire;
use ofnode_harness::cluster::Node;

use crate::store_world::*;

/// Requests in flight while the world is built (the build is not what is measured).
pub const IN_FLIGHT: usize = 64;

/// Runs `requests` through the API, `IN_FLIGHT` at a time; panics on the first refusal.
pub fn all<F>(runtime: &tokio::runtime::Runtime, requests: Vec<F>)
where
    F: std::future::Future<Output = Result<(), ClientError>> + Send + 'static,
{
    runtime.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for request in requests {
            if set.len() >= IN_FLIGHT {
                set.join_next().await.map(|r| r.expect("a request task"));
            }
            set.spawn(request);
        }
        while let Some(done) = set.join_next().await {
            done.expect("a request task").expect("building the world");
        }
    });
}

/// Pod `i` of `world`, known on this node as another node's.
pub fn remote_pod(world: &World, i: usize, variant: usize) -> wire::KnownPod {
    wire::KnownPod {
        pod: pod_key(i, world.namespaces()),
        info: remote_info(i, world.namespaces(), variant),
    }
}

/// `world`'s namespaces and pods on `node` (no policies yet).
pub fn build_pods(
    world: World,
    node: &Node,
    client: &Arc<Client>,
    runtime: &tokio::runtime::Runtime,
) {
    let namespaces = (0..world.namespaces())
        .map(|ns| {
            let (client, namespace) = (client.clone(), namespace(ns));
            async move { client.namespace_set(&namespace).await }
        })
        .collect();
    all(runtime, namespaces);
    node.netns()
        .add_veth_pairs("sp", 0..LOCAL_PODS)
        .expect("creating veths");
    let local = (0..LOCAL_PODS)
        .map(|i| {
            let client = client.clone();
            let add = wire::PodAdd {
                pod: pod_key(i, world.namespaces()),
                veth: format!("sp{i}").parse().expect("a veth name"),
                ip: Ipv4Addr::from(u32::from(node.subnet) + 10 + i as u32),
                mac: format!("0a:58:00:00:{:02x}:{:02x}", i >> 8, i & 0xff)
                    .parse()
                    .expect("a MAC"),
                sandbox: format!("{:064x}", 0xc000 + i).parse().expect("a sandbox"),
                vnid: Default::default(),
                labels: pod_labels(i, world.namespaces(), 0),
            };
            async move { client.pod_add(&add).await.map(|_| ()) }
        })
        .collect();
    all(runtime, local);
    let remote = (LOCAL_PODS..world.pods)
        .map(|i| {
            let client = client.clone();
            let pod = remote_pod(&world, i, 0);
            async move { client.remote_pod_set(&pod).await }
        })
        .collect();
    all(runtime, remote);
}
