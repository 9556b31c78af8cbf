//! Issue 9: subnet leases against a real etcd (on loopback, in a temp dir): concurrent nodes
//! get distinct subnets, a node gets its own subnet back, an exhausted network is an error that
//! says so, and nothing is left behind by a failed attempt.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use etcd_client::{Client, GetOptions};
use ofnode::cluster::lease::{acquire, Acquired};
use ofnode::cluster::registry::Holder;
use ofnode::cluster::{ClusterSettings, TlsFiles};
use ofnode::sdn::Cidr;
use ofnode_harness::Etcd;

fn settings(etcd: &Etcd, network: &str) -> ClusterSettings {
    let text = format!(
        "endpoints = [\"{}\"]\nnetwork = \"{network}\"\nsubnet_prefix_len = 23\n\
         service_network = \"172.30.0.0/16\"\npublic_ip = \"192.0.2.11\"\nlease_ttl = 5\n",
        etcd.endpoint()
    );
    let settings: ClusterSettings = toml::from_str(&text).unwrap();
    settings.validate().unwrap();
    settings
}

fn holder(i: u8) -> Holder {
    Holder {
        node: format!("node-{i}"),
        host_ip: Ipv4Addr::new(192, 0, 2, 10 + i),
        vtep_mac: None,
    }
}

async fn client(etcd: &Etcd) -> Client {
    Client::connect([etcd.endpoint()], None).await.unwrap()
}

async fn keys(client: &mut Client) -> Vec<String> {
    let response = client
        .get("/ofnode/", Some(GetOptions::new().with_prefix()))
        .await
        .unwrap();
    response
        .kvs()
        .iter()
        .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_nodes_get_distinct_subnets_and_their_own_back() {
    let etcd = Etcd::start_on_loopback().unwrap();
    let settings = settings(&etcd, "10.128.0.0/14");
    // Eight nodes racing for the same first free subnet.
    let tasks: Vec<_> = (0..8u8)
        .map(|i| {
            let settings = settings.clone();
            let endpoint = etcd.endpoint();
            tokio::spawn(async move {
                let mut client = Client::connect([endpoint], None).await.unwrap();
                acquire(&mut client, &settings, &holder(i), None).await
            })
        })
        .collect();
    let mut acquired: Vec<Acquired> = Vec::new();
    for task in tasks {
        acquired.push(task.await.unwrap().unwrap());
    }
    let subnets: BTreeSet<Cidr> = acquired.iter().map(|a| a.subnet).collect();
    assert_eq!(subnets.len(), 8, "{acquired:?}");
    let mut client = client(&etcd).await;
    assert_eq!(keys(&mut client).await.len(), 8);

    // Node 3 restarts while its lease is alive: it takes over its own key, whatever it
    // remembered, under a new lease.
    let before = acquired[3];
    let again = acquire(&mut client, &settings, &holder(3), None)
        .await
        .unwrap();
    assert_eq!(again.subnet, before.subnet);
    assert_ne!(again.lease_id, before.lease_id);
    assert_eq!(keys(&mut client).await.len(), 8);

    // A new node that remembers a subnet nobody holds gets it.
    let remembered: Cidr = "10.128.200.0/23".parse().unwrap();
    let new = acquire(&mut client, &settings, &holder(9), Some(remembered))
        .await
        .unwrap();
    assert_eq!(new.subnet, remembered);
    // One that remembers a taken subnet gets a free one instead.
    let other = acquire(&mut client, &settings, &holder(10), Some(remembered))
        .await
        .unwrap();
    assert!(!subnets.contains(&other.subnet) && other.subnet != remembered);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_network_is_an_error_that_changes_nothing() {
    let etcd = Etcd::start_on_loopback().unwrap();
    // Room for two /23s.
    let settings = settings(&etcd, "10.128.0.0/22");
    let mut client = client(&etcd).await;
    for i in 0..2 {
        acquire(&mut client, &settings, &holder(i), None)
            .await
            .unwrap();
    }
    let leases_before = client.leases().await.unwrap().leases().len();
    let err = acquire(&mut client, &settings, &holder(2), None)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "cluster network 10.128.0.0/22 is exhausted: all 2 /23 subnets are leased by other nodes"
    );
    assert_eq!(keys(&mut client).await.len(), 2);
    // The lease granted for the attempt was revoked.
    assert_eq!(client.leases().await.unwrap().leases().len(), leases_before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_etcd_is_reached_with_the_configured_files() {
    let etcd = Etcd::start_on_loopback_tls().unwrap();
    let files = etcd.tls_files();
    let mut settings = settings(&etcd, "10.128.0.0/14");
    settings.tls = Some(TlsFiles {
        ca: files.ca.clone(),
        cert: Some(files.cert.clone()),
        key: Some(files.key.clone()),
    });
    settings.validate().unwrap();
    let options = settings.connect_options().unwrap();
    let mut client = Client::connect(&settings.endpoints, Some(options))
        .await
        .unwrap();
    let acquired = acquire(&mut client, &settings, &holder(1), None)
        .await
        .unwrap();
    assert_eq!(acquired.subnet, "10.128.0.0/23".parse().unwrap());
    let listed = etcd
        .etcdctl(&["get", "--prefix", "--keys-only", "/ofnode/"])
        .unwrap();
    assert!(listed.contains("/ofnode/subnets/10.128.0.0-23"), "{listed}");

    // Without the client certificate etcd refuses the node, and the error says etcd.
    settings.tls = Some(TlsFiles {
        ca: files.ca.clone(),
        cert: None,
        key: None,
    });
    let options = settings.connect_options().unwrap();
    let refused = match Client::connect(&settings.endpoints, Some(options)).await {
        Ok(mut client) => acquire(&mut client, &settings, &holder(2), None)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(err) => Err(err.to_string()),
    };
    let err = refused.unwrap_err();
    assert!(err.starts_with("etcd"), "{err}");
    // A missing CA file is named.
    settings.tls = Some(TlsFiles {
        ca: etcd.dir().join("missing.pem"),
        cert: None,
        key: None,
    });
    let err = settings.connect_options().unwrap_err().to_string();
    assert!(err.contains("missing.pem"), "{err}");
}
