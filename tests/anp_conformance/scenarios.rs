//! The upstream v1alpha1 AdminNetworkPolicy conformance suite (kubernetes-sigs/network-policy-api
//! v0.1.8, `conformance/tests/*admin-network-policy*`) as data: each test's objects, and for each
//! subtest the change made before probing and the probes with their expected result. Restated
//! for ofnode from the suite's manifests and tests (the objects are the manifests' values; the
//! namespaces are `network-policy-conformance-<house>`, shortened to `<house>` in the probes).
//! Host-network ports: v0.1.8's defaults (HNP[0..7] = 34345..34352).

/// A change a subtest makes before it probes (on the state the earlier subtests left).
#[derive(Debug, Clone, Copy)]
pub enum Step {
    None,
    /// Swap rules `i` and `j` in each direction named.
    Swap(&'static [&'static str], usize, usize),
    /// Policy, direction, rule index, new action.
    Action(&'static str, &'static str, usize, &'static str),
    /// Delete the NetworkPolicy of that name (in the manifest).
    DeleteNetworkPolicy(&'static str),
    /// Policy, new priority.
    Priority(&'static str, i64),
    /// Insert an egress rule 0 of that name allowing the pods' addresses as /32 networks.
    AllowPodAddresses(&'static str, &'static [&'static str]),
    /// Direction, rule index, named port replacing the rule's ports.
    NamedPort(&'static str, usize, &'static str),
}

/// One probe: client pod, server pod (`house/pod`), protocol, port, whether it must connect.
pub type Row = (&'static str, &'static str, &'static str, u16, bool);

pub struct Subtest {
    pub id: &'static str,
    pub name: &'static str,
    pub step: Step,
    pub probes: &'static [Row],
}

pub struct Test {
    pub number: u8,
    pub name: &'static str,
    /// The objects the test creates (YAML documents); patches apply to the first unless named.
    pub manifest: &'static str,
    pub subtests: &'static [Subtest],
}

pub const TESTS: &[Test] = &[
    Test {
        number: 1,
        name: "AdminNetworkPolicyIngressTCP",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: ingress-tcp}
spec:
  priority: 3
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}
  ingress:
  - {name: allow-from-ravenclaw-everything, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-ravenclaw-everything, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: pass-from-ravenclaw-everything, action: Pass, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-slytherin-at-port-80, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}]}
  - {name: pass-from-slytherin-at-port-80, action: Pass, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}]}
  - {name: allow-from-hufflepuff-at-port-80, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: TCP, port: 80}}]}
  - {name: deny-from-hufflepuff-everything-else, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
"#,
        subtests: &[
            Subtest {
                id: "1.1",
                name: "Should support an 'allow-ingress' policy for TCP protocol; ensure rule ordering is respected",
                step: Step::None,
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-0", "TCP", 80, true),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-0", "TCP", 8080, true),
                ],
            },
            Subtest {
                id: "1.2",
                name: "Should support an 'allow-ingress' policy for TCP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "gryffindor/harry-potter-1", "TCP", 80, true),
                    ("hufflepuff/cedric-diggory-1", "gryffindor/harry-potter-1", "TCP", 8080, false),
                ],
            },
            Subtest {
                id: "1.3",
                name: "Should support an 'deny-ingress' policy for TCP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["ingress"], 0, 1),
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-1", "TCP", 80, false),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-1", "TCP", 8080, false),
                ],
            },
            Subtest {
                id: "1.4",
                name: "Should support a 'deny-ingress' policy for TCP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "TCP", 80, false),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "TCP", 8080, true),
                ],
            },
            Subtest {
                id: "1.5",
                name: "Should support an 'pass-ingress' policy for TCP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["ingress"], 0, 2),
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-0", "TCP", 80, true),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-0", "TCP", 8080, true),
                ],
            },
            Subtest {
                id: "1.6",
                name: "Should support a 'pass-ingress' policy for TCP protocol at the specified port",
                step: Step::Swap(&["ingress"], 3, 4),
                probes: &[
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "TCP", 80, true),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "TCP", 8080, true),
                ],
            },
        ],
    },
    Test {
        number: 2,
        name: "AdminNetworkPolicyIngressUDP",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: ingress-udp}
spec:
  priority: 4
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}
  ingress:
  - {name: allow-from-ravenclaw-everything, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-ravenclaw-everything, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: pass-from-ravenclaw-everything, action: Pass, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-slytherin-at-port-5353, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: UDP, port: 5353}}]}
  - {name: pass-from-slytherin-at-port-5353, action: Pass, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: UDP, port: 5353}}]}
  - {name: allow-from-gryffindor-at-port-53, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}], ports: [{portNumber: {protocol: UDP, port: 53}}]}
  - {name: deny-from-gryffindor-everything-else, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
"#,
        subtests: &[
            Subtest {
                id: "2.1",
                name: "Should support an 'allow-ingress' policy for UDP protocol; ensure rule ordering is respected",
                step: Step::None,
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "hufflepuff/cedric-diggory-0", "UDP", 53, true),
                    ("ravenclaw/luna-lovegood-1", "hufflepuff/cedric-diggory-0", "UDP", 5353, true),
                ],
            },
            Subtest {
                id: "2.2",
                name: "Should support an 'allow-ingress' policy for UDP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "hufflepuff/cedric-diggory-1", "UDP", 53, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "UDP", 5353, false),
                ],
            },
            Subtest {
                id: "2.3",
                name: "Should support an 'deny-ingress' policy for UDP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["ingress"], 0, 1),
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "hufflepuff/cedric-diggory-1", "UDP", 53, false),
                    ("ravenclaw/luna-lovegood-1", "hufflepuff/cedric-diggory-1", "UDP", 5353, false),
                ],
            },
            Subtest {
                id: "2.4",
                name: "Should support a 'deny-ingress' policy for UDP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("slytherin/draco-malfoy-0", "hufflepuff/cedric-diggory-0", "UDP", 5353, false),
                    ("slytherin/draco-malfoy-1", "hufflepuff/cedric-diggory-0", "UDP", 53, true),
                ],
            },
            Subtest {
                id: "2.5",
                name: "Should support an 'pass-ingress' policy for UDP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["ingress"], 0, 2),
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "hufflepuff/cedric-diggory-1", "UDP", 5353, true),
                    ("ravenclaw/luna-lovegood-1", "hufflepuff/cedric-diggory-1", "UDP", 53, true),
                ],
            },
            Subtest {
                id: "2.6",
                name: "Should support a 'pass-ingress' policy for UDP protocol at the specified port",
                step: Step::Swap(&["ingress"], 3, 4),
                probes: &[
                    ("slytherin/draco-malfoy-0", "hufflepuff/cedric-diggory-0", "UDP", 5353, true),
                    ("slytherin/draco-malfoy-1", "hufflepuff/cedric-diggory-0", "UDP", 53, true),
                ],
            },
        ],
    },
    Test {
        number: 3,
        name: "AdminNetworkPolicyIngressSCTP",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: ingress-sctp}
spec:
  priority: 5
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}
  ingress:
  - {name: allow-from-gryffindor-everything, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
  - {name: deny-from-gryffindor-everything, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
  - {name: pass-from-gryffindor-everything, action: Pass, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
  - {name: deny-from-slytherin-at-port-9003, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: pass-from-slytherin-at-port-9003, action: Pass, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: allow-from-hufflepuff-at-port-9003, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: deny-from-hufflepuff-everything-else, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
"#,
        subtests: &[
            Subtest {
                id: "3.1",
                name: "Should support an 'allow-ingress' policy for SCTP protocol; ensure rule ordering is respected",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-0", "SCTP", 9003, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "SCTP", 9005, true),
                ],
            },
            Subtest {
                id: "3.2",
                name: "Should support an 'allow-ingress' policy for SCTP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "ravenclaw/luna-lovegood-1", "SCTP", 9003, true),
                    ("hufflepuff/cedric-diggory-1", "ravenclaw/luna-lovegood-1", "SCTP", 9005, false),
                ],
            },
            Subtest {
                id: "3.3",
                name: "Should support an 'deny-ingress' policy for SCTP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["ingress"], 0, 1),
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-1", "SCTP", 9003, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-1", "SCTP", 9005, false),
                ],
            },
            Subtest {
                id: "3.4",
                name: "Should support a 'deny-ingress' policy for SCTP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("slytherin/draco-malfoy-0", "ravenclaw/luna-lovegood-0", "SCTP", 9003, false),
                    ("slytherin/draco-malfoy-1", "ravenclaw/luna-lovegood-0", "SCTP", 9005, true),
                ],
            },
            Subtest {
                id: "3.5",
                name: "Should support an 'pass-ingress' policy for SCTP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["ingress"], 0, 2),
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-1", "SCTP", 9003, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-1", "SCTP", 9005, true),
                ],
            },
            Subtest {
                id: "3.6",
                name: "Should support a 'pass-ingress' policy for SCTP protocol at the specified port",
                step: Step::Swap(&["ingress"], 3, 4),
                probes: &[
                    ("slytherin/draco-malfoy-0", "ravenclaw/luna-lovegood-0", "SCTP", 9003, true),
                    ("slytherin/draco-malfoy-1", "ravenclaw/luna-lovegood-0", "SCTP", 9005, true),
                ],
            },
        ],
    },
    Test {
        number: 4,
        name: "AdminNetworkPolicyEgressTCP",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: egress-tcp}
spec:
  priority: 6
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}
  egress:
  - {name: allow-to-ravenclaw-everything, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-ravenclaw-everything, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: pass-to-ravenclaw-everything, action: Pass, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-slytherin-at-port-80, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}]}
  - {name: pass-to-slytherin-at-port-80, action: Pass, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}]}
  - {name: allow-to-hufflepuff-at-port-8080, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: TCP, port: 8080}}]}
  - {name: deny-to-hufflepuff-everything-else, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
"#,
        subtests: &[
            Subtest {
                id: "4.1",
                name: "Should support an 'allow-egress' policy for TCP protocol; ensure rule ordering is respected",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "TCP", 8080, true),
                ],
            },
            Subtest {
                id: "4.2",
                name: "Should support an 'allow-egress' policy for TCP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "hufflepuff/cedric-diggory-1", "TCP", 8080, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "TCP", 80, false),
                ],
            },
            Subtest {
                id: "4.3",
                name: "Should support an 'deny-egress' policy for TCP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["egress"], 0, 1),
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-1", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-1", "TCP", 8080, false),
                ],
            },
            Subtest {
                id: "4.4",
                name: "Should support a 'deny-egress' policy for TCP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "TCP", 8080, true),
                ],
            },
            Subtest {
                id: "4.5",
                name: "Should support an 'pass-egress' policy for TCP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["egress"], 0, 2),
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "TCP", 8080, true),
                ],
            },
            Subtest {
                id: "4.6",
                name: "Should support a 'pass-egress' policy for TCP protocol at the specified port",
                step: Step::Swap(&["egress"], 3, 4),
                probes: &[
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "TCP", 8080, true),
                ],
            },
        ],
    },
    Test {
        number: 5,
        name: "AdminNetworkPolicyEgressUDP",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: egress-udp}
spec:
  priority: 7
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}
  egress:
  - {name: allow-to-ravenclaw-everything, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-ravenclaw-everything, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: pass-to-ravenclaw-everything, action: Pass, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-slytherin-at-port-5353, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: UDP, port: 5353}}]}
  - {name: pass-to-slytherin-at-port-5353, action: Pass, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: UDP, port: 5353}}]}
  - {name: allow-to-gryffindor-at-port-53, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}], ports: [{portNumber: {protocol: UDP, port: 53}}]}
  - {name: deny-to-gryffindor-everything-else, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
"#,
        subtests: &[
            Subtest {
                id: "5.1",
                name: "Should support an 'allow-egress' policy for UDP protocol; ensure rule ordering is respected",
                step: Step::None,
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "ravenclaw/luna-lovegood-0", "UDP", 53, true),
                    ("hufflepuff/cedric-diggory-1", "ravenclaw/luna-lovegood-0", "UDP", 5353, true),
                ],
            },
            Subtest {
                id: "5.2",
                name: "Should support an 'allow-egress' policy for UDP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "gryffindor/harry-potter-1", "UDP", 53, true),
                    ("hufflepuff/cedric-diggory-1", "gryffindor/harry-potter-1", "UDP", 5353, false),
                ],
            },
            Subtest {
                id: "5.3",
                name: "Should support an 'deny-egress' policy for UDP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["egress"], 0, 1),
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "ravenclaw/luna-lovegood-1", "UDP", 53, false),
                    ("hufflepuff/cedric-diggory-1", "ravenclaw/luna-lovegood-1", "UDP", 5353, false),
                ],
            },
            Subtest {
                id: "5.4",
                name: "Should support a 'deny-egress' policy for UDP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "slytherin/draco-malfoy-0", "UDP", 5353, false),
                    ("hufflepuff/cedric-diggory-1", "slytherin/draco-malfoy-0", "UDP", 53, true),
                ],
            },
            Subtest {
                id: "5.5",
                name: "Should support an 'pass-egress' policy for UDP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["egress"], 0, 2),
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "ravenclaw/luna-lovegood-1", "UDP", 5353, true),
                    ("hufflepuff/cedric-diggory-1", "ravenclaw/luna-lovegood-1", "UDP", 53, true),
                ],
            },
            Subtest {
                id: "5.6",
                name: "Should support a 'pass-egress' policy for UDP protocol at the specified port",
                step: Step::Swap(&["egress"], 3, 4),
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "slytherin/draco-malfoy-0", "UDP", 5353, true),
                    ("hufflepuff/cedric-diggory-1", "slytherin/draco-malfoy-0", "UDP", 53, true),
                ],
            },
        ],
    },
    Test {
        number: 6,
        name: "AdminNetworkPolicyEgressSCTP",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: egress-sctp}
spec:
  priority: 8
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}
  egress:
  - {name: allow-to-gryffindor-everything, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
  - {name: deny-to-gryffindor-everything, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
  - {name: pass-to-gryffindor-everything, action: Pass, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
  - {name: deny-to-slytherin-at-port-9003, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: pass-to-slytherin-at-port-9003, action: Pass, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: allow-to-hufflepuff-at-port-9003, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: deny-to-hufflepuff-everything-else, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
"#,
        subtests: &[
            Subtest {
                id: "6.1",
                name: "Should support an 'allow-egress' policy for SCTP protocol; ensure rule ordering is respected",
                step: Step::None,
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-0", "SCTP", 9003, true),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-0", "SCTP", 9005, true),
                ],
            },
            Subtest {
                id: "6.2",
                name: "Should support an 'allow-egress' policy for SCTP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "hufflepuff/cedric-diggory-1", "SCTP", 9003, true),
                    ("ravenclaw/luna-lovegood-1", "hufflepuff/cedric-diggory-1", "SCTP", 9005, false),
                ],
            },
            Subtest {
                id: "6.3",
                name: "Should support an 'deny-egress' policy for SCTP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["egress"], 0, 1),
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-1", "SCTP", 9003, false),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-1", "SCTP", 9005, false),
                ],
            },
            Subtest {
                id: "6.4",
                name: "Should support a 'deny-egress' policy for SCTP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "slytherin/draco-malfoy-0", "SCTP", 9003, false),
                    ("ravenclaw/luna-lovegood-1", "slytherin/draco-malfoy-0", "SCTP", 9005, true),
                ],
            },
            Subtest {
                id: "6.5",
                name: "Should support an 'pass-egress' policy for SCTP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["egress"], 0, 2),
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-1", "SCTP", 9003, true),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-1", "SCTP", 9005, true),
                ],
            },
            Subtest {
                id: "6.6",
                name: "Should support a 'pass-egress' policy for SCTP protocol at the specified port",
                step: Step::Swap(&["egress"], 3, 4),
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "slytherin/draco-malfoy-0", "SCTP", 9003, true),
                    ("ravenclaw/luna-lovegood-1", "slytherin/draco-malfoy-0", "SCTP", 9005, true),
                ],
            },
        ],
    },
    Test {
        number: 7,
        name: "AdminNetworkPolicyGress",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: gress-rules}
spec:
  priority: 15
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}
  egress:
  - {name: allow-to-ravenclaw-everything, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-ravenclaw-everything, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: pass-to-ravenclaw-everything, action: Pass, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-slytherin-at-ports-80-53-9003, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}, {portNumber: {protocol: UDP, port: 53}}, {portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: pass-to-slytherin-at-port-80-53-9003, action: Pass, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}, {portNumber: {protocol: UDP, port: 53}}, {portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: allow-to-hufflepuff-at-ports-8080-5353-9003, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: TCP, port: 8080}}, {portNumber: {protocol: UDP, port: 5353}}, {portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: deny-to-hufflepuff-everything-else, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
  ingress:
  - {name: allow-from-ravenclaw-everything, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-ravenclaw-everything, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: pass-from-ravenclaw-everything, action: Pass, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-slytherin-at-port-80-53-9003, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}, {portNumber: {protocol: UDP, port: 53}}, {portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: pass-from-slytherin-at-port-80-53-9003, action: Pass, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}, {portNumber: {protocol: UDP, port: 53}}, {portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: allow-from-hufflepuff-at-port-80-5353-9003, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: TCP, port: 80}}, {portNumber: {protocol: UDP, port: 5353}}, {portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: deny-from-hufflepuff-everything-else, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
"#,
        subtests: &[
            Subtest {
                id: "7.1",
                name: "Should support an 'allow-gress' policy across different protocols",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "UDP", 53, true),
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-0", "SCTP", 9003, true),
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-0", "TCP", 80, true),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-0", "UDP", 53, true),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-0", "SCTP", 9003, true),
                ],
            },
            Subtest {
                id: "7.2",
                name: "Should support an 'allow-gress' policy across different protocols at the specified ports",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "hufflepuff/cedric-diggory-1", "TCP", 8080, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "TCP", 80, false),
                    ("gryffindor/harry-potter-0", "hufflepuff/cedric-diggory-1", "UDP", 5353, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "UDP", 53, false),
                    ("gryffindor/harry-potter-0", "hufflepuff/cedric-diggory-1", "SCTP", 9003, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "SCTP", 9005, false),
                    ("hufflepuff/cedric-diggory-0", "gryffindor/harry-potter-1", "TCP", 80, true),
                    ("hufflepuff/cedric-diggory-1", "gryffindor/harry-potter-1", "TCP", 8080, false),
                    ("hufflepuff/cedric-diggory-0", "gryffindor/harry-potter-1", "UDP", 5353, true),
                    ("hufflepuff/cedric-diggory-1", "gryffindor/harry-potter-1", "UDP", 53, false),
                    ("hufflepuff/cedric-diggory-0", "gryffindor/harry-potter-1", "SCTP", 9003, true),
                    ("hufflepuff/cedric-diggory-1", "gryffindor/harry-potter-1", "SCTP", 9005, false),
                ],
            },
            Subtest {
                id: "7.3",
                name: "Should support an 'deny-gress' policy across different protocols",
                step: Step::Swap(&["ingress", "egress"], 0, 1),
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-1", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-1", "UDP", 53, false),
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-1", "SCTP", 9003, false),
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-1", "TCP", 80, false),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-1", "UDP", 53, false),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-1", "SCTP", 9003, false),
                ],
            },
            Subtest {
                id: "7.4",
                name: "Should support a 'deny-gress' policy across different protocols at the specified ports",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "TCP", 8080, true),
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "UDP", 53, false),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "UDP", 5353, true),
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "SCTP", 9003, false),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "SCTP", 9005, true),
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "TCP", 80, false),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "TCP", 8080, true),
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "UDP", 53, false),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "UDP", 5353, true),
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "SCTP", 9003, false),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "SCTP", 9005, true),
                ],
            },
            Subtest {
                id: "7.5",
                name: "Should support an 'pass-gress' policy across different protocols",
                step: Step::Swap(&["ingress", "egress"], 0, 2),
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-0", "UDP", 5353, true),
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-0", "SCTP", 9003, true),
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-0", "TCP", 80, true),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-0", "UDP", 53, true),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-0", "SCTP", 9003, true),
                ],
            },
            Subtest {
                id: "7.6",
                name: "Should support a 'pass-gress' policy across different protocols at the specified ports",
                step: Step::Swap(&["ingress", "egress"], 3, 4),
                probes: &[
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "TCP", 8080, true),
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "UDP", 53, true),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "UDP", 5353, true),
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "SCTP", 9003, true),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "SCTP", 9005, true),
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "TCP", 80, true),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "TCP", 8080, true),
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "UDP", 53, true),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "UDP", 5353, true),
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "SCTP", 9003, true),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "SCTP", 9005, true),
                ],
            },
        ],
    },
    Test {
        number: 8,
        name: "AdminNetworkPolicyIntegration",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: pass-example}
spec:
  priority: 10
  subject: {namespaces: {matchLabels: {conformance-house: gryffindor}}}
  ingress:
  - {name: deny-all-ingress-from-slytherin, action: Deny, from: [{namespaces: {matchLabels: {conformance-house: slytherin}}}]}
  egress:
  - {name: deny-all-egress-to-slytherin, action: Deny, to: [{namespaces: {matchLabels: {conformance-house: slytherin}}}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-gress-from-to-slytherin-to-gryffindor, namespace: network-policy-conformance-gryffindor}
spec:
  podSelector: null
  policyTypes: [Ingress, Egress]
  ingress:
  - {from: [{namespaceSelector: {matchLabels: {conformance-house: slytherin}}}]}
  egress:
  - {to: [{namespaceSelector: {matchLabels: {conformance-house: slytherin}}}]}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {conformance-house: gryffindor}}}
  ingress:
  - {name: deny-all-ingress-from-slytherin, action: Deny, from: [{namespaces: {matchLabels: {conformance-house: slytherin}}}]}
  egress:
  - {name: deny-all-egress-to-slytherin, action: Deny, to: [{namespaces: {matchLabels: {conformance-house: slytherin}}}]}
"#,
        subtests: &[
            Subtest {
                id: "8.1",
                name: "Should Deny traffic from slytherin to gryffindor respecting ANP",
                step: Step::None,
                probes: &[
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "TCP", 80, false),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "TCP", 8080, false),
                ],
            },
            Subtest {
                id: "8.2",
                name: "Should Deny traffic to slytherin from gryffindor respecting ANP",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "TCP", 8080, false),
                ],
            },
            Subtest {
                id: "8.3",
                name: "Should support a 'pass-ingress' policy for ANP and respect the match for network policy",
                step: Step::Action("pass-example", "ingress", 0, "Pass"),
                probes: &[
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "TCP", 80, true),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "TCP", 8080, true),
                ],
            },
            Subtest {
                id: "8.4",
                name: "Should support a 'pass-egress' policy for ANP and respect the match for network policy",
                step: Step::Action("pass-example", "egress", 0, "Pass"),
                probes: &[
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "TCP", 8080, true),
                ],
            },
            Subtest {
                id: "8.5",
                name: "Should support a 'pass-ingress' policy for ANP and respect the match for baseline admin network policy",
                step: Step::DeleteNetworkPolicy("allow-gress-from-to-slytherin-to-gryffindor"),
                probes: &[
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "TCP", 80, false),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "TCP", 8080, false),
                ],
            },
            Subtest {
                id: "8.6",
                name: "Should support a 'pass-egress' policy for ANP and respect the match for baseline admin network policy",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "TCP", 8080, false),
                ],
            },
        ],
    },
    Test {
        number: 9,
        name: "AdminNetworkPolicyPriorityField",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: priority-50-example}
spec:
  priority: 50
  subject: {pods: {namespaceSelector: {matchLabels: {conformance-house: gryffindor}}, podSelector: {matchLabels: {conformance-house: gryffindor}}}}
  ingress:
  - {name: deny-all-ingress-from-slytherin, action: Deny, from: [{pods: {namespaceSelector: {matchLabels: {conformance-house: slytherin}}, podSelector: {matchLabels: {conformance-house: slytherin}}}}]}
  egress:
  - {name: deny-all-egress-to-slytherin, action: Deny, to: [{pods: {namespaceSelector: {matchLabels: {conformance-house: slytherin}}, podSelector: {matchLabels: {conformance-house: slytherin}}}}]}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: old-priority-60-new-priority-40-example}
spec:
  priority: 60
  subject: {pods: {namespaceSelector: {matchLabels: {conformance-house: gryffindor}}, podSelector: {matchLabels: {conformance-house: gryffindor}}}}
  ingress:
  - {name: pass-all-ingress-from-slytherin, action: Pass, from: [{pods: {namespaceSelector: {matchLabels: {conformance-house: slytherin}}, podSelector: {matchLabels: {conformance-house: slytherin}}}}]}
  egress:
  - {name: pass-all-egress-to-slytherin, action: Pass, to: [{pods: {namespaceSelector: {matchLabels: {conformance-house: slytherin}}, podSelector: {matchLabels: {conformance-house: slytherin}}}}]}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {pods: {namespaceSelector: {matchLabels: {conformance-house: gryffindor}}, podSelector: {matchLabels: {conformance-house: gryffindor}}}}
  ingress:
  - {name: allow-all-ingress-from-slytherin, action: Allow, from: [{pods: {namespaceSelector: {matchLabels: {conformance-house: slytherin}}, podSelector: {matchLabels: {conformance-house: slytherin}}}}]}
  egress:
  - {name: allow-all-egress-to-slytherin, action: Allow, to: [{pods: {namespaceSelector: {matchLabels: {conformance-house: slytherin}}, podSelector: {matchLabels: {conformance-house: slytherin}}}}]}
"#,
        subtests: &[
            Subtest {
                id: "9.1",
                name: "Should Deny traffic from slytherin to gryffindor respecting ANP",
                step: Step::None,
                probes: &[
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "TCP", 80, false),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "TCP", 8080, false),
                ],
            },
            Subtest {
                id: "9.2",
                name: "Should Deny traffic to slytherin from gryffindor respecting ANP",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "TCP", 8080, false),
                ],
            },
            Subtest {
                id: "9.3",
                name: "Should respect ANP priority field; thus passing both ingress and egress traffic over to BANP",
                step: Step::Priority("old-priority-60-new-priority-40-example", 40),
                probes: &[
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "TCP", 80, true),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "TCP", 8080, true),
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "TCP", 8080, true),
                ],
            },
        ],
    },
    Test {
        number: 10,
        name: "AdminNetworkPolicyEgressInlineCIDRPeers",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: inline-cidr-as-peers-example}
spec:
  priority: 85
  subject: {pods: {namespaceSelector: {matchLabels: {conformance-house: gryffindor}}, podSelector: {matchLabels: {conformance-house: gryffindor}}}}
  egress:
  - {name: allow-egress-to-slytherin, action: Allow, to: [{pods: {namespaceSelector: {matchLabels: {conformance-house: slytherin}}, podSelector: {matchLabels: {conformance-house: slytherin}}}}]}
  - {name: deny-egress-to-internet, action: Deny, to: [{networks: [0.0.0.0/0, '::/0']}]}
"#,
        subtests: &[
            Subtest {
                id: "10.1",
                name: "Should support a 'deny-egress' rule policy for egress-cidr-peer",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "UDP", 53, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "SCTP", 9003, false),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-0", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-0", "UDP", 53, false),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-0", "SCTP", 9003, false),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "UDP", 53, true),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "SCTP", 9003, true),
                ],
            },
            Subtest {
                id: "10.2",
                name: "Should support an 'allow-egress' rule policy for egress-cidr-peer",
                step: Step::AllowPodAddresses("allow-egress-to-specific-podIPs", &["ravenclaw/luna-lovegood-0", "hufflepuff/cedric-diggory-0"]),
                probes: &[
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "UDP", 53, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "SCTP", 9003, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-0", "UDP", 53, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-0", "SCTP", 9003, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-1", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-1", "UDP", 53, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-1", "SCTP", 9003, false),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "UDP", 53, false),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "SCTP", 9003, false),
                ],
            },
        ],
    },
    Test {
        number: 11,
        name: "AdminNetworkPolicyIngressNamedPort",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: ingress-udp}
spec:
  priority: 4
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}
  ingress:
  - {name: allow-from-ravenclaw-everything, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-ravenclaw-everything, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: pass-from-ravenclaw-everything, action: Pass, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-slytherin-at-port-5353, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: UDP, port: 5353}}]}
  - {name: pass-from-slytherin-at-port-5353, action: Pass, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: UDP, port: 5353}}]}
  - {name: allow-from-gryffindor-at-port-53, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}], ports: [{portNumber: {protocol: UDP, port: 53}}]}
  - {name: deny-from-gryffindor-everything-else, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
"#,
        subtests: &[
            Subtest {
                id: "11.1",
                name: "Should support an 'allow-ingress' policy for named port",
                step: Step::NamedPort("ingress", 5, "dns"),
                probes: &[
                    ("gryffindor/harry-potter-0", "hufflepuff/cedric-diggory-1", "UDP", 53, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "UDP", 5353, false),
                ],
            },
        ],
    },
    Test {
        number: 12,
        name: "AdminNetworkPolicyEgressNamedPort",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: egress-tcp}
spec:
  priority: 6
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}
  egress:
  - {name: allow-to-ravenclaw-everything, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-ravenclaw-everything, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: pass-to-ravenclaw-everything, action: Pass, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-slytherin-at-port-80, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}]}
  - {name: pass-to-slytherin-at-port-80, action: Pass, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}]}
  - {name: allow-to-hufflepuff-at-port-8080, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: TCP, port: 8080}}]}
  - {name: deny-to-hufflepuff-everything-else, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
"#,
        subtests: &[
            Subtest {
                id: "12.1",
                name: "Should support an 'allow-egress' policy for named port",
                step: Step::NamedPort("egress", 5, "web"),
                probes: &[
                    ("gryffindor/harry-potter-0", "hufflepuff/cedric-diggory-1", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "TCP", 8080, false),
                ],
            },
        ],
    },
    Test {
        number: 13,
        name: "AdminNetworkPolicyEgressNodePeers",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: node-and-cidr-as-peers-example}
spec:
  priority: 75
  subject: {pods: {namespaceSelector: {matchLabels: {conformance-house: gryffindor}}, podSelector: {matchLabels: {conformance-house: gryffindor}}}}
  egress:
  - {name: allow-egress-to-34345-on-nodes, action: Allow, to: [{nodes: {matchLabels: {kubernetes.io/os: linux}}}], ports: [{portNumber: {protocol: TCP, port: 34345}}]}
  - {name: pass-egress-to-34347-on-nodes, action: Pass, to: [{nodes: {matchLabels: {kubernetes.io/os: linux}}}], ports: [{portNumber: {protocol: UDP, port: 34347}}]}
  - {name: deny-egress-to-slytherin-and-nodes-and-internet, action: Deny, to: [{pods: {namespaceSelector: {matchLabels: {conformance-house: slytherin}}, podSelector: {matchLabels: {conformance-house: slytherin}}}}, {nodes: {matchLabels: {kubernetes.io/os: linux}}}, {networks: [0.0.0.0/0, '::/0']}]}
"#,
        subtests: &[
            Subtest {
                id: "13.1",
                name: "Should support an 'allow-egress' rule policy for egress-node-peer",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-1", "forbidden-forrest/centaur-1", "TCP", 34345, true),
                ],
            },
            Subtest {
                id: "13.2",
                name: "Should support a 'pass-egress' rule policy for egress-node-peer",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-1", "forbidden-forrest/centaur-1", "UDP", 34347, true),
                ],
            },
            Subtest {
                id: "13.3",
                name: "Should support a 'deny-egress' rule policy for egress-node-peer",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-1", "forbidden-forrest/centaur-1", "TCP", 34346, false),
                    ("gryffindor/harry-potter-1", "forbidden-forrest/centaur-1", "UDP", 34349, false),
                    ("gryffindor/harry-potter-1", "forbidden-forrest/centaur-1", "SCTP", 34351, false),
                ],
            },
        ],
    },
    Test {
        number: 14,
        name: "BaselineAdminNetworkPolicyIngressTCP",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}
  ingress:
  - {name: allow-from-ravenclaw-everything, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-ravenclaw-everything, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-slytherin-at-port-80, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}]}
  - {name: allow-from-hufflepuff-at-port-80, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: TCP, port: 80}}]}
  - {name: deny-from-hufflepuff-everything-else, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
"#,
        subtests: &[
            Subtest {
                id: "14.1",
                name: "Should support an 'allow-ingress' policy for TCP protocol; ensure rule ordering is respected",
                step: Step::None,
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-0", "TCP", 80, true),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-0", "TCP", 8080, true),
                ],
            },
            Subtest {
                id: "14.2",
                name: "Should support an 'allow-ingress' policy for TCP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "gryffindor/harry-potter-1", "TCP", 80, true),
                    ("hufflepuff/cedric-diggory-1", "gryffindor/harry-potter-1", "TCP", 8080, false),
                ],
            },
            Subtest {
                id: "14.3",
                name: "Should support an 'deny-ingress' policy for TCP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["ingress"], 0, 1),
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-1", "TCP", 80, false),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-1", "TCP", 8080, false),
                ],
            },
            Subtest {
                id: "14.4",
                name: "Should support a 'deny-ingress' policy for TCP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "TCP", 80, false),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "TCP", 8080, true),
                ],
            },
        ],
    },
    Test {
        number: 15,
        name: "BaselineAdminNetworkPolicyIngressUDP",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}
  ingress:
  - {name: allow-from-ravenclaw-everything, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-ravenclaw-everything, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-slytherin-at-port-5353, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: UDP, port: 5353}}]}
  - {name: allow-from-gryffindor-at-port-53, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}], ports: [{portNumber: {protocol: UDP, port: 53}}]}
  - {name: deny-from-gryffindor-everything-else, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
"#,
        subtests: &[
            Subtest {
                id: "15.1",
                name: "Should support an 'allow-ingress' policy for UDP protocol; ensure rule ordering is respected",
                step: Step::None,
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "hufflepuff/cedric-diggory-0", "UDP", 53, true),
                    ("ravenclaw/luna-lovegood-1", "hufflepuff/cedric-diggory-0", "UDP", 5353, true),
                ],
            },
            Subtest {
                id: "15.2",
                name: "Should support an 'allow-ingress' policy for UDP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "hufflepuff/cedric-diggory-1", "UDP", 53, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "UDP", 5353, false),
                ],
            },
            Subtest {
                id: "15.3",
                name: "Should support an 'deny-ingress' policy for UDP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["ingress"], 0, 1),
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "hufflepuff/cedric-diggory-1", "UDP", 53, false),
                    ("ravenclaw/luna-lovegood-1", "hufflepuff/cedric-diggory-1", "UDP", 5353, false),
                ],
            },
            Subtest {
                id: "15.4",
                name: "Should support a 'deny-ingress' policy for UDP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("slytherin/draco-malfoy-0", "hufflepuff/cedric-diggory-0", "UDP", 5353, false),
                    ("slytherin/draco-malfoy-1", "hufflepuff/cedric-diggory-0", "UDP", 53, true),
                ],
            },
        ],
    },
    Test {
        number: 16,
        name: "BaselineAdminNetworkPolicyIngressSCTP",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}
  ingress:
  - {name: allow-from-gryffindor-everything, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
  - {name: deny-from-gryffindor-everything, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
  - {name: deny-from-slytherin-at-port-9003, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: allow-from-hufflepuff-at-port-9003, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: deny-from-hufflepuff-everything-else, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
"#,
        subtests: &[
            Subtest {
                id: "16.1",
                name: "Should support an 'allow-ingress' policy for SCTP protocol; ensure rule ordering is respected",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-0", "SCTP", 9003, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "SCTP", 9005, true),
                ],
            },
            Subtest {
                id: "16.2",
                name: "Should support an 'allow-ingress' policy for SCTP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "ravenclaw/luna-lovegood-1", "SCTP", 9003, true),
                    ("hufflepuff/cedric-diggory-1", "ravenclaw/luna-lovegood-1", "SCTP", 9005, false),
                ],
            },
            Subtest {
                id: "16.3",
                name: "Should support an 'deny-ingress' policy for SCTP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["ingress"], 0, 1),
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-1", "SCTP", 9003, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-1", "SCTP", 9005, false),
                ],
            },
            Subtest {
                id: "16.4",
                name: "Should support a 'deny-ingress' policy for SCTP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("slytherin/draco-malfoy-0", "ravenclaw/luna-lovegood-0", "SCTP", 9003, false),
                    ("slytherin/draco-malfoy-1", "ravenclaw/luna-lovegood-0", "SCTP", 9005, true),
                ],
            },
        ],
    },
    Test {
        number: 17,
        name: "BaselineAdminNetworkPolicyEgressTCP",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}
  egress:
  - {name: allow-to-ravenclaw-everything, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-ravenclaw-everything, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-slytherin-at-port-80, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}]}
  - {name: allow-to-hufflepuff-at-port-8080, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: TCP, port: 8080}}]}
  - {name: deny-to-hufflepuff-everything-else, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
"#,
        subtests: &[
            Subtest {
                id: "17.1",
                name: "Should support an 'allow-egress' policy for TCP protocol; ensure rule ordering is respected",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "TCP", 8080, true),
                ],
            },
            Subtest {
                id: "17.2",
                name: "Should support an 'allow-egress' policy for TCP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "hufflepuff/cedric-diggory-1", "TCP", 8080, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "TCP", 80, false),
                ],
            },
            Subtest {
                id: "17.3",
                name: "Should support an 'deny-egress' policy for TCP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["egress"], 0, 1),
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-1", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-1", "TCP", 8080, false),
                ],
            },
            Subtest {
                id: "17.4",
                name: "Should support a 'deny-egress' policy for TCP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "TCP", 8080, true),
                ],
            },
        ],
    },
    Test {
        number: 18,
        name: "BaselineAdminNetworkPolicyEgressUDP",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}
  egress:
  - {name: allow-to-ravenclaw-everything, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-ravenclaw-everything, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-slytherin-at-port-5353, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: UDP, port: 5353}}]}
  - {name: allow-to-gryffindor-at-port-53, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}], ports: [{portNumber: {protocol: UDP, port: 53}}]}
  - {name: deny-to-gryffindor-everything-else, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
"#,
        subtests: &[
            Subtest {
                id: "18.1",
                name: "Should support an 'allow-egress' policy for UDP protocol; ensure rule ordering is respected",
                step: Step::None,
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "ravenclaw/luna-lovegood-0", "UDP", 53, true),
                    ("hufflepuff/cedric-diggory-1", "ravenclaw/luna-lovegood-0", "UDP", 5353, true),
                ],
            },
            Subtest {
                id: "18.2",
                name: "Should support an 'allow-egress' policy for UDP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "gryffindor/harry-potter-1", "UDP", 53, true),
                    ("hufflepuff/cedric-diggory-1", "gryffindor/harry-potter-1", "UDP", 5353, false),
                ],
            },
            Subtest {
                id: "18.3",
                name: "Should support an 'deny-egress' policy for UDP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["egress"], 0, 1),
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "ravenclaw/luna-lovegood-1", "UDP", 53, false),
                    ("hufflepuff/cedric-diggory-1", "ravenclaw/luna-lovegood-1", "UDP", 5353, false),
                ],
            },
            Subtest {
                id: "18.4",
                name: "Should support a 'deny-egress' policy for UDP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "slytherin/draco-malfoy-0", "UDP", 5353, false),
                    ("hufflepuff/cedric-diggory-1", "slytherin/draco-malfoy-0", "UDP", 53, true),
                ],
            },
        ],
    },
    Test {
        number: 19,
        name: "BaselineAdminNetworkPolicyEgressSCTP",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}
  egress:
  - {name: allow-to-gryffindor-everything, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
  - {name: deny-to-gryffindor-everything, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
  - {name: deny-to-slytherin-at-port-9003, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: allow-to-hufflepuff-at-port-9003, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: deny-to-hufflepuff-everything-else, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
"#,
        subtests: &[
            Subtest {
                id: "19.1",
                name: "Should support an 'allow-egress' policy for SCTP protocol; ensure rule ordering is respected",
                step: Step::None,
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-0", "SCTP", 9003, true),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-0", "SCTP", 9005, true),
                ],
            },
            Subtest {
                id: "19.2",
                name: "Should support an 'allow-egress' policy for SCTP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "hufflepuff/cedric-diggory-1", "SCTP", 9003, true),
                    ("ravenclaw/luna-lovegood-1", "hufflepuff/cedric-diggory-1", "SCTP", 9005, false),
                ],
            },
            Subtest {
                id: "19.3",
                name: "Should support an 'deny-egress' policy for SCTP protocol; ensure rule ordering is respected",
                step: Step::Swap(&["egress"], 0, 1),
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-1", "SCTP", 9003, false),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-1", "SCTP", 9005, false),
                ],
            },
            Subtest {
                id: "19.4",
                name: "Should support a 'deny-egress' policy for SCTP protocol at the specified port",
                step: Step::None,
                probes: &[
                    ("ravenclaw/luna-lovegood-0", "slytherin/draco-malfoy-0", "SCTP", 9003, false),
                    ("ravenclaw/luna-lovegood-1", "slytherin/draco-malfoy-0", "SCTP", 9005, true),
                ],
            },
        ],
    },
    Test {
        number: 20,
        name: "BaselineAdminNetworkPolicyGress",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}
  egress:
  - {name: allow-to-ravenclaw-everything, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-ravenclaw-everything, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-slytherin-at-ports-80-53-9003, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}, {portNumber: {protocol: UDP, port: 53}}, {portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: allow-to-hufflepuff-at-ports-8080-5353, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: TCP, port: 8080}}, {portNumber: {protocol: UDP, port: 5353}}, {portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: deny-to-hufflepuff-everything-else, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
  ingress:
  - {name: allow-from-ravenclaw-everything, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-ravenclaw-everything, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-slytherin-at-port-80-53-9003, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}, {portNumber: {protocol: UDP, port: 53}}, {portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: allow-from-hufflepuff-at-port-80-5353-9003, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: TCP, port: 80}}, {portNumber: {protocol: UDP, port: 5353}}, {portNumber: {protocol: SCTP, port: 9003}}]}
  - {name: deny-from-hufflepuff-everything-else, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
"#,
        subtests: &[
            Subtest {
                id: "20.1",
                name: "Should support an 'allow-gress' policy across different protocols",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "UDP", 53, true),
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-0", "SCTP", 9003, true),
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-0", "TCP", 80, true),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-0", "UDP", 53, true),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-0", "SCTP", 9003, true),
                ],
            },
            Subtest {
                id: "20.2",
                name: "Should support an 'allow-gress' policy across different protocols at the specified ports",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "hufflepuff/cedric-diggory-1", "TCP", 8080, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "TCP", 80, false),
                    ("gryffindor/harry-potter-0", "hufflepuff/cedric-diggory-1", "UDP", 5353, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "UDP", 53, false),
                    ("gryffindor/harry-potter-0", "hufflepuff/cedric-diggory-1", "SCTP", 9003, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "SCTP", 9005, false),
                    ("hufflepuff/cedric-diggory-0", "gryffindor/harry-potter-1", "TCP", 80, true),
                    ("hufflepuff/cedric-diggory-1", "gryffindor/harry-potter-1", "TCP", 8080, false),
                    ("hufflepuff/cedric-diggory-0", "gryffindor/harry-potter-1", "UDP", 5353, true),
                    ("hufflepuff/cedric-diggory-1", "gryffindor/harry-potter-1", "UDP", 53, false),
                    ("hufflepuff/cedric-diggory-0", "gryffindor/harry-potter-1", "SCTP", 9003, true),
                    ("hufflepuff/cedric-diggory-1", "gryffindor/harry-potter-1", "SCTP", 9005, false),
                ],
            },
            Subtest {
                id: "20.3",
                name: "Should support an 'deny-gress' policy across different protocols",
                step: Step::Swap(&["ingress", "egress"], 0, 1),
                probes: &[
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-1", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-1", "UDP", 53, false),
                    ("gryffindor/harry-potter-0", "ravenclaw/luna-lovegood-1", "SCTP", 9003, false),
                    ("ravenclaw/luna-lovegood-0", "gryffindor/harry-potter-1", "TCP", 80, false),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-1", "UDP", 53, false),
                    ("ravenclaw/luna-lovegood-1", "gryffindor/harry-potter-1", "SCTP", 9003, false),
                ],
            },
            Subtest {
                id: "20.4",
                name: "Should support a 'deny-gress' policy across different protocols at the specified ports",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "TCP", 8080, true),
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "UDP", 53, false),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "UDP", 5353, true),
                    ("gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", "SCTP", 9003, false),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "SCTP", 9005, true),
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "TCP", 80, false),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "TCP", 8080, true),
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "UDP", 53, false),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "UDP", 5353, true),
                    ("slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", "SCTP", 9003, false),
                    ("slytherin/draco-malfoy-1", "gryffindor/harry-potter-0", "SCTP", 9005, true),
                ],
            },
        ],
    },
    Test {
        number: 21,
        name: "BaselineAdminNetworkPolicyEgressInlineCIDRPeers",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}
  egress:
  - {name: allow-egress-to-slytherin, action: Allow, to: [{pods: {namespaceSelector: {matchLabels: {conformance-house: slytherin}}, podSelector: {matchLabels: {conformance-house: slytherin}}}}]}
  - {name: deny-egress-to-internet, action: Deny, to: [{networks: [0.0.0.0/0, '::/0']}]}
"#,
        subtests: &[
            Subtest {
                id: "21.1",
                name: "Should support a 'deny-egress' rule policy for egress-cidr-peer",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "UDP", 53, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "SCTP", 9003, false),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-0", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-0", "UDP", 53, false),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-0", "SCTP", 9003, false),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "UDP", 53, true),
                    ("gryffindor/harry-potter-1", "slytherin/draco-malfoy-0", "SCTP", 9003, true),
                ],
            },
            Subtest {
                id: "21.2",
                name: "Should support an 'allow-egress' rule policy for egress-cidr-peer",
                step: Step::AllowPodAddresses("allow-egress-to-specific-podIPs", &["ravenclaw/luna-lovegood-0", "hufflepuff/cedric-diggory-0"]),
                probes: &[
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "UDP", 53, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-0", "SCTP", 9003, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-0", "TCP", 80, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-0", "UDP", 53, true),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-0", "SCTP", 9003, true),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-1", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-1", "UDP", 53, false),
                    ("gryffindor/harry-potter-1", "ravenclaw/luna-lovegood-1", "SCTP", 9003, false),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "TCP", 80, false),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "UDP", 53, false),
                    ("gryffindor/harry-potter-1", "hufflepuff/cedric-diggory-1", "SCTP", 9003, false),
                ],
            },
        ],
    },
    Test {
        number: 22,
        name: "BaselineAdminNetworkPolicyIngressNamedPort",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}
  ingress:
  - {name: allow-from-ravenclaw-everything, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-ravenclaw-everything, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-from-slytherin-at-port-80, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: TCP, port: 80}}]}
  - {name: allow-from-hufflepuff-at-port-80, action: Allow, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}], ports: [{portNumber: {protocol: TCP, port: 80}}]}
  - {name: deny-from-hufflepuff-everything-else, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}]}
"#,
        subtests: &[
            Subtest {
                id: "22.1",
                name: "Should support an 'allow-ingress' policy for named port",
                step: Step::NamedPort("ingress", 3, "web"),
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "gryffindor/harry-potter-1", "TCP", 80, true),
                    ("hufflepuff/cedric-diggory-1", "gryffindor/harry-potter-1", "TCP", 8080, false),
                ],
            },
        ],
    },
    Test {
        number: 23,
        name: "BaselineAdminNetworkPolicyEgressNamedPort",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-hufflepuff}}}
  egress:
  - {name: allow-to-ravenclaw-everything, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-ravenclaw-everything, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-ravenclaw}}}]}
  - {name: deny-to-slytherin-at-port-5353, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-slytherin}}}], ports: [{portNumber: {protocol: UDP, port: 5353}}]}
  - {name: allow-to-gryffindor-at-port-53, action: Allow, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}], ports: [{portNumber: {protocol: UDP, port: 53}}]}
  - {name: deny-to-gryffindor-everything-else, action: Deny, to: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}]}
"#,
        subtests: &[
            Subtest {
                id: "23.1",
                name: "Should support an 'allow-egress' policy for named port",
                step: Step::NamedPort("egress", 3, "dns"),
                probes: &[
                    ("hufflepuff/cedric-diggory-0", "gryffindor/harry-potter-1", "UDP", 53, true),
                    ("hufflepuff/cedric-diggory-1", "gryffindor/harry-potter-1", "UDP", 5353, false),
                ],
            },
        ],
    },
    Test {
        number: 24,
        name: "BaselineAdminNetworkPolicyEgressNodePeers",
        manifest: r#"apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-gryffindor}}}
  egress:
  - {name: allow-egress-to-34345-on-nodes, action: Allow, to: [{nodes: {matchLabels: {kubernetes.io/os: linux}}}], ports: [{portRange: {protocol: TCP, start: 34345, end: 34346}}]}
  - {name: deny-egress-to-nodes-and-internet, action: Deny, to: [{nodes: {matchLabels: {kubernetes.io/os: linux}}}, {networks: [0.0.0.0/0, '::/0']}]}
"#,
        subtests: &[
            Subtest {
                id: "24.1",
                name: "Should support an 'allow-egress' rule policy for egress-node-peer",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-0", "forbidden-forrest/centaur-1", "TCP", 34345, true),
                    ("gryffindor/harry-potter-1", "forbidden-forrest/centaur-1", "TCP", 34346, true),
                ],
            },
            Subtest {
                id: "24.2",
                name: "Should support a 'deny-egress' rule policy for egress-node-peer",
                step: Step::None,
                probes: &[
                    ("gryffindor/harry-potter-1", "forbidden-forrest/centaur-1", "UDP", 34349, false),
                    ("gryffindor/harry-potter-1", "forbidden-forrest/centaur-1", "SCTP", 34351, false),
                ],
            },
        ],
    },
];
