//! TLS on both channels against real Open vSwitch, with certificates from a throwaway CA:
//! ovsdb-server serving `pssl:` and ovs-vswitchd dialling our `pssl:` controller after
//! `ovs-vsctl set-ssl` (OpenSSL on their side, rustls on ours). A good peer connects and works; a
//! peer whose certificate comes from another CA is refused, and the error says why.

mod openflow_common;
mod ovsdb_common;

use std::time::Duration;

use ofnode::openflow::{Switch, SwitchConfig};
use ofnode::ovsdb::{Client, ClientOptions};
use ofnode::tls::{TlsConfig, TlsFiles};
use ofnode_harness::{Ovs, OvsOptions, OvsdbSsl, PeerFiles, Pki};
use ofnode_proto::Message;
use openflow_common::{reg_flow, reg_flow_line, tcp_listener_in_netns, CONNECT_TIMEOUT};
use ovsdb_common::{connected_in_netns, seed_bridge, test_options, vsctl};

/// ovsdb-server's pssl: port inside the test's own namespace (nothing else listens there).
const OVSDB_SSL_PORT: u16 = 6640;

fn tls(files: &PeerFiles) -> TlsConfig {
    TlsConfig::load(&TlsFiles {
        private_key: files.private_key.clone(),
        certificate: files.certificate.clone(),
        ca_cert: files.ca_cert.clone(),
    })
    .expect("test certificates load")
}

/// Our key and certificate from `ours`, trusting `trusted`'s CA.
fn mixed(ours: &PeerFiles, trusted: &Pki) -> PeerFiles {
    PeerFiles {
        ca_cert: trusted.ca_cert(),
        ..ours.clone()
    }
}

fn ovsdb_with_ssl(server: PeerFiles) -> (Ovs, String) {
    let ssl = OvsdbSsl {
        files: server,
        port: OVSDB_SSL_PORT,
    };
    let target = ssl.target();
    let ovs = Ovs::start_with(OvsOptions {
        vswitchd: false,
        ovsdb_ssl: Some(ssl),
        ..OvsOptions::default()
    })
    .expect("ovsdb-server with pssl starts");
    (ovs, target)
}

/// Connects to `target` from inside the OVS namespace (where the pssl: remote listens) and runs
/// `then` on the connected client, all on one thread in that namespace.
fn in_ovs_netns<R: Send>(
    ovs: &Ovs,
    target: &str,
    tls: TlsConfig,
    then: impl AsyncFnOnce(Client) -> R + Send,
) -> Result<R, ofnode::ovsdb::Error> {
    let options = ClientOptions {
        tls: Some(tls),
        wait_for_vswitchd: false,
        ..test_options()
    };
    connected_in_netns(ovs, target, options, then)
}

#[test]
fn ovsdb_over_tls_works_with_a_certificate_from_the_ca() {
    let pki = Pki::new("ofnode test CA").unwrap();
    let (ovs, target) = ovsdb_with_ssl(pki.issue("ovsdb-server").unwrap());
    let ours = tls(&pki.issue("ofnode").unwrap());
    let outcome = in_ovs_netns(&ovs, &target, ours, async |client| {
        client.ensure_bridge(&seed_bridge()).await
    });
    outcome
        .expect("TLS connection to ovsdb-server")
        .expect("ensure_bridge over TLS");
    // The oracle reads the same database over the unix socket.
    assert_eq!(vsctl(&ovs, &["list-br"]), "br0");
}

#[test]
fn ovsdb_server_from_another_ca_is_refused_and_the_error_says_so() {
    let ours_ca = Pki::new("ofnode test CA").unwrap();
    let other_ca = Pki::new("another CA").unwrap();
    // The server trusts our CA but presents a certificate another CA signed.
    let server = mixed(&other_ca.issue("ovsdb-server").unwrap(), &ours_ca);
    let (ovs, target) = ovsdb_with_ssl(server);
    let ours = tls(&ours_ca.issue("ofnode").unwrap());
    let err = in_ovs_netns(&ovs, &target, ours, async |_| ()).expect_err("must be refused");
    let text = err.to_string();
    assert!(text.contains("UnknownIssuer"), "{text}");
    assert!(text.contains("not signed by our CA"), "{text}");
    assert_eq!(vsctl(&ovs, &["list-br"]), "", "nothing was changed");
}

#[test]
fn ovsdb_server_refuses_our_certificate_from_another_ca() {
    let server_ca = Pki::new("ofnode test CA").unwrap();
    let other_ca = Pki::new("another CA").unwrap();
    let (ovs, target) = ovsdb_with_ssl(server_ca.issue("ovsdb-server").unwrap());
    // We trust the server's CA, but our own certificate is from another CA.
    let ours = tls(&mixed(&other_ca.issue("ofnode").unwrap(), &server_ca));
    // In TLS 1.3 the client's certificate is checked after the client's handshake completes:
    // the refusal shows on the first exchange, which Client::connect makes (get_schema).
    let err = in_ovs_netns(&ovs, &target, ours, async |_| ()).expect_err("must be refused");
    assert!(err.to_string().contains("UnknownCA"), "{err}");
    // The server's alert can reach us before its log line is written: wait for the line.
    let logged =
        |log: &str| log.contains("unknown ca") || log.contains("certificate verify failed");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut log = ovs.log_tail("ovsdb", 40).to_lowercase();
    while !logged(&log) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        log = ovs.log_tail("ovsdb", 40).to_lowercase();
    }
    assert!(
        logged(&log),
        "ovsdb-server did not log the refusal; client error: {err}\n{log}"
    );
}

/// br0 on a private OVS, ovs-vswitchd's SSL set to `switch`, and br0's controller pointed at a
/// `pssl:` listener in the namespace served by a `Switch` with `ours`.
async fn switch_over_tls(switch_files: &PeerFiles, ours: TlsConfig) -> (Ovs, Switch) {
    let ovs = tokio::task::spawn_blocking(openflow_common::ovs_with_br0)
        .await
        .unwrap();
    let key = switch_files.private_key.display().to_string();
    let cert = switch_files.certificate.display().to_string();
    let ca = switch_files.ca_cert.display().to_string();
    vsctl(&ovs, &["set-ssl", &key, &cert, &ca]);
    let listener = tcp_listener_in_netns(&ovs.netns().path());
    let port = listener.local_addr().unwrap().port();
    let mut cfg: SwitchConfig = openflow_common::config(&format!("pssl:{port}:127.0.0.1"));
    cfg.tls = Some(ours);
    let (switch, _events) = Switch::start_with_listener(cfg, listener).expect("pssl listener");
    vsctl(
        &ovs,
        &["set-controller", "br0", &format!("ssl:127.0.0.1:{port}")],
    );
    (ovs, switch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vswitchd_connects_to_our_pssl_and_takes_flows() {
    let pki = Pki::new("ofnode test CA").unwrap();
    let switch_files = pki.issue("br0-switch").unwrap();
    let (ovs, switch) = switch_over_tls(&switch_files, tls(&pki.issue("ofnode").unwrap())).await;
    switch
        .wait_connected(CONNECT_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ovs.log_tail("vswitchd", 30)));
    switch
        .send_checked(Message::FlowMod(reg_flow(0, 100, 1, 2, 3)))
        .await
        .expect("flow over TLS");
    let flows = ovs.dump_flows("br0").unwrap();
    assert!(flows.contains(&reg_flow_line(0, 100, 1, 2, 3)), "{flows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vswitchd_with_a_certificate_from_another_ca_is_refused() {
    let ours_ca = Pki::new("ofnode test CA").unwrap();
    let other_ca = Pki::new("another CA").unwrap();
    // ovs-vswitchd trusts our CA but presents a certificate another CA signed.
    let switch_files = mixed(&other_ca.issue("br0-switch").unwrap(), &ours_ca);
    let (ovs, switch) =
        switch_over_tls(&switch_files, tls(&ours_ca.issue("ofnode").unwrap())).await;
    // OpenSSL logs the alert rustls sent when it refused the certificate.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let log = ovs.log_tail("vswitchd", 200).to_lowercase();
        if log.contains("unknown ca") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ovs-vswitchd never logged our refusal:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !switch.is_connected(),
        "a peer from another CA got a session"
    );
}
