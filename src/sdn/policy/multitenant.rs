//! The multitenant mode (the seed's multitenant plugin, id 1): pods reach pods and services of
//! their own VNID; VNID 0 (the global network) reaches and is reached by everyone.

use ofnode_proto::FlowMod;

use super::Policy;
use crate::sdn::flowmod::{table, Actions};
use crate::sdn::layout::{POLICY, REG_DESTINATION_VNID, REG_OUTPUT_PORT, REG_SOURCE_VNID};
use crate::sdn::types::SetupRequest;
use crate::value::Vnid;

pub struct Multitenant;

impl Policy for Multitenant {
    fn plugin_id(&self) -> u8 {
        1
    }

    /// `table=80, priority=200, reg0=0, actions=output:NXM_NX_REG2[]`, and the same for reg1.
    fn base_flows(&self, _setup: &SetupRequest) -> Vec<FlowMod> {
        [REG_SOURCE_VNID, REG_DESTINATION_VNID]
            .into_iter()
            .map(|reg| {
                table(POLICY)
                    .priority(200)
                    .reg(reg, Vnid::GLOBAL)
                    .output_reg(REG_OUTPUT_PORT)
                    .build()
            })
            .collect()
    }

    /// `table=80, priority=100, reg0=VNID, reg1=VNID, actions=output:NXM_NX_REG2[]`; none for
    /// the global VNID 0: setup's `reg0=0`/`reg1=0` flows already cover it.
    fn vnid_flows(&self, vnid: Vnid) -> Vec<FlowMod> {
        if vnid == Vnid::GLOBAL {
            return Vec::new();
        }
        vec![table(POLICY)
            .priority(100)
            .reg(REG_SOURCE_VNID, vnid)
            .reg(REG_DESTINATION_VNID, vnid)
            .output_reg(REG_OUTPUT_PORT)
            .build()]
    }
}
