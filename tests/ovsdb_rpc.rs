//! The JSON-RPC layer against a private ovsdb-server: list_dbs, get_schema, echo, and transact
//! with every operation kind; server errors surface with the server's own words.

mod ovsdb_common;

use ofnode::ovsdb::txn::{Condition, Function, Mutation, Mutator, Operation, Until};
use ofnode::ovsdb::{Atom, Datum, Error, Row, Uuid};
use ovsdb_common::*;

fn row<const N: usize>(columns: [(&str, Datum); N]) -> Row {
    columns
        .into_iter()
        .map(|(c, d)| (c.to_string(), d))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_dbs_get_schema_and_echo() {
    let Setup { client, ovs } = start().await;
    let dbs = client.list_dbs().await.unwrap();
    assert!(dbs.contains(&"Open_vSwitch".to_string()), "{dbs:?}");
    let schema = client.get_schema("Open_vSwitch").await.unwrap();
    let version = std::process::Command::new("ovsdb-tool")
        .args(["schema-version", "/usr/share/openvswitch/vswitch.ovsschema"])
        .output()
        .unwrap();
    let version = String::from_utf8(version.stdout).unwrap();
    assert_eq!(schema["version"].as_str(), Some(version.trim()));
    assert_eq!(client.schema().version, version.trim());
    assert!(client.schema().is_map("Interface", "options"));
    client.echo().await.unwrap();
    match client.get_schema("NoSuchDb").await {
        Err(Error::Server { error, .. }) => assert_eq!(error, "unknown database"),
        other => panic!("expected unknown database, got {other:?}"),
    }
    drop(ovs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transact_runs_every_operation_kind() {
    let Setup { client, ovs } = start_with(ClientOptionsNoWait::get()).await;
    // insert (with named-uuid references), then mutate the root set, in one transaction.
    let results = client
        .transact(&[
            Operation::Comment("ofnode test".into()),
            Operation::Insert {
                table: "Interface".into(),
                row: row([("name", "t0".into()), ("type", "internal".into())]),
                uuid_name: Some("i".into()),
            },
            Operation::Insert {
                table: "Port".into(),
                row: row([
                    ("name", "t0".into()),
                    ("interfaces", Datum::atom(Atom::NamedUuid("i".into()))),
                ]),
                uuid_name: Some("p".into()),
            },
            Operation::Insert {
                table: "Bridge".into(),
                row: row([
                    ("name", "brx".into()),
                    ("ports", Datum::atom(Atom::NamedUuid("p".into()))),
                ]),
                uuid_name: Some("b".into()),
            },
            Operation::Mutate {
                table: "Open_vSwitch".into(),
                conditions: vec![],
                mutations: vec![Mutation::new(
                    "bridges",
                    Mutator::Insert,
                    Datum::atom(Atom::NamedUuid("b".into())),
                )],
            },
        ])
        .await
        .unwrap();
    let bridge_uuid = results[3].uuid.unwrap();
    assert_eq!(results[4].count, Some(1));
    let listed = vsctl_rows(&ovs, "Bridge", Some("brx"), &["name"]);
    assert_eq!(listed.keys().collect::<Vec<_>>(), [&bridge_uuid]);

    // update + select + wait.
    let results = client
        .transact(&[
            Operation::Update {
                table: "Bridge".into(),
                conditions: vec![Condition::uuid(bridge_uuid)],
                row: row([("external_ids", Datum::map([("k", "v")]))]),
            },
            Operation::Wait {
                table: "Bridge".into(),
                conditions: vec![Condition::eq("name", "brx")],
                columns: vec!["external_ids".into()],
                until: Until::Equal,
                rows: vec![row([("external_ids", Datum::map([("k", "v")]))])],
                timeout_ms: 0,
            },
            Operation::Select {
                table: "Bridge".into(),
                conditions: vec![Condition::new(
                    "external_ids",
                    Function::Includes,
                    Datum::map([("k", "v")]),
                )],
                columns: Some(vec!["name".into()]),
            },
        ])
        .await
        .unwrap();
    assert_eq!(results[0].count, Some(1));
    let rows = results[2].rows.as_ref().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["name"].as_str(), Some("brx"));
    assert_eq!(
        vsctl(&ovs, &["get", "Bridge", "brx", "external_ids:k"]),
        "v"
    );

    // A failed wait aborts the whole transaction: the delete before it is not applied.
    let err = client
        .transact(&[
            Operation::Mutate {
                table: "Open_vSwitch".into(),
                conditions: vec![],
                mutations: vec![Mutation::new(
                    "bridges",
                    Mutator::Delete,
                    Datum::atom(bridge_uuid),
                )],
            },
            Operation::Wait {
                table: "Bridge".into(),
                conditions: vec![Condition::eq("name", "brx")],
                columns: vec!["name".into()],
                until: Until::Equal,
                rows: vec![],
                timeout_ms: 0,
            },
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Server { error, during, .. } if error == "timed out" && during.contains("operation 2")),
        "{err}"
    );
    assert_eq!(vsctl(&ovs, &["list-br"]), "brx");

    // delete: removing the bridge from the root set garbage-collects it, its port and interface.
    let results = client
        .transact(&[Operation::Mutate {
            table: "Open_vSwitch".into(),
            conditions: vec![],
            mutations: vec![Mutation::new(
                "bridges",
                Mutator::Delete,
                Datum::atom(bridge_uuid),
            )],
        }])
        .await
        .unwrap();
    assert_eq!(results[0].count, Some(1));
    assert_eq!(vsctl(&ovs, &["list-br"]), "");
    assert!(vsctl_rows(&ovs, "Interface", None, &["name"]).is_empty());
    let qos = client
        .transact(&[Operation::Insert {
            table: "QoS".into(),
            row: row([("type", "linux-htb".into())]),
            uuid_name: None,
        }])
        .await
        .unwrap()[0]
        .uuid
        .unwrap();
    let results = client
        .transact(&[Operation::Delete {
            table: "QoS".into(),
            conditions: vec![Condition::uuid(qos)],
        }])
        .await
        .unwrap();
    assert_eq!(results[0].count, Some(1));
    assert_eq!(vsctl(&ovs, &["list", "QoS"]), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_carry_the_servers_words() {
    let Setup { client, ovs } = start_with(ClientOptionsNoWait::get()).await;
    // Constraint violation: a value outside the column's enum.
    let err = client
        .transact(&[Operation::Insert {
            table: "Bridge".into(),
            row: row([("name", "bry".into()), ("fail_mode", "bogus".into())]),
            uuid_name: None,
        }])
        .await
        .unwrap_err();
    match &err {
        Error::Server { error, details, .. } => {
            assert_eq!(error, "constraint violation");
            assert!(details.contains("bogus"), "{details}");
        }
        other => panic!("{other:?}"),
    }
    // Referential integrity, reported for the commit: a Port naming an Interface that is not there.
    let missing = Uuid::parse_str("aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa").unwrap();
    let err = client
        .transact(&[
            Operation::Insert {
                table: "Port".into(),
                row: row([("name", "pz".into()), ("interfaces", Datum::atom(missing))]),
                uuid_name: Some("p".into()),
            },
            Operation::Insert {
                table: "Bridge".into(),
                row: row([
                    ("name", "brz".into()),
                    ("ports", Datum::atom(Atom::NamedUuid("p".into()))),
                ]),
                uuid_name: Some("b".into()),
            },
            Operation::Mutate {
                table: "Open_vSwitch".into(),
                conditions: vec![],
                mutations: vec![Mutation::new(
                    "bridges",
                    Mutator::Insert,
                    Datum::atom(Atom::NamedUuid("b".into())),
                )],
            },
        ])
        .await
        .unwrap_err();
    match &err {
        Error::Server {
            error,
            details,
            during,
        } => {
            assert_eq!(error, "referential integrity violation", "{details}");
            assert!(details.contains(&missing.to_string()), "{details}");
            assert_eq!(during, "the transaction's commit");
        }
        other => panic!("{other:?}"),
    }
    // Syntax: a table that does not exist.
    let err = client
        .transact(&[Operation::Select {
            table: "NoSuchTable".into(),
            conditions: vec![],
            columns: None,
        }])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Server { error, details, .. }
        if error == "syntax error" && details.contains("No table named NoSuchTable")),
        "{err}"
    );
    // Nothing of the failed transactions was applied.
    assert_eq!(vsctl(&ovs, &["list-br"]), "");
}

/// Options for tests of the bare protocol (no waiting for ovs-vswitchd).
struct ClientOptionsNoWait;

impl ClientOptionsNoWait {
    fn get() -> ofnode::ovsdb::ClientOptions {
        ofnode::ovsdb::ClientOptions {
            wait_for_vswitchd: false,
            ..test_options()
        }
    }
}
