//! ovs-vswitchd 3.1's `ofproto/trace` text, parsed into passes and steps.
//!
//! The text (ofproto/ofproto-dpif-trace.c, ofproto-dpif-xlate.c) is a tree printed with
//! indentation: `Flow: …`, then per bridge a `bridge("br0")` heading, one line per table
//! visited (`%2d. MATCH, priority P[, cookie C]`, or `No match.` and its variants), each
//! followed by the actions it executed, and after an action its details (` -> …`, warnings
//! ` >> …`, errors ` >>>> … <<<<`); then `Final flow:`, `Megaflow:`, `Datapath actions:`. A
//! recirculation (conntrack, …) repeats all of that after a `recirc(0x…)` banner, and its steps
//! begin with `thaw` / `Resuming from table N`.
//!
//! Nesting is shown by indentation only when the nested node is not its parent's last child:
//! a `goto_table` chain prints flat, while a `resubmit` followed by more actions prints the
//! resubmitted tables deeper, then the parent's remaining actions at the parent's level. So an
//! action belongs to the most recent table line that is indented less than the action itself.

use serde::{Deserialize, Serialize};

use super::owner::Owner;
use super::tables::table_name;
use super::verdict::Verdict;

/// A whole trace: the first pass and one per recirculation, and what became of the packet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The bridge the packet entered (the first `bridge("…")` of the first pass).
    pub bridge: String,
    pub passes: Vec<Pass>,
    pub verdict: Verdict,
}

/// One translation: the packet as it entered, the tables it visited, what the datapath does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pass {
    /// None for the first pass; for the others, the recirculation that started them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recirculation: Option<Recirculation>,
    /// The flow as OVS prints it (`tcp,in_port=3,…`).
    pub flow: String,
    pub steps: Vec<Step>,
    /// The flow after the actions; None when OVS says "unchanged".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_flow: Option<String>,
    #[serde(default)]
    pub megaflow: String,
    #[serde(default)]
    pub datapath_actions: String,
    /// Lines OVS adds about the pass as a whole (slow path reasons, a failed translation, a
    /// detail before any table).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// `Translation failed (…), packet is dropped.`: the reason in the parentheses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translation_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recirculation {
    pub id: u32,
    /// What OVS says about it, e.g. `resume conntrack with default ct_state=trk|new (…)`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// One table lookup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub bridge: String,
    pub table: u8,
    /// The seed's name for the table (br0's tables only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_name: Option<String>,
    pub matched: Matched,
    pub actions: Vec<Action>,
    /// The pass continued here after a recirculation (`thaw`, `Resuming from table N`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resumed: bool,
    /// Who owns the matched flow (filled in by [`Trace::attribute`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<Owner>,
    #[serde(skip)]
    pub(super) indent: usize,
}

/// What the lookup found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Matched {
    Flow {
        priority: u16,
        /// The match as ovs-ofctl prints it (`ip,in_port=3,nw_src=10.128.0.10`), empty for a
        /// flow that matches everything.
        #[serde(rename = "match")]
        match_: String,
        #[serde(default, skip_serializing_if = "is_zero")]
        cookie: u64,
    },
    /// No flow matched: the packet is dropped there.
    NoMatch,
    /// No flow matched, and the table-miss sends it to the controller.
    MissToController,
    /// An IP fragment, dropped by the switch's fragment handling mode.
    FragmentDropped,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl Step {
    /// The matched flow in ovs-ofctl's text, as `dump-flows --no-stats` starts its line
    /// (`table=20, priority=100,ip,in_port=3`); None when no flow matched.
    pub fn flow_text(&self) -> Option<String> {
        let Matched::Flow {
            priority,
            match_,
            cookie,
        } = &self.matched
        else {
            return None;
        };
        let cookie = match cookie {
            0 => String::new(),
            c => format!("cookie={c:#x}, "),
        };
        let sep = if match_.is_empty() { "" } else { "," };
        Some(format!(
            "{cookie}table={}, priority={priority}{sep}{match_}",
            self.table
        ))
    }

    /// The actions as one ovs-ofctl action list (`load:0xa->NXM_NX_REG0[],goto_table:21`).
    pub fn actions_text(&self) -> String {
        self.actions
            .iter()
            .map(|a| a.text.as_str())
            // A detail printed before the table's first action is kept on an unnamed one.
            .filter(|text| !text.is_empty())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// An action executed in a table, with what OVS said about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<Detail>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detail {
    pub level: Level,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// ` -> …`
    Note,
    /// ` >> …`
    Warning,
    /// ` >>>> … <<<<`
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trace output line {line}: {reason}: {text:?}")]
pub struct ParseError {
    pub line: usize,
    pub text: String,
    pub reason: &'static str,
}

/// Parses the whole text `ofproto/trace` returned.
pub fn parse(text: &str) -> Result<Trace, ParseError> {
    let mut parser = Parser::default();
    for (index, line) in text.lines().enumerate() {
        parser.line(line).map_err(|reason| ParseError {
            line: index + 1,
            text: line.to_string(),
            reason,
        })?;
    }
    parser.finish().map_err(|reason| ParseError {
        line: text.lines().count(),
        text: String::new(),
        reason,
    })
}

#[derive(Default)]
struct Parser {
    passes: Vec<Pass>,
    current: Option<Pass>,
    bridge: Option<String>,
    /// Index in `current.steps` of the first step of the current bridge section.
    section_start: usize,
    /// Inside a `recirc(…)` banner, before the pass's `Flow:` line.
    banner: Option<Recirculation>,
    /// The indentation of a `thaw` line whose children are being read.
    thaw: Option<usize>,
    resume_next: bool,
    /// After "This flow is handled by the userspace slow path because it:", whose reasons
    /// follow as `  - …` lines.
    slow_path: bool,
}

type LineResult = Result<(), &'static str>;

impl Parser {
    fn line(&mut self, line: &str) -> LineResult {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.is_empty() {
            return Ok(());
        }
        if let Some(flow) = line.strip_prefix("Flow: ") {
            return self.start_pass(flow);
        }
        if indent == 0 && trimmed.starts_with("==========") {
            return Ok(());
        }
        if let Some(rest) = line.strip_prefix("recirc(") {
            return self.recirc_banner(rest);
        }
        if self.banner.is_some() {
            // NAT simulation lines between the banner's rules.
            if let Some(banner) = self.banner.as_mut() {
                push_note(&mut banner.note, trimmed);
            }
            return Ok(());
        }
        let pass = self
            .current
            .as_mut()
            .ok_or("text before the first `Flow:` line")?;
        if let Some(rest) = line.strip_prefix("Final flow: ") {
            pass.final_flow = (rest != "unchanged").then(|| rest.to_string());
            return Ok(());
        }
        if let Some(rest) = line.strip_prefix("Megaflow: ") {
            pass.megaflow = rest.to_string();
            return Ok(());
        }
        if let Some(rest) = line.strip_prefix("Datapath actions: ") {
            pass.datapath_actions = rest.to_string();
            return Ok(());
        }
        if let Some(rest) = line.strip_prefix("Translation failed (") {
            let reason = rest.split_once(')').map_or(rest, |(reason, _)| reason);
            pass.translation_error = Some(reason.to_string());
            return Ok(());
        }
        if let Some(name) = trimmed
            .strip_prefix("bridge(\"")
            .and_then(|rest| rest.strip_suffix("\")"))
        {
            self.bridge = Some(name.to_string());
            self.section_start = pass.steps.len();
            self.thaw = None;
            return Ok(());
        }
        if trimmed.chars().all(|c| c == '-') {
            return Ok(()); // the bridge heading's underline
        }
        if indent == 0 && !trimmed.starts_with(|c: char| c.is_ascii_digit()) {
            if trimmed.starts_with("This flow is handled by the userspace slow path") {
                self.slow_path = true;
                pass.notes.push(trimmed.to_string());
                return Ok(());
            }
            if trimmed.starts_with("Action execution failed") || trimmed.starts_with('.') {
                pass.notes.push(trimmed.to_string());
                return Ok(());
            }
            return Err("not a line ofproto/trace prints");
        }
        if self.slow_path && trimmed.starts_with("- ") {
            pass.notes.push(trimmed.to_string());
            return Ok(());
        }
        if let Some((table, text)) = table_line(trimmed) {
            // `%2d. `: a one-digit table is padded by a space the tree's indentation lacks.
            let indent = if table < 10 {
                indent.saturating_sub(1)
            } else {
                indent
            };
            return self.step(indent, (table, text));
        }
        if trimmed == "thaw" {
            self.thaw = Some(indent);
            return Ok(());
        }
        if let Some(thaw_indent) = self.thaw {
            if indent > thaw_indent {
                if trimmed.starts_with("Resuming from table ") {
                    self.resume_next = true;
                } else {
                    pass.notes.push(trimmed.to_string());
                }
                return Ok(());
            }
            self.thaw = None;
        }
        self.action_or_detail(indent, trimmed)
    }

    fn start_pass(&mut self, flow: &str) -> LineResult {
        if let Some(done) = self.current.take() {
            self.passes.push(done);
        }
        let recirculation = self.banner.take();
        if recirculation.is_none() && !self.passes.is_empty() {
            return Err("a second `Flow:` line without a recirculation banner");
        }
        self.current = Some(Pass {
            recirculation,
            flow: flow.to_string(),
            steps: Vec::new(),
            final_flow: None,
            megaflow: String::new(),
            datapath_actions: String::new(),
            notes: Vec::new(),
            translation_error: None,
        });
        self.bridge = None;
        self.section_start = 0;
        self.thaw = None;
        self.resume_next = false;
        self.slow_path = false;
        Ok(())
    }

    /// `recirc(0x1) - resume conntrack with …`
    fn recirc_banner(&mut self, rest: &str) -> LineResult {
        let (id, note) = rest
            .split_once(')')
            .ok_or("a recirculation banner without `)`")?;
        let id = id
            .strip_prefix("0x")
            .ok_or("a recirculation id that is not hex")?;
        let id = u32::from_str_radix(id, 16).map_err(|_| "a recirculation id that is not hex")?;
        let note = note.trim_start_matches(" - ").trim().to_string();
        self.banner = Some(Recirculation { id, note });
        Ok(())
    }

    fn step(&mut self, indent: usize, (table, text): (u8, &str)) -> LineResult {
        let bridge = self.bridge.clone().ok_or("a table line outside a bridge")?;
        let pass = self.current.as_mut().ok_or("a table line before `Flow:`")?;
        self.thaw = None;
        let resumed = std::mem::take(&mut self.resume_next);
        pass.steps.push(Step {
            table_name: table_name(table).map(str::to_string),
            bridge,
            table,
            matched: matched(text)?,
            actions: Vec::new(),
            resumed,
            owners: Vec::new(),
            indent,
        });
        Ok(())
    }

    fn action_or_detail(&mut self, indent: usize, trimmed: &str) -> LineResult {
        let pass = self.current.as_mut().ok_or("an action before `Flow:`")?;
        let section = pass.steps.get_mut(self.section_start..).unwrap_or_default();
        let owner = section.iter_mut().rev().find(|step| step.indent < indent);
        let detail = detail(trimmed);
        match (owner, detail) {
            (Some(step), Some(detail)) => match step.actions.last_mut() {
                Some(action) => action.details.push(detail),
                None => step.actions.push(Action {
                    text: String::new(),
                    details: vec![detail],
                }),
            },
            (Some(step), None) => step.actions.push(Action {
                text: trimmed.to_string(),
                details: Vec::new(),
            }),
            (None, _) => pass.notes.push(trimmed.to_string()),
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Trace, &'static str> {
        if self.banner.is_some() {
            return Err("a recirculation banner with no pass after it");
        }
        let last = self
            .current
            .take()
            .ok_or("no `Flow:` line: not an ofproto/trace output")?;
        if last.datapath_actions.is_empty() && last.translation_error.is_none() {
            return Err("the output ends before `Datapath actions:`");
        }
        self.passes.push(last);
        let bridge = self
            .passes
            .first()
            .and_then(|pass| pass.steps.first())
            .map(|step| step.bridge.clone())
            .unwrap_or_default();
        let verdict = Verdict::of(&bridge, &self.passes);
        Ok(Trace {
            bridge,
            passes: self.passes,
            verdict,
        })
    }
}

fn push_note(note: &mut String, line: &str) {
    if !note.is_empty() {
        note.push_str("; ");
    }
    note.push_str(line);
}

/// `20. ip,in_port=3, priority 100` → (20, "ip,in_port=3, priority 100").
fn table_line(trimmed: &str) -> Option<(u8, &str)> {
    let (number, rest) = trimmed.split_once(". ")?;
    if number.is_empty() || number.len() > 3 || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((number.parse().ok()?, rest))
}

fn matched(text: &str) -> Result<Matched, &'static str> {
    if text == "No match." {
        return Ok(Matched::NoMatch);
    }
    if text.starts_with("No match, and a \"packet-in\"") {
        return Ok(Matched::MissToController);
    }
    if text.starts_with("Packets are IP fragments") {
        return Ok(Matched::FragmentDropped);
    }
    let (head, cookie) = match text.rsplit_once(", cookie ") {
        Some((head, cookie)) => {
            let hex = cookie
                .strip_prefix("0x")
                .ok_or("a cookie that is not hex")?;
            let cookie = u64::from_str_radix(hex, 16).map_err(|_| "a cookie that is not hex")?;
            (head, cookie)
        }
        None => (text, 0),
    };
    let (match_, priority) = match head.strip_prefix("priority ") {
        Some(priority) => ("", priority),
        None => head
            .rsplit_once(", priority ")
            .ok_or("a table line without a priority")?,
    };
    let priority = priority
        .parse()
        .map_err(|_| "a priority that is not a number 0-65535")?;
    Ok(Matched::Flow {
        priority,
        match_: match_.to_string(),
        cookie,
    })
}

fn detail(trimmed: &str) -> Option<Detail> {
    if let Some(text) = trimmed.strip_prefix(">>>> ") {
        let text = text.strip_suffix(" <<<<").unwrap_or(text);
        return Some(Detail {
            level: Level::Error,
            text: text.to_string(),
        });
    }
    let (level, text) = if let Some(text) = trimmed.strip_prefix(">> ") {
        (Level::Warning, text)
    } else {
        (Level::Note, trimmed.strip_prefix("-> ")?)
    };
    Some(Detail {
        level,
        text: text.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lines_give_the_flow_in_ovs_ofctl_text() {
        assert_eq!(
            matched("ip,in_port=3,nw_src=10.128.0.10, priority 100").unwrap(),
            Matched::Flow {
                priority: 100,
                match_: "ip,in_port=3,nw_src=10.128.0.10".into(),
                cookie: 0
            }
        );
        assert_eq!(
            matched("priority 0, cookie 0x1f").unwrap(),
            Matched::Flow {
                priority: 0,
                match_: String::new(),
                cookie: 0x1f
            }
        );
        assert_eq!(matched("No match.").unwrap(), Matched::NoMatch);
        assert!(matched("ip,in_port=3").is_err());
        assert!(matched("ip, priority 70000").is_err());
        assert!(matched("ip, priority 1, cookie 12").is_err());
        assert_eq!(
            table_line(" 0. ip, priority 100".trim_start()).unwrap().0,
            0
        );
        assert_eq!(table_line("253. priority 0").unwrap().0, 253);
        assert!(table_line("256. priority 0").is_none());
        assert!(table_line("output:1").is_none());
    }

    #[test]
    fn garbage_and_truncated_text_are_refused_with_the_line() {
        let err = parse("hello\n").unwrap_err();
        assert_eq!(err.line, 1);
        assert!(
            err.to_string().contains("before the first `Flow:`"),
            "{err}"
        );
        let err = parse("").unwrap_err();
        assert!(
            err.to_string().contains("not an ofproto/trace output"),
            "{err}"
        );
        let truncated =
            "Flow: ip,in_port=1\n\nbridge(\"br0\")\n-------------\n 0. ip, priority 1\n    drop\n";
        let err = parse(truncated).unwrap_err();
        assert!(
            err.to_string().contains("ends before `Datapath actions:`"),
            "{err}"
        );
        let stray = "Flow: ip,in_port=1\n\nbridge(\"br0\")\n-------------\n 0. ip, priority\n";
        let err = parse(stray).unwrap_err();
        assert_eq!(err.line, 5);
        assert!(err.to_string().contains("priority"), "{err}");
        let outside = "Flow: ip,in_port=1\n 0. ip, priority 1\n";
        assert!(parse(outside)
            .unwrap_err()
            .to_string()
            .contains("outside a bridge"));
        let unknown = "Flow: ip,in_port=1\nSomething new\n";
        assert!(parse(unknown).is_err());
    }
}
