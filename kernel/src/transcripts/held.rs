//! What a session already holds of a re-sent history: each imported
//! turn's identity, and the last whole history imported, by its bytes.
//!
//! A host re-sends its whole conversation each turn. The identities of the
//! turns earlier imports appended are computed once and kept with the
//! session's log; a re-sent history is compared with them turn by turn.
//! Most of what a host re-sends is, byte for byte, what it sent last time:
//! the elements up to the last place both texts agree, ending where the
//! reader was between turns, are skipped unread (a [`Gap`]), their turns
//! known to be the session's. The conversation's leading system and
//! developer messages are always read: they are the session's instructions.
//!
//! What the kernel keeps here is never authority: it is used only while the
//! log's head is the one the last import left, and a call that finds
//! anything amiss is read in full.

use super::turns::{Gap, Reading, Turn};
use crate::canonical;
use crate::contracts::{ContextItem, Format, Head, ItemKind, Part, PartKind, ProviderFields, Role, SourceKind, ToolCall, ToolOutcome};
use crate::error::{ErrorCode, KernelError};
use crate::session::SessionLog;
use serde_json::json;
use std::any::Any;
use std::borrow::Cow;

/// What `import-messages` keeps with a session's log between calls.
#[derive(Default)]
struct Memo {
    /// How many of the log's items `turns` was read from.
    read: usize,
    /// The turns earlier imports appended, in order: (seq, identity).
    turns: Vec<(u64, String)>,
    /// The last whole history imported, while the log is as it left it.
    last: Option<Last>,
}

/// A whole history as imported, and where its reader was between turns.
struct Last {
    /// The log's head once it was imported.
    head: Head,
    format: Format,
    /// Whether opaque parts were refused.
    refused: bool,
    text: String,
    /// Where its conversation starts in `text`.
    start: usize,
    /// Each point between turns: (elements, the conversation's turns in
    /// them, where the last of those elements ends in `text`).
    rests: Vec<(usize, usize, usize)>,
    /// The point after the conversation's leading system and developer
    /// messages (elements, turns): a gap starts there, so the session's
    /// instructions are always read.
    lead: Option<(usize, usize)>,
}

/// The log's memo, made on first use.
fn memo(log: &SessionLog) -> std::cell::RefMut<'_, Memo> {
    std::cell::RefMut::map(log.memo.borrow_mut(), |m| {
        m.get_or_insert_with(|| Box::new(Memo::default()) as Box<dyn Any>).downcast_mut::<Memo>().expect("the import memo is the only one kept")
    })
}

/// The identities of the turns the log's imports appended, read up to its end.
fn imported(log: &SessionLog) -> std::cell::RefMut<'_, Memo> {
    let mut memo = memo(log);
    // What earlier imports appended: the host's own records (an approval
    // asked through `append-events`, a note) are no turn of its transcript.
    let Memo { read, turns, .. } = &mut *memo;
    let items = log.items[*read..].iter().filter(|c| c.item.source_ref.kind == SourceKind::Import);
    turns.extend(items.filter_map(|c| Some((c.seq?, Identity::of_item(&c.item)?.digest()?))));
    *read = log.items.len();
    memo
}

/// The conversation elements of `text` a whole-history import can skip:
/// those the last import was given as the same bytes, after the leading
/// system and developer messages and up to a point where its reader was
/// between turns. `ends` is where the conversation's first element starts
/// in `text` and where each element ends.
pub fn gap(log: &SessionLog, format: Format, refused: bool, text: &str, ends: &(usize, Vec<usize>)) -> Gap {
    let memo = imported(log);
    let Some(last) = memo.last.as_ref().filter(|l| l.head == log.head && l.format == format && l.refused == refused && l.start == ends.0) else {
        return Gap::default();
    };
    let Some(lead) = last.lead else { return Gap::default() };
    let agreed = common_prefix(text.as_bytes(), last.text.as_bytes());
    let until = last.rests.iter().rev().find(|(elements, _, end)| *elements > lead.0 && *end <= agreed && ends.1.get(elements - 1) == Some(end));
    let Some(&(elements, turns, _)) = until else { return Gap::default() };
    // The skipped turns are the session's first imported ones, after its instructions.
    let hidden = turns - lead.1;
    let Some(skipped) = memo.turns.get(..hidden) else { return Gap::default() };
    let mut gap = Gap { elements: lead.0..elements, turns: hidden, calls: Vec::new(), answered: Vec::new() };
    for (seq, _) in skipped {
        let Ok(at) = log.items.binary_search_by_key(&Some(*seq), |c| c.seq) else { return Gap::default() };
        let item = &log.items[at].item;
        gap.calls.extend(item.tool_calls.iter().map(|c| c.call_id.clone()));
        gap.answered.extend(item.tool_result.iter().map(|r| r.call_id.clone()));
    }
    gap
}

/// How many leading bytes `a` and `b` share, compared eight at a time (a
/// byte-wise `memcmp` is what a WebAssembly build links).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (words_a, words_b) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or_default());
    let same = words_a.zip(words_b).take_while(|(x, y)| word(x) == word(y)).count() * 8;
    same + a[same..n].iter().zip(&b[same..n]).take_while(|(x, y)| x == y).count()
}

/// Keeps a whole history the session now holds all of, as the log stands at
/// `head`: `reading` is what was read of it (skipping its gap), `ends` where
/// its conversation's elements end.
pub fn remember(log: &SessionLog, head: &Head, format: Format, refused: bool, text: &str, reading: &Reading, ends: &(usize, Vec<usize>)) {
    let mut memo = memo(log);
    let previous = memo.last.take();
    let skipped = reading.gap.elements.clone();
    // Rests inside the gap are the last history's: its bytes up to them are these.
    let kept = previous.iter().flat_map(|l| l.rests.iter().filter(|(e, _, _)| *e > skipped.start && *e <= skipped.end).copied());
    let read = reading.rests.iter().filter_map(|&(e, t)| Some((e, t, *ends.1.get(e.checked_sub(1)?)?)));
    let mut rests: Vec<(usize, usize, usize)> = kept.chain(read).collect();
    rests.sort_unstable();
    let leading = reading.turns[reading.opening..].iter().take_while(|t| t.speaker.instructs()).count();
    let lead = match (leading, &previous) {
        // The gap started after the same leading messages.
        (_, Some(l)) if !skipped.is_empty() => l.lead,
        (0, _) => Some((0, 0)),
        (n, _) => rests.iter().rev().find(|(_, t, _)| *t == n).map(|&(e, t, _)| (e, t)),
    };
    let text = match previous {
        Some(l) if l.text.len() == text.len() && common_prefix(l.text.as_bytes(), text.as_bytes()) == text.len() => l.text,
        _ => text.to_string(),
    };
    memo.last = Some(Last { head: head.clone(), format, refused, text, start: ends.0, rests, lead });
}

/// How many of the transcript's turns the session holds, when the
/// transcript is the whole conversation: all the session imported, which
/// must be where the transcript starts. The first `hidden` were skipped
/// unread (a [`Gap`]); `turns` are those after them. A turn that differs
/// before the session's end, or a transcript that stops short of it, is a
/// conflict naming the first turn that does not match.
pub fn held(log: &SessionLog, turns: &[Turn], hidden: usize) -> std::result::Result<usize, Divergence> {
    let memo = imported(log);
    let had = &memo.turns;
    let total = turns.len() + hidden;
    for (turn, (seq, stored)) in had.iter().enumerate().skip(hidden) {
        // A turn that differs is named; a history cut short, by its last turn.
        let (why, path) = match turns.get(turn - hidden) {
            None => ("ends after", turns.last().map_or("$", |t| t.path.as_str())),
            Some(t) if Identity::of_turn(t).digest().as_ref() != Some(stored) => ("differs from the session's at", t.path.as_str()),
            Some(_) => continue,
        };
        return Err(Divergence { why, path: path.to_string(), turn, turns: total, held: had.len(), cut: *seq });
    }
    Ok(had.len())
}

/// Where a whole history parts from the session's: the first turn that
/// differs (or the last one, when the history is cut short).
pub struct Divergence {
    why: &'static str,
    path: String,
    turn: usize,
    turns: usize,
    held: usize,
    /// The seq of the session's first turn the transcript does not hold:
    /// a fork keeps the events before it.
    pub cut: u64,
}

impl Divergence {
    pub fn conflict(&self) -> KernelError {
        let (why, path, turn, held) = (self.why, &self.path, self.turn, self.held);
        KernelError::new(
            ErrorCode::Conflict,
            format!(
                "the transcript's conversation {why} `{path}` (turn {turn} of {}), while the session holds {held} turns: a whole history starts with \
                 what the session holds; a host sending only new turns says `history: new`, and one that edited the history may start `forkTo`",
                self.turns
            ),
        )
        .with_detail(json!({"path": path, "turn": turn, "held": held}))
    }
}

/// An instruction item's identity: its text and parts.
pub fn instruction_identity(item: &ContextItem) -> Option<String> {
    canonical::digest_value(&(item.content.as_deref().map_or_else(|| item.parts_text(), str::to_string), parts_identity(&item.parts))).ok()
}

/// What makes two conversational turns the same, read alike from a stored
/// item and from a transcript's turn (as the item it would become).
struct Identity<'a> {
    speaker: &'static str,
    text: Cow<'a, str>,
    parts: &'a [Part],
    calls: &'a [ToolCall],
    result: Option<(&'a str, ToolOutcome)>,
    fields: Option<&'a ProviderFields>,
}

impl<'a> Identity<'a> {
    /// A stored item's; none for what is no conversational turn.
    fn of_item(item: &'a ContextItem) -> Option<Self> {
        let speaker = match (item.kind, item.role, &item.tool_result) {
            (ItemKind::Message, Some(role), _) => match role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::System => "system",
                Role::Developer => "developer",
            },
            (ItemKind::ToolEvidence, _, Some(_)) => "tool",
            _ => return None,
        };
        let text = match (&item.content, &item.content_ref) {
            (Some(text), _) => Cow::Borrowed(text.as_str()),
            (None, Some(reference)) => Cow::Borrowed(reference.digest.as_str()),
            (None, None) => Cow::Owned(item.parts_text()),
        };
        let result = item.tool_result.as_ref().map(|r| (r.call_id.as_str(), r.outcome));
        Some(Identity { speaker, text, parts: &item.parts, calls: &item.tool_calls, result, fields: item.provider_fields.as_ref() })
    }

    fn of_turn(turn: &'a Turn) -> Self {
        let text = match turn.parts.is_empty() {
            true => Cow::Borrowed(turn.text.as_str()),
            false => Cow::Owned(crate::contracts::text_of(&turn.parts)),
        };
        let result = turn.result.as_ref().map(|(id, outcome)| (id.as_str(), *outcome));
        Identity { speaker: turn.speaker.name(), text, parts: &turn.parts, calls: &turn.calls, result, fields: turn.provider_fields.as_ref() }
    }

    fn digest(&self) -> Option<String> {
        // Text alone is the same turn however it is split into parts (`"hi"`,
        // `[{"type": "text", "text": "hi"}]` once a host marks it for caching).
        let parts = parts_identity(self.parts);
        let parts = if parts.iter().all(|(kind, _, url, digest)| *kind == "text" && url.is_none() && digest.is_none()) { Vec::new() } else { parts };
        let calls: Vec<(&str, &str, Option<String>, Option<&str>)> = self
            .calls
            .iter()
            .map(|c| (c.call_id.as_str(), c.name.as_str(), c.arguments.as_deref().map(arguments_identity), c.input.as_deref()))
            .collect();
        // An answer given without content says it in the provider's own fields.
        let answer = self.fields.map(|f| (f.fields.get("refusal"), f.fields.get("audio"))).filter(|(r, a)| r.is_some() || a.is_some());
        canonical::digest_value(&(self.speaker, &self.text, parts, calls, self.result, answer)).ok()
    }
}

/// Arguments as JSON values, so the spacing, member order and number
/// spelling (`1.0`, `1`) a host's JSON writer changes between turns are the
/// same call; text that is not JSON, as it is.
fn arguments_identity(arguments: &str) -> String {
    let value = serde_json::from_str::<serde_json::Value>(arguments).ok().map(integral);
    value.and_then(|v| canonical::to_string(&v).ok()).unwrap_or_else(|| arguments.to_string())
}

/// A value with each integral float (`1.0`, `1e2`, `-0.0`) as its integer.
fn integral(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() <= crate::wire::MAX_SAFE_INTEGER as f64 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(integral).collect()),
        Value::Object(members) => Value::Object(members.into_iter().map(|(k, v)| (k, integral(v))).collect()),
        other => other,
    }
}

/// The parts a provider sends back unchanged: not thinking or reasoning,
/// which providers and hosts may strip from earlier turns; binary and
/// opaque parts by digest. The provider's own fields are left out: a
/// status, say, changes as a turn completes.
fn parts_identity(parts: &[Part]) -> Vec<(&'static str, Option<&str>, Option<&str>, Option<String>)> {
    let digest = |p: &Part| match (&p.content_ref, &p.provider_fields) {
        (Some(reference), _) => Some(reference.digest.clone()),
        // As a host may send it again: with or without its nulls and cache breakpoint.
        (None, Some(fields)) if p.kind == PartKind::Opaque => canonical::digest_value(&unnulled(&fields.fields)).ok(),
        _ => None,
    };
    parts
        .iter()
        .filter(|p| !matches!(p.kind, PartKind::Thinking | PartKind::RedactedThinking | PartKind::Reasoning))
        .map(|p| (p.kind_name(), p.text.as_deref(), p.url.as_deref(), digest(p)))
        .collect()
}

/// A block without its `cache_control` and without null members, at any depth.
fn unnulled(fields: &serde_json::Map<String, serde_json::Value>) -> serde_json::Value {
    use serde_json::Value;
    fn value(v: &Value) -> Value {
        match v {
            Value::Object(map) => Value::Object(map.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), value(v))).collect()),
            Value::Array(items) => Value::Array(items.iter().map(value).collect()),
            other => other.clone(),
        }
    }
    let mut block = fields.clone();
    block.remove("cache_control");
    value(&Value::Object(block))
}

