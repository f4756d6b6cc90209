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
//! "remember that" or "记住"), of at least two words, spelled as the user
//! spelled them, and neither negated by what bears on it nor taken back
//! afterwards, nor asked (see [`grounds`]): "deploy on Fridays" is not
//! grounded by "Do not deploy on Fridays, ever.", "Deploy on Fridays. Just
//! kidding." or "We deploy on Fridays?",
//! while "I totally agree. It's not always easy." grounds its first sentence.

use crate::contracts::{check_id, AuthorityKind, MemoryRecord, Origin, Trust};
use crate::error::{ErrorCode, KernelError, Result};
use serde_json::json;
use std::sync::OnceLock;
use unicode_normalization::UnicodeNormalization;

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
            // A deletion on the user's behalf is the one grounding a host
            // cannot guess from the request: name what it takes.
            let forget = matches!(grounding, Grounding::Forget);
            let refuse = |why: &str| {
                let error = denied(act, kind, why);
                if !forget {
                    return error;
                }
                let mut detail = error.detail.clone();
                detail["missing"] = json!("the user's latest message asking to forget");
                detail["accepted"] = json!(FORGET_WORDS.iter().chain(FORGET_WORDS_CJK).collect::<Vec<_>>());
                error.with_detail(detail)
            };
            let Some(message) = message else {
                return Err(refuse("the session has no message from the user to ground it"));
            };
            // A negation outside what is grounded refuses it: "Deploy on
            // Fridays? No." and "Don't forget X" must not read as consent.
            let not_said = || "the user's latest message does not say so".to_string();
            let verdict = match grounding {
                Grounding::Said(claim) => grounds(&message.text, claim).map_err(|why| format!("{}: {why}", not_said())),
                Grounding::Refers(record) => {
                    (!negates(&message.text) && refers(&message.text, &record.memory_id, record.key.as_deref(), &record.content)).then_some(()).ok_or_else(not_said)
                }
                Grounding::Forget if negates(&message.text) => {
                    Err("the user's latest message holds a negation (\"don't forget …\" keeps it), so it does not ask to forget".to_string())
                }
                Grounding::Forget => asks_to_forget(&message.text).then_some(()).ok_or_else(|| {
                    "a deletion on the user's behalf needs the user's latest message in the session to ask for it \
                     (forget, delete, remove or erase), and it does not"
                        .to_string()
                }),
                Grounding::Never => Err(not_said()),
            };
            verdict.map_err(|why| refuse(&why))
        }
    }
}

/// Whether `message` says `claim` in the user's own words (see [`grounds`]).
pub fn says(message: &str, claim: &str) -> bool {
    grounds(message, claim).is_ok()
}

/// Whether `message` grounds `claim`, or why not, naming the word or rule.
///
/// The claim is one or more consecutive whole sentences of the message (the
/// first may start with lead-ins such as "remember that" or "记住", the last
/// end with a trailer such as "now"), of at least two words, spelled as the
/// user spelled them. A negation vetoes only what it bears on: the claim's
/// own words are what the user said ("never on the primary"); another
/// sentence vetoes it when it is a bare negation or an echo right before or
/// after it ("Do not." / "No." / "Not on Fridays."), an answer starting with
/// "no" right after it, a negating line that introduces a list the claim is
/// in ("Don't do any of these:"), or a retraction anywhere after it ("Just
/// kidding.", "冗談です", "/s").
pub fn grounds(message: &str, claim: &str) -> std::result::Result<(), String> {
    if let Some(c) = message.chars().find(|c| is_direction_override(*c)) {
        return Err(format!("the message holds a direction control (U+{:04X}) that reorders what a reader sees", c as u32));
    }
    let sentences = sentences(message);
    let Some(run) = said_at(&sentences, claim) else {
        return Err("the claim is not whole sentences of the user's latest message".into());
    };
    spelled_as_said(message, claim)?;
    // A request's question mark asks for the claim to be kept; that the
    // claim follows a lead-in is `said_at`'s to hold.
    if !sentences[run.start].requests && sentences[run.clone()].iter().any(|s| s.asks) {
        return Err("the user asks it (a question mark), and a question states nothing".into());
    }
    let claimed: Vec<&String> = sentences[run.clone()].iter().flat_map(|s| &s.words).collect();
    let bare = |s: &Sentence, also: &dyn Fn(&String) -> bool| {
        s.negation.is_some()
            && s.words.iter().all(|w| s.negation.as_ref() == Some(w) || is_negation(w) || cjk_negation(w).is_some() || fillers().contains(w) || also(w))
    };
    // Interjections ("Hmm...", "Seriously.") stand between nothing.
    let said = |s: &&Sentence| !s.words.iter().all(|w| interjections().contains(w));
    if let Some(before) = sentences[..run.start].iter().rev().find(said) {
        // "Do not." or "Never." before it forbids it; "No." or "Not at all."
        // before it answers something earlier.
        if forbids(before) && bare(before, &|w| lead_in_words().contains(w)) {
            return Err(format!("the sentence before it negates it (`{}`)", before.negation.as_deref().unwrap_or_default()));
        }
    }
    if let Some(intro) = sentences[..run.start].iter().find(|s| s.introduces && forbids(s)) {
        return Err(format!("it is listed under a negation (`{}`)", intro.negation.as_deref().unwrap_or_default()));
    }
    if let Some(retraction) = sentences[run.end..].iter().find_map(|s| s.retraction.as_ref()) {
        return Err(format!("the user takes it back (`{retraction}`)"));
    }
    if sentences[run.start..].iter().any(|s| s.sarcastic) {
        return Err("the user takes it back (a sarcasm marker)".into());
    }
    // A tag question right after it ("Right?", "Really?") doubts it.
    if let Some(next) = sentences.get(run.end).filter(|s| s.asks && is_tag_question(&s.words)) {
        return Err(format!("the user asks whether it holds (`{}?`)", next.words.join(" ")));
    }
    if let Some(after) = sentences[run.end..].iter().find(said) {
        if after.answers_no || bare(after, &|w| claimed.contains(&w)) {
            return Err(format!("the sentence after it negates it (`{}`)", after.negation.as_deref().unwrap_or(&after.words[0])));
        }
    }
    Ok(())
}

/// What a user adds to a statement to ask whether it holds: "We deploy on
/// Fridays. Right?"
const TAG_QUESTIONS: &[&str] = &[
    "right", "correct", "is that right", "is that correct", "is that true", "true", "really", "yes", "no", "ok", "okay", "isn't it",
    "am i right", "isn't that right", "aren't i right", "yeah", "yes or no", "agreed", "you agree", "do you agree", "sure", "confirm",
    "don't we", "didn't we", "aren't we", "or not", "n'est-ce pas", "non", "c'est ça", "verdad", "no es así", "oder", "nicht wahr",
    "stimmt's", "stimmt das", "né", "certo", "vero", "toch", "правда", "да", "对吧", "对吗", "是吗", "對吧", "對嗎", "是嗎", "吗", "嗎",
    "でしょう", "ですよね", "よね", "そうですか", "맞죠", "맞나요", "그렇죠",
];

fn is_tag_question(words: &[String]) -> bool {
    static FOLDED: OnceLock<Vec<Vec<String>>> = OnceLock::new();
    FOLDED.get_or_init(|| TAG_QUESTIONS.iter().map(|t| tokens(t)).collect()).iter().any(|tag| tag[..] == words[..])
}

/// Direction overrides, embeddings and isolates: a message holding one may
/// show a reader other words than it holds. (Marks such as U+200F are left:
/// right-to-left text needs them.)
fn is_direction_override(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// What is stored under user authority is what the user wrote: the claim,
/// in NFC and lower case with soft punctuation (quotes, commas, stops,
/// dashes) and runs of spaces read as one space, is a stretch of the
/// message read the same way. No compatibility folding: `𝐅rankfurt`,
/// `Ｆrankfurt` and `10²` are not `Frankfurt` and `102`; symbols count, so
/// `> 100` is not `< 100`; an invisible or control character must be where
/// the user typed it.
fn spelled_as_said(message: &str, claim: &str) -> std::result::Result<(), String> {
    fn typed(text: &str) -> String {
        const SOFT: &str = "'\"\u{2018}\u{2019}\u{201C}\u{201D}\u{00AB}\u{00BB},.;:!?()[]\u{2014}\u{2013}\u{2026}\u{3001}\u{3002}\u{FF0C}\u{FF01}\u{FF1F}\u{FF1A}\u{FF1B}";
        let mut out = String::with_capacity(text.len());
        for c in text.nfc().flat_map(char::to_lowercase) {
            let blank = c.is_whitespace() || SOFT.contains(c);
            if !blank {
                out.push(c);
            } else if !out.ends_with(' ') {
                out.push(' ');
            }
        }
        out.trim().to_string()
    }
    let (message, claim) = (typed(message), typed(claim));
    if message.contains(&claim) {
        return Ok(());
    }
    let odd = claim.chars().find(|&c| c.is_control() || crate::text::is_invisible(c) || !message.contains(c));
    Err(match odd {
        Some(c) if !c.is_alphanumeric() || c.is_control() || crate::text::is_invisible(c) => {
            format!("the claim holds `{}` (U+{:04X}) where the user's words do not", c.escape_default(), c as u32)
        }
        _ => {
            let word = claim.split(' ').find(|w| !message.split(' ').any(|m| m == *w)).unwrap_or(&claim);
            format!("the claim spells `{word}` other than the user did")
        }
    })
}

/// Words of letters and digits as a reader sees them: folded (NFKC, no
/// invisible characters), lowercased, and each reduced to its confusable
/// skeleton (UTS #39), so `nоt` with a Cyrillic `о` is `not`. (Content fence
/// keys are made of these words: a change here re-keys every stored fence.)
pub fn words(text: &str) -> Vec<String> {
    let lowered: String = crate::text::normalize(text)
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    lowered.split_whitespace().map(|w| unicode_security::skeleton(w).flat_map(char::to_lowercase).collect()).collect()
}

/// [`words`], with each Han and kana character a word of its own: Chinese
/// and Japanese put no spaces between words, so `记住我们在周五部署` is read
/// as `记 住 我 们 …` and a lead-in or a claim can be found in it.
fn tokens(text: &str) -> Vec<String> {
    // "don't" is one word, `dont`, so a name (`Don`) is not a negation.
    let joined = text.replace(['\u{2019}', '\u{2018}', '\u{02BC}'], "'").replace("n't", "nt").replace("N'T", "NT").replace("N't", "Nt");
    words(&pad_cjk(&joined))
}

fn pad_cjk(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_cjk(c) {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

fn is_cjk(c: char) -> bool {
    matches!(c, '\u{3040}'..='\u{30FF}' | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' | '\u{20000}'..='\u{3134F}')
}

/// Whether the message negates or refuses anything, in any of its words:
/// what keeps "please don't forget X" from reading as a request to forget.
fn negates(message: &str) -> bool {
    tokens(message).iter().any(|w| is_negation(w)) || cjk_negation(message).is_some()
}

const NEGATIONS: &[&str] = &[
    "not", "no", "never", "nope", "nah", "don", "dont", "doesn", "doesnt", "didn", "didnt", "isn", "isnt", "aren", "arent",
    "wasn", "wasnt", "weren", "werent", "won", "wont", "wouldn", "wouldnt", "shouldn", "shouldnt", "couldn", "couldnt",
    "cannot", "cant", "mustn", "mustnt", "t", "nothing", "nobody", "none", "nowhere", "neither", "nor", "without", "stop",
    "avoid", "forbidden", "prohibited", "refuse", "wrong", "false", "incorrect", "except",
];

/// A negating word of a grounding sentence ([`tokens`] joins contractions,
/// so the stems `don`, `won` and `t` are names and letters there). CJK
/// negations are found in the text itself (see [`cjk_negation`]): the
/// confusable skeleton reads `末` as `未`.
fn is_negation(word: &str) -> bool {
    static FOLDED: OnceLock<Vec<String>> = OnceLock::new();
    FOLDED.get_or_init(|| NEGATIONS.iter().filter(|n| !matches!(**n, "don" | "won" | "t")).flat_map(|n| words(n)).collect()).iter().any(|n| n == word)
}

/// The first CJK negation in the text as typed: `不`, `别`, `没`, … and the
/// Korean `않`/`못` (which sit inside words). Characters that mostly begin
/// other words (`非常` "very", `未来` "future", `莫斯科`, `无论`, `안녕`) are
/// left out.
fn cjk_negation(raw: &str) -> Option<String> {
    const STRICT: &[char] = &['不', '别', '別', '没', '沒', '勿', '禁', '않', '못'];
    crate::text::normalize(raw).chars().find(|c| STRICT.contains(c)).map(String::from)
}


/// Words that leave a bare negation bare: "Do not.", "Don't do this.",
/// "Actually, no.", "Not anymore.", "不是。"
fn fillers() -> &'static [String] {
    static FOLDED: OnceLock<Vec<String>> = OnceLock::new();
    FOLDED.get_or_init(|| {
        [
            "do", "does", "did", "please", "this", "that", "it", "these", "those", "ever", "again", "and", "but", "so", "i", "we", "you",
            "say", "said", "to", "actually", "anymore", "really", "at", "all", "either", "s", "is", "was", "true", "right", "correct",
            "thanks", "oh", "well", "hmm", "是", "的", "了", "对", "要", "吧", "啊",
        ]
        .iter()
        .flat_map(|w| tokens(w))
        .collect()
    })
}

/// Whether a sentence forbids what follows it: "Don't.", "Do not.",
/// "Never.", "Avoid these:", "别。" — but "I don't." answers a question.
fn forbids(s: &Sentence) -> bool {
    let has = |word: &str| s.words.iter().any(|w| w == word);
    let subject = s.words.first().is_some_and(|w| ["i", "we", "you", "he", "she", "it", "they", "我", "你", "他", "她"].contains(&w.as_str()));
    !subject && (s.words.iter().any(|w| forbidding().contains(w)) || has("do") && has("not"))
}

/// Words that say nothing by themselves: "Hmm.", "Well...", "Seriously."
fn interjections() -> &'static [String] {
    static FOLDED: OnceLock<Vec<String>> = OnceLock::new();
    FOLDED.get_or_init(|| ["hmm", "hm", "well", "oh", "uh", "um", "ah", "haha", "lol", "seriously", "really", "ok", "okay", "嗯", "哈哈"].iter().flat_map(|w| tokens(w)).collect())
}

/// Words that forbid what follows them: "Don't.", "Never.", "别。"
fn forbidding() -> &'static [String] {
    static FOLDED: OnceLock<Vec<String>> = OnceLock::new();
    FOLDED.get_or_init(|| {
        ["dont", "never", "avoid", "stop", "mustnt", "別", "别", "勿", "禁", "verboten", "interdit", "prohibido", "nunca", "jamais", "niemals"].iter().flat_map(|w| tokens(w)).collect()
    })
}

/// Whether the sentence opens with an answer that contradicts what came
/// before it: "No, Tuesdays.", "Wrong!", "不。" — the word alone or before
/// punctuation, so Spanish "No puedo…" (a statement) is not one.
fn answers_no(raw: &str) -> bool {
    const ANSWERS: &[&str] = &[
        "no way", "absolutely not", "of course not", "certainly not", "not a chance", "not at all", "no", "nope", "nah", "wrong",
        "false", "incorrect", "nein", "non", "nee", "não", "nao", "нет", "не", "不是", "不对", "不", "没有", "沒有", "いいえ", "いや", "아니요",
        "아뇨", "아니",
    ];
    let lower = crate::text::normalize(raw).trim_start().to_lowercase();
    ANSWERS.iter().any(|a| lower.strip_prefix(a).is_some_and(|rest| rest.chars().next().is_none_or(|c| !c.is_alphanumeric() && !c.is_whitespace())))
}

/// Phrases that take back what was just said, in the languages users write
/// in; each is matched as whole words (Han and kana per character).
const RETRACTIONS: &[&str] = &[
    "just kidding", "only kidding", "i'm kidding", "im kidding", "kidding", "jk", "j/k", "just joking", "i'm joking", "joking",
    "i was joking", "that was a joke", "not really", "scratch that", "never mind", "nevermind", "ignore that", "ignore this",
    "disregard that", "disregard this", "i take that back", "take that back", "i take it back", "lol no", "yeah right",
    "sarcasm", "not serious", "april fools", "kiddin", "mentira", "算了", "嘘", "嘘だよ", "장난이에요", "장난",
    "es broma", "es una broma", "era broma", "era una broma", "solo bromeaba", "bromeaba", "es coña",
    "je plaisante", "je rigole", "c'est une blague", "c'était une blague", "c'etait une blague",
    "nur ein scherz", "nur spaß", "nur spass", "war ein scherz", "kleiner scherz",
    "é brincadeira", "e brincadeira", "brincadeira", "to brincando", "tô brincando", "estou brincando",
    "sto scherzando", "stavo scherzando", "scherzo", "grapje", "ik maak een grapje", "шучу", "шутка", "я пошутил", "жартую",
    "şaka", "şaka yapıyorum", "bercanda", "cuma bercanda",
    "开玩笑", "開玩笑", "说笑", "說笑", "骗你的", "騙你的", "当我没说", "當我沒說", "冗談", "なんちゃって", "うそうそ", "嘘です", "농담", "장난이야",
];

/// Retractions that are also ordinary words ("I'm not really capable of
/// it", "a joke about scherzo"): they take something back only as a sentence
/// of their own ("Not really.", "Kidding!").
const ALONE: &[&str] = &[
    "not really", "never mind", "nevermind", "yeah right", "scratch that", "ignore that", "ignore this", "disregard that",
    "disregard this", "sarcasm", "kidding", "kiddin", "joking", "jk", "not serious", "scherzo", "brincadeira", "broma", "mentira",
    "шутка", "說笑", "说笑", "开玩笑", "開玩笑", "冗談", "算了", "嘘",
];

/// A retraction the sentence holds, as written in the list.
fn retraction_in(raw: &str, sentence: &[String]) -> Option<String> {
    static FOLDED: OnceLock<Vec<Vec<String>>> = OnceLock::new();
    let folded = FOLDED.get_or_init(|| RETRACTIONS.iter().map(|r| tokens(r)).collect());
    let hangul = |c: char| ('\u{AC00}'..='\u{D7AF}').contains(&c);
    for (phrase, words) in RETRACTIONS.iter().zip(folded) {
        let found = if phrase.chars().any(hangul) {
            // Korean attaches endings to the word (`농담이야`): the sentence
            // opens with the phrase.
            crate::text::normalize(raw).trim_start().starts_with(phrase)
        } else if ALONE.contains(phrase) {
            static AROUND: OnceLock<Vec<String>> = OnceLock::new();
            let around = AROUND.get_or_init(|| {
                ["i", "im", "m", "just", "lol", "haha", "only", "我", "是", "的", "了", "で", "す", "だ", "よ", "ね"].iter().flat_map(|w| tokens(w)).collect()
            });
            sentence.len() >= words.len()
                && sentence.windows(words.len()).any(|w| w == &words[..])
                && sentence.iter().all(|w| words.contains(w) || fillers().contains(w) || around.contains(w))
        } else {
            !words.is_empty() && sentence.windows(words.len()).any(|w| w == &words[..])
        };
        if found {
            return Some(phrase.to_string());
        }
    }
    None
}

/// Whether the text ends with a sarcasm marker (`/s`) or holds an eye-roll
/// or upside-down face: what it says is meant the other way.
fn sarcastic(raw: &str) -> bool {
    let folded = crate::text::normalize(raw).to_lowercase();
    let trimmed = folded.trim_end().trim_end_matches([')', ']', '*']);
    trimmed.ends_with("/s") && !trimmed.ends_with("//s") || raw.contains(['🙄', '🙃'])
}

/// What a user may put before a fact they want remembered: acknowledgements
/// and phrases that say "store this", in any order, in the languages users
/// write in (Han and kana read per character).
const LEAD_INS: &[&str] = &[
    "yes", "yeah", "ok", "okay", "sure", "also", "and", "so", "please", "actually", "correction", "update", "note", "important",
    "fyi", "remember that", "remember this instead", "remember this", "remember", "instead", "note that", "keep in mind that",
    "for the record", "for this project", "for this workspace", "for this repo", "for this repository", "for later",
    "i want you to remember that", "from now on", "don't forget that", "don't forget", "do not forget that", "do not forget",
    "never forget that",
    // A request put as a question: its question mark asks nothing about the claim.
    "can you remember that", "could you remember that", "would you remember that", "can you note that", "could you note that",
    "can you keep in mind that", "could you keep in mind that", "would you keep in mind that",
    // Chinese, Japanese, Korean
    "请记住", "請記住", "记住", "記住", "记得", "記得", "记一下", "記一下", "备注", "備註", "注意", "另外", "更正", "纠正", "以后",
    "覚えておいて", "覚えて", "メモ", "訂正", "기억해 줘", "기억해줘", "기억해", "참고로", "정정",
    // European languages
    "recuerda que", "recuerda", "recordá que", "ten en cuenta que", "para que conste", "corrección",
    "souviens-toi que", "souviens toi que", "rappelle-toi que", "retiens que", "retiens", "note que", "correction",
    "merk dir", "merke dir", "denk daran, dass", "denk daran dass", "denk daran", "korrektur",
    "lembre-se de que", "lembre-se que", "lembre que", "lembre", "lembra que", "correção",
    "ricorda che", "ricorda", "tieni presente che", "correzione", "onthoud dat", "onthoud", "запомни, что", "запомни что", "запомни",
    "unutma", "ingat bahwa", "ingat",
];

/// A sentence of the message as grounding reads it.
struct Sentence {
    words: Vec<String>,
    /// The first negating word it holds, if any.
    negation: Option<String>,
    /// It ends with a colon: it introduces what follows.
    introduces: bool,
    retraction: Option<String>,
    sarcastic: bool,
    /// It opens with "No," or the like (see [`answers_no`]).
    answers_no: bool,
    /// It ends with a question mark: it asks, and grounds nothing.
    asks: bool,
    /// It asks for something ("Can you remember that …?"): its question
    /// mark is a request's, not doubt about what follows.
    requests: bool,
}

/// Whether a `.` at byte `at` of `text` ends a sentence: not inside a number
/// or a name (`3.5`, `example.com`), nor after an abbreviation or an initial
/// (`e.g.`, `etc.`, `Dr.`, `J. Smith`).
fn ends_sentence(text: &str, at: usize) -> bool {
    const ABBREVIATIONS: &[&str] = &["eg", "ie", "etc", "vs", "cf", "approx", "incl", "esp", "viz", "mr", "mrs", "ms", "dr", "st", "prof", "nr", "zb", "dh", "bzw", "usw", "pex"];
    if text[at + 1..].chars().next().is_some_and(char::is_alphanumeric) {
        return false;
    }
    // The word before the dot, from the last space.
    let word = text[..at].rsplit(char::is_whitespace).next().unwrap_or_default().trim_start_matches(|c: char| !c.is_alphanumeric());
    let initial = word.chars().count() == 1 && word.chars().all(char::is_uppercase);
    let bare: String = word.chars().filter(|c| *c != '.').flat_map(char::to_lowercase).collect();
    !initial && !ABBREVIATIONS.contains(&bare.as_str())
}

/// The message's sentences. "Remember for this project: X" reads as "X": a
/// clause before a colon made only of lead-ins introduces what follows it.
fn sentences(text: &str) -> Vec<Sentence> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (at, c) in text.char_indices() {
        let end = match c {
            '.' => ends_sentence(text, at),
            // A `?` in a link's query (`/search?q=`) or before a closing
            // quote (`reads “Forgot password?”.`) ends nothing.
            '?' => !in_link(text, at) && !quoted_mid_sentence(text, at),
            '!' | ';' | '\n' | '\r' | '\u{2028}' | '\u{2029}' | '。' | '！' | '；' | '…' | '．' | '｡' => true,
            c if is_question_mark(c) => true,
            _ => false,
        };
        if end {
            pieces.push((&text[start..at], c));
            start = at + c.len_utf8();
        }
    }
    pieces.push((&text[start..], '.'));
    let question = is_question_mark;
    let mut out: Vec<Sentence> = Vec::new();
    for (raw, end) in pieces {
        let mut words = tokens(raw);
        if let Some((before, after)) = raw.split_once([':', '：']) {
            let intro = tokens(before);
            if !intro.is_empty() && only_lead_ins(&intro) {
                words = tokens(after);
            }
        }
        if words.is_empty() {
            // A question mark after a closing quote or an abbreviation's dot
            // (`…“Call me Ishmael.”?`, `the U.S.?`) asks the sentence before it.
            if question(end) {
                if let Some(last) = out.last_mut() {
                    last.asks = true;
                }
            }
            continue;
        }
        let negation = words.iter().find(|w| is_negation(w)).cloned().or_else(|| cjk_negation(raw));
        let retraction = retraction_in(raw, &words);
        let asks = question(end) || raw.trim_start().starts_with('¿');
        // Lead-ins that ask ("can you remember that"), not a question that
        // happens to open with "can you".
        let all = tokens(raw);
        let led = &all[..all.len() - strip_lead_in_all(&all).len()];
        let requests = led.windows(2).any(|w| matches!(w[0].as_str(), "can" | "could" | "would") && w[1] == "you");
        out.push(Sentence { introduces: raw.trim_end().ends_with([':', '：']), words, negation, retraction, sarcastic: sarcastic(raw), answers_no: answers_no(raw), asks, requests });
    }
    out
}

/// Question marks that end a sentence: Latin, full-width and small forms,
/// Arabic, Greek (U+037E), Ethiopic, reversed, the emoji, and the double
/// and mixed marks.
fn is_question_mark(c: char) -> bool {
    matches!(c, '?' | '？' | '﹖' | '︖' | '؟' | '\u{037E}' | '፧' | '⸮' | '❓' | '❔' | '⁇' | '⁈' | '⁉' | '‽')
}

/// Whether the `?` at byte `at` sits in a link's query: the word before it
/// holds a `/` and a character other than a space follows.
fn in_link(text: &str, at: usize) -> bool {
    let word = text[..at].rsplit(char::is_whitespace).next().unwrap_or_default();
    word.contains('/') && text[at + 1..].chars().next().is_some_and(|n| !n.is_whitespace())
}

/// Whether the `?` at byte `at` closes a quotation inside a sentence that
/// goes on: a closing quote follows it, then a lower-case word or a mark
/// (`the prompt reads “Forgot password?” now.`).
fn quoted_mid_sentence(text: &str, at: usize) -> bool {
    let rest = &text[at + 1..];
    let after = rest.trim_start_matches(['"', '\'', '\u{201D}', '\u{2019}', '\u{00BB}', '\u{300D}', '\u{300F}']);
    after.len() < rest.len() && after.trim_start_matches([' ', '\t']).chars().next().is_some_and(|c| c.is_lowercase() || matches!(c, '.' | ',' | ';' | ':'))
}

/// Whether the words are lead-ins and nothing else ("remember for this project").
fn only_lead_ins(intro: &[String]) -> bool {
    strip_lead_in_all(intro).is_empty()
}

/// The words after every lead-in at their start.
fn strip_lead_in_all(mut sentence: &[String]) -> &[String] {
    let leads = lead_ins();
    'strip: while !sentence.is_empty() {
        for lead in leads {
            if !lead.is_empty() && sentence.len() >= lead.len() && sentence[..lead.len()] == lead[..] {
                sentence = &sentence[lead.len()..];
                continue 'strip;
            }
        }
        break;
    }
    sentence
}

fn strip_lead_in(sentence: &[String]) -> &[String] {
    let rest = strip_lead_in_all(sentence);
    // A lead-in is never the whole of what was said.
    if rest.is_empty() { sentence } else { rest }
}

/// Phrases as [`tokens`] spells them, so they compare with what it read.
fn lead_ins() -> &'static [Vec<String>] {
    static FOLDED: OnceLock<Vec<Vec<String>>> = OnceLock::new();
    FOLDED.get_or_init(|| {
        let mut phrases: Vec<Vec<String>> = LEAD_INS.iter().map(|p| tokens(p)).collect();
        // Longest first, so "remember that" is stripped whole, not as "remember".
        phrases.sort_by_key(|p| std::cmp::Reverse(p.len()));
        phrases
    })
}

fn lead_in_words() -> &'static [String] {
    static WORDS: OnceLock<Vec<String>> = OnceLock::new();
    WORDS.get_or_init(|| lead_ins().iter().flatten().cloned().collect())
}

/// What a user may put after a fact without changing it.
const TRAILERS: &[&str] = &["now", "please", "thanks", "thank you", "too", "as well", "from now on", "going forward", "谢谢", "謝謝", "ありがとう"];

fn strip_trailer(sentence: &[String]) -> &[String] {
    static FOLDED: OnceLock<Vec<Vec<String>>> = OnceLock::new();
    for trail in FOLDED.get_or_init(|| TRAILERS.iter().map(|t| tokens(t)).collect()) {
        if sentence.len() > trail.len() && sentence[sentence.len() - trail.len()..] == trail[..] {
            return &sentence[..sentence.len() - trail.len()];
        }
    }
    sentence
}

/// Where the claim is one or more consecutive whole sentences of the message
/// (the first may start with lead-ins, the last end with a trailer), and at
/// least two words: the range of those sentences.
fn said_at(sentences: &[Sentence], claim: &str) -> Option<std::ops::Range<usize>> {
    let claim = tokens(claim);
    // Two Han or kana characters are one word (`周五`), and a lead-in alone
    // (`记住`, "remember that") says nothing.
    let cjk = claim.iter().all(|w| w.chars().all(is_cjk));
    if claim.len() < if cjk { 3 } else { 2 } || strip_lead_in_all(&claim).is_empty() {
        return None;
    }
    for start in 0..sentences.len() {
        let mut run: Vec<String> = Vec::new();
        for (end, sentence) in sentences.iter().enumerate().skip(start) {
            run.extend(sentence.words.iter().cloned());
            // Lead-ins stack, but only so far: a longer run cannot match.
            if run.len() > claim.len() + 16 {
                break;
            }
            let lead = run.len() - strip_lead_in(&run).len();
            let trail = run.len() - strip_trailer(&run).len();
            for (front, back) in [(0, 0), (lead, 0), (0, trail), (lead, trail)] {
                if front + back < run.len() && run[front..run.len() - back] == claim[..] {
                    return Some(start..end + 1);
                }
            }
        }
    }
    None
}

#[cfg(test)]
fn said(message: &str, claim: &str) -> bool {
    said_at(&sentences(message), claim).is_some()
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

/// The words that ask to forget, as whole words; the CJK ones anywhere in the text.
const FORGET_WORDS: &[&str] = &["forget", "delete", "remove", "erase"];
const FORGET_WORDS_CJK: &[&str] = &["忘记", "删除", "忘掉"];

fn asks_to_forget(message: &str) -> bool {
    static ASKS: OnceLock<Vec<String>> = OnceLock::new();
    let asks = ASKS.get_or_init(|| FORGET_WORDS.iter().flat_map(|w| words(w)).collect());
    words(message).iter().any(|w| asks.contains(w)) || FORGET_WORDS_CJK.iter().any(|w| message.contains(w))
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
        assert!(says("Do not deploy on Fridays. Never deploy on Mondays.", "Never deploy on Mondays"), "the other sentence negates something else");
        assert!(!says("Deploy on Mondays. Never.", "Deploy on Mondays"), "a bare negation after it");
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
