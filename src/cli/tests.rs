//! The command line as clap parses it: options, their checks, and the rate suffixes.

use super::*;
use clap::CommandFactory;

#[test]
fn cli_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn api_goes_before_or_after_the_subcommand_or_in_the_environment() {
    let api = |args: &[&str]| Cli::try_parse_from(args.iter().copied()).unwrap().api;
    let path = Some(PathBuf::from("/tmp/a.sock"));
    assert_eq!(api(&["ofnode", "--api", "/tmp/a.sock", "status"]), path);
    assert_eq!(api(&["ofnode", "status", "--api", "/tmp/a.sock"]), path);
    assert_eq!(
        api(&[
            "ofnode",
            "pod",
            "del",
            "--api",
            "/tmp/a.sock",
            "--pod",
            "x/web-0"
        ]),
        path
    );
    // `run` takes it too, as the socket it serves (over the config file's `api`).
    assert_eq!(api(&["ofnode", "run", "--api", "/tmp/a.sock"]), path);
    // Only this test sets OFNODE_API; the others never read `api`.
    std::env::set_var("OFNODE_API", "/tmp/env.sock");
    let from_env = api(&["ofnode", "status"]);
    let flag_wins = api(&["ofnode", "status", "--api", "/tmp/a.sock"]);
    std::env::remove_var("OFNODE_API");
    assert_eq!(from_env, Some(PathBuf::from("/tmp/env.sock")));
    assert_eq!(flag_wins, path);
    assert_eq!(api(&["ofnode", "status"]), None);
}

/// Every option and argument of every command, and every command, says in one line what
/// it is (`--help`, the completions and the man pages show these).
#[test]
fn every_option_has_a_one_line_help() {
    fn one_line(what: &str, help: Option<&clap::builder::StyledStr>) -> usize {
        let help = help.map(|h| h.to_string()).unwrap_or_default();
        assert!(!help.trim().is_empty(), "{what} has no help");
        assert!(!help.contains('\n'), "{what}'s help is more than one line");
        1
    }
    fn check(cmd: &clap::Command, path: &str) -> usize {
        let mut checked = 0;
        for arg in cmd.get_arguments() {
            if ["help", "version"].contains(&arg.get_id().as_str()) {
                continue;
            }
            let what = format!("`{path}` argument {}", arg.get_id());
            checked += one_line(&what, arg.get_help());
        }
        for sub in cmd.get_subcommands() {
            let sub_path = format!("{path} {}", sub.get_name());
            checked += one_line(&format!("`{sub_path}`"), sub.get_about());
            checked += check(sub, &sub_path);
        }
        checked
    }
    let mut command = Cli::command();
    command.build();
    // The walk reaches the whole tree: `run`'s flags, `pod add`'s, the positional ones.
    assert!(check(&command, "ofnode") > 80);
}

#[test]
fn modes_are_the_nodes_own() {
    let parse = |mode: &str| {
        Cli::try_parse_from([
            "ofnode",
            "setup",
            "--cluster-network",
            "10.128.0.0/14",
            "--service-network",
            "172.30.0.0/16",
            "--local-subnet",
            "10.128.0.0/23",
            "--gateway",
            "10.128.0.1",
            "--mode",
            mode,
        ])
    };
    for mode in Mode::ALL {
        let Command::Setup { mode: parsed, .. } = parse(mode.name()).unwrap().command else {
            panic!("not setup");
        };
        assert_eq!(parsed, mode);
    }
    assert!(parse("bridged").is_err());
}

#[test]
fn networkpolicy_commands_take_labels_and_namespaces() {
    let parse = |args: &[&str]| Cli::try_parse_from(args.iter().copied());
    let Command::Namespace(NamespaceCommand::Set { labels, .. }) = parse(&[
        "ofnode",
        "namespace",
        "set",
        "--name",
        "x",
        "--vnid",
        "11",
        "--label",
        "ns=x",
        "--label",
        "team=",
    ])
    .unwrap()
    .command
    else {
        panic!("not namespace set");
    };
    assert_eq!(
        labels,
        vec![("ns".into(), "x".into()), ("team".into(), String::new())]
    );
    assert!(parse(&[
        "ofnode",
        "namespace",
        "set",
        "--name",
        "x",
        "--vnid",
        "1",
        "--label",
        "nokey"
    ])
    .is_err());
    assert!(parse(&["ofnode", "netpol", "apply", "--file", "-"]).is_ok());
    assert!(parse(&["ofnode", "netpol", "del", "--namespace", "x", "--name", "p"]).is_ok());
    assert!(parse(&["ofnode", "anp", "apply", "--file", "anp.yaml"]).is_ok());
    assert!(parse(&["ofnode", "anp", "del", "--name", "deny-all"]).is_ok());
    assert!(parse(&["ofnode", "banp", "del"]).is_ok());
    assert!(parse(&["ofnode", "banp", "list", "--json"]).is_ok());
    assert!(parse(&[
        "ofnode",
        "node",
        "set",
        "--name",
        "n1",
        "--ip",
        "192.0.2.11",
        "--label",
        "kubernetes.io/os=linux"
    ])
    .is_ok());
    assert!(
        parse(&["ofnode", "node", "set", "--name", "n1"]).is_err(),
        "a node needs an address"
    );
    assert!(parse(&["ofnode", "node", "set", "--name", "n1", "--ip", "fd00::1"]).is_err());
    let remote = |args: &[&str]| {
        let mut all = vec!["ofnode", "pod", "remote", "set", "--pod", "x/db-0"];
        all.extend_from_slice(args);
        parse(&all)
    };
    assert!(remote(&["--ip", "10.129.0.5"]).is_ok());
    assert!(remote(&["--ip", "10.129.0.5", "--ip", "fd00::5", "--label", "a=b"]).is_ok());
    assert!(
        remote(&[]).is_err(),
        "a pod of another node needs an address"
    );
    // `kubectl label`'s words: k=v sets, k- removes; one of them at least.
    let Command::Pod(PodCommand::Label { edits, .. }) = parse(&[
        "ofnode", "pod", "label", "--pod", "x/web-0", "app=web", "tier-",
    ])
    .unwrap()
    .command
    else {
        panic!("not pod label");
    };
    assert_eq!(
        edits,
        vec![
            LabelChange::Set("app".into(), "web".into()),
            LabelChange::Remove("tier".into())
        ]
    );
    assert!(parse(&["ofnode", "pod", "label", "--pod", "x/web-0"]).is_err());
    assert!(parse(&["ofnode", "pod", "label", "--pod", "x/web-0", "nope"]).is_err());
    assert!(parse(&["ofnode", "namespace", "label", "--name", "x", "team-"]).is_ok());
    // A pod is named NAMESPACE/NAME, as Kubernetes names it.
    let sandbox = "ab".repeat(32);
    let pod = |name: &str| {
        parse(&[
            "ofnode",
            "pod",
            "add",
            "--pod",
            name,
            "--veth",
            "v1",
            "--ip",
            "10.128.0.5",
            "--mac",
            "0a:58:0a:80:00:05",
            "--sandbox",
            &sandbox,
            "--label",
            "pod=a",
        ])
    };
    assert!(pod("x/web-0").is_ok());
    for bad in ["web-0", "X/web-0", "x/"] {
        let err = pod(bad).unwrap_err().to_string();
        assert!(err.contains("invalid pod"), "{bad}: {err}");
    }
    for list in [
        &["ofnode", "pod", "list", "--json"][..],
        &["ofnode", "pod", "remote", "list", "--json"],
        &["ofnode", "namespace", "list", "--json"],
        &["ofnode", "netpol", "list", "--json"],
    ] {
        assert!(parse(list).is_ok(), "{list:?}");
    }
}

#[test]
fn rates() {
    assert_eq!(parse_rate("1000000").unwrap(), 1_000_000);
    assert_eq!(parse_rate("10M").unwrap(), 10_000_000);
    assert_eq!(parse_rate("500k").unwrap(), 500_000);
    assert!(parse_rate("10X").is_err());
    assert!(parse_rate("99999999999999999999G").is_err());
}

#[test]
fn multicast_local_needs_enable_with_ports_or_disable() {
    let parse = |args: &[&str]| Cli::try_parse_from(args.iter().copied());
    assert!(parse(&["ofnode", "multicast", "local", "--vnid", "5"]).is_err());
    assert!(parse(&["ofnode", "multicast", "local", "--vnid", "5", "--enable"]).is_err());
    assert!(parse(&[
        "ofnode",
        "multicast",
        "local",
        "--vnid",
        "5",
        "--enable",
        "--ofport",
        "3"
    ])
    .is_ok());
    assert!(parse(&["ofnode", "multicast", "local", "--vnid", "5", "--disable"]).is_ok());
    assert!(parse(&[
        "ofnode",
        "multicast",
        "local",
        "--vnid",
        "5",
        "--disable",
        "--ofport",
        "3"
    ])
    .is_err());
}

#[test]
fn bad_input_is_refused_by_the_cli() {
    let parse = |args: &[&str]| Cli::try_parse_from(args.iter().copied());
    let sandbox = "ab".repeat(32);
    let good = [
        "ofnode",
        "pod",
        "add",
        "--pod",
        "x/web-0",
        "--veth",
        "veth1",
        "--ip",
        "10.128.0.5",
        "--mac",
        "0a:58:0a:80:00:05",
        "--sandbox",
        &sandbox,
        "--vnid",
        "10",
    ];
    assert!(parse(&good).is_ok());
    let mut bad_ip = good;
    bad_ip[8] = "fd00::5";
    let err = parse(&bad_ip).unwrap_err().to_string();
    assert!(err.contains("IPv6 is not supported"), "{err}");
    let mut bad_vnid = good;
    bad_vnid[14] = "16777216";
    assert!(parse(&bad_vnid).is_err());
    assert!(parse(&[
        "ofnode",
        "service",
        "add",
        "--ip",
        "172.30.0.1",
        "--vnid",
        "1",
        "--port",
        "sctp/80"
    ])
    .is_err());
}

#[test]
fn rule_stats_print_one_aligned_rule_a_line() {
    use crate::sdn::audit::{AuditTier, Dir, Verdict};
    use crate::sdn::core::audit_names::RuleNames;
    use crate::sdn::rule_counters::{RuleCounters, RuleSnapshot, RuleTraffic};
    let rule = |names: RuleNames, packets: u64| RuleCounters {
        names,
        key: 1,
        traffic: RuleTraffic {
            packets,
            bytes: packets * 60,
            flows: 1,
        },
    };
    let web = RuleNames {
        namespace: Some("x".into()),
        policy: Some("web".into()),
        rule: "ingress[0]".into(),
        ..RuleNames::unnamed(crate::sdn::audit::RuleRef {
            tier: AuditTier::NetworkPolicy,
            dir: Dir::Ingress,
            verdict: Verdict::Allow,
            id: 1,
        })
    };
    let isolation = RuleNames {
        policy: None,
        rule: "default-deny".into(),
        verdict: Verdict::Deny,
        isolated_by: vec!["x/web".into()],
        ..web.clone()
    };
    let anp = RuleNames {
        tier: AuditTier::Admin,
        namespace: None,
        policy: Some("first".into()),
        priority: Some(3),
        rule_name: Some("deny-y".into()),
        verdict: Verdict::Deny,
        ..web.clone()
    };
    let stats = RuleSnapshot {
        polled_at_unix_ms: Some(1),
        rules: vec![rule(anp, 2), rule(web, 15), rule(isolation, 5)],
    };
    assert_eq!(
        super::run::rule_stats_table(&stats),
        "TIER           POLICY                  RULE                  VERDICT  PACKETS  BYTES\n\
         admin          anp/first (priority 3)  ingress[0] \"deny-y\"   deny     2        120\n\
         networkpolicy  x/web                   ingress[0]            allow    15       900\n\
         networkpolicy  x                       ingress default-deny  deny     5        300\n"
    );
    let empty = RuleSnapshot::default();
    assert!(super::run::rule_stats_table(&empty).contains("no policy rule has a verdict flow"));
}

#[test]
fn netpol_explain_takes_a_pod_a_pod_or_ip_and_port_proto() {
    let parse = |args: &[&str]| Cli::try_parse_from(args.iter().copied());
    let base = ["ofnode", "netpol", "explain", "--from", "x/a", "--to"];
    let with = |to: &str, port: &str| {
        let mut args = base.to_vec();
        args.extend([to, "--port", port]);
        parse(&args)
    };
    assert!(with("x/b", "80/tcp").is_ok());
    assert!(with("10.128.0.9", "53/udp").is_ok());
    let err = with("x/b", "80").unwrap_err().to_string();
    assert!(err.contains("expected PORT/PROTOCOL"), "{err}");
    let err = with("x/b", "80/icmp").unwrap_err().to_string();
    assert!(err.contains("tcp, udp or sctp"), "{err}");
    let err = parse(&[
        "ofnode", "netpol", "explain", "--from", "a", "--to", "x/b", "--port", "80/tcp",
    ])
    .unwrap_err()
    .to_string();
    assert!(err.contains("invalid pod"), "{err}");
}

#[test]
fn namespace_set_takes_an_audit_setting_and_refuses_an_unknown_verdict() {
    let parse = |audit: &[&str]| {
        let args = ["ofnode", "namespace", "set", "--name", "x", "--vnid", "11"];
        Cli::try_parse_from(args.iter().chain(audit).copied())
    };
    let audit_of = |cli: Cli| match cli.command {
        Command::Namespace(NamespaceCommand::Set { audit, .. }) => audit,
        _ => panic!("not namespace set"),
    };
    assert_eq!(audit_of(parse(&[]).unwrap()).to_string(), "none");
    let set = audit_of(parse(&["--audit", "allow,deny"]).unwrap());
    assert_eq!(set.to_string(), "allow,deny");
    let err = parse(&["--audit", "allow,drop"]).unwrap_err().to_string();
    assert!(err.contains(r#"unknown value "drop""#), "{err}");
}
