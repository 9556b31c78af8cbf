//! Meters in ovs-ofctl's text: the `add-meter`/`mod-meter`/`del-meters` syntax
//! (`meter=1 pktps burst stats bands=type=drop rate=100 burst_size=10`) → [`MeterMod`], and
//! meters as `dump-meters`, `meter-stats`, `meter-features` and `ofp-print` print them
//! (lib/ofp-meter.c).

use crate::meter::{
    settable, BandType, MeterBand, MeterCommand, MeterConfig, MeterFeatures, MeterMod, MeterStats,
    OFPMBT_DROP, OFPMBT_DSCP_REMARK, OFPMF_BURST, OFPMF_KBPS, OFPMF_PKTPS, OFPMF_STATS, OFPM_ALL,
    OFPM_CONTROLLER, OFPM_MAX, OFPM_SLOWPATH,
};
use crate::text::error::ParseError;
use crate::text::value::{format_duration, parse_uint};

/// Flag words in the order ovs-ofctl prints them (each followed by a space).
const FLAG_WORDS: [(u16, &str); 4] = [
    (OFPMF_KBPS, "kbps"),
    (OFPMF_PKTPS, "pktps"),
    (OFPMF_BURST, "burst"),
    (OFPMF_STATS, "stats"),
];

/// The virtual meters (and "all") by the names ovs-ofctl reads and prints.
const METER_NAMES: [(u32, &str); 3] = [
    (OFPM_SLOWPATH, "slowpath"),
    (OFPM_CONTROLLER, "controller"),
    (OFPM_ALL, "all"),
];

/// ofputil_format_meter_id: `meter=N` (or `meter:N`), a virtual meter by name.
fn format_meter_id(meter_id: u32, separator: char) -> String {
    let name = if meter_id <= OFPM_MAX {
        meter_id.to_string()
    } else {
        METER_NAMES
            .iter()
            .find(|(id, _)| *id == meter_id)
            .map_or("unknown", |(_, name)| name)
            .to_string()
    };
    format!("meter{separator}{name}")
}

/// ofputil_format_meter_config: `meter=N flags bands=` and each band on a line of its own.
fn format_meter(meter_id: u32, flags: u16, bands: &[MeterBand]) -> String {
    let mut s = format_meter_id(meter_id, '=');
    s.push(' ');
    for (bit, word) in FLAG_WORDS {
        if flags & bit != 0 {
            s.push_str(word);
            s.push(' ');
        }
    }
    let other = flags & !(OFPMF_KBPS | OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS);
    if other != 0 {
        s.push_str(&format!("flags:{other:#x} "));
    }
    s.push_str("bands=");
    for band in bands {
        let name = match band.band_type {
            BandType::Drop => "drop",
            BandType::DscpRemark { .. } => "dscp_remark",
        };
        s.push_str(&format!("\ntype={name} rate={}", band.rate));
        if flags & OFPMF_BURST != 0 {
            s.push_str(&format!(" burst_size={}", band.burst_size));
        }
        if let BandType::DscpRemark { prec_level } = band.band_type {
            s.push_str(&format!(" prec_level={prec_level}"));
        }
    }
    s
}

/// One meter as `ovs-ofctl -O OpenFlow13 dump-meters` prints it: its first line, then a line
/// per band (joined by `\n`, without the blank line ovs-ofctl puts between meters).
pub fn format_meter_config(config: &MeterConfig) -> String {
    format_meter(config.meter_id, config.flags, &config.bands)
}

/// A meter mod as `ovs-ofctl ofp-print` prints it: `ADD meter=...`, `MOD ...`, `DEL ...`.
pub fn format_meter_mod(mm: &MeterMod) -> String {
    let command = match mm.command {
        MeterCommand::Add => "ADD",
        MeterCommand::Modify => "MOD",
        MeterCommand::Delete => "DEL",
    };
    format!(
        "{command} {}",
        format_meter(mm.meter_id, mm.flags, &mm.bands)
    )
}

/// One meter as `ovs-ofctl -O OpenFlow13 meter-stats` prints it: its counters, then a line
/// per band (joined by `\n`).
pub fn format_meter_stats(stats: &MeterStats) -> String {
    let mut s = format!(
        "{} flow_count:{} packet_in_count:{} byte_in_count:{} duration:{} bands:",
        format_meter_id(stats.meter_id, ':'),
        stats.flow_count,
        stats.packet_in_count,
        stats.byte_in_count,
        format_duration(stats.duration_sec, stats.duration_nsec),
    );
    for (i, band) in stats.bands.iter().enumerate() {
        s.push_str(&format!(
            "\n{i}: packet_count:{} byte_count:{}",
            band.packet_count, band.byte_count
        ));
    }
    s
}

/// The meter features as `ovs-ofctl -O OpenFlow13 meter-features` prints them (the three
/// lines after its header line).
pub fn format_meter_features(features: &MeterFeatures) -> String {
    let band_types = bit_names(features.band_types, |bit| match bit {
        b if b == 1 << OFPMBT_DROP => Some("drop"),
        b if b == 1 << OFPMBT_DSCP_REMARK => Some("dscp_remark"),
        _ => None,
    });
    let capabilities = bit_names(features.capabilities, |bit| {
        FLAG_WORDS
            .iter()
            .find(|(flag, _)| u32::from(*flag) == bit)
            .map(|(_, word)| *word)
    });
    format!(
        "max_meter:{} max_bands:{} max_color:{}\nband_types: {band_types}\ncapabilities: {capabilities}",
        features.max_meter, features.max_bands, features.max_color
    )
}

/// ofp_print_bit_names: the names of the set bits, lowest first, then the unnamed ones in hex;
/// `0` when none is set.
fn bit_names(bits: u32, name: impl Fn(u32) -> Option<&'static str>) -> String {
    if bits == 0 {
        return "0".into();
    }
    let mut parts = Vec::new();
    let mut unnamed = bits;
    for bit in (0..32).map(|i| 1u32 << i).filter(|b| bits & b != 0) {
        if let Some(n) = name(bit) {
            parts.push(n.to_string());
            unnamed &= !bit;
        }
    }
    if unnamed != 0 {
        parts.push(format!("{unnamed:#x}"));
    }
    parts.join(" ")
}

/// Words of ovs-ofctl's meter syntax, read as strtok_r reads them: a word ends at one of
/// `delimiters`, which is consumed with it.
struct Words<'a> {
    rest: &'a str,
}

/// What ends a keyword, and what ends a value (`=` may be part of a value).
const NAME_DELIMITERS: &[char] = &['=', ',', ' ', '\t', '\r', '\n'];
const VALUE_DELIMITERS: &[char] = &[',', ' ', '\t', '\r', '\n'];

impl<'a> Words<'a> {
    fn next(&mut self, delimiters: &[char]) -> Option<&'a str> {
        let s = self.rest.trim_start_matches(delimiters);
        let end = s.find(delimiters).unwrap_or(s.len());
        // The delimiters are ASCII: one byte past the word is a char boundary.
        self.rest = s.get(end + 1..).unwrap_or("");
        (end > 0).then(|| &s[..end])
    }

    /// The next name and the value after it.
    fn pair(&mut self) -> Option<(&'a str, Result<&'a str, ParseError>)> {
        let name = self.next(NAME_DELIMITERS)?;
        Some((name, self.value_of(name)))
    }

    fn value_of(&mut self, name: &str) -> Result<&'a str, ParseError> {
        self.next(VALUE_DELIMITERS)
            .ok_or_else(|| ParseError::Syntax(format!("field {name} missing value")))
    }
}

/// Parses a meter as `ovs-ofctl add-meter` (Add), `mod-meter` (Modify) and `del-meters`
/// (Delete; an empty text deletes every meter) read it, with ovs-ofctl's checks. Refused
/// although ovs-ofctl 3.1 sends them, because the switch refuses them (OFPMMFC_BAD_FLAGS,
/// OFPMMFC_INVALID_METER): a meter without exactly one of `kbps` and `pktps`, and
/// `meter=all` in an add or modify.
pub fn parse_meter(text: &str, command: MeterCommand) -> Result<MeterMod, ParseError> {
    if command == MeterCommand::Delete {
        if text.trim().is_empty() {
            return Ok(MeterMod::delete(OFPM_ALL));
        }
        let (meter_id, _) = parse_head(text, false)?;
        return Ok(MeterMod::delete(meter_id));
    }
    // As ovs-ofctl: the bands follow the first `=` after the first `band`.
    let (head, bands) = match text.find("band") {
        Some(at) => (&text[..at], text[at + 1..].split_once('=').map(|(_, b)| b)),
        None => (text, None),
    };
    let bands = bands.ok_or_else(|| ParseError::Syntax("must specify bands".into()))?;
    let (meter_id, flags) = parse_head(head, true)?;
    if !settable(meter_id) {
        return Err(ParseError::Syntax(
            "meter=all names every meter: only a delete takes it".into(),
        ));
    }
    let units = flags & (OFPMF_KBPS | OFPMF_PKTPS);
    if units == 0 || units == OFPMF_KBPS | OFPMF_PKTPS {
        return Err(ParseError::Syntax(
            "meter must specify either 'kbps' or 'pktps' (the switch refuses neither and both: \
             OFPMMFC_BAD_FLAGS)"
                .into(),
        ));
    }
    Ok(MeterMod {
        command,
        meter_id,
        flags,
        bands: parse_bands(bands, flags)?,
    })
}

/// The meter id and flags before the bands (flags only where `with_flags`).
fn parse_head(text: &str, with_flags: bool) -> Result<(u32, u16), ParseError> {
    let mut words = Words { rest: text };
    let mut meter_id = None;
    let mut flags = 0;
    while let Some(name) = words.next(NAME_DELIMITERS) {
        if let Some((bit, _)) = FLAG_WORDS.iter().find(|(_, w)| *w == name) {
            if with_flags {
                flags |= bit;
                continue;
            }
        }
        let value = words.value_of(name)?;
        if name != "meter" {
            return Err(ParseError::UnknownKeyword(name.to_string()));
        }
        meter_id = Some(parse_meter_id(value)?);
    }
    let meter_id = meter_id.ok_or_else(|| ParseError::Syntax("must specify 'meter'".into()))?;
    Ok((meter_id, flags))
}

fn parse_meter_id(value: &str) -> Result<u32, ParseError> {
    if let Some((id, _)) = METER_NAMES.iter().find(|(_, name)| *name == value) {
        return Ok(*id);
    }
    parse_uint(value)
        .and_then(|v| u32::try_from(v).ok())
        .filter(|id| (1..=OFPM_MAX).contains(id))
        .ok_or_else(|| ParseError::Syntax(format!("invalid value for meter: `{value}`")))
}

/// A band as written, before it is checked.
#[derive(Default)]
struct BandText {
    dscp_remark: bool,
    rate: u32,
    burst_size: u32,
    prec_level: u8,
}

/// `type=drop rate=N [burst_size=N]` or `type=dscp_remark rate=N prec_level=N`, each band
/// starting at its `type`.
fn parse_bands(text: &str, flags: u16) -> Result<Vec<MeterBand>, ParseError> {
    let mut words = Words { rest: text };
    let mut bands: Vec<BandText> = Vec::new();
    while let Some((name, value)) = words.pair() {
        let value = value?;
        let number = |what: &str| {
            parse_uint(value).ok_or_else(|| {
                ParseError::Syntax(format!("invalid numeric format {value} ({what})"))
            })
        };
        if name == "type" {
            let dscp_remark = match value {
                "drop" => false,
                "dscp_remark" => true,
                _ => {
                    return Err(ParseError::Syntax(format!(
                        "field type unknown value {value}"
                    )))
                }
            };
            bands.push(BandText {
                dscp_remark,
                ..BandText::default()
            });
            continue;
        }
        let band = bands
            .last_mut()
            .ok_or_else(|| ParseError::Syntax("band must start with the 'type' keyword".into()))?;
        let out_of_range = || ParseError::Syntax(format!("{name}: {value} is out of range"));
        match name {
            "rate" => band.rate = u32::try_from(number(name)?).map_err(|_| out_of_range())?,
            "burst_size" => {
                band.burst_size = u32::try_from(number(name)?).map_err(|_| out_of_range())?
            }
            "prec_level" => {
                band.prec_level = u8::try_from(number(name)?).map_err(|_| out_of_range())?
            }
            _ => return Err(ParseError::UnknownKeyword(name.to_string())),
        }
    }
    if bands.is_empty() {
        return Err(ParseError::Syntax("meter must have bands".into()));
    }
    bands.into_iter().map(|b| check_band(b, flags)).collect()
}

/// The checks of parse_ofp_meter_mod_str on each band.
fn check_band(band: BandText, flags: u16) -> Result<MeterBand, ParseError> {
    let fail = |reason: &str| Err(ParseError::Syntax(reason.to_string()));
    let band_type = match (band.dscp_remark, band.prec_level) {
        (true, 0) => return fail("'dscp_remark' band must have 'prec_level'"),
        (true, prec_level) => BandType::DscpRemark { prec_level },
        (false, 0) => BandType::Drop,
        (false, _) => return fail("Only 'dscp_remark' band may have 'prec_level'"),
    };
    if band.rate == 0 {
        return fail("band must have 'rate'");
    }
    match (flags & OFPMF_BURST != 0, band.burst_size != 0) {
        (true, false) => return fail("band must have 'burst_size' when 'burst' flag is set"),
        (false, true) => return fail("band may have 'burst_size' only when 'burst' flag is set"),
        _ => {}
    }
    Ok(MeterBand {
        band_type,
        rate: band.rate,
        burst_size: band.burst_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_like_ovs_ofctl() {
        let text = "meter=1 pktps burst stats bands=type=drop rate=100 burst_size=10";
        let mm = parse_meter(text, MeterCommand::Add).unwrap();
        assert_eq!(
            mm,
            MeterMod::add(
                1,
                OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS,
                vec![MeterBand::drop(100, 10)]
            )
        );
        // What dump-meters prints reads back (ovs-ofctl's own delimiters include newlines).
        let printed = format_meter_mod(&mm);
        assert_eq!(
            printed,
            "ADD meter=1 pktps burst stats bands=\ntype=drop rate=100 burst_size=10"
        );
        assert_eq!(
            parse_meter(&printed["ADD ".len()..], MeterCommand::Add),
            Ok(mm)
        );
        let two = parse_meter(
            "meter=controller,kbps,band=type=drop,rate=1,type=dscp_remark,rate=2,prec_level=3",
            MeterCommand::Modify,
        )
        .unwrap();
        assert_eq!(
            format_meter_mod(&two),
            "MOD meter=controller kbps bands=\ntype=drop rate=1\ntype=dscp_remark rate=2 prec_level=3"
        );
        assert_eq!(
            parse_meter("", MeterCommand::Delete),
            Ok(MeterMod::delete(OFPM_ALL))
        );
        assert_eq!(
            parse_meter("meter=7", MeterCommand::Delete),
            Ok(MeterMod::delete(7))
        );
        assert_eq!(format_meter_mod(&MeterMod::delete(7)), "DEL meter=7 bands=");
    }

    #[test]
    fn refuses_what_ovs_ofctl_or_the_switch_refuses() {
        for (text, command) in [
            ("meter=1 kbps", MeterCommand::Add),
            ("meter=0 kbps bands=type=drop rate=1", MeterCommand::Add),
            (
                "meter=4294901761 kbps bands=type=drop rate=1",
                MeterCommand::Add,
            ),
            ("meter=all kbps bands=type=drop rate=1", MeterCommand::Add),
            ("kbps bands=type=drop rate=1", MeterCommand::Add),
            ("meter=1 bands=type=drop rate=1", MeterCommand::Add),
            (
                "meter=1 burst bands=type=drop rate=1 burst_size=1",
                MeterCommand::Add,
            ),
            (
                "meter=1 kbps pktps bands=type=drop rate=1",
                MeterCommand::Add,
            ),
            ("meter=1 kbps bands=rate=1", MeterCommand::Add),
            ("meter=1 kbps bands=type=drop", MeterCommand::Add),
            ("meter=1 kbps bands=type=drop rate=0", MeterCommand::Add),
            (
                "meter=1 kbps bands=type=drop rate=1 burst_size=5",
                MeterCommand::Add,
            ),
            (
                "meter=1 kbps burst bands=type=drop rate=1",
                MeterCommand::Add,
            ),
            (
                "meter=1 kbps bands=type=dscp_remark rate=1",
                MeterCommand::Add,
            ),
            (
                "meter=1 kbps bands=type=drop rate=1 prec_level=1",
                MeterCommand::Add,
            ),
            ("meter=1 kbps bands=type=copy rate=1", MeterCommand::Add),
            (
                "meter=1 kbps bands=type=drop rate=4294967296",
                MeterCommand::Add,
            ),
            ("meter=1 kbps bands=type=drop rate", MeterCommand::Add),
            (
                "meter=1 kbps colour=red bands=type=drop rate=1",
                MeterCommand::Add,
            ),
            ("meter=1 kbps", MeterCommand::Delete),
            ("meter", MeterCommand::Delete),
        ] {
            assert!(parse_meter(text, command).is_err(), "{text}");
        }
    }

    #[test]
    fn stats_and_features_print_like_ovs_ofctl() {
        let stats = MeterStats {
            meter_id: 1,
            flow_count: 2,
            packet_in_count: 3,
            byte_in_count: 4,
            duration_sec: 0,
            duration_nsec: 43_000_000,
            bands: vec![crate::MeterBandStats {
                packet_count: 5,
                byte_count: 6,
            }],
        };
        assert_eq!(
            format_meter_stats(&stats),
            "meter:1 flow_count:2 packet_in_count:3 byte_in_count:4 duration:0.043s bands:\n\
             0: packet_count:5 byte_count:6"
        );
        let features = MeterFeatures {
            max_meter: 262_144,
            band_types: 1 << OFPMBT_DROP,
            capabilities: 0xf,
            max_bands: 8,
            max_color: 0,
        };
        assert_eq!(
            format_meter_features(&features),
            "max_meter:262144 max_bands:8 max_color:0\nband_types: drop\n\
             capabilities: kbps pktps burst stats"
        );
    }
}
