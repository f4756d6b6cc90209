//! Authority: what grounds a user's word. A negation vetoes what it bears on,
//! not the whole message; a retraction takes back what came before it, in
//! any language users write in; what is stored is what the user typed; an
//! actor is someone. Each class is checked over generated phrasings, and
//! honest conversation text (28 languages, and a held-out set in 68) bounds
//! the false refusals.

mod common;

use common::*;
use ctxkernel::authority::{grounds, says};
use ctxkernel::store::MemStore;
use ctxkernel::{Command, ErrorCode};
use proptest::prelude::*;
use serde_json::{json, Value};

const CLAIMS: [&str; 6] = [
    "We deploy on Fridays",
    "The staging cluster runs in Frankfurt",
    "my manager is Dana",
    "我们在周五部署",
    "金曜日にデプロイします",
    "Мы выкатываем по пятницам",
];

const RETRACTIONS: [&str; 16] = [
    "Just kidding", "jk", "lol jk", "Never mind", "Scratch that", "I take that back", "Not really", "Yeah right",
    "es broma", "je plaisante", "nur ein Scherz", "é brincadeira", "开玩笑的", "冗談です", "농담이야", "шучу",
];

#[test]
fn a_retraction_takes_back_what_came_before_it() {
    for claim in CLAIMS {
        assert!(says(&format!("{claim}."), claim), "{claim:?} alone");
        for retraction in RETRACTIONS {
            for message in [format!("{claim}. {retraction}."), format!("{claim}! {retraction} 😂"), format!("{claim}。{retraction}")] {
                let why = grounds(&message, claim).unwrap_err();
                assert!(why.contains("takes it back"), "{message:?}: {why}");
            }
        }
        assert!(!says(&format!("{claim} /s"), claim), "sarcasm marker");
        assert!(!says(&format!("{claim} 🙄"), claim), "sarcasm marker");
    }
}

#[test]
fn a_question_states_nothing() {
    for claim in CLAIMS {
        for message in [
            format!("{claim}?"), format!("{claim}？"), format!("{claim}?!"), format!("¿{claim}?"), format!("Remember that {claim}?"),
            format!("{claim}. Right?"), format!("{claim}. Is that right?"), format!("{claim}。对吧？"), format!("{claim}. Nicht wahr?"),
            format!("{claim}. Really?"), format!("{claim}. OK?"), format!("{claim}. Am I right?"),
            format!("_{claim}?_"), format!("{claim}❓"), format!("{claim}﹖"), format!("{claim}\u{37e}"), format!("{claim}?Thanks!"),
        ] {
            let why = grounds(&message, claim).unwrap_err();
            assert!(why.contains("asks"), "{message:?}: {why}");
        }
        // A request put as a question, a question elsewhere, a question mark inside a link.
        for message in [
            format!("Can you remember that {claim}?"), format!("Please can you remember that {claim}?"), format!("Could you remember that: {claim}?"),
            format!("Can you remember that\n{claim}?"), format!("Is it raining? {claim}."), format!("{claim}. Why do you ask?"),
            format!("Hi! {claim}."),
        ] {
            assert_eq!(grounds(&message, claim), Ok(()), "{message:?}");
        }
    }
    for (message, claim) in [
        ("Search with https://example.com/find?q=ledger&lang=en from now on.", "Search with https://example.com/find?q=ledger&lang=en"),
        ("Query https://api.example.com/Products?$filter=open for the list.", "Query https://api.example.com/Products?$filter=open for the list"),
        ("Remember that the login prompt reads “Forgot password?” now.", "the login prompt reads “Forgot password?”"),
    ] {
        assert_eq!(grounds(message, claim), Ok(()), "{message:?}");
    }
}

#[test]
fn a_negation_vetoes_only_what_it_bears_on() {
    // Honest: another sentence negates something else.
    for (message, claim) in [
        ("I totally agree, Melanie. It's not always easy, though.", "I totally agree, Melanie"),
        ("We use pnpm. Not yarn.", "We use pnpm"),
        ("Do not deploy on Fridays. Never deploy on Mondays.", "Never deploy on Mondays"),
        ("Our exports run on the replica, never on the primary.", "Our exports run on the replica, never on the primary"),
        ("It isn't raining. We deploy on Fridays.", "We deploy on Fridays"),
        ("我不喜欢咖啡。我们在周五部署。", "我们在周五部署"),
        ("The build failed, e.g. on Linux. We deploy on Fridays.", "We deploy on Fridays"),
        ("Please don't forget that releases go out on Tuesdays!", "releases go out on Tuesdays"),
    ] {
        assert_eq!(grounds(message, claim), Ok(()), "{message:?}");
    }
    // Hostile: the negation bears on the claim.
    for (message, claim) in [
        ("Deploy on Fridays? No.", "Deploy on Fridays"),
        ("Deploy on Fridays? No, Tuesdays.", "Deploy on Fridays"),
        ("Deploy on Fridays. Not on Fridays.", "Deploy on Fridays"),
        ("Deploy on Fridays. Actually, don't.", "Deploy on Fridays"),
        ("Do not. Deploy on Fridays.", "Deploy on Fridays"),
        ("Do not... deploy on Fridays.", "deploy on Fridays"),
        ("Never do this: deploy on Fridays", "deploy on Fridays"),
        ("Remember, do not: deploy on Fridays", "deploy on Fridays"),
        ("Don't do any of these:\n- deploy on Fridays\n- skip the tests", "skip the tests"),
        ("Avoid risky releases, e.g. deploy on Fridays.", "deploy on Fridays"),
        ("Do not deploy on Fridays, ever.", "deploy on Fridays"),
        ("周五部署？不。", "周五部署"),
        ("Remember, dо nоt: deploy on Fridays", "deploy on Fridays"),
    ] {
        assert!(grounds(message, claim).is_err(), "{message:?} grounded {claim:?}");
    }
}

#[test]
fn lead_ins_are_read_in_the_users_language() {
    for (message, claim) in [
        ("记住：我们在周五部署。", "我们在周五部署"),
        ("记住我们在周五部署", "我们在周五部署"),
        ("请记住，我们在周五部署。", "我们在周五部署"),
        ("覚えておいて：金曜日にデプロイします。", "金曜日にデプロイします"),
        ("기억해: 우리는 금요일에 배포해요", "우리는 금요일에 배포해요"),
        ("Recuerda que desplegamos los viernes.", "desplegamos los viernes"),
        ("Souviens-toi que nous déployons le vendredi.", "nous déployons le vendredi"),
        ("Merk dir: wir deployen freitags.", "wir deployen freitags"),
        ("Запомни: мы выкатываем по пятницам.", "мы выкатываем по пятницам"),
        ("Remember that releases go out on Tuesdays.", "releases go out on Tuesdays"),
    ] {
        assert_eq!(grounds(message, claim), Ok(()), "{message:?}");
    }
    // A lead-in alone, or a claim of one word, grounds nothing.
    assert!(!says("记住", "记住"));
    assert!(!says("Remember that Fridays.", "Fridays"));
}

#[test]
fn what_is_stored_is_what_the_user_typed() {
    let message = "Remember that the staging cluster runs in Frankfurt.";
    assert_eq!(grounds(message, "the staging cluster runs in Frankfurt"), Ok(()));
    assert_eq!(grounds(message, "The staging cluster runs in Frankfurt"), Ok(()), "case aside");
    for forged in [
        "the staging cluster runs in Frаnkfurt",
        "the staging cluster runs in Frank\u{200b}furt",
        "the staging cluster runs in Frankfurt\u{0}",
        "the staging cluster runs in \u{202e}Frankfurt",
        "the staging cluster runs in Frankfurt\u{feff}",
        "the ѕtaging cluster runs in Frankfurt",
    ] {
        let why = grounds(message, forged).unwrap_err();
        assert!(why.contains("U+") || why.contains("spells"), "{forged:?}: {why}");
    }
    // The user's own unusual spelling is theirs to keep.
    assert_eq!(grounds("Remember that we ship from Ｓtuttgart.", "we ship from Ｓtuttgart"), Ok(()));
    // A message whose words a direction override reorders grounds nothing.
    for message in ["\u{202e}syadirF no yolped ew\u{202c}", "Remember that \u{2066}we deploy on Fridays\u{2069}."] {
        assert!(grounds(message, "we deploy on Fridays").unwrap_err().contains("direction"), "{message:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Generated messages: filler sentences around a claim. The claim is
    /// grounded unless a retraction follows it, a bare negation sits next to
    /// it, or it is asked, whatever the filler says.
    #[test]
    fn grounding_follows_what_bears_on_the_claim(
        claim in prop::sample::select(CLAIMS.to_vec()),
        before in prop::collection::vec(prop::sample::select(vec!["It's not easy.", "I like tea.", "Thanks!", "We had a long week.", "天气不错。", "Nobody told me that."]), 0..3),
        after in prop::collection::vec(prop::sample::select(vec!["It's not easy.", "See you.", "Thanks!", "I never liked Mondays.", "明天见。"]), 0..3),
        disguise in 0usize..6,
        retraction in prop::sample::select(RETRACTIONS.to_vec()),
    ) {
        let mut message = before.concat();
        message.push_str(&format!(" Remember that {claim}"));
        if disguise != 4 {
            message.push('.');
        }
        match disguise {
            1 => message.push_str(&format!(" {retraction}.")),
            2 => message.push_str(" No."),
            3 => message = message.replace(" Remember that ", " Don't. "),
            4 => message.push('?'),
            5 => message.push_str(" Right?"),
            _ => {}
        }
        message.push(' ');
        message.push_str(&after.concat());
        let grounded = says(&message, claim);
        prop_assert_eq!(grounded, disguise == 0, "{:?}", message);
    }
}

/// Sentences of a line of text as a writer ends them (a dot ends one unless
/// it follows an initial or a short title such as `Dr`), of at least two
/// words (three Han or kana characters): what a proposer would cite; each
/// with whether it is a question.
fn sentences_of(line: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        current.push(c);
        let next_blank = chars.peek().is_none_or(|n| n.is_whitespace());
        let word = current[..current.len() - c.len_utf8()].rsplit(' ').next().unwrap_or("");
        let title = word.chars().count() <= 3 && word.chars().next().is_some_and(char::is_uppercase)
            || ["etc", "vs", "e.g", "i.e"].contains(&word.trim_start_matches(|c: char| !c.is_alphanumeric()));
        // A run of marks (`!?`) ends one sentence.
        let more = chars.peek().is_some_and(|n| "!?。！？؟፧".contains(*n));
        if !more && (matches!(c, '!' | '?' | '。' | '！' | '？' | '؟' | '፧') || c == '.' && next_blank && !title) {
            out.push(std::mem::take(&mut current));
        }
    }
    out.push(current);
    let cjk = |c: char| matches!(c, '\u{3040}'..='\u{30FF}' | '\u{3400}'..='\u{9FFF}');
    out.into_iter()
        .map(|s| {
            // A question: its closing marks hold a question mark (`?`, `?!`, `؟!`, Ethiopic `፧`), or it opens with `¿`.
            let marks: String = s.trim_end().chars().rev().take_while(|c| "!?。！？؟፧.".contains(*c)).collect();
            (s.trim().trim_end_matches(['.', '!', '?', '。', '！', '？', '؟', '፧']).trim().to_string(), marks.contains(['?', '？', '؟', '፧']) || s.trim_start().starts_with('¿'))
        })
        .filter(|(s, _)| s.split_whitespace().count() >= 2 || s.chars().filter(|c| cjk(*c)).count() >= 3)
        .collect()
}

/// How a corpus of honest lines (`{"lang", "text"}` per line) fares when
/// each sentence of each line is a claim cited from it: statements must
/// ground (at most 1% refused), questions must not. Returns the number of
/// statements and of questions.
fn honest_corpus_is_grounded(name: &str, corpus: &str) -> (usize, usize) {
    let (mut total, mut refused, mut examples) = (0, 0, Vec::new());
    let (mut questions, mut grounded_questions) = (0, Vec::new());
    for line in corpus.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let text = v["text"].as_str().unwrap();
        if text.contains("```") {
            // Code, not conversation.
            continue;
        }
        for (sentence, question) in sentences_of(text) {
            if question {
                questions += 1;
                if grounds(text, &sentence).is_ok() {
                    grounded_questions.push(format!("{}: {sentence:?} in {text:?}", v["lang"]));
                }
                continue;
            }
            total += 1;
            if let Err(why) = grounds(text, &sentence) {
                refused += 1;
                if examples.len() < 12 {
                    examples.push(format!("{}: {sentence:?} in {text:?}: {why}", v["lang"]));
                }
            }
        }
    }
    let rate = refused as f64 / total as f64;
    println!("{name}: {refused} of {total} statements refused ({:.2}%), {} of {questions} questions grounded\n{}", rate * 100.0, grounded_questions.len(), examples.join("\n"));
    assert!(grounded_questions.is_empty(), "{name}: {:?}", &grounded_questions[..grounded_questions.len().min(12)]);
    assert!(rate <= 0.01, "{name}: {refused} of {total} refused ({:.2}%):\n{}", rate * 100.0, examples.join("\n"));
    (total, questions)
}

#[test]
fn honest_conversation_is_grounded() {
    // chatterbot-corpus 1.3.3 (28 languages): each line is a user's message.
    // A sentence is honestly refused only when the line retracts it or
    // answers it with a bare negation. The scoping rules were adjusted to
    // the refusals this corpus showed (answers such as "I don't." before a
    // statement, Spanish "No puedo…"), so this is a floor against
    // regressions, not a held-out measure.
    let (statements, questions) = honest_corpus_is_grounded("chatterbot-corpus", include_str!("data/conversations/chatterbot-corpus.jsonl"));
    assert!(statements > 10_000 && questions > 1_000, "{statements}, {questions}");
}

#[test]
fn held_out_honest_text_is_grounded() {
    // spaCy's example sentences (68 languages, written by native speakers
    // for its documentation): nothing was adjusted to them.
    let (statements, questions) = honest_corpus_is_grounded("held out", include_str!("data/conversations/spacy-examples.jsonl"));
    assert!(statements > 350 && questions > 100, "{statements}, {questions}");
}

fn session_saying(text: &str) -> MemStore {
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    conv.user(text);
    call(&mut store, Command::AppendEvents, &json!({"schemaVersion": 1, "sessionId": "s", "expectedHead": {"seq": 0}, "items": conv.items, "now": NOW})).unwrap();
    store
}

fn propose_as_user(store: &mut MemStore, content: &str) -> Result<Value, ctxkernel::KernelError> {
    call(store, Command::ProposeMemory, &json!({"schemaVersion": 1, "now": NOW, "authority": {"kind": "user-explicit", "sessionId": "s"},
        "candidates": [{"scope": "project", "scopeId": "p", "category": "fact", "content": content, "confidence": 0.9, "importance": 0.5,
            "provenance": {"origin": "user"}, "evidenceRefs": [{"kind": "session", "id": "s", "seq": 1}]}]}))
}

#[test]
fn through_the_kernel_a_refusal_names_its_reason_and_changes_nothing() {
    for (message, claim, reason) in [
        ("Deploy on Fridays. Just kidding.", "Deploy on Fridays", "just kidding"),
        ("Remember that the cluster runs in Frankfurt.", "the cluster runs in Frаnkfurt", "spells"),
        ("Deploy on Fridays. No.", "Deploy on Fridays", "negates"),
        ("Deploy on Fridays?", "Deploy on Fridays", "asks"),
    ] {
        let mut store = session_saying(message);
        let before = store.entries.clone();
        let err = propose_as_user(&mut store, claim).unwrap_err();
        assert_eq!(err.code, ErrorCode::ScopeDenied, "{message:?}: {err:?}");
        assert!(err.message.contains(reason), "{message:?}: {}", err.message);
        assert_eq!(store.entries, before);
    }
    let mut store = session_saying("记住：我们在周五部署。");
    let stored = propose_as_user(&mut store, "我们在周五部署").unwrap();
    assert_eq!(stored["receipts"][0]["memory"]["state"], "active", "{stored}");
}

#[test]
fn what_a_review_found_bears_on_the_claim() {
    // Hostile: each refuses its claim.
    for (message, claim) in [
        ("Deploy on Fridays? No way.", "Deploy on Fridays"),
        ("Deploy on Fridays? Absolutely not.", "Deploy on Fridays"),
        ("Deploy on Fridays? Hmm... no.", "Deploy on Fridays"),
        ("Wir deployen freitags? Nein.", "Wir deployen freitags"),
        ("Nous déployons le vendredi ? Non.", "Nous déployons le vendredi"),
        ("Мы выкатываем по пятницам? Нет.", "Мы выкатываем по пятницам"),
        ("우리는 금요일에 배포해요? 아니요.", "우리는 금요일에 배포해요"),
        ("金曜日にデプロイします？いや、火曜日。", "金曜日にデプロイします"),
        ("Deploy on Fridays. Haha, kidding.", "Deploy on Fridays"),
        ("Deploy on Fridays. Just kiddin'.", "Deploy on Fridays"),
        ("Desplegamos los viernes. Mentira.", "Desplegamos los viernes"),
        ("我们在周五部署。算了。", "我们在周五部署"),
        ("金曜日にデプロイします。嘘だよ。", "金曜日にデプロイします"),
        ("우리는 금요일에 배포해요. 장난이에요.", "우리는 금요일에 배포해요"),
        ("Deploy on Fridays. ／s", "Deploy on Fridays"),
        ("Deploy on Fridays /S", "Deploy on Fridays"),
        ("Deploy on Fridays (/s)", "Deploy on Fridays"),
        ("Don't. Seriously. Deploy on Fridays.", "Deploy on Fridays"),
        ("Verboten:\n- deploy on Fridays", "deploy on Fridays"),
        ("Keep the batch size < 100.", "Keep the batch size > 100"),
        ("Remember that the cluster runs in Frankfurt.", "the cluster runs in 𝐅rankfurt"),
        ("Remember that the limit is 102.", "the limit is 10²"),
        ("Remember 👨\u{200d}💻: we deploy on Fridays.", "we deploy on Fri\u{200d}days"),
    ] {
        assert!(grounds(message, claim).is_err(), "{message:?} grounded {claim:?}");
    }
    // Honest: each grounds its claim.
    for (message, claim) in [
        ("Thanks, Don. We deploy on Fridays.", "We deploy on Fridays"),
        ("The cluster runs in Frankfurt. Thanks, Don!", "The cluster runs in Frankfurt"),
        ("Our team is in Berlin. We won!", "Our team is in Berlin"),
        ("周末计划：\n我们去爬山。", "我们去爬山"),
        ("非常重要：\n我们在周五部署。", "我们在周五部署"),
        ("안녕하세요, 제 정보예요:\n저는 서울에 살아요.", "저는 서울에 살아요"),
        ("Not sure about the rest, but here's what I know:\n- We deploy on Fridays", "We deploy on Fridays"),
        ("The outage was long. The outage was not serious.", "The outage was long"),
        ("他很喜欢开玩笑。我们在周五部署。", "他很喜欢开玩笑"),
        ("We deploy on Fridays. Ask JK.", "We deploy on Fridays"),
        ("I moved to Lisbon… Loving it!", "I moved to Lisbon"),
        ("Keep the batch size < 100.", "Keep the batch size < 100"),
        ("Remember 👨\u{200d}💻: we deploy on Fridays.", "we deploy on Fridays"),
    ] {
        assert_eq!(grounds(message, claim), Ok(()), "{message:?}");
    }
}
