//! The subnet mode (the seed's single-tenant plugin, id 0): every pod reaches every other.

use ofnode_proto::FlowMod;

use super::Policy;
use crate::sdn::flowmod::{table, Actions};
use crate::sdn::layout::{POLICY, REG_OUTPUT_PORT};
use crate::sdn::types::SetupRequest;
use crate::value::Vnid;

pub struct Subnet;

impl Policy for Subnet {
    fn plugin_id(&self) -> u8 {
        0
    }

    /// `table=80, priority=200, actions=output:NXM_NX_REG2[]`
    fn base_flows(&self, _setup: &SetupRequest) -> Vec<FlowMod> {
        vec![table(POLICY)
            .priority(200)
            .output_reg(REG_OUTPUT_PORT)
            .build()]
    }

    fn vnid_flows(&self, _vnid: Vnid) -> Vec<FlowMod> {
        Vec::new()
    }
}
