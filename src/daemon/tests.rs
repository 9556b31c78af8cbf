//! `ofnode run`'s settings: the config file, the flags, and what is refused.

use super::*;

#[test]
fn pod_counter_keys_are_read_flags_win_and_a_bad_interval_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ofnode.toml");
    std::fs::write(&path, "pod_counters_interval = 0\npod_metrics_max = 5\n").unwrap();
    let file = |flag: Option<u64>| {
        Settings::resolve(RunArgs {
            config: Some(path.clone()),
            pod_counters_interval: flag,
            ..RunArgs::default()
        })
    };
    let settings = file(None).unwrap();
    assert_eq!(settings.node.pod_counters_interval, Duration::ZERO);
    assert_eq!(settings.node.pod_metrics_max, 5);
    let flag = file(Some(2)).unwrap();
    assert_eq!(flag.node.pod_counters_interval, Duration::from_secs(2));
    let defaults = Settings::resolve(RunArgs::default()).unwrap();
    assert_eq!(defaults.node.pod_counters_interval, Duration::from_secs(10));
    assert_eq!(defaults.node.pod_metrics_max, 1_000);
    let err = file(Some(86_401)).unwrap_err().to_string();
    assert!(err.contains("pod_counters_interval 86401"), "{err}");
}

#[test]
fn rule_counter_keys_are_read_shown_and_a_bad_interval_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ofnode.toml");
    let check = |text: &str| {
        std::fs::write(&path, text).unwrap();
        check_config(RunArgs {
            config: Some(path.clone()),
            ..RunArgs::default()
        })
    };
    let defaults = check("").unwrap();
    assert!(
        defaults.contains("\nrule_counters_interval: 60\n"),
        "{defaults}"
    );
    assert!(defaults.contains("\nrule_metrics_max: 1000"), "{defaults}");
    let set = check("rule_counters_interval = 0\nrule_metrics_max = 20\n").unwrap();
    assert!(set.contains("\nrule_counters_interval: 0\n"), "{set}");
    assert!(set.contains("\nrule_metrics_max: 20"), "{set}");
    let err = check("rule_counters_interval = 90000\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("rule_counters_interval 90000 is above"),
        "{err}"
    );
    let err = check("rule_metrics_max = -1\n").unwrap_err().to_string();
    assert!(err.contains("rule_metrics_max"), "{err}");
}

#[test]
fn tls_targets_need_tls_files() {
    let args = RunArgs {
        openflow: Some("pssl:6653".into()),
        ..RunArgs::default()
    };
    let err = Settings::resolve(args).unwrap_err().to_string();
    assert!(err.contains("pssl:6653 needs TLS files"), "{err}");
    let args = RunArgs {
        ovsdb: Some("ssl:127.0.0.1:6640".into()),
        ..RunArgs::default()
    };
    let err = Settings::resolve(args).unwrap_err().to_string();
    assert!(err.contains("ssl:127.0.0.1:6640 needs TLS files"), "{err}");
}

#[test]
fn tls_section_is_read_and_its_files_checked() {
    let pki = ofnode_harness::Pki::new("config CA").unwrap();
    let peer = pki.issue("node").unwrap();
    let path = pki.dir().join("ofnode.toml");
    let toml = format!(
        "openflow = \"pssl:6653\"\n[tls]\nprivate_key = {:?}\ncertificate = {:?}\nca_cert = {:?}\n",
        peer.private_key, peer.certificate, peer.ca_cert
    );
    std::fs::write(&path, toml).unwrap();
    let settings = Settings::resolve(RunArgs {
        config: Some(path.clone()),
        ..RunArgs::default()
    })
    .unwrap();
    let tls = settings.node.tls.expect("TLS configured");
    assert_eq!(tls.files().certificate, peer.certificate);
    // A flag set wins over the file; a bad file in it is named.
    let err = Settings::resolve(RunArgs {
        config: Some(path),
        private_key: Some(pki.dir().join("missing-key.pem")),
        certificate: Some(peer.certificate.clone()),
        ca_cert: Some(peer.ca_cert.clone()),
        ..RunArgs::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("missing-key.pem"), "{err}");
}

#[test]
fn flags_override_file_and_defaults_fill_in() {
    let dir = std::env::temp_dir().join(format!("ofnode-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ofnode.toml");
    std::fs::write(
        &path,
        "bridge = \"br-int\"\nmtu = 1400\nstate_dir = \"/tmp/x\"\n",
    )
    .unwrap();
    let args = RunArgs {
        config: Some(path.clone()),
        mtu: Some(9000),
        ..RunArgs::default()
    };
    let settings = Settings::resolve(args).unwrap();
    assert_eq!(settings.node.bridge, "br-int");
    assert_eq!(settings.node.mtu, 9000);
    assert_eq!(settings.node.ovsdb, DEFAULT_OVSDB);
    assert_eq!(settings.node.state_dir, PathBuf::from("/tmp/x"));
    std::fs::write(
        &path,
        "[vxlan]\naddress = \"10.128.0.1/14\"\nvni = 7\nmode = \"miss\"\n",
    )
    .unwrap();
    let settings = Settings::resolve(RunArgs {
        config: Some(path.clone()),
        ..RunArgs::default()
    })
    .unwrap();
    let vxlan = settings.node.vxlan.expect("the [vxlan] section");
    assert_eq!(vxlan.vni, 7);
    std::fs::write(
        &path,
        "[ha]\nid = 2\ncontrollers = [\"tcp:192.0.2.1:6653\", \"tcp:192.0.2.2:6653\"]\n",
    )
    .unwrap();
    let settings = Settings::resolve(RunArgs {
        config: Some(path.clone()),
        ..RunArgs::default()
    })
    .unwrap();
    let ha = settings.node.ha.expect("the [ha] section");
    assert_eq!((ha.id, ha.controllers.len()), (2, 2));
    assert_eq!((ha.heartbeat_ms, ha.takeover_ms), (200, 1000));
    let cluster = "[cluster]\nendpoints = [\"http://192.0.2.1:2379\"]\n\
                   network = \"10.128.0.0/14\"\nservice_network = \"172.30.0.0/16\"\n\
                   public_ip = \"192.0.2.11\"\n";
    std::fs::write(&path, format!("{cluster}subnet_prefix_len = 23\n")).unwrap();
    let settings = Settings::resolve(RunArgs {
        config: Some(path.clone()),
        ..RunArgs::default()
    })
    .unwrap();
    assert_eq!(settings.cluster.expect("[cluster]").subnet_prefix_len, 23);
    std::fs::write(&path, format!("{cluster}subnet_prefix_len = 8\n")).unwrap();
    let err = Settings::resolve(RunArgs {
        config: Some(path.clone()),
        ..RunArgs::default()
    })
    .unwrap_err();
    assert!(
        err.to_string().contains("cluster.subnet_prefix_len 8"),
        "{err}"
    );
    std::fs::write(&path, "brige = \"typo\"\n").unwrap();
    let err = Settings::resolve(RunArgs {
        config: Some(path),
        ..RunArgs::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("unknown field"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn openflow_timing_keys_are_read_the_flag_wins_and_a_bad_value_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ofnode.toml");
    let resolve = |toml: &str, flag: Option<u64>| {
        std::fs::write(&path, toml).unwrap();
        Settings::resolve(RunArgs {
            config: Some(path.clone()),
            openflow_request_timeout_ms: flag,
            ..RunArgs::default()
        })
    };
    let defaults = resolve("", None).unwrap().node;
    assert_eq!(defaults.request_timeout, Duration::from_secs(60));
    assert_eq!(defaults.echo_interval, Duration::from_secs(5));
    assert_eq!(defaults.echo_timeout, Duration::from_secs(5));
    let toml = "openflow_request_timeout_ms = 1500\nopenflow_echo_interval_ms = 2000\n\
                openflow_echo_timeout_ms = 3000\n";
    let file = resolve(toml, None).unwrap().node;
    assert_eq!(file.request_timeout, Duration::from_millis(1500));
    assert_eq!(file.echo_interval, Duration::from_millis(2000));
    assert_eq!(file.echo_timeout, Duration::from_millis(3000));
    let flag = resolve(toml, Some(700)).unwrap().node;
    assert_eq!(flag.request_timeout, Duration::from_millis(700));
    for (toml, flag, named) in [
        ("", Some(99), "openflow_request_timeout_ms 99"),
        (
            "openflow_echo_interval_ms = 0\n",
            None,
            "openflow_echo_interval_ms 0",
        ),
        (
            "openflow_echo_timeout_ms = 3600001\n",
            None,
            "openflow_echo_timeout_ms 3600001",
        ),
    ] {
        let err = resolve(toml, flag).unwrap_err().to_string();
        assert!(
            err.contains(named) && err.contains("100..=3600000"),
            "{err}"
        );
    }
}

#[test]
fn kubernetes_section_is_checked_shown_and_not_with_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\n").unwrap();
    let path = dir.path().join("ofnode.toml");
    let kube = format!(
        "[kubernetes]\nkubeconfig = \"{}\"\nnode_name = \"node-1\"\ncluster_network = \"10.128.0.0/14\"\nservice_network = \"172.30.0.0/16\"\n",
        kubeconfig.display()
    );
    let check = |text: &str| {
        std::fs::write(&path, text).unwrap();
        check_config(RunArgs {
            config: Some(path.clone()),
            ..RunArgs::default()
        })
    };
    let shown = check(&kube).unwrap();
    assert!(
        shown.contains("kubernetes: kubeconfig") && shown.contains("node node-1"),
        "{shown}"
    );
    let bad = check(&kube.replace("node-1", "Node_1"))
        .unwrap_err()
        .to_string();
    assert!(bad.contains("node_name"), "{bad}");
    let both = format!(
        "{kube}[cluster]\nendpoints = [\"http://192.0.2.1:2379\"]\nnetwork = \"10.128.0.0/14\"\nsubnet_prefix_len = 23\nservice_network = \"172.30.0.0/16\"\npublic_ip = \"192.0.2.11\"\n"
    );
    let err = check(&both).unwrap_err().to_string();
    assert!(err.contains("[cluster] and [kubernetes]"), "{err}");
}

#[test]
fn audit_log_keys_are_read_shown_and_bad_values_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ofnode.toml");
    let check = |text: &str| {
        std::fs::write(&path, text).unwrap();
        check_config(RunArgs {
            config: Some(path.clone()),
            ..RunArgs::default()
        })
    };
    let good = "audit_log = \"/var/log/ofnode/audit.log\"\naudit_log_max_bytes = 1048576\naudit_log_keep = 3\naudit_log_format = \"text\"\naudit_syslog = \"udp:127.0.0.1:514\"\n";
    std::fs::write(&path, good).unwrap();
    let settings = Settings::resolve(RunArgs {
        config: Some(path.clone()),
        ..RunArgs::default()
    })
    .unwrap();
    let audit = &settings.node.audit_log;
    assert_eq!(
        audit.path.as_deref(),
        Some(Path::new("/var/log/ofnode/audit.log"))
    );
    assert_eq!((audit.max_bytes, audit.keep), (1_048_576, 3));
    assert_eq!(audit.format, crate::sdn::audit_log::LineFormat::Text);
    let shown = check(good).unwrap();
    assert!(
        shown.contains(
            "audit_log: /var/log/ofnode/audit.log (text, rotated at 1048576 bytes, 3 kept), syslog udp:127.0.0.1:514"
        ),
        "{shown}"
    );
    let defaults = check("").unwrap();
    assert!(
        defaults.contains("audit_log: no file (set audit_log)"),
        "{defaults}"
    );
    for (bad, says) in [
        ("audit_log_format = \"xml\"\n", "audit_log_format \"xml\""),
        (
            "audit_syslog = \"tcp:127.0.0.1:514\"\n",
            "expected unix:PATH or udp:IP:PORT",
        ),
        (
            "audit_log_max_bytes = 10\n",
            "audit_log_max_bytes 10 is below 4096",
        ),
        (
            "audit_log_keep = 1000\n",
            "audit_log_keep 1000 is above 100",
        ),
        ("audit_log = \"audit.log\"\n", "absolute"),
    ] {
        let err = check(bad).unwrap_err().to_string();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn the_audit_log_names_the_node_as_kubernetes_or_the_cluster_does() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\n").unwrap();
    let path = dir.path().join("ofnode.toml");
    let text = format!(
        "audit_log = \"/tmp/audit.log\"\n[kubernetes]\nkubeconfig = \"{}\"\nnode_name = \"node-7\"\ncluster_network = \"10.128.0.0/14\"\nservice_network = \"172.30.0.0/16\"\n",
        kubeconfig.display()
    );
    std::fs::write(&path, text).unwrap();
    let settings = Settings::resolve(RunArgs {
        config: Some(path.clone()),
        ..RunArgs::default()
    })
    .unwrap();
    assert_eq!(settings.node.audit_log.node_name, "node-7");
    let cluster =
        "[cluster]\nendpoints = [\"http://192.0.2.1:2379\"]\nnetwork = \"10.128.0.0/14\"\n\
                   service_network = \"172.30.0.0/16\"\nsubnet_prefix_len = 23\n\
                   public_ip = \"192.0.2.11\"\n";
    std::fs::write(&path, cluster).unwrap();
    let settings = Settings::resolve(RunArgs {
        config: Some(path),
        ..RunArgs::default()
    })
    .unwrap();
    assert_eq!(
        settings.node.audit_log.node_name, "192.0.2.11",
        "[cluster]'s node name (its public IP when none is set)"
    );
}

#[test]
fn audit_rate_keys_are_read_the_burst_follows_the_rate_and_bad_values_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ofnode.toml");
    let resolve = |text: &str| {
        std::fs::write(&path, text).unwrap();
        Settings::resolve(RunArgs {
            config: Some(path.clone()),
            ..RunArgs::default()
        })
    };
    let defaults = Settings::resolve(RunArgs::default()).unwrap();
    assert_eq!(
        defaults.node.audit,
        AuditRate {
            rate: 100,
            burst: 10
        }
    );
    let rate = resolve("audit_rate = 35\n").unwrap();
    assert_eq!(rate.node.audit, AuditRate { rate: 35, burst: 3 });
    let both = resolve("audit_rate = 5\naudit_burst = 40\n").unwrap();
    assert_eq!(both.node.audit, AuditRate { rate: 5, burst: 40 });
    std::fs::write(&path, "audit_rate = 35\n").unwrap();
    let shown = check_config(RunArgs {
        config: Some(path.clone()),
        ..RunArgs::default()
    })
    .unwrap();
    assert!(
        shown.contains("audit_rate: 35 packet-ins/s per audited rule, audit_burst: 3"),
        "{shown}"
    );
    let err = resolve("audit_rate = 0\n").unwrap_err().to_string();
    assert!(err.contains("audit_rate 0: must be from 1"), "{err}");
    let err = resolve("audit_burst = 0\n").unwrap_err().to_string();
    assert!(err.contains("audit_burst 0: must be from 1"), "{err}");
    let err = resolve("audit_rate = -3\n").unwrap_err().to_string();
    assert!(err.contains("audit_rate"), "{err}");
}
