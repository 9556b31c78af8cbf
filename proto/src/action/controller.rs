//! `controller(...)`: send the packet to the controller with more than OFPAT_OUTPUT can say —
//! a packet-in reason, a controller connection id, opaque `userdata` the packet-in carries
//! back, `pause` (resume later with NXT_RESUME) and a meter that rate-limits the packet-ins.
//! NXAST_CONTROLLER carries max_len, id and reason; NXAST_CONTROLLER2 carries any of them as
//! properties (lib/ofp-actions.c: decode_NXAST_RAW_CONTROLLER(2), encode_CONTROLLER,
//! parse_CONTROLLER, format_CONTROLLER). A controller action that needs neither is the plain
//! output to CONTROLLER, as ovs-ofctl sends it ([`Action::Output`]).

use bytes::{BufMut, BytesMut};

use super::{
    must_be_zero, nx_fixed, nx_header, Action, Ctx, Kind, WireId, NXAST_CONTROLLER,
    NXAST_CONTROLLER2, OFPCML_NO_BUFFER,
};
use crate::property;
use crate::reason::{packet_in_reason_name, OFPR_ACTION, OFPR_N_REASONS};
use crate::text::error::{bad, number, ParseError};
use crate::text::lexer::{tokens, Token};
use crate::text::value::{format_hex_dots, parse_hex_dots};
use crate::wire::Reader;
use crate::{DecodeError, EncodeError, OFPP_CONTROLLER};

pub(super) static CONTROLLER: Kind = Kind {
    wire: &[WireId::Nx(NXAST_CONTROLLER), WireId::Nx(NXAST_CONTROLLER2)],
    keywords: &["controller"],
    decode,
    parse,
};

/// NXAST_CONTROLLER2 property types (enum nx_action_controller2_prop_type).
const NXAC2PT_MAX_LEN: u16 = 0;
const NXAC2PT_CONTROLLER_ID: u16 = 1;
const NXAC2PT_REASON: u16 = 2;
const NXAC2PT_USERDATA: u16 = 3;
const NXAC2PT_PAUSE: u16 = 4;
const NXAC2PT_METER_ID: u16 = 5;

/// NXAST_CONTROLLER / NXAST_CONTROLLER2: send the packet to the controller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Controller {
    /// How many bytes of the packet to send (65535: all of it).
    pub max_len: u16,
    /// Send only to controller connections with this id (`id=`; 0 is the default id).
    pub controller_id: u16,
    /// The packet-in's reason (`OFPR_*`; OFPR_ACTION by default).
    pub reason: u8,
    /// Opaque bytes the NXT_PACKET_IN2 carries back (`userdata=01.02.03`).
    pub userdata: Vec<u8>,
    /// Stop the pipeline; the controller may resume it with NXT_RESUME.
    pub pause: bool,
    /// Rate-limit these packet-ins through this meter (`meter_id=`; on the wire 0 is "none").
    pub meter_id: Option<u32>,
    /// Sent as NXAST_CONTROLLER2 although NXAST_CONTROLLER could carry it: so it came, and so
    /// OVS sends it back. False lets the encoder choose as ovs-ofctl does (NXAST_CONTROLLER2
    /// only for userdata, pause or a meter).
    pub controller2: bool,
}

impl Default for Controller {
    /// `controller()`: the whole packet, reason `action`, controller id 0, nothing more.
    fn default() -> Self {
        Controller {
            max_len: OFPCML_NO_BUFFER,
            controller_id: 0,
            reason: OFPR_ACTION,
            userdata: Vec::new(),
            pause: false,
            meter_id: None,
            controller2: false,
        }
    }
}

impl Controller {
    /// Whether only NXAST_CONTROLLER2 can carry it.
    fn needs_controller2(&self) -> bool {
        !self.userdata.is_empty() || self.pause || self.meter_id.is_some()
    }

    /// Whether it says no more than `output:CONTROLLER` with a max_len (how OVS prints it then).
    fn is_plain(&self) -> bool {
        self.reason == OFPR_ACTION && self.controller_id == 0 && !self.needs_controller2()
    }

    pub(super) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        if self.meter_id == Some(0) {
            return Err(EncodeError::BadValue {
                what: "controller action meter_id",
                value: 0,
                reason: "meter 0 means no meter on the wire: use None",
            });
        }
        if !self.needs_controller2() && !self.controller2 {
            let mut action = nx_fixed::<16>(NXAST_CONTROLLER);
            action[10..12].copy_from_slice(&self.max_len.to_be_bytes());
            action[12..14].copy_from_slice(&self.controller_id.to_be_bytes());
            action[14] = self.reason;
            out.put_slice(&action);
            return Ok(());
        }
        let slot = nx_header(out, NXAST_CONTROLLER2, "controller action");
        out.put_bytes(0, 6);
        if self.max_len != OFPCML_NO_BUFFER {
            property::put_u16(out, NXAC2PT_MAX_LEN, self.max_len)?;
        }
        if self.controller_id != 0 {
            property::put_u16(out, NXAC2PT_CONTROLLER_ID, self.controller_id)?;
        }
        if self.reason != OFPR_ACTION {
            property::put_u8(out, NXAC2PT_REASON, self.reason)?;
        }
        if !self.userdata.is_empty() {
            property::put(out, NXAC2PT_USERDATA, &self.userdata)?;
        }
        if self.pause {
            property::put(out, NXAC2PT_PAUSE, &[])?;
        }
        if let Some(meter_id) = self.meter_id {
            property::put_u32(out, NXAC2PT_METER_ID, meter_id)?;
        }
        slot.finish(out, true).map(|_| ())
    }

    /// format_CONTROLLER: `CONTROLLER:max_len` when that says it all, else
    /// `controller(reason=R,max_len=N,id=N,userdata=..,pause,meter_id=N)` with the defaults
    /// left out.
    pub(super) fn format(&self, out: &mut String) {
        if self.is_plain() {
            out.push_str(&format!("CONTROLLER:{}", self.max_len));
            return;
        }
        let mut parts = Vec::new();
        if self.reason != OFPR_ACTION {
            parts.push(format!("reason={}", packet_in_reason_name(self.reason)));
        }
        if self.max_len != OFPCML_NO_BUFFER {
            parts.push(format!("max_len={}", self.max_len));
        }
        if self.controller_id != 0 {
            parts.push(format!("id={}", self.controller_id));
        }
        if !self.userdata.is_empty() {
            parts.push(format!("userdata={}", format_hex_dots(&self.userdata)));
        }
        if self.pause {
            parts.push("pause".into());
        }
        if let Some(meter_id) = self.meter_id {
            parts.push(format!("meter_id={meter_id}"));
        }
        out.push_str(&format!("controller({})", parts.join(",")));
    }
}

fn decode(id: WireId, body: &mut Reader<'_>, _: Ctx) -> Result<Option<Action>, DecodeError> {
    let controller = match id {
        WireId::Nx(NXAST_CONTROLLER) => decode_controller(body)?,
        _ => decode_controller2(body)?,
    };
    Ok(Some(Action::Controller(controller)))
}

/// NXAST_CONTROLLER: max_len, controller id, reason, a byte OVS ignores; 16 bytes in all.
fn decode_controller(body: &mut Reader<'_>) -> Result<Controller, DecodeError> {
    if body.remaining() != 6 {
        return Err(DecodeError::BadLength {
            what: "controller action (NXAST_CONTROLLER)",
            length: body.remaining() + 10,
            reason: "must be 16 bytes",
        });
    }
    let max_len = body.u16()?;
    let controller_id = body.u16()?;
    let reason = body.u8()?;
    body.rest();
    Ok(Controller {
        max_len,
        controller_id,
        reason,
        ..Controller::default()
    })
}

/// NXAST_CONTROLLER2: six bytes of zeros, then properties; OVS refuses one it does not know.
fn decode_controller2(body: &mut Reader<'_>) -> Result<Controller, DecodeError> {
    must_be_zero(
        body.take(6)?,
        "controller action padding (NXBRC_MUST_BE_ZERO)",
    )?;
    let mut c = Controller::default();
    while let Some(prop) = property::next(body, "controller action property")? {
        match prop.prop_type {
            NXAC2PT_MAX_LEN => c.max_len = prop.u16()?,
            NXAC2PT_CONTROLLER_ID => c.controller_id = prop.u16()?,
            NXAC2PT_REASON => c.reason = prop.u8()?,
            NXAC2PT_USERDATA => c.userdata = prop.payload.to_vec(),
            NXAC2PT_PAUSE => c.pause = true,
            NXAC2PT_METER_ID => c.meter_id = Some(prop.u32()?).filter(|&m| m != 0),
            other => {
                return Err(DecodeError::BadValue {
                    what: "controller action property type (OFPBPC_BAD_TYPE)",
                    value: u64::from(other),
                })
            }
        }
    }
    c.controller2 = !c.needs_controller2();
    Ok(c)
}

/// parse_CONTROLLER: `controller`, `controller:N` (max_len), `controller(key=value,...)` with
/// `reason`, `max_len`, `id`, `userdata`, `pause`, `meter_id`. What needs neither
/// NXAST_CONTROLLER nor NXAST_CONTROLLER2 is an output to CONTROLLER, as ovs-ofctl sends it.
fn parse(token: &Token<'_>, _: Ctx) -> Result<Vec<Action>, ParseError> {
    let arg = token.value.unwrap_or("");
    let mut c = Controller::default();
    if !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_digit()) {
        c.max_len = number(token, arg)?;
    } else {
        for kv in tokens(arg).map_err(ParseError::Syntax)? {
            parse_argument(&mut c, &kv)?;
        }
    }
    if c.is_plain() {
        return Ok(vec![Action::Output {
            port: OFPP_CONTROLLER,
            max_len: c.max_len,
        }]);
    }
    Ok(vec![Action::Controller(c)])
}

fn parse_argument(c: &mut Controller, kv: &Token<'_>) -> Result<(), ParseError> {
    let value = || kv.value.ok_or_else(|| bad(kv, "missing value"));
    match kv.key {
        "reason" => c.reason = parse_reason(kv, value()?)?,
        "max_len" => c.max_len = number(kv, value()?)?,
        "id" => c.controller_id = number(kv, value()?)?,
        "userdata" => {
            let bytes = parse_hex_dots(value()?)
                .ok_or_else(|| bad(kv, "bad hex digit in `controller' action `userdata'"))?;
            if bytes.is_empty() {
                // ovs-ofctl sends a plain controller action for it, which prints without it.
                return Err(bad(kv, "empty userdata: leave it out"));
            }
            c.userdata = bytes;
        }
        // ovs-ofctl reads only the key (`pause=x` pauses too).
        "pause" => c.pause = true,
        // Meter 0 is "no meter", as ovs-ofctl reads it.
        "meter_id" => c.meter_id = Some(number(kv, value()?)?).filter(|&m: &u32| m != 0),
        _ => return Err(bad(kv, "not an argument of controller")),
    }
    Ok(())
}

/// A reason by the name ovs-ofctl prints (case-insensitive, as ofputil_packet_in_reason_from_string
/// reads it); numbers are not read.
fn parse_reason(token: &Token<'_>, value: &str) -> Result<u8, ParseError> {
    (0..OFPR_N_REASONS)
        .find(|&r| {
            let name = packet_in_reason_name(r);
            !name.is_empty() && name.eq_ignore_ascii_case(value)
        })
        .ok_or_else(|| {
            bad(
                token,
                "the reasons are no_match, action, invalid_ttl, action_set, group and packet_out",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::super::tests::roundtrip;
    use super::super::{decode_actions, format_list};
    use super::*;
    use crate::test_util::hex;

    fn printed(actions: &[Action]) -> String {
        let mut s = String::new();
        format_list(actions, &mut s);
        s
    }

    /// Bytes ovs-ofctl 3.1 sends for the text, and the text it prints for them.
    #[test]
    fn controller_actions_from_ovs() {
        let cases = [
            (
                "ffff0020000023200025000000000000 0003000701020300 0005000800000001",
                "controller(userdata=01.02.03,meter_id=1)",
            ),
            (
                "ffff0010000023200014006400030000",
                "controller(reason=no_match,max_len=100,id=3)",
            ),
            (
                "ffff0020000023200025000000000000 000300060a0b0000 0004000400000000",
                "controller(userdata=0a.0b,pause)",
            ),
        ];
        for (bytes, text) in cases {
            let decoded = decode_actions(&mut Reader::new(&hex(bytes), "t")).unwrap();
            assert_eq!(printed(&decoded), text);
            roundtrip(bytes, &decoded);
        }
    }

    #[test]
    fn controller2_without_need_is_kept_as_it_came() {
        // An NXAST_CONTROLLER2 with only a max_len prints as ovs-ofctl prints it and goes back
        // as NXAST_CONTROLLER2, as OVS sends it back.
        let bytes = "ffff0018000023200025000000000000 0000000800640000";
        let decoded = decode_actions(&mut Reader::new(&hex(bytes), "t")).unwrap();
        assert_eq!(printed(&decoded), "CONTROLLER:100");
        let Action::Controller(c) = &decoded[0] else {
            panic!("{decoded:?}")
        };
        assert!(c.controller2);
        roundtrip(bytes, &decoded);
    }

    #[test]
    fn refuses_what_ovs_refuses() {
        for bad in [
            // NXAST_CONTROLLER of 24 bytes
            "ffff00180000232000140064000300000000000000000000",
            // CONTROLLER2 with non-zero padding
            "ffff0010000023200025000000000001",
            // an unknown property (type 6)
            "ffff0018000023200025000000000000 0006000400000000",
            // a meter id of two bytes
            "ffff0018000023200025000000000000 0005000600010000",
            // a property running past the action
            "ffff0018000023200025000000000000 0003001000000000",
        ] {
            assert!(
                decode_actions(&mut Reader::new(&hex(bad), "t")).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn meter_zero_is_no_meter() {
        let mut out = BytesMut::new();
        let c = Controller {
            meter_id: Some(0),
            ..Controller::default()
        };
        assert!(c.encode(&mut out).is_err());
        assert!(out.is_empty());
        // On the wire, a meter property of 0 is no meter.
        let zero = "ffff0018000023200025000000000000 0005000800000000";
        let decoded = decode_actions(&mut Reader::new(&hex(zero), "t")).unwrap();
        assert_eq!(printed(&decoded), "CONTROLLER:65535");
        // ...and it goes back without the property, as OVS sends it back.
        roundtrip("ffff0010000023200025000000000000", &decoded);
    }
}
