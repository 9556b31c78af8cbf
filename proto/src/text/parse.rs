//! The ovs-ofctl flow syntax → [`FlowMod`].

use crate::action::{Action, Ctx};
use crate::field::Field;
use crate::flow_mod::{FlowMod, FlowModCommand};
use crate::instruction::{meter_in_range, Instruction};
use crate::oxm::Match;
use crate::text::error::{bad, number, ParseError};
use crate::text::lexer::{tokens, Token};
use crate::text::value::{parse_field_value, parse_port, PROTOCOLS};
use crate::{
    OFPFF_CHECK_OVERLAP, OFPFF_NO_BYT_COUNTS, OFPFF_NO_PKT_COUNTS, OFPFF_RESET_COUNTS,
    OFPFF_SEND_FLOW_REM,
};

/// Parses a flow as `ovs-ofctl add-flow`/`mod-flows`/`del-flows` read it, e.g.
/// `table=0, priority=200, in_port=1, arp, nw_src=10.128.0.0/14, actions=goto_table:10` or,
/// for a delete, `table=100, reg0=5, cookie=0/1`. Unlike ovs-ofctl 3.1, which silently drops
/// a field whose prerequisite is missing (`nw_src=...` without `ip`) and a cookie without a
/// mask on a modify (OpenFlow 1.3 cannot change a flow's cookie), these are errors.
pub fn parse_flow(text: &str, command: FlowModCommand) -> Result<FlowMod, ParseError> {
    let (match_text, actions_text) = split_actions(text);
    let mut fm = FlowMod::new(command);
    match (command.is_delete(), actions_text) {
        (false, None) => return Err(ParseError::MissingActions),
        (true, Some(actions)) => return Err(ParseError::UnexpectedActions(actions.to_string())),
        (false, Some(actions)) => fm.instructions = parse_actions(actions)?,
        (true, None) => {}
    }
    let mut fields = FieldSet::default();
    for token in tokens(match_text).map_err(ParseError::Syntax)? {
        apply_token(&mut fm, &mut fields, &token)?;
    }
    fm.match_ = fields.into_match()?;
    check_actions(&fm).map_err(ParseError::Inconsistent)?;
    Ok(fm)
}

/// What ovs-ofctl checks of a flow's actions before it sends them (ofpacts_check,
/// ofpacts_verify): each action against the match, and conjunction only beside notes.
fn check_actions(fm: &FlowMod) -> Result<(), String> {
    crate::instruction::check_conjunctions(&fm.instructions)?;
    for inst in &fm.instructions {
        if let Instruction::ApplyActions(actions) | Instruction::WriteActions(actions) = inst {
            actions.iter().try_for_each(|a| a.check(&fm.match_))?;
        }
    }
    Ok(())
}

/// Parses just a match (`ip, nw_dst=10.129.0.5`), with prerequisites checked.
pub fn parse_match(text: &str) -> Result<Match, ParseError> {
    let mut fields = FieldSet::default();
    for token in tokens(text).map_err(ParseError::Syntax)? {
        if !fields.apply(&token)? {
            return Err(ParseError::UnknownKeyword(token.key.to_string()));
        }
    }
    fields.into_match()
}

/// Splits off the actions: everything after the first `actions=` (ovs-ofctl finds the keyword
/// the same way, so it must come last).
fn split_actions(text: &str) -> (&str, Option<&str>) {
    let Some(at) = find_keyword(text, "actions") else {
        return (text, None);
    };
    let after = text[at + "actions".len()..].trim_start();
    match after.strip_prefix('=').or_else(|| after.strip_prefix(':')) {
        Some(actions) => (&text[..at], Some(actions)),
        None => (text, None),
    }
}

/// Byte offset of `word` where it starts a token.
fn find_keyword(text: &str, word: &str) -> Option<usize> {
    text.match_indices(word).map(|(i, _)| i).find(|&i| {
        text[..i]
            .chars()
            .next_back()
            .is_none_or(|c| matches!(c, ',' | ' ' | '\t' | '\r' | '\n'))
    })
}

/// Which flow-level keywords each command accepts (mirrors ovs-ofctl's F_* sets).
fn allows(command: FlowModCommand, keyword: &str) -> bool {
    use FlowModCommand::*;
    match keyword {
        "priority" => command != Delete,
        "idle_timeout" | "hard_timeout" | "flags" => !command.is_delete(),
        "out_port" | "out_group" => command.is_delete(),
        _ => true,
    }
}

/// Flow-mod flag keywords and their bits.
const FLAG_WORDS: [(&str, u16); 5] = [
    ("send_flow_rem", OFPFF_SEND_FLOW_REM),
    ("check_overlap", OFPFF_CHECK_OVERLAP),
    ("reset_counts", OFPFF_RESET_COUNTS),
    ("no_packet_counts", OFPFF_NO_PKT_COUNTS),
    ("no_byte_counts", OFPFF_NO_BYT_COUNTS),
];

/// Keywords dump-flows prints that ovs-ofctl ignores on input, so dumps can be fed back.
const IGNORED: [&str; 5] = ["duration", "n_packets", "n_bytes", "idle_age", "hard_age"];

fn apply_token<'a>(
    fm: &mut FlowMod,
    fields: &mut FieldSet<'a>,
    token: &Token<'a>,
) -> Result<(), ParseError> {
    if fields.apply(token)? {
        return Ok(());
    }
    let key = token.key;
    if let Some((_, bit)) = FLAG_WORDS.iter().find(|(w, _)| *w == key) {
        if token.value.is_none() && allows(fm.command, "flags") {
            fm.flags |= bit;
            return Ok(());
        }
    }
    if IGNORED.contains(&key) {
        return Ok(());
    }
    let known = matches!(
        key,
        "table"
            | "priority"
            | "idle_timeout"
            | "hard_timeout"
            | "cookie"
            | "out_port"
            | "out_group"
    );
    if !known || !allows(fm.command, key) {
        return Err(ParseError::UnknownKeyword(key.to_string()));
    }
    let value = token
        .value
        .filter(|v| !v.is_empty())
        .ok_or_else(|| bad(token, "missing value"))?;
    match key {
        "table" => fm.table_id = number(token, value)?,
        "priority" => fm.priority = number(token, value)?,
        "idle_timeout" => fm.idle_timeout = number(token, value)?,
        "hard_timeout" => fm.hard_timeout = number(token, value)?,
        "out_port" => {
            fm.out_port = parse_port(value).ok_or_else(|| bad(token, "not a valid port"))?
        }
        "out_group" => fm.out_group = number(token, value)?,
        _ => parse_cookie(fm, token, value)?,
    }
    Ok(())
}

/// `cookie=V` sets the cookie of an added flow (refused elsewhere: a modify cannot change it
/// in OpenFlow 1.3, a delete can only select by it); `cookie=V/M` selects flows by cookie
/// (not allowed on add).
fn parse_cookie(fm: &mut FlowMod, token: &Token<'_>, value: &str) -> Result<(), ParseError> {
    match value.split_once('/') {
        Some(_) if fm.command == FlowModCommand::Add => {
            Err(bad(token, "flow additions cannot use a cookie mask"))
        }
        Some((v, m)) => {
            fm.cookie = number(token, v)?;
            fm.cookie_mask = number(token, m)?;
            Ok(())
        }
        None if fm.command.is_delete() => Err(bad(
            token,
            "cannot set a cookie on delete (to match on a cookie, give a mask: cookie=V/-1)",
        )),
        // An OpenFlow 1.3 modify has no "new cookie": ovs-ofctl silently sends cookie 0 and
        // the switch keeps the old one. Refused rather than dropped, like a missing prerequisite.
        None if fm.command != FlowModCommand::Add => Err(bad(
            token,
            "OpenFlow 1.3 cannot change a cookie on modify (to select flows by cookie, give a mask: cookie=V/-1)",
        )),
        None => {
            fm.cookie = number(token, value)?;
            Ok(())
        }
    }
}

/// Match fields as written, resolved against the packet type once every token is read.
#[derive(Default)]
struct FieldSet<'a> {
    /// (field as named, value, mask, token) in the order written; later ones win.
    entries: Vec<(Field, u128, u128, Token<'a>)>,
}

impl<'a> FieldSet<'a> {
    /// Takes a protocol keyword or a field; `Ok(false)` when the token is neither.
    fn apply(&mut self, token: &Token<'a>) -> Result<bool, ParseError> {
        if let Some(&(_, eth_type, ip_proto)) =
            PROTOCOLS.iter().find(|(name, _, _)| *name == token.key)
        {
            if token.value.is_some() {
                return Err(bad(token, "a protocol keyword takes no value"));
            }
            self.entries
                .push((Field::EthType, eth_type, u128::MAX, *token));
            if let Some(proto) = ip_proto {
                self.entries
                    .push((Field::IpProto, proto, u128::MAX, *token));
            }
            return Ok(true);
        }
        let Some(field) = Field::from_name(token.key) else {
            return Ok(false);
        };
        let value = token
            .value
            .filter(|v| !v.is_empty())
            .ok_or_else(|| bad(token, "missing value"))?;
        let (v, m) = parse_field_value(field.info(), value).map_err(|r| bad(token, r))?;
        if field == Field::CtNwProto && v == 0 {
            // ovs-ofctl 3.1 accepts it and then sends nothing for it (nor for ct_tp_*).
            return Err(bad(
                token,
                "ct_nw_proto=0 matches nothing OVS can send; omit it",
            ));
        }
        self.entries.push((field, v, m, *token));
        Ok(true)
    }

    /// Builds the match in the order prerequisites need (eth_type, then ip_proto — which is
    /// arp_op in ARP flows —, then ip_frag and ct_state, then ct_nw_proto, then the rest),
    /// each field resolved to the one its packet type makes it and checked against its
    /// prerequisites.
    fn into_match(self) -> Result<Match, ParseError> {
        let mut m = Match::new();
        for stage in 0..=4 {
            for (named, value, mask, token) in
                self.entries.iter().filter(|e| stage_of(e.0) == stage)
            {
                let field = resolve(&m, *named);
                check_prereq(&m, field, token)?;
                let mask = sibling_mask(*named, field, *value, *mask, token)?;
                m.set_masked_u128(field, *value, mask);
            }
        }
        Ok(m)
    }
}

/// When a field is applied: after every field its prerequisite reads.
fn stage_of(field: Field) -> u8 {
    match field {
        Field::EthType => 0,
        Field::IpProto => 1,
        Field::IpFrag | Field::CtState => 2,
        Field::CtNwProto => 3,
        _ => 4,
    }
}

/// A field whose prerequisite is unmet stands for the field sharing its flow slot whose
/// prerequisite is met (`nw_src` in an ARP flow is arp_spa, `tp_dst` in an SCTP flow is
/// sctp_dst), as OVS's shared flow slots make it.
fn resolve(m: &Match, field: Field) -> Field {
    if prereq_met(m, field) {
        return field;
    }
    field
        .shared_slot()
        .and_then(|(fields, _)| fields.iter().copied().find(|&f| prereq_met(m, f)))
        .unwrap_or(field)
}

/// The mask to use in `field` for a value written as `named` (a field sharing its slot, or
/// itself).
/// Siblings differ in width (`ip_proto` is 8 bits, `arp_op` 16): an exact match stays exact,
/// and a value the sibling cannot hold is an error, not silently cut (found by fuzzing).
fn sibling_mask(
    named: Field,
    field: Field,
    value: u128,
    mask: u128,
    token: &Token<'_>,
) -> Result<u128, ParseError> {
    if named == field {
        return Ok(mask);
    }
    let full = field.info().full_mask();
    if value & !full != 0 {
        return Err(bad(
            token,
            format!(
                "{value} does not fit in {} ({} bits)",
                field.info().names[0],
                128 - field.info().significant.leading_zeros()
            ),
        ));
    }
    Ok(if mask == named.info().full_mask() {
        u128::MAX
    } else {
        mask
    })
}

fn prereq_met(m: &Match, field: Field) -> bool {
    field.info().prereq.is_met(m)
}

fn check_prereq(m: &Match, field: Field, token: &Token<'_>) -> Result<(), ParseError> {
    if prereq_met(m, field) {
        return Ok(());
    }
    let needs = match field.shared_slot() {
        Some((_, needs)) => needs,
        None => field.info().prereq.describe(),
    };
    Err(ParseError::Prerequisite {
        token: token.text.to_string(),
        needs,
    })
}

/// Instruction kinds in the only order OpenFlow 1.1+ allows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Meter,
    Apply,
    Clear,
    Write,
    Goto,
}

/// Parses an action list (`load:42->NXM_NX_REG0[], note:01.02, goto_table:21`, `drop`) into
/// instructions: meter:N first, then plain actions in one apply_actions, followed by
/// clear_actions, write_actions(...) and goto_table:N in that order.
pub fn parse_actions(text: &str) -> Result<Vec<Instruction>, ParseError> {
    let toks = tokens(text).map_err(ParseError::Syntax)?;
    if toks.iter().any(|t| t.key.eq_ignore_ascii_case("drop")) {
        return match toks.len() {
            1 => Ok(Vec::new()),
            _ => Err(ParseError::Syntax(
                "`drop` must not be accompanied by any other action or instruction".into(),
            )),
        };
    }
    let mut apply = Vec::new();
    let mut rest = Vec::new();
    let mut stage = None;
    for token in &toks {
        let (next, item) = parse_instruction_token(token)?;
        let out_of_order = stage.is_some_and(|s| next < s || (next == s && next != Stage::Apply));
        if out_of_order {
            return Err(bad(token, "instructions must come in the order meter, actions, clear_actions, write_actions, goto_table, each once"));
        }
        stage = Some(next);
        match item {
            Ok(actions) => apply.extend(actions),
            Err(instruction) => rest.push(instruction),
        }
    }
    // The meter instruction, if any, comes first in `rest` (the stages make it so).
    let (meter, rest): (Vec<_>, Vec<_>) = rest
        .into_iter()
        .partition(|inst| matches!(inst, Instruction::Meter(_)));
    let mut out = meter;
    if !apply.is_empty() {
        out.push(Instruction::ApplyActions(apply));
    }
    // An empty write_actions is sent as no instruction at all, as ovs-ofctl 3.1 does (it
    // prints `write_actions(drop)` for one it receives, but parses that text to nothing).
    out.extend(
        rest.into_iter()
            .filter(|inst| !matches!(inst, Instruction::WriteActions(a) if a.is_empty())),
    );
    Ok(out)
}

/// One token of an action list: an action (`Ok`) or an instruction (`Err`), with its stage.
/// Instruction and action names are case-insensitive, as ovs-ofctl reads them (strcasecmp);
/// their arguments are not.
fn parse_instruction_token(
    token: &Token<'_>,
) -> Result<(Stage, Result<Vec<Action>, Instruction>), ParseError> {
    Ok(match token.key.to_ascii_lowercase().as_str() {
        "meter" => {
            let value = token.value.ok_or_else(|| bad(token, "missing meter"))?;
            let meter_id = number(token, value)?;
            if !meter_in_range(meter_id) {
                return Err(bad(
                    token,
                    "a flow's meter is 1 to 4294901760 (OFPMMFC_INVALID_METER)",
                ));
            }
            (Stage::Meter, Err(Instruction::Meter(meter_id)))
        }
        "goto_table" => {
            let value = token.value.ok_or_else(|| bad(token, "missing table"))?;
            (
                Stage::Goto,
                Err(Instruction::GotoTable(number(token, value)?)),
            )
        }
        "clear_actions" => (Stage::Clear, Err(Instruction::ClearActions)),
        "write_actions" => {
            let inner = token.value.unwrap_or("");
            let inner = if inner.trim() == "drop" { "" } else { inner };
            let mut actions = Vec::new();
            for t in tokens(inner).map_err(ParseError::Syntax)? {
                let parsed = Action::parse(&t, Ctx::default())?;
                if !parsed.iter().all(Action::allowed_in_action_set) {
                    // ovs-ofctl sends it; the switch refuses it (OFPBAC_BAD_TYPE).
                    return Err(bad(&t, "not an action an action set (write_actions) takes"));
                }
                actions.extend(parsed);
            }
            (Stage::Write, Err(Instruction::WriteActions(actions)))
        }
        _ => (Stage::Apply, Ok(Action::parse(token, Ctx::default())?)),
    })
}
