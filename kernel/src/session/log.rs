//! The log itself: append, read, the chain and its head.

use crate::canonical::{self, Timestamp};
use crate::contracts::{check_id, check_version, split_tail, CompactionRecord, ContextItem, ExpectedHead, Head, ItemLimits};
use crate::error::{ErrorCode, KernelError, Result};
use crate::store::{keys, Db};
use serde_json::json;
use std::collections::BTreeMap;

/// Largest item text a session log accepts; bigger content goes to the content store.
pub const MAX_EVENT_BYTES: u64 = 16 << 20;
/// Most items one `append-events` call may carry.
pub const MAX_APPEND_ITEMS: usize = 10_000;
/// Most events one `read-events` call returns.
pub const MAX_READ_EVENTS: u32 = 10_000;

contract! {
pub struct AppendEventsRequest {
    pub expected_head: ExpectedHead,
    pub items: Vec<ContextItem>,
    pub now: Timestamp,
    pub schema_version: u32,
    pub session_id: String,
}
}

contract! {
pub struct AppendEventsResponse {
    pub appended: Vec<Appended>,
    pub head: Head,
    pub schema_version: u32,
    pub session_id: String,
}
}

contract! {
pub struct Appended {
    pub digest: String,
    pub item_id: String,
    pub seq: u64,
    pub token_estimate: u32,
}
}

contract! {
pub struct ReadEventsRequest {
    /// Return events with a sequence number above this (default 0: from the start).
    #[serde(default)]
    pub after_seq: u64,
    /// Only events whose item's content hashes to this digest: the handle a
    /// shrunk tool result's placeholder shows, so the result can be served
    /// back when the model asks for it. The log is walked in order and
    /// `limit` counts the events returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_digest: Option<String>,
    #[serde(default = "default_read_limit")]
    pub limit: u32,
    pub schema_version: u32,
    pub session_id: String,
}
}

fn default_read_limit() -> u32 {
    1000
}

contract! {
pub struct ReadEventsResponse {
    pub events: Vec<Event>,
    pub head: Head,
    /// True when events after the last one returned exist (with a
    /// `contentDigest`, when the walk stopped at `limit` before the head).
    pub more: bool,
    pub schema_version: u32,
    pub session_id: String,
}
}

/// Whether an item can ground user-explicit memory authority: a message the
/// user wrote, at user trust or better. Text a tool, a page or a model wrote
/// never can, whatever role the host gave it.
pub fn grounds_user_authority(item: &ContextItem) -> bool {
    item.kind == crate::contracts::ItemKind::Message
        && item.role == Some(crate::contracts::Role::User)
        && item.provenance.origin == crate::contracts::Origin::User
        && item.trust <= crate::contracts::Trust::User
        && item.summary_of.is_none()
}

contract! {
/// One event of a session log as stored: an item a host appended, or a
/// compaction the kernel committed.
pub struct Event {
    pub appended_at: Timestamp,
    /// The chain digest after this event.
    pub chain: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Box<CompactionRecord>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<ContextItem>,
    pub seq: u64,
}
}

impl Event {
    /// The canonical JSON the chain extends with (by its digest).
    fn payload(&self) -> Result<String> {
        match (&self.item, &self.compaction) {
            (Some(item), None) => canonical::to_string(item),
            (None, Some(compaction)) => canonical::to_string(compaction),
            _ => Err(KernelError::storage(format!("event {} must hold exactly one item or compaction", self.seq))),
        }
    }
}

contract! {
struct StoredHead {
    digest: String,
    schema_version: u32,
    seq: u64,
    session_id: String,
    updated_at: Timestamp,
}
}

contract! {
struct ItemIndex {
    seq: u64,
}
}

/// The head of a session that has no events yet.
pub fn genesis(session_id: &str) -> Result<Head> {
    Ok(Head { seq: 0, digest: canonical::digest_value(&json!({"session": session_id}))? })
}

fn chain(prev: &str, payload_digest: &str) -> Result<String> {
    canonical::digest_value(&(prev, payload_digest))
}

/// Reads a session's head and the store revision of its key (0: new session).
pub fn head(db: &mut Db, session_id: &str) -> Result<(Head, u64)> {
    match db.get::<StoredHead>(&keys::session_head(session_id))? {
        Some((revision, stored)) => Ok((Head { seq: stored.seq, digest: stored.digest }, revision)),
        None => Ok((genesis(session_id)?, 0)),
    }
}

/// `stale` unless the session is at the head the writer built on.
pub fn check_expected(session: &str, head: &Head, expected: &ExpectedHead) -> Result<()> {
    let why = if expected.seq != head.seq {
        Some(format!("session `{session}` is at seq {} but the writer built on seq {}", head.seq, expected.seq))
    } else {
        expected.digest.as_ref().filter(|d| **d != head.digest).map(|d| {
            format!("session `{session}` is at seq {} with digest {}, but the writer built on digest {d}: a different history", head.seq, head.digest)
        })
    };
    match why {
        Some(why) => Err(KernelError::new(ErrorCode::Stale, why).with_detail(json!({"sessionId": session, "currentHead": head, "expectedHead": expected}))),
        None => Ok(()),
    }
}

pub fn append(db: &mut Db, request: AppendEventsRequest) -> Result<AppendEventsResponse> {
    check_version("request", request.schema_version)?;
    check_id("sessionId", &request.session_id)?;
    if request.items.is_empty() {
        return Err(KernelError::invalid("append-events needs at least one item"));
    }
    if request.items.len() > MAX_APPEND_ITEMS {
        return Err(KernelError::limit(format!(
            "append-events carries {} items; the ceiling is {MAX_APPEND_ITEMS}",
            request.items.len()
        )));
    }
    let session = request.session_id.as_str();
    let (mut head, head_revision) = head(db, session)?;
    check_expected(session, &head, &request.expected_head)?;

    let limits = ItemLimits { max_item_bytes: MAX_EVENT_BYTES };
    let mut events = Vec::with_capacity(request.items.len());
    let mut batch_ids = BTreeMap::new();
    // The end of the text before each item, for a secret split across two.
    let mut before = match head.seq {
        0 => String::new(),
        seq => db.get::<Event>(&keys::session_event(session, seq))?.and_then(|(_, e)| e.item).map_or_else(String::new, |i| split_tail(i.visible_text()).to_string()),
    };
    for mut item in request.items {
        let seq = head.seq + 1;
        item.normalize(limits, &format!("{session}#{seq}"))?;
        item.screen();
        item.screen_split(&before);
        before = split_tail(item.visible_text()).to_string();
        let item_id = item.id().to_string();
        if batch_ids.insert(item_id.clone(), seq).is_some() {
            return Err(KernelError::invalid(format!("itemId `{item_id}` appears twice in one append")));
        }
        head = Head { seq, digest: chain(&head.digest, &canonical::digest_value(&item)?)? };
        events.push(Event { seq, chain: head.digest.clone(), appended_at: request.now.clone(), compaction: None, item: Some(item) });
    }

    // Every check before any write.
    for item in events.iter().filter_map(|e| e.item.as_ref()) {
        let item_id = item.id();
        if let Some((_, existing)) = db.get::<ItemIndex>(&keys::session_item(session, item_id))? {
            return Err(KernelError::invalid(format!(
                "itemId `{item_id}` is already event {} of session `{session}`",
                existing.seq
            )));
        }
    }
    let mut appended = Vec::with_capacity(events.len());
    for event in &events {
        let item = event.item.as_ref().expect("appended events hold items");
        db.put(&keys::session_item(session, item.id()), &ItemIndex { seq: event.seq }, Some(0))?;
        db.put(&keys::session_event(session, event.seq), event, Some(0))?;
        if grounds_user_authority(item) {
            db.put(&keys::session_last_user(session), &serde_json::json!({"seq": event.seq}), None)?;
        }
        appended.push(Appended {
            seq: event.seq,
            item_id: item.id().to_string(),
            digest: item.digest.clone().unwrap_or_default(),
            token_estimate: item.token_estimate.unwrap_or(0),
        });
    }
    let stored = StoredHead {
        schema_version: crate::contracts::SCHEMA_VERSION,
        session_id: session.to_string(),
        seq: head.seq,
        digest: head.digest.clone(),
        updated_at: request.now,
    };
    db.put(&keys::session_head(session), &stored, Some(head_revision))?;
    Ok(AppendEventsResponse { schema_version: 1, session_id: request.session_id, head, appended })
}

/// Appends a compaction the kernel committed, with a CAS on the head key as
/// it was read in this call.
pub fn append_compaction(db: &mut Db, session: &str, record: CompactionRecord, now: &Timestamp) -> Result<Head> {
    let (head, revision) = head(db, session)?;
    let seq = head.seq + 1;
    let digest = chain(&head.digest, &canonical::digest_value(&record)?)?;
    let event = Event { appended_at: now.clone(), chain: digest.clone(), compaction: Some(Box::new(record)), item: None, seq };
    db.put(&keys::session_event(session, seq), &event, Some(0))?;
    let stored = StoredHead {
        digest: digest.clone(),
        schema_version: crate::contracts::SCHEMA_VERSION,
        seq,
        session_id: session.to_string(),
        updated_at: now.clone(),
    };
    db.put(&keys::session_head(session), &stored, Some(revision))?;
    Ok(Head { digest, seq })
}

pub fn read(db: &mut Db, request: ReadEventsRequest) -> Result<ReadEventsResponse> {
    check_version("request", request.schema_version)?;
    check_id("sessionId", &request.session_id)?;
    if request.limit == 0 || request.limit > MAX_READ_EVENTS {
        return Err(KernelError::limit(format!("limit must be within 1..={MAX_READ_EVENTS}")));
    }
    let session = request.session_id.as_str();
    let (head, revision) = head(db, session)?;
    if revision == 0 {
        return Err(KernelError::new(ErrorCode::NotFound, format!("session `{session}` has no events")));
    }
    let events = match &request.content_digest {
        None => load(db, session, request.after_seq, request.limit as usize)?,
        Some(digest) => holding(db, session, digest, request.after_seq, request.limit as usize)?,
    };
    // A page shorter than its limit walked to the head.
    let more = events.len() == request.limit as usize && events.last().is_some_and(|e| e.seq < head.seq);
    Ok(ReadEventsResponse { schema_version: 1, session_id: request.session_id, head, events, more })
}

/// Events after `after_seq` whose item's content hashes to `digest`, at
/// most `limit`, read a page at a time.
fn holding(db: &mut Db, session: &str, digest: &str, mut after_seq: u64, limit: usize) -> Result<Vec<Event>> {
    if !canonical::is_digest(digest) {
        return Err(KernelError::invalid("contentDigest must be `sha256:` and 64 lowercase hex digits").with_detail(json!({"path": "contentDigest"})));
    }
    const PAGE: usize = 256;
    let mut found = Vec::new();
    loop {
        let page = load(db, session, after_seq, PAGE)?;
        let Some(last) = page.last().map(|e| e.seq) else { return Ok(found) };
        for event in page {
            if event.item.as_ref().is_some_and(|i| i.content_digest() == digest) {
                found.push(event);
                if found.len() == limit {
                    return Ok(found);
                }
            }
        }
        after_seq = last;
    }
}

/// Events after `after_seq`, at most `limit`, with their chain verified from
/// `after_seq` onward when it starts at 0.
pub fn load(db: &mut Db, session: &str, after_seq: u64, limit: usize) -> Result<Vec<Event>> {
    let start_after = if after_seq == 0 { String::new() } else { keys::session_event(session, after_seq) };
    let events: Vec<Event> = db
        .scan::<Event>(&keys::session_events(session), &start_after, limit)?
        .into_iter()
        .map(|(_, event)| event)
        .collect();
    let mut expected_seq = after_seq;
    for event in &events {
        expected_seq += 1;
        if event.seq != expected_seq {
            return Err(KernelError::storage(format!(
                "session `{session}` is missing event {expected_seq} (found {})",
                event.seq
            )));
        }
        if let Some(item) = &event.item {
            check_version("stored event", item.schema_version)?;
        }
    }
    Ok(events)
}

/// Verifies that `events` extend the chain from `from` (the head before the
/// first of them). Returns the head reached and each event's canonical
/// payload, which a caller may keep rather than serialize again.
pub fn verify_chain(session: &str, from: &Head, events: &[Event]) -> Result<(Head, Vec<String>)> {
    let mut head = from.clone();
    let mut payloads = Vec::with_capacity(events.len());
    for event in events {
        let payload = event.payload()?;
        let digest = chain(&head.digest, &canonical::digest_bytes(payload.as_bytes()))?;
        if digest != event.chain || event.seq != head.seq + 1 {
            return Err(KernelError::new(
                ErrorCode::DigestMismatch,
                format!("session `{session}` event {} does not match its chain digest", event.seq),
            )
            .with_detail(json!({"sessionId": session, "seq": event.seq})));
        }
        head = Head { seq: event.seq, digest };
        payloads.push(payload);
    }
    Ok((head, payloads))
}
