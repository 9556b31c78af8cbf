//! Subscribing to the switch's flow changes (ONF flow monitor, as OVS offers it over
//! OpenFlow 1.3). The subscription lives as long as the session: subscribe again after every
//! reconnect. Updates arrive as `SwitchEvent::FlowsChanged`.

use ofnode_proto::{FlowMonitorRequest, FlowUpdate, MultipartReplyBody, MultipartRequest};

use super::error::{Error, Result};
use super::switch::Switch;

impl Switch {
    /// Starts `monitor` on the current session and returns the switch's initial report (empty
    /// unless the monitor asked for `NXFMF_INITIAL`). A switch that does not offer flow
    /// monitoring answers with `Error::Switch` (e.g. OFPBRC_BAD_STAT).
    pub async fn monitor_flows(&self, monitor: FlowMonitorRequest) -> Result<Vec<FlowUpdate>> {
        let request = MultipartRequest::FlowMonitor(vec![monitor]);
        let mut initial = Vec::new();
        for body in self.multipart(request).await? {
            match body {
                MultipartReplyBody::FlowMonitor(updates) => initial.extend(updates),
                other => {
                    return Err(Error::Protocol(format!(
                        "flow monitor request answered with multipart body {other:?}"
                    )))
                }
            }
        }
        Ok(initial)
    }
}
