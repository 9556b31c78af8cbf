//! The admin objects' parsing: the upstream conformance manifests' shapes accepted (YAML and
//! JSON), and every refusal naming its field.

use super::*;
use crate::sdn::objects::L4;

const ANP: &str = r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: gress-rules}
spec:
  priority: 16
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: gryffindor}}}
  ingress:
  - {name: allow-from-ravenclaw, action: Allow, from: [{namespaces: {matchLabels: {house: ravenclaw}}}]}
  - {name: pass-from-slytherin, action: Pass, from: [{pods: {namespaceSelector: {}, podSelector: {matchLabels: {house: slytherin}}}}], ports: [{portNumber: {protocol: UDP, port: 53}}, {portRange: {start: 8000, end: 8080}}, {namedPort: web}]}
  egress:
  - {name: deny-internet, action: Deny, to: [{networks: [0.0.0.0/0, '::/0']}]}
"#;

fn refused(text: &str) -> (String, String) {
    let e = parse_admin_policy(text.as_bytes()).expect_err("refused");
    (e.path, e.reason)
}

fn with(from: &str, to: &str) -> String {
    assert!(ANP.contains(from), "{from}");
    ANP.replace(from, to)
}

#[test]
fn an_anp_in_yaml_is_read_field_by_field() {
    let p = parse_admin_policy(ANP.as_bytes()).unwrap();
    assert_eq!(p.name, "gress-rules");
    assert_eq!(p.tier, Tier::Admin { priority: 16 });
    assert_eq!(p.key(), "anp/gress-rules");
    assert_eq!(p.ingress.len(), 2);
    assert_eq!(p.ingress[1].action, Action::Pass);
    assert_eq!(
        p.ingress[1].numbered_ports(),
        vec![(L4::Tcp, 8000, 8080), (L4::Udp, 53, 53)]
    );
    assert_eq!(p.ingress[1].named_ports(), vec!["web".to_string()]);
    assert!(p.ingress[0].ports.is_none() && p.ingress[0].has_numbered_part());
    match &p.egress[0].peers[0] {
        AdminPeer::Networks { ipv4, ipv6 } => {
            assert_eq!(ipv4.len(), 1);
            assert_eq!(ipv6, &vec!["::/0".to_string()]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_same_object_in_json_is_the_same_policy() {
    let value: serde_json::Value = serde_yaml::from_str(ANP).unwrap();
    let json = serde_json::to_vec(&value).unwrap();
    assert_eq!(
        parse_admin_policy(&json).unwrap(),
        parse_admin_policy(ANP.as_bytes()).unwrap()
    );
}

#[test]
fn a_baseline_must_be_named_default_and_has_no_priority_nor_pass() {
    let banp = with(
        "kind: AdminNetworkPolicy",
        "kind: BaselineAdminNetworkPolicy",
    )
    .replace("  priority: 16\n", "")
    .replace("action: Pass", "action: Deny");
    assert_eq!(refused(&banp).0, "metadata.name");
    let banp = banp.replace("name: gress-rules", "name: default");
    let p = parse_admin_policy(banp.as_bytes()).unwrap();
    assert_eq!((p.tier, p.key()), (Tier::Baseline, "banp/default".into()));
    let pass = banp.replacen("action: Deny", "action: Pass", 1);
    let (path, reason) = refused(&pass);
    assert_eq!(path, "spec.ingress[1].action");
    assert!(reason.contains("cannot Pass"), "{reason}");
    let prio = banp.replace("spec:\n", "spec:\n  priority: 3\n");
    assert_eq!(refused(&prio).0, "spec.priority");
}

#[test]
fn bad_input_is_refused_naming_the_field() {
    let cases = [
        (with("priority: 16", "priority: 1001"), "spec.priority"),
        (with("priority: 16", "priority: -1"), "spec.priority"),
        (with("  priority: 16\n", ""), "spec.priority"),
        (
            with("action: Allow", "action: allow"),
            "spec.ingress[0].action",
        ),
        (
            with("name: allow-from-ravenclaw, ", "name: x, colour: red, "),
            "spec.ingress[0]",
        ),
        (
            with("protocol: UDP", "protocol: ICMP"),
            "spec.ingress[1].ports[0].portNumber.protocol",
        ),
        (
            with("port: 53", "port: 70000"),
            "spec.ingress[1].ports[0].portNumber.port",
        ),
        (
            with("start: 8000, end: 8080", "start: 8080, end: 8000"),
            "spec.ingress[1].ports[1].portRange.end",
        ),
        (
            with(
                "{namedPort: web}",
                "{namedPort: web, portNumber: {port: 1}}",
            ),
            "spec.ingress[1].ports[2]",
        ),
        (
            with("[0.0.0.0/0, '::/0']", "[10.0.0.0/33]"),
            "spec.egress[0].to[0].networks[0]",
        ),
        (
            with(
                "{networks: [0.0.0.0/0, '::/0']}]",
                "{nodes: {}}], ports: [{namedPort: web}]",
            ),
            "spec.egress[0].ports",
        ),
        (
            with(
                "{networks: [0.0.0.0/0, '::/0']}",
                "{nodes: {matchLabels: {'bad key!': x}}}",
            ),
            "spec.egress[0].to[0].nodes.matchLabels",
        ),
        (
            with(
                "{networks: [0.0.0.0/0, '::/0']}",
                "{domainNames: [a.example.com]}",
            ),
            "spec.egress[0].to[0].domainNames",
        ),
        (
            with(
                "from: [{namespaces: {matchLabels: {house: ravenclaw}}}]",
                "from: [{networks: [10.0.0.0/8]}]",
            ),
            "spec.ingress[0].from[0]",
        ),
        (
            with(
                "from: [{namespaces: {matchLabels: {house: ravenclaw}}}]",
                "from: []",
            ),
            "spec.ingress[0].from",
        ),
        (
            with(
                "subject: {namespaces:",
                "subject: {pods: {namespaceSelector: {}, podSelector: {}}, namespaces:",
            ),
            "spec.subject",
        ),
        (
            with("kubernetes.io/metadata.name: gryffindor", "bad key!: x"),
            "spec.subject.namespaces.matchLabels",
        ),
        (
            with("kind: AdminNetworkPolicy", "kind: NetworkPolicy"),
            "kind",
        ),
        (with("v1alpha1", "v1"), "apiVersion"),
        (
            with(
                "{networks: [0.0.0.0/0, '::/0']}]",
                "{networks: [10.0.0.0/8]}], ports: [{namedPort: web}]",
            ),
            "spec.egress[0].ports",
        ),
    ];
    for (text, path) in cases {
        let (got, reason) = refused(&text);
        assert!(got.starts_with(path), "{path}: got {got}: {reason}");
    }
}

#[test]
fn more_rules_than_a_priority_band_holds_are_refused() {
    let rule = "  - {action: Allow, from: [{namespaces: {}}]}\n";
    let text = format!(
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {{name: big}}\nspec:\n  priority: 1\n  subject: {{namespaces: {{}}}}\n  ingress:\n{}",
        rule.repeat(MAX_RULES + 1)
    );
    let (path, reason) = refused(&text);
    assert_eq!(path, "spec.ingress");
    assert!(reason.contains("at most 64"), "{reason}");
}
