//! The subnet mode (the seed's single-tenant plugin, id 0): every pod reaches every other.

use super::Policy;
use crate::sdn::layout::POLICY;
use crate::sdn::types::SetupRequest;
use crate::value::Vnid;

pub struct Subnet;

impl Policy for Subnet {
    fn plugin_id(&self) -> u8 {
        0
    }

    fn base_flows(&self, _setup: &SetupRequest) -> Vec<String> {
        vec![format!(
            "table={POLICY}, priority=200, actions=output:NXM_NX_REG2[]"
        )]
    }

    fn vnid_flows(&self, _vnid: Vnid) -> Vec<String> {
        Vec::new()
    }
}
