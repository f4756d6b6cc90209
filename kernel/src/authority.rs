//! Who may change a memory: one table, and every transition is checked
//! against it before anything is written.
//!
//! | action | `policy` | `management` | `user-explicit` |
//! |---|---|---|---|
//! | activate (or propose with authority) | origin is neither model nor tool, and no evidence is untrusted | a named actor | the user said it |
//! | correct | never | a named actor | the user said the new content |
//! | reinforce, expire, archive | yes | a named actor | the user refers to it |
//! | reject, supersede | never | a named actor | the user refers to it |
//! | promote | never | a named actor (`global` also needs `allowGlobal`) | the user refers to it; into a user scope only the actor's own |
//! | delete | yes (retention) | a named actor | the user asks to forget |
//! | purge | never | a named actor | never |
//!
//! "The user" is the latest message of the authority's session that has role
//! user, origin user and trust at most `user`: text a tool, a web page or a
//! model wrote never grounds user authority. "Said it" means the claim is one
//! or more whole sentences of that message (after a lead-in such as
//! "remember that"), of at least two words, so "deploy on Fridays" is not
//! grounded by "Do not deploy on Fridays, ever."

use crate::contracts::{check_id, AuthorityKind, MemoryRecord, Origin, Trust};
use crate::error::{ErrorCode, KernelError, Result};
use serde_json::json;
use std::sync::OnceLock;

/// What a transition does, for the table above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    Activate,
    Correct,
    Reinforce,
    Expire,
    Archive,
    Reject,
    Supersede,
    Promote,
    Delete,
    Purge,
}

impl Act {
    pub fn name(self) -> &'static str {
        match self {
            Act::Activate => "activate",
            Act::Correct => "correct",
            Act::Reinforce => "reinforce",
            Act::Expire => "expire",
            Act::Archive => "archive",
            Act::Reject => "reject",
            Act::Supersede => "supersede",
            Act::Promote => "promote",
            Act::Delete => "delete",
            Act::Purge => "purge",
        }
    }
}

/// What grounds a user-explicit transition.
pub enum Grounding<'a> {
    /// The user said this text.
    Said(&'a str),
    /// The user's message refers to this memory.
    Refers(&'a MemoryRecord),
    /// The user asks to forget something.
    Forget,
    /// Nothing can: the table says never.
    Never,
}

/// The latest message a user wrote in a session, as the kernel recorded it.
pub struct UserMessage {
    pub text: String,
}

/// The facts about the memory the table needs besides the authority.
pub struct Subject {
    pub origin: Origin,
    /// The least trusted of the session events it cites as evidence.
    pub evidence_trust: Option<Trust>,
}

fn denied(act: Act, kind: AuthorityKind, why: &str) -> KernelError {
    KernelError::new(ErrorCode::ScopeDenied, format!("{} authority may not {}: {why}", kind.name(), act.name()))
        .with_detail(json!({"action": act.name(), "authority": kind.name()}))
}

/// Checks `kind` (with its actor) may do `act` to `subject`; for
/// user-explicit, `message` must ground it as `grounding` says.
pub fn check(
    act: Act,
    kind: AuthorityKind,
    actor: Option<&str>,
    subject: &Subject,
    grounding: Grounding,
    message: Option<&UserMessage>,
) -> Result<()> {
    if let Some(actor) = actor {
        check_id("authority.actor", actor)?;
    }
    match kind {
        AuthorityKind::Management => match actor {
            Some(_) => Ok(()),
            None => Err(denied(act, kind, "management authority names its `actor`")),
        },
        AuthorityKind::Policy => match act {
            Act::Reinforce | Act::Expire | Act::Archive | Act::Delete => Ok(()),
            Act::Activate if matches!(subject.origin, Origin::Model | Origin::Tool) => {
                Err(denied(act, kind, "a model's or a tool's words become memory only when a user or a manager says so"))
            }
            Act::Activate if subject.evidence_trust.is_some_and(|t| t >= Trust::External) => {
                Err(denied(act, kind, "its evidence is untrusted text"))
            }
            Act::Activate => Ok(()),
            _ => Err(denied(act, kind, "rules only activate, reinforce, expire, archive and delete")),
        },
        AuthorityKind::UserExplicit => {
            let Some(message) = message else {
                return Err(denied(act, kind, "the session has no message from the user to ground it"));
            };
            // A negation outside what is grounded refuses it: "Deploy on
            // Fridays? No." and "Don't forget X" must not read as consent.
            let grounded = match grounding {
                Grounding::Said(claim) => says(&message.text, claim),
                Grounding::Refers(record) => {
                    !negates(&message.text) && refers(&message.text, &record.memory_id, record.key.as_deref(), &record.content)
                }
                Grounding::Forget => !negates(&message.text) && asks_to_forget(&message.text),
                Grounding::Never => false,
            };
            if grounded {
                Ok(())
            } else {
                Err(denied(act, kind, "the user's latest message does not say so"))
            }
        }
    }
}

/// Whether `message` says `claim` in the user's own words: whole sentences,
/// and nothing negated (see [`check`]).
pub fn says(message: &str, claim: &str) -> bool {
    // A negation the claim itself carries ("never on the primary") is what
    // the user said; one outside it ("Do not …", "… ? No.") refuses it.
    negations(message) <= negations(claim) && said(message, claim)
}

/// Words of letters and digits as a reader sees them: folded (NFKC, no
/// invisible characters), lowercased, and each reduced to its confusable
/// skeleton (UTS #39), so `nоt` with a Cyrillic `о` is `not`.
pub fn words(text: &str) -> Vec<String> {
    let lowered: String = crate::text::normalize(text)
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    lowered.split_whitespace().map(|w| unicode_security::skeleton(w).flat_map(char::to_lowercase).collect()).collect()
}

/// Whether the message negates or refuses anything, in any of its words.
/// Refusing grounding for a message that merely contains "not" somewhere is
/// the safe mistake: the user can say the fact plainly.
fn negates(message: &str) -> bool {
    negations(message) > 0
}

/// How many negating words (or CJK negating characters) the text holds.
fn negations(text: &str) -> usize {
    const NEGATIONS: &[&str] = &[
        "not", "no", "never", "nope", "nah", "don", "dont", "doesn", "doesnt", "didn", "didnt", "isn", "isnt", "aren", "arent",
        "wasn", "wasnt", "weren", "werent", "won", "wont", "wouldn", "wouldnt", "shouldn", "shouldnt", "couldn", "couldnt",
        "cannot", "cant", "mustn", "mustnt", "t", "nothing", "nobody", "none", "nowhere", "neither", "nor", "without", "stop",
        "avoid", "forbidden", "prohibited", "refuse", "wrong", "false", "incorrect", "except",
    ];
    const CJK: &[char] = &['不', '别', '別', '没', '沒', '勿', '莫', '未', '无', '無', '非', '否', '禁', '않', '안', '못'];
    static FOLDED: OnceLock<Vec<String>> = OnceLock::new();
    let folded = FOLDED.get_or_init(|| NEGATIONS.iter().flat_map(|n| words(n)).collect());
    words(text).iter().filter(|w| folded.contains(w)).count() + crate::text::normalize(text).chars().filter(|c| CJK.contains(c)).count()
}

/// What a user may put before a fact they want remembered: acknowledgements
/// and phrases that say "store this", in any order.
const LEAD_INS: &[&[&str]] = &[
    &["yes"],
    &["yeah"],
    &["ok"],
    &["okay"],
    &["sure"],
    &["also"],
    &["and"],
    &["so"],
    &["please"],
    &["actually"],
    &["correction"],
    &["update"],
    &["note"],
    &["important"],
    &["fyi"],
    &["remember", "that"],
    &["remember", "this", "instead"],
    &["remember", "this"],
    &["remember"],
    &["instead"],
    &["note", "that"],
    &["keep", "in", "mind", "that"],
    &["for", "the", "record"],
    &["for", "this", "project"],
    &["for", "this", "workspace"],
    &["for", "this", "repo"],
    &["for", "this", "repository"],
    &["for", "later"],
    &["i", "want", "you", "to", "remember", "that"],
    &["from", "now", "on"],
];

/// The message's sentences, as word lists. "Remember for this project: X"
/// reads as "X": a clause before a colon made only of lead-ins introduces
/// what follows it.
fn sentences(text: &str) -> Vec<Vec<String>> {
    text.split(|c: char| matches!(c, '.' | '!' | '?' | ';' | '\n' | '\r' | '\u{2028}' | '\u{2029}' | '。' | '！' | '？' | '；'))
        .map(|sentence| {
            if let Some((before, after)) = sentence.split_once([':', '：']) {
                let intro = words(before);
                if !intro.is_empty() && only_lead_ins(&intro) {
                    return words(after);
                }
            }
            words(sentence)
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether the words are lead-ins and nothing else ("remember for this project").
fn only_lead_ins(mut intro: &[String]) -> bool {
    let leads = lead_ins();
    'strip: while !intro.is_empty() {
        for lead in leads {
            if intro.len() >= lead.len() && intro[..lead.len()] == lead[..] {
                intro = &intro[lead.len()..];
                continue 'strip;
            }
        }
        return false;
    }
    true
}

fn strip_lead_in(mut sentence: &[String]) -> &[String] {
    let leads = lead_ins();
    'strip: loop {
        for lead in leads {
            if sentence.len() > lead.len() && sentence[..lead.len()] == lead[..] {
                sentence = &sentence[lead.len()..];
                continue 'strip;
            }
        }
        return sentence;
    }
}

/// Phrases as [`words`] spells them, so they compare with what it read.
fn lead_ins() -> &'static [Vec<String>] {
    static FOLDED: OnceLock<Vec<Vec<String>>> = OnceLock::new();
    FOLDED.get_or_init(|| folded(LEAD_INS))
}

fn folded(phrases: &[&[&str]]) -> Vec<Vec<String>> {
    phrases.iter().map(|p| p.iter().flat_map(|w| words(w)).collect()).collect()
}

/// What a user may put after a fact without changing it.
const TRAILERS: &[&[&str]] = &[&["now"], &["please"], &["thanks"], &["thank", "you"], &["too"], &["as", "well"], &["from", "now", "on"], &["going", "forward"]];

fn strip_trailer(sentence: &[String]) -> &[String] {
    static FOLDED: OnceLock<Vec<Vec<String>>> = OnceLock::new();
    for trail in FOLDED.get_or_init(|| folded(TRAILERS)) {
        if sentence.len() > trail.len() && sentence[sentence.len() - trail.len()..] == trail[..] {
            return &sentence[..sentence.len() - trail.len()];
        }
    }
    sentence
}

/// The claim is one or more consecutive whole sentences of the message (the
/// first may start with lead-ins, the last end with a trailer such as
/// "now"), and at least two words.
fn said(message: &str, claim: &str) -> bool {
    let claim = words(claim);
    if claim.len() < 2 {
        return false;
    }
    let sentences = sentences(message);
    for start in 0..sentences.len() {
        let mut run: Vec<String> = Vec::new();
        for sentence in &sentences[start..] {
            run.extend(sentence.iter().cloned());
            // Lead-ins stack, but only so far: a longer run cannot match.
            if run.len() > claim.len() + 16 {
                break;
            }
            let lead = run.len() - strip_lead_in(&run).len();
            let trail = run.len() - strip_trailer(&run).len();
            for (front, back) in [(0, 0), (lead, 0), (0, trail), (lead, trail)] {
                if front + back < run.len() && run[front..run.len() - back] == claim[..] {
                    return true;
                }
            }
        }
    }
    false
}

/// The message names the memory: its id, its key, or most of its words.
fn refers(message: &str, memory_id: &str, key: Option<&str>, content: &str) -> bool {
    let message_words = words(message);
    let contains = |needle: &[String]| !needle.is_empty() && message_words.windows(needle.len()).any(|w| w == needle);
    if message.contains(memory_id) || key.is_some_and(|k| contains(&words(k))) {
        return true;
    }
    let mut content: Vec<String> = words(content).into_iter().filter(|w| w.chars().count() >= 3).collect();
    content.sort();
    content.dedup();
    let present = content.iter().filter(|w| message_words.contains(w)).count();
    content.len() >= 2 && present >= 2 && present * 3 >= content.len() * 2
}

fn asks_to_forget(message: &str) -> bool {
    static ASKS: OnceLock<Vec<String>> = OnceLock::new();
    let asks = ASKS.get_or_init(|| ["forget", "delete", "remove", "erase"].iter().flat_map(|w| words(w)).collect());
    words(message).iter().any(|w| asks.contains(w))
        || ["忘记", "删除", "忘掉"].iter().any(|w| message.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_whole_sentences_of_the_users_message() {
        assert!(said("Remember that releases go out on Tuesdays.", "Releases go out on Tuesdays"));
        assert!(said("Yes, please remember that the user lives in Berlin", "the user lives in Berlin"));
        assert!(said("correction: I moved to Lisbon", "I moved to Lisbon"));
        assert!(said("correction: we use pnpm for the web app now", "we use pnpm for the web app"));
        assert!(said("Correction — remember this instead: releases go out on Thursdays at 15:00.", "releases go out on Thursdays at 15:00"));
        assert!(!said("we use pnpm for the web app, not yarn", "we use pnpm for the web app"));
        assert!(said("Remember for this project: the shop builds with pnpm", "the shop builds with pnpm"));
        assert!(!said("Remember, do not: deploy on Fridays", "deploy on Fridays"));
        assert!(!said("Never do this: deploy on Fridays", "deploy on Fridays"));
        assert!(!said("Remember what broke prod last time: deploy on Fridays", "deploy on Fridays"));
        assert!(said("Hi! We deploy from main. Tests run nightly.", "We deploy from main. Tests run nightly."));
        assert!(!said("Do not deploy on Fridays, ever.", "deploy on Fridays"));
        assert!(!said("Never store the token in git.", "store the token in git"));
        assert!(!said("Fridays are for deploys, says the bot", "Fridays"));
        assert!(!said("Remember that releases go out on Tuesdays.", "Tuesdays"));
        assert!(!said("We ship on Tuesdays and Fridays.", "We ship on Tuesdays"));
    }

    #[test]
    fn a_negating_message_grounds_nothing() {
        for message in [
            "Deploy on Fridays? No.",
            "Do not... deploy on Fridays.",
            "Avoid risky releases, e.g. deploy on Fridays.",
            "Don't do any of these:\n- deploy on Fridays\n- skip the tests",
            "Remember, we cannot: deploy on Fridays",
            "Remember, ｎｏｔ: deploy on Fridays",
            "Remember, do n\u{200b}ot: deploy on Fridays",
            "Remember, dо nоt: deploy on Fridays",
            "Please don't forget that releases go out on Tuesdays!",
            "周五不要部署。deploy on Fridays",
        ] {
            assert!(negates(message), "{message:?}");
        }
        assert!(!negates("Remember that releases go out on Tuesdays."));
        let correction = "Correction — remember this instead: releases of ledger-service go out on Thursdays at 15:00. 发布日改成周四了。";
        assert!(says(correction, "releases of ledger-service go out on Thursdays at 15:00"));
        let own = "Remember: our exports run on the reporting replica, never on the primary.";
        assert!(says(own, "our exports run on the reporting replica, never on the primary"), "the negation is the user's own claim");
        assert!(!says("Do not deploy on Fridays. Never deploy on Mondays.", "Never deploy on Mondays"), "another sentence negates");
        assert!(!said("Fri\u{200b}days!", "Fri\u{200b}days"), "one word, however it is spelled");
    }

    #[test]
    fn a_long_message_is_read_once_per_sentence_run() {
        // A 16 KiB-sentence message of one-word sentences: grounding stays a
        // bounded walk, and a claim in the middle is still found.
        let mut message = "ok. ".repeat(4096);
        message.push_str("Remember that releases go out on Tuesdays. ");
        message.push_str(&"fine. ".repeat(4096));
        assert!(says(&message, "releases go out on Tuesdays"));
        assert!(!says(&message, "releases go out on Mondays"));
    }

    #[test]
    fn a_reference_needs_most_of_the_memorys_words() {
        let content = "Releases go out on Tuesdays";
        assert!(refers("the releases on tuesdays note is wrong", "mem-1", None, content));
        assert!(!refers("what day is it", "mem-1", None, content));
        assert!(!refers("releases are fine", "mem-1", None, content));
        assert!(refers("forget release day", "mem-1", Some("release.day"), content));
        assert!(refers("drop mem-1 please", "mem-1", None, content));
    }
}
