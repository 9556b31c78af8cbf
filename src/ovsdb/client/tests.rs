//! The client without ovsdb-server: how records are named, how failed operations are reported,
//! and, against the scripted server (`ovsdb/fake.rs`), what a transaction that waits for
//! ovs-vswitchd sends and how the wait ends.

use serde_json::json;

use super::*;
use crate::ovsdb::fake::{options, FakeServer, NO_HANG};

const UUID: &str = "10000000-0000-4000-8000-00000000000a";

#[test]
fn records_are_named_by_their_key_by_uuid_or_as_the_one_open_vswitch_row() {
    let (table, conditions) = record_conditions("bridge", "br0").unwrap();
    assert_eq!(table, "Bridge", "any letter case, as ovs-vsctl");
    assert_eq!(conditions, vec![Condition::eq("name", "br0")]);
    let (table, conditions) = record_conditions("Manager", "ptcp:6640").unwrap();
    assert_eq!(table, "Manager");
    assert_eq!(conditions, vec![Condition::eq("target", "ptcp:6640")]);
    let uuid = Uuid::parse_str(UUID).unwrap();
    let (_, conditions) = record_conditions("QoS", UUID).unwrap();
    assert_eq!(conditions, vec![Condition::uuid(uuid)]);
    let (table, conditions) = record_conditions("open_vswitch", ".").unwrap();
    assert_eq!((table.as_str(), conditions), ("Open_vSwitch", vec![]));
    // A table without a name column: only its UUID names a record.
    let err = record_conditions("qos", "q1").unwrap_err();
    assert!(
        matches!(&err, Error::Invalid(m) if m == "QoS records have no name; name \"q1\" by its UUID"),
        "{err}"
    );
}

#[test]
fn a_failed_operation_is_named_by_its_place_and_kind() {
    let ops = [
        Operation::Select {
            table: "Bridge".into(),
            conditions: vec![],
            columns: None,
        },
        Operation::Delete {
            table: "Port".into(),
            conditions: vec![],
        },
    ];
    let err = op_error(
        &ops,
        OpError {
            index: Some(1),
            error: "referential integrity violation".into(),
            details: "port in use".into(),
        },
    );
    assert_eq!(
        err.to_string(),
        "ovsdb-server refused operation 2 of 2 (delete from Port): referential integrity violation: port in use"
    );
    let err = op_error(
        &ops,
        OpError {
            index: None,
            error: "constraint violation".into(),
            details: String::new(),
        },
    );
    assert!(
        matches!(&err, Error::Server { during, .. } if during == "the transaction's commit"),
        "{err}"
    );
}

#[test]
fn an_update_must_touch_exactly_its_one_row() {
    let counted = |count| OpResult {
        count,
        ..OpResult::default()
    };
    let results = [
        counted(Some(1)),
        counted(Some(0)),
        counted(Some(2)),
        counted(None),
    ];
    assert!(expect_count(&results, 0, "Bridge", "br0").is_ok());
    assert!(matches!(
        expect_count(&results, 1, "Bridge", "br0"),
        Err(Error::NotFound { table, record }) if table == "Bridge" && record == "br0"
    ));
    for index in [2, 3, 4] {
        let err = expect_count(&results, index, "Bridge", "br0").unwrap_err();
        assert!(matches!(err, Error::Protocol(_)), "{index}: {err}");
    }
}

/// The operations of a `transact` request (its params after the database name).
fn ops_of(params: &serde_json::Value) -> Vec<serde_json::Value> {
    let params = params.as_array().expect("transact params are an array");
    assert_eq!(params[0], json!("Open_vSwitch"));
    params[1..].to_vec()
}

#[tokio::test]
async fn a_bumping_transaction_adds_next_cfg_and_hands_back_only_the_callers_results() {
    let server = FakeServer::bind();
    let (client, mut peer) = server.connect(options(), 7).await;
    let update = Operation::Update {
        table: "Bridge".into(),
        conditions: vec![Condition::eq("name", "br0")],
        row: Row::from([("fail_mode".to_string(), Datum::atom("secure"))]),
    };
    let call = tokio::spawn({
        let (client, update) = (client.clone(), update.clone());
        async move { client.transact_bumping(vec![update], true).await }
    });
    let (id, params) = peer.request("transact").await;
    assert_eq!(
        ops_of(&params),
        vec![
            update.to_json(),
            json!({"op": "mutate", "table": "Open_vSwitch", "where": [],
                   "mutations": [["next_cfg", "+=", 1]]}),
            json!({"op": "select", "table": "Open_vSwitch", "where": [], "columns": ["next_cfg"]}),
        ]
    );
    peer.reply(
        id,
        json!([{"count": 1}, {"count": 1}, {"rows": [{"next_cfg": 8}]}]),
    )
    .await;
    let (results, next_cfg) = call.await.unwrap().unwrap().unwrap();
    assert_eq!(results.len(), 1, "the bump's results are the client's own");
    assert_eq!((results[0].count, next_cfg), (Some(1), Some(8)));
}

#[tokio::test]
async fn a_bumping_transaction_tells_the_callers_failures_from_its_own() {
    let server = FakeServer::bind();
    let (client, mut peer) = server.connect(options(), 7).await;
    let wait = Operation::Wait {
        table: "Port".into(),
        conditions: vec![Condition::eq("name", "p1")],
        columns: vec!["name".into()],
        until: crate::ovsdb::txn::Until::Equal,
        rows: vec![],
        timeout_ms: 0,
    };
    let bumping = |client: &Client| {
        let (client, wait) = (client.clone(), wait.clone());
        tokio::spawn(async move { client.transact_bumping(vec![wait], true).await })
    };
    // The caller's own operation failed (a guard): the caller decides (it plans again).
    let call = bumping(&client);
    let (id, _) = peer.request("transact").await;
    peer.reply(id, json!([{"error": "timed out", "details": "wait"}]))
        .await;
    let failed = call.await.unwrap().unwrap().unwrap_err();
    assert_eq!(failed.index, Some(0));
    // The bump failed: an error naming it.
    let call = bumping(&client);
    let (id, _) = peer.request("transact").await;
    peer.reply(
        id,
        json!([{}, {"error": "permission error", "details": "no"}]),
    )
    .await;
    let err = call.await.unwrap().unwrap_err();
    assert!(
        matches!(&err, Error::Server { during, .. } if during == "operation 2 of 3 (mutate of Open_vSwitch)"),
        "{err}"
    );
    // A database without its Open_vSwitch row cannot be waited on.
    let call = bumping(&client);
    let (id, _) = peer.request("transact").await;
    peer.reply(id, json!([{}, {"count": 0}, {"rows": []}]))
        .await;
    let err = call.await.unwrap().unwrap_err();
    assert!(err.to_string().contains("ovs-vsctl init"), "{err}");
}

#[tokio::test]
async fn waiting_for_ovs_vswitchd_ends_when_cur_cfg_arrives_or_times_out_saying_where_it_is() {
    let server = FakeServer::bind();
    let (client, mut peer) = server.connect(options(), 7).await;
    // Already there.
    client.wait_for_cfg(7).await.unwrap();
    // Arrives with a monitor update.
    let wait = tokio::spawn({
        let client = client.clone();
        async move { client.wait_for_cfg(8).await }
    });
    peer.set_cur_cfg(8).await;
    tokio::time::timeout(NO_HANG, wait)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // Never arrives: the reconfigure timeout (300 ms in these options) ends it.
    let err = client.wait_for_cfg(9).await.unwrap_err();
    assert!(
        matches!(&err, Error::Timeout { what, .. } if what == "waiting for ovs-vswitchd to apply configuration 9 (it is at 8)"),
        "{err}"
    );
}

#[tokio::test]
async fn a_session_lost_while_waiting_ends_the_wait_as_disconnected() {
    let server = FakeServer::bind();
    let (client, peer) = server.connect(options(), 7).await;
    let wait = tokio::spawn({
        let client = client.clone();
        async move { client.wait_for_cfg(8).await }
    });
    tokio::task::yield_now().await;
    drop(peer);
    let err = tokio::time::timeout(NO_HANG, wait)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::Disconnected { .. }), "{err}");
    // Typed operations refuse to plan from the cache of a dead session.
    let err = client
        .set_controller("br0", &["tcp:127.0.0.1:6653"])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Disconnected { .. }), "{err}");
}

#[tokio::test]
async fn clearing_a_column_sends_the_empty_value_of_its_type() {
    let server = FakeServer::bind();
    let opts = ClientOptions {
        wait_for_vswitchd: false,
        ..options()
    };
    let (client, mut peer) = server.connect(opts, 7).await;
    for (column, empty) in [
        ("external_ids", json!(["map", []])),
        ("fail_mode", json!(["set", []])),
    ] {
        let call = tokio::spawn({
            let client = client.clone();
            async move { client.clear_column("Bridge", "br0", column).await }
        });
        let (id, params) = peer.request("transact").await;
        assert_eq!(
            ops_of(&params),
            vec![
                json!({"op": "update", "table": "Bridge", "where": [["name", "==", "br0"]],
                        "row": {column: empty}})
            ],
            "{column}"
        );
        peer.reply(id, json!([{"count": 1}])).await;
        call.await.unwrap().unwrap();
    }
    // No such bridge: the update touched nothing.
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.clear_column("Bridge", "br9", "external_ids").await }
    });
    let (id, _) = peer.request("transact").await;
    peer.reply(id, json!([{"count": 0}])).await;
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.to_string(), "no Bridge record \"br9\"");
}

#[tokio::test]
async fn reading_a_column_of_a_missing_record_is_not_found() {
    let server = FakeServer::bind();
    let (client, mut peer) = server.connect(options(), 7).await;
    let read = |record: &'static str| {
        let client = client.clone();
        tokio::spawn(async move { client.get_column("Bridge", record, "fail_mode").await })
    };
    let call = read("br0");
    let (id, params) = peer.request("transact").await;
    assert_eq!(
        ops_of(&params),
        vec![
            json!({"op": "select", "table": "Bridge", "where": [["name", "==", "br0"]],
                    "columns": ["fail_mode"]})
        ]
    );
    peer.reply(id, json!([{"rows": [{"fail_mode": "secure"}]}]))
        .await;
    assert_eq!(call.await.unwrap().unwrap(), Datum::atom("secure"));
    let call = read("br9");
    let (id, _) = peer.request("transact").await;
    peer.reply(id, json!([{"rows": []}])).await;
    let err = call.await.unwrap().unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { table, record } if table == "Bridge" && record == "br9"),
        "{err}"
    );
}
