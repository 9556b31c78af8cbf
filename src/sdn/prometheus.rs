//! The Prometheus text exposition format, written once for every /metrics writer (the node's
//! metrics, the per-pod and per-rule counters, the controller's).

use std::fmt::Write;

/// A metric family's `# HELP` and `# TYPE` lines (`kind`: counter, gauge); its series follow.
pub(crate) fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// One counter in Prometheus text exposition format (the controller's /metrics writes these too).
pub(crate) fn counter(out: &mut String, name: &str, help: &str, value: impl std::fmt::Display) {
    header(out, name, help, "counter");
    let _ = writeln!(out, "{name} {value}");
}

/// One gauge in Prometheus text exposition format.
pub(crate) fn gauge(out: &mut String, name: &str, help: &str, value: impl std::fmt::Display) {
    header(out, name, help, "gauge");
    let _ = writeln!(out, "{name} {value}");
}

/// A label value as the Prometheus text format wants it.
pub(crate) fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}
