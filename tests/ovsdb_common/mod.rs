//! Shared by the OVSDB integration tests: a private OVS, a client on it, and ovs-vsctl as the
//! oracle.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use ofnode::ovsdb::monitor::TABLES;
use ofnode::ovsdb::{BridgeSpec, Client, ClientOptions, Datum, Row, Uuid};
use ofnode_harness::Ovs;
use serde_json::Value;

pub struct Setup {
    pub client: Client,
    // Dropped after the client: stops the daemons and removes the namespace.
    pub ovs: Ovs,
}

pub fn test_options() -> ClientOptions {
    ClientOptions {
        request_timeout: Duration::from_secs(20),
        reconfigure_timeout: Duration::from_secs(30),
        backoff_min: Duration::from_millis(50),
        backoff_max: Duration::from_millis(500),
        ..ClientOptions::default()
    }
}

pub async fn start() -> Setup {
    start_with(test_options()).await
}

pub async fn start_with(opts: ClientOptions) -> Setup {
    let ovs = tokio::task::spawn_blocking(|| Ovs::start().expect("private OVS starts"))
        .await
        .unwrap();
    let client = Client::connect(&ovs.db_target(), opts)
        .await
        .expect("client connects");
    Setup { client, ovs }
}

/// The bridge the seed's SetupOVS makes.
/// Connects to `target` with `options` from inside the OVS namespace (where a tcp:/ssl: remote
/// on loopback is reachable) and runs `then` on the connected client, all on one thread there.
pub fn connected_in_netns<R: Send>(
    ovs: &Ovs,
    target: &str,
    options: ClientOptions,
    then: impl AsyncFnOnce(Client) -> R + Send,
) -> Result<R, ofnode::ovsdb::Error> {
    ovs.netns()
        .run_in(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                let client = Client::connect(target, options).await?;
                Ok(then(client).await)
            })
        })
        .expect("enter the OVS namespace")
}

pub fn seed_bridge() -> BridgeSpec {
    BridgeSpec {
        name: "br0".into(),
        fail_mode: Some("secure".into()),
        protocols: vec!["OpenFlow13".into()],
        datapath_type: Some("netdev".into()),
    }
}

/// `ovs-vsctl ARGS…`, trimmed; panics with stderr on failure.
pub fn vsctl(ovs: &Ovs, args: &[&str]) -> String {
    ovs.vsctl(args)
        .unwrap_or_else(|e| panic!("ovs-vsctl {args:?}: {e}"))
        .trim()
        .to_string()
}

/// `ovs-vsctl --format=json list TABLE [RECORD]` decoded into rows keyed by `_uuid`, with the
/// given columns (all of them when empty).
pub fn vsctl_rows(
    ovs: &Ovs,
    table: &str,
    record: Option<&str>,
    columns: &[&str],
) -> BTreeMap<Uuid, Row> {
    let mut cols = vec!["_uuid"];
    cols.extend_from_slice(columns);
    let columns_arg = format!("--columns={}", cols.join(","));
    let mut args = vec!["--format=json", "--data=json"];
    if !columns.is_empty() {
        args.push(&columns_arg);
    }
    args.extend(["list", table]);
    if let Some(record) = record {
        args.push(record);
    }
    let text = vsctl(ovs, &args);
    let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let headings: Vec<String> = serde_json::from_value(json["headings"].clone()).unwrap();
    let mut rows = BTreeMap::new();
    for values in json["data"].as_array().unwrap() {
        let mut row = Row::new();
        let mut uuid = None;
        for (heading, value) in headings.iter().zip(values.as_array().unwrap()) {
            let datum = Datum::from_json(value).unwrap();
            if heading == "_uuid" {
                uuid = datum.as_uuid();
            } else {
                row.insert(heading.clone(), datum);
            }
        }
        rows.insert(uuid.expect("row has a _uuid"), row);
    }
    rows
}

/// One column of one record, per ovs-vsctl.
pub fn vsctl_column(ovs: &Ovs, table: &str, record: &str, column: &str) -> Datum {
    let rows = vsctl_rows(ovs, table, Some(record), &[column]);
    assert_eq!(rows.len(), 1, "{table} {record}: {rows:?}");
    rows.into_values().next().unwrap().remove(column).unwrap()
}

/// Differences between the client's cache and what ovs-vsctl lists, for every cached table and
/// column; empty when they agree.
pub fn cache_differences(ovs: &Ovs, client: &Client) -> Vec<String> {
    let cache = client.cache_snapshot();
    let mut differences = Vec::new();
    for spec in TABLES.iter().filter(|spec| !spec.monitored.is_empty()) {
        let oracle = vsctl_rows(ovs, spec.name, None, spec.monitored);
        let cached: BTreeMap<Uuid, Row> = cache
            .rows(spec.name)
            .map(|(uuid, row)| (uuid, row.clone()))
            .collect();
        if oracle != cached {
            differences.push(format!(
                "{}: ovs-vsctl lists {oracle:#?}\ncache holds {cached:#?}",
                spec.name
            ));
        }
    }
    differences
}
