//! The operation: one compaction walked through its states and journaled at
//! each step, so a crash, a retried call or a lost provider answer resumes
//! where it stopped. `compact` starts one, `resume` takes the provider's
//! answer (continue-operation), `reconcile` settles an unknown outcome.

use crate::canonical::{self, Timestamp};
use crate::content::{self, Excerpt};
use crate::contracts::{
    check_id, check_sink, check_version, CompactionMetrics, CompactionRecord, ContentRef, Externalized, ProviderResponse, SinkPolicy,
    Strategy, Usage,
};
use crate::error::{ErrorCode, KernelError, Result};
use crate::events;
use crate::session::{self, project, SessionLog};
use crate::store::{keys, Db};
use serde_json::json;
use std::rc::Rc;
use super::prepare::{input_budget, prepare, tokens_of, Prepared};
use super::requests::{
    CompactRequest, CompactResponse, CompactionPolicy, CompactionState, ContinueRequest, Operation, OperationState, ReconcileRequest,
    Resolution, Status,
};
use super::summary::{check_provider_text, clip, clip_summary, local_summary, provider_request, summary_item};
use super::verify::verify;

/// An operation's identity: what it compacts and how, never when it was asked.
fn operation_id(request: &CompactRequest, head: &serde_json::Value, policy: &CompactionPolicy, attempt: u32) -> Result<String> {
    let digest = canonical::digest_value(&json!({
        "allowDegraded": request.allow_degraded,
        "attempt": attempt,
        "force": request.force,
        "head": head,
        "keepFromSeq": request.keep_from_seq,
        "model": request.model,
        "policy": policy,
        "provider": request.provider,
        "session": request.session_id,
        "sink": request.sink,
        "strategy": request.strategy,
    }))?;
    Ok(canonical::derived_id("op", &digest))
}

fn load_operation(db: &mut Db, id: &str) -> Result<(u64, Operation)> {
    check_id("operationId", id)?;
    db.get::<Operation>(&keys::operation(id))?
        .ok_or_else(|| KernelError::new(ErrorCode::NotFound, format!("no operation `{id}`")))
}

fn save_operation(db: &mut Db, op: &Operation, revision: u64) -> Result<()> {
    db.put(&keys::operation(&op.operation_id), op, Some(revision)).map(|_| ())
}

fn metrics_event(record: &CompactionRecord, states: &[CompactionState]) -> serde_json::Value {
    json!({
        "states": states,
        "compactionId": record.compaction_id,
        "cutSeq": record.cut_seq,
        "metrics": record.metrics,
        "outputDigest": record.output_digest,
        "policyVersion": record.policy_version,
    })
}

/// `compact-context`.
pub fn compact(db: &mut Db, log: &SessionLog, request: CompactRequest) -> Result<CompactResponse> {
    check_version("request", request.schema_version)?;
    check_id("sessionId", &request.session_id)?;
    check_sink(&request.sink)?;
    let policy = request.policy.clone().unwrap_or_default();
    policy.validate()?;
    input_budget(&request.model)?;
    if request.strategy == Strategy::Provider {
        let provider = request.provider.as_ref().ok_or_else(|| KernelError::invalid("the provider strategy needs `provider`"))?;
        check_id("provider.model", &provider.model)?;
    }
    // The identity uses the head as the caller stated it, so a retry finds it.
    let stated = match &request.expected_head {
        Some(expected) => json!(expected),
        None => json!(log.head),
    };
    let op_id = operation_id(&request, &stated, &policy, 0)?;
    if let Some((_, op)) = db.get::<Operation>(&keys::operation(&op_id))? {
        // A retried request: answer as before, never twice.
        return Ok(op.receipt);
    }
    if let Some(expected) = &request.expected_head {
        if expected.seq != log.head.seq || expected.digest.as_ref().is_some_and(|d| *d != log.head.digest) {
            return Err(KernelError::new(
                ErrorCode::Stale,
                format!("session `{}` is at seq {} but the request built on seq {}", request.session_id, log.head.seq, expected.seq),
            )
            .with_detail(json!({"currentHead": log.head, "expectedHead": expected})));
        }
    }
    start(db, log, request, policy, op_id, None, 0, false)
}

/// Evaluates and prepares; commits locally or hands the summary to the provider.
fn start(
    db: &mut Db,
    log: &SessionLog,
    request: CompactRequest,
    policy: CompactionPolicy,
    op_id: String,
    previous: Option<String>,
    attempt: u32,
    degraded: bool,
) -> Result<CompactResponse> {
    let mut states = vec![CompactionState::Evaluating];
    let Some(prepared) = prepare(db, log, &request, &policy)? else {
        return Ok(CompactResponse {
            compaction: None,
            head: log.head.clone(),
            operation_id: op_id,
            previous_operation_id: previous,
            provider_request: None,
            reason: Some("under the trigger, and nothing to externalize".into()),
            schema_version: 1,
            states,
            status: Status::NotNeeded,
        });
    };
    states.push(CompactionState::Preparing);
    let (receipt, state) = if request.strategy == Strategy::Provider && prepared.summarizes() {
        states.push(CompactionState::Summarizing);
        let provider = request.provider.as_ref().expect("checked on admission");
        events::emit(db, "context.compaction.started", &request.now, Some(&request.session_id), Some(&op_id), json!({
            "cutSeq": prepared.cut_seq, "spanItems": prepared.inputs.len(), "states": states, "strategy": Strategy::Provider,
        }))?;
        let receipt = CompactResponse {
            compaction: None,
            head: log.head.clone(),
            operation_id: op_id.clone(),
            previous_operation_id: previous.clone(),
            provider_request: Some(provider_request(&prepared, provider, &policy)),
            reason: None,
            schema_version: 1,
            states,
            status: Status::AwaitingProvider,
        };
        (receipt, OperationState::AwaitingProvider)
    } else {
        let summary = Summary::Local { degraded };
        let receipt = commit(db, log, &request, &policy, &prepared, summary, &op_id, previous.clone(), &request.now, states)?;
        if receipt.status == Status::NotNeeded {
            return Ok(receipt);
        }
        (receipt, if degraded { OperationState::Degraded } else { OperationState::Committed })
    };
    let op = Operation {
        attempt,
        created_at: request.now.clone(),
        operation_id: op_id,
        previous,
        receipt: receipt.clone(),
        updated_at: request.now.clone(),
        request,
        response_digest: None,
        schema_version: 1,
        state,
    };
    save_operation(db, &op, 0)?;
    Ok(receipt)
}

enum Summary {
    Local { degraded: bool },
    Provider { text: String, usage: Usage },
}

#[allow(clippy::too_many_arguments)]
fn commit(
    db: &mut Db,
    log: &SessionLog,
    request: &CompactRequest,
    policy: &CompactionPolicy,
    prepared: &Prepared,
    summary: Summary,
    op_id: &str,
    previous: Option<String>,
    now: &Timestamp,
    mut states: Vec<CompactionState>,
) -> Result<CompactResponse> {
    let session = request.session_id.as_str();
    let excerpt = Excerpt { head_chars: policy.head_chars as usize, tail_chars: policy.tail_chars as usize };
    // Everything is decided and verified before anything is written.
    let mut artifact_refs = Vec::new();
    let mut externalized = Vec::new();
    let mut writes: Vec<(ContentRef, &[u8], SinkPolicy)> = Vec::new();
    let mut externalized_bytes = 0;
    for (c, bytes) in &prepared.externalize {
        let item = &c.item;
        let mime = "text/plain";
        let (policy, _) = content::screened(bytes, SinkPolicy::new(item.sensitivity, &item.allowed_sinks));
        let reference = content::reference(bytes, Some(mime), content::summarize(bytes, Some(mime), excerpt, policy.sensitivity))?;
        writes.push((reference.clone(), bytes, policy));
        externalized_bytes += bytes.len() as u64;
        artifact_refs.push(reference.clone());
        externalized.push(Externalized { content_ref: reference, item_id: item.id().to_string(), seq: c.seq.unwrap_or(0) });
    }
    let (degraded, usage) = match &summary {
        Summary::Local { degraded } => (*degraded, None),
        Summary::Provider { usage, .. } => (false, Some(usage.clone())),
    };
    let strategy = match summary {
        Summary::Local { .. } => Strategy::Local,
        Summary::Provider { .. } => Strategy::Provider,
    };
    let compaction_digest = canonical::digest_value(&json!({"operation": op_id, "cut": prepared.cut_seq, "session": session}))?;
    let compaction_id = canonical::derived_id("cmp", &compaction_digest);
    // Each archive is readable exactly where all of its events are: the
    // events this sink may read form the one the summary cites, and each other
    // policy gets its own, so nothing becomes readable where it was not.
    let mut archives = Vec::new();
    for (n, (policy, bytes)) in prepared.archives.iter().enumerate() {
        // Events appended before items were screened on append may hold a
        // secret their policy does not declare: the archive's text decides too.
        let (policy, _) = content::screened(bytes, policy.clone());
        let part = if n == 0 { String::new() } else { format!(" (part {})", n + 1) };
        let label = format!("archive of session `{session}` events up to #{}{part}", prepared.cut_seq);
        let reference = content::reference(bytes, Some("application/x-ndjson"), label)?;
        writes.insert(n, (reference.clone(), bytes.as_slice(), policy.clone()));
        artifact_refs.insert(n, reference.clone());
        archives.push((reference, policy));
    }
    let summary_item = match archives.first() {
        Some((archive_ref, archive_policy)) if prepared.summarizes() && archive_policy.admits(&request.sink) => {
            let text = match &summary {
                Summary::Local { .. } => local_summary(prepared, &archive_ref.object_id, policy),
                Summary::Provider { text, .. } => clip_summary(
                    &format!(
                        "[Summary of session history up to event #{}, written by {}. The raw events are archived losslessly as content {}.]\n{text}",
                        prepared.cut_seq,
                        request.provider.as_ref().map_or("a provider", |p| p.model.as_str()),
                        archive_ref.object_id
                    ),
                    policy.summary_max_tokens,
                ),
            };
            Some(Rc::new(summary_item(prepared, &compaction_id, archive_ref, text, strategy, request, now)?))
        }
        _ => None,
    };

    let record_without_output = CompactionRecord {
        artifact_refs,
        committed_at: now.clone(),
        compaction_id: compaction_id.clone(),
        cut_seq: prepared.cut_seq,
        degraded,
        externalized,
        input_digest: canonical::digest_value(&prepared.inputs.iter().map(|c| (c.item.id(), c.item.digest.as_deref())).collect::<Vec<_>>())?,
        input_head: log.head.clone(),
        metrics: CompactionMetrics {
            degraded,
            duration_ms: 0,
            externalized_bytes,
            externalized_items: prepared.externalize.len() as u32,
            input_tokens: 0,
            output_tokens: 0,
            ratio_permille: 0,
            span_events: prepared.span_events,
            strategy,
            withheld: prepared.withheld,
        },
        model_profile: request.model.profile.clone(),
        operation_id: op_id.to_string(),
        output_digest: String::new(),
        policy_version: policy.version.clone(),
        preserved: prepared.preserved.clone(),
        session_id: session.to_string(),
        started_at: request.now.clone(),
        strategy,
        summary: summary_item,
        usage,
    };
    let mut record = record_without_output;
    record.output_digest = canonical::digest_value(&(&record.summary, &record.preserved, &record.externalized))?;

    states.push(CompactionState::Verifying);
    let mut compactions = log.compactions.clone();
    compactions.push((log.head.seq + 1, Rc::new(record.clone())));
    let after = project(&log.items, &compactions);
    verify(prepared, &after, now, &request.sink)?;
    let before_tokens: u64 = prepared.before.iter().map(tokens_of).sum();
    let after_tokens: u64 = after.iter().map(tokens_of).sum();
    if after_tokens >= before_tokens {
        return Ok(CompactResponse {
            compaction: None,
            head: log.head.clone(),
            operation_id: op_id.to_string(),
            previous_operation_id: previous,
            provider_request: None,
            reason: Some(format!("a summary would not shrink the context ({before_tokens} → {after_tokens} tokens)")),
            schema_version: 1,
            states,
            status: Status::NotNeeded,
        });
    }
    record.metrics.input_tokens = before_tokens;
    record.metrics.output_tokens = after_tokens;
    record.metrics.ratio_permille = after_tokens * 1000 / before_tokens.max(1);
    record.metrics.duration_ms = now.unix_millis() - request.now.unix_millis();

    states.push(CompactionState::Committing);
    for (reference, bytes, policy) in &writes {
        content::store(db, reference, bytes, policy, now)?;
    }
    let head = session::append_compaction(db, session, record.clone(), now)?;
    states.push(CompactionState::Committed);
    events::emit(db, "context.compaction.committed", now, Some(session), Some(op_id), metrics_event(&record, &states))?;
    Ok(CompactResponse {
        compaction: Some(record),
        head,
        operation_id: op_id.to_string(),
        previous_operation_id: previous,
        provider_request: None,
        reason: degraded.then(|| "the provider failed; the local strategy wrote the summary".to_string()),
        schema_version: 1,
        states,
        status: if degraded { Status::Degraded } else { Status::Committed },
    })
}
/// `continue-operation`.
pub fn resume(db: &mut Db, log: &SessionLog, request: ContinueRequest) -> Result<CompactResponse> {
    check_version("request", request.schema_version)?;
    let (revision, mut op) = load_operation(db, &request.operation_id)?;
    let response_digest = canonical::digest_value(&request.response)?;
    if op.state != OperationState::AwaitingProvider {
        if op.response_digest.as_deref() == Some(response_digest.as_str()) {
            return Ok(op.receipt);
        }
        return Err(KernelError::new(
            ErrorCode::IllegalTransition,
            format!("operation `{}` is {:?}, not awaiting the provider", op.operation_id, op.state),
        )
        .with_detail(json!({"operationId": op.operation_id, "state": op.state})));
    }
    let input_head = op.receipt.head.clone();
    let session = op.request.session_id.clone();
    let (op_id, previous) = (op.operation_id.clone(), op.previous.clone());
    let settled = |status: Status, states: Vec<CompactionState>, reason: String| CompactResponse {
        compaction: None,
        head: log.head.clone(),
        operation_id: op_id.clone(),
        previous_operation_id: previous.clone(),
        provider_request: None,
        reason: Some(reason),
        schema_version: 1,
        states,
        status,
    };
    let (state, receipt) = if log.summarized_after(input_head.seq) {
        let reason = "another compaction committed first; compact again from the current head";
        events::emit(db, "context.compaction.aborted", &request.now, Some(&session), Some(&op_id), json!({"reason": "stale", "states": [CompactionState::Stale]}))?;
        (OperationState::Stale, settled(Status::Stale, vec![CompactionState::Stale], reason.into()))
    } else {
        let policy = op.request.policy.clone().unwrap_or_default();
        let at_input = log.at(&input_head);
        let prepared = prepare(db, &at_input, &op.request, &policy)?
            .filter(Prepared::summarizes)
            .ok_or_else(|| KernelError::internal("the operation's span can no longer be prepared"))?;
        let states = vec![CompactionState::Summarizing];
        let commit_with = |db: &mut Db, summary: Summary| {
            commit(db, &at_input, &op.request, &policy, &prepared, summary, &op_id, previous.clone(), &request.now, states.clone())
        };
        match request.response.clone() {
            ProviderResponse::Success { text, usage } => {
                check_provider_text(&text)?;
                let receipt = commit_with(db, Summary::Provider { text, usage })?;
                let state = if receipt.status == Status::NotNeeded { OperationState::Aborted } else { OperationState::Committed };
                (state, receipt)
            }
            ProviderResponse::Failed { error } if !op.request.allow_degraded => {
                return Err(KernelError::new(
                    ErrorCode::Degraded,
                    format!("the provider failed ({}) and the request does not allow a degraded fallback", clip(&error)),
                )
                .with_detail(json!({"operationId": op_id})));
            }
            ProviderResponse::Failed { .. } => {
                let receipt = commit_with(db, Summary::Local { degraded: true })?;
                let state = if receipt.status == Status::NotNeeded { OperationState::Aborted } else { OperationState::Degraded };
                (state, receipt)
            }
            ProviderResponse::Unknown { reason } => {
                let mut states = states;
                states.push(CompactionState::ReconciliationRequired);
                events::emit(db, "context.compaction.reconciliation_required", &request.now, Some(&session), Some(&op_id), json!({"states": states, "usageSettled": false}))?;
                let reason = format!("the provider outcome is unknown: {}", clip(&reason));
                (OperationState::ReconciliationRequired, settled(Status::ReconciliationRequired, states, reason))
            }
            ProviderResponse::Cancelled { reason } => {
                let mut states = states;
                states.push(CompactionState::Aborted);
                events::emit(db, "context.compaction.aborted", &request.now, Some(&session), Some(&op_id), json!({"reason": "cancelled", "states": states}))?;
                let why = reason.map_or("cancelled".to_string(), |r| format!("cancelled: {}", clip(&r)));
                (OperationState::Aborted, settled(Status::Aborted, states, why))
            }
        }
    };
    op.state = state;
    op.receipt = receipt.clone();
    op.response_digest = Some(response_digest);
    op.updated_at = request.now.clone();
    save_operation(db, &op, revision)?;
    Ok(receipt)
}
/// `reconcile`: settles an operation left `reconciliation-required` (or
/// awaiting a provider answer that was lost) under a new operation identity.
pub fn reconcile(db: &mut Db, log: &SessionLog, request: ReconcileRequest) -> Result<CompactResponse> {
    check_version("request", request.schema_version)?;
    let resolution = request.resolution.ok_or_else(|| KernelError::invalid("reconciling a compaction needs a `resolution`"))?;
    let (revision, mut op) = load_operation(db, &request.operation_id)?;
    if !matches!(op.state, OperationState::ReconciliationRequired | OperationState::AwaitingProvider) {
        return Err(KernelError::new(
            ErrorCode::IllegalTransition,
            format!("operation `{}` is {:?}; only unsettled operations are reconciled", op.operation_id, op.state),
        )
        .with_detail(json!({"operationId": op.operation_id, "state": op.state})));
    }
    let policy = op.request.policy.clone().unwrap_or_default();
    let attempt = op.attempt + 1;
    let mut next = op.request.clone();
    next.now = request.now.clone();
    next.expected_head = None;
    let new_id = operation_id(&next, &json!(log.head), &policy, attempt)?;
    op.state = OperationState::Reconciled;
    op.updated_at = request.now.clone();
    op.receipt.reason = Some(format!("reconciled ({resolution:?}) as {new_id}").to_lowercase());
    save_operation(db, &op, revision)?;
    events::emit(db, "context.compaction.reconciled", &request.now, Some(&op.request.session_id), Some(&op.operation_id), json!({
        "resolution": resolution, "newOperationId": new_id,
    }))?;
    match resolution {
        Resolution::Abandon => Ok(CompactResponse {
            compaction: None,
            head: log.head.clone(),
            operation_id: new_id,
            previous_operation_id: Some(op.operation_id),
            provider_request: None,
            reason: Some("abandoned; nothing was committed".into()),
            schema_version: 1,
            states: vec![CompactionState::Aborted],
            status: Status::Aborted,
        }),
        Resolution::Retry => start(db, log, next, policy, new_id, Some(op.operation_id), attempt, false),
        Resolution::FallbackLocal => {
            next.strategy = Strategy::Local;
            start(db, log, next, policy, new_id, Some(op.operation_id), attempt, true)
        }
    }
}
