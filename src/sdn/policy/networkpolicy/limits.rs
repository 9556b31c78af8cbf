//! How big one policy may be, so that no input makes the node's single writer work without
//! bound. Each limit is checked when a policy is applied: a policy over one is refused with
//! the field and the limit named, and nothing changes.

use crate::sdn::labels::{Checked, FieldError};

/// Rules in `spec.ingress`, and in `spec.egress`.
pub const MAX_RULES: usize = 100;
/// Peers in one rule's `from` or `to`.
pub const MAX_PEERS: usize = 100;
/// Entries in one rule's `ports`.
pub const MAX_PORTS: usize = 100;
/// CIDRs in one ipBlock's `except` (a block minus E excepts is up to 62·(E+1) flows).
pub const MAX_EXCEPTS: usize = 32;
/// Flows one policy may need on this node when it is applied. Pods, labels and namespaces that
/// come later can make a policy need more: they are never refused for a policy's sake.
pub const MAX_FLOWS: usize = 20_000;

/// Refuses a list at `path` of `len` entries when it has more than `max`.
pub fn check_len(path: &str, what: &str, len: usize, max: usize) -> Checked<()> {
    if len > max {
        return Err(FieldError::new(
            path,
            format!("{len} {what}: at most {max} are allowed"),
        ));
    }
    Ok(())
}

/// The refusal of a policy that needs more than [`MAX_FLOWS`] flows.
pub fn too_many_flows() -> FieldError {
    FieldError::new(
        "spec",
        format!(
            "needs more than {MAX_FLOWS} flows on this node (at most {MAX_FLOWS} per policy): \
             select fewer pods, peers or ports, or split the policy"
        ),
    )
}
