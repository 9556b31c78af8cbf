//! The multitenant mode (the seed's multitenant plugin, id 1): pods reach pods and services of
//! their own VNID; VNID 0 (the global network) reaches and is reached by everyone.

use super::Policy;
use crate::sdn::layout::POLICY;
use crate::sdn::types::SetupRequest;
use crate::value::Vnid;

pub struct Multitenant;

impl Policy for Multitenant {
    fn plugin_id(&self) -> u8 {
        1
    }

    fn base_flows(&self, _setup: &SetupRequest) -> Vec<String> {
        vec![
            format!("table={POLICY}, priority=200, reg0=0, actions=output:NXM_NX_REG2[]"),
            format!("table={POLICY}, priority=200, reg1=0, actions=output:NXM_NX_REG2[]"),
        ]
    }

    /// None for the global VNID 0: setup's `reg0=0`/`reg1=0` flows already cover it.
    fn vnid_flows(&self, vnid: Vnid) -> Vec<String> {
        if vnid == Vnid::GLOBAL {
            return Vec::new();
        }
        vec![format!(
            "table={POLICY}, priority=100, reg0={vnid}, reg1={vnid}, actions=output:NXM_NX_REG2[]"
        )]
    }
}
