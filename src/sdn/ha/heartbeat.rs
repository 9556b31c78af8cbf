//! The active daemon's heartbeat, as the switch hands it to the standbys in a packet-in, and
//! the generation ids of claims.

use bytes::{BufMut, Bytes, BytesMut};

/// Heartbeat frames: ethertype 0x88b5 (IEEE local experimental), then this magic, the
/// sender's id (u16) and its generation id (u64).
const HEARTBEAT_ETHERTYPE: u16 = 0x88b5;
const HEARTBEAT_MAGIC: &[u8; 10] = b"ofnode-ha\0";

/// The heartbeat frame of daemon `id` at `generation`.
pub(super) fn heartbeat_frame(id: u16, generation: u64) -> Bytes {
    let mut frame = BytesMut::with_capacity(60);
    // Broadcast from a locally administered address that names the sender.
    frame.put_slice(&[0xff; 6]);
    frame.put_slice(&[0x02, 0, 0, 0]);
    frame.put_u16(id);
    frame.put_u16(HEARTBEAT_ETHERTYPE);
    frame.put_slice(HEARTBEAT_MAGIC);
    frame.put_u16(id);
    frame.put_u64(generation);
    frame.resize(60, 0);
    frame.freeze()
}

/// The sender's id and generation of a heartbeat frame; None for any other frame.
pub(super) fn parse_heartbeat(frame: &[u8]) -> Option<(u16, u64)> {
    let body = frame.get(12..)?;
    let (ethertype, rest) = body.split_at_checked(2)?;
    if ethertype != HEARTBEAT_ETHERTYPE.to_be_bytes() {
        return None;
    }
    let rest = rest.strip_prefix(HEARTBEAT_MAGIC.as_slice())?;
    let id = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?);
    let generation = u64::from_be_bytes(rest.get(2..10)?.try_into().ok()?);
    Some((id, generation))
}

/// The generation a claim by `id` uses, above `seen`.
pub(super) fn next_generation(seen: u64, id: u16) -> u64 {
    (((seen >> 16) + 1) << 16) | u64::from(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeats_round_trip_and_other_frames_are_not_heartbeats() {
        let frame = heartbeat_frame(7, 0x3_0007);
        assert_eq!(frame.len(), 60);
        assert_eq!(parse_heartbeat(&frame), Some((7, 0x3_0007)));
        assert_eq!(parse_heartbeat(&frame[..20]), None);
        let mut other = frame.to_vec();
        other[12] = 0x08;
        assert_eq!(parse_heartbeat(&other), None);
        assert_eq!(parse_heartbeat(&[]), None);
    }

    #[test]
    fn claims_outbid_every_generation_seen_and_never_tie() {
        assert_eq!(next_generation(0, 1), 0x1_0001);
        assert_eq!(next_generation(0x1_0001, 2), 0x2_0002);
        assert_ne!(next_generation(0x5_0001, 1), next_generation(0x5_0001, 2));
        assert!(next_generation(0x5_0002, 1) > 0x5_0002);
    }
}
