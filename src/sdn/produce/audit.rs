//! The policy audit's flows, each written once for both policy producers: a verdict flow
//! named by its rule's cookie and, when its verdict is audited, first handing the rule's key
//! to table 24 (`load:KEY->NXM_NX_REG4[], resubmit(,24)`, its own actions after); and table
//! 24's one flow per audited rule, which sends a new connection's first packet to ofnode
//! through the rule's meter:
//!
//! ```text
//! table=24, priority=100, ct_state=+new+trk, reg4=KEY,
//!     actions=controller(max_len=128,userdata=ofA1 ++ KEY,meter_id=KEY)
//! ```
//!
//! Nothing else is in table 24: a packet that is not a new connection's misses, and the
//! resubmit returns to the verdict flow's own actions. The meter limits only the packet-in
//! copy; the packet itself is forwarded or dropped by the verdict flow as before.

use ofnode_proto::{Action, Controller, FlowMod, Instruction};

use crate::sdn::audit::RuleRef;
use crate::sdn::flowmod::{table, Actions, CT_NEW, CT_TRK};
use crate::sdn::layout::{POLICY_AUDIT, REG_AUDIT_KEY};
use crate::sdn::table::Flow;

/// Table 24's flows' priority.
pub const PRIO_AUDIT: u16 = 100;
/// How much of the packet a packet-in carries: the headers of the 5-tuple.
pub const AUDIT_MAX_LEN: u16 = 128;

/// `fm`, the verdict flow of `rule`, named by the rule's cookie and, when `audited`, handing
/// the rule's key to table 24 before its own actions.
pub fn verdict_flow(mut fm: FlowMod, rule: RuleRef, audited: bool) -> FlowMod {
    fm.cookie = rule.cookie();
    if audited {
        let prefix = table(0)
            .load(REG_AUDIT_KEY, rule.key())
            .resubmit(POLICY_AUDIT)
            .build()
            .instructions;
        let prefix = prefix.into_iter().flat_map(|i| match i {
            Instruction::ApplyActions(actions) => actions,
            _ => Vec::new(),
        });
        match fm.instructions.first_mut() {
            Some(Instruction::ApplyActions(actions)) => {
                actions.splice(0..0, prefix);
            }
            _ => fm
                .instructions
                .insert(0, Instruction::ApplyActions(prefix.collect())),
        }
    }
    fm
}

/// Table 24's flow of an audited rule.
pub fn audit_flow(rule: RuleRef) -> FlowMod {
    table(POLICY_AUDIT)
        .priority(PRIO_AUDIT)
        .ct_state(CT_NEW | CT_TRK, 0)
        .reg(REG_AUDIT_KEY, rule.key())
        .action(Action::Controller(Controller {
            max_len: AUDIT_MAX_LEN,
            userdata: rule.userdata().to_vec(),
            meter_id: Some(rule.key()),
            ..Controller::default()
        }))
        .build()
}

/// The audited rule (its key: the meter id) a held flow of table 24 sends packet-ins for;
/// None for any other flow.
pub fn audited_key(flow: &Flow) -> Option<u32> {
    if flow.table() != POLICY_AUDIT {
        return None;
    }
    let fm = flow.to_add().ok()?;
    let key = u32::try_from(fm.match_.exact(REG_AUDIT_KEY)?).ok()?;
    RuleRef::of_key(key).map(RuleRef::key)
}
