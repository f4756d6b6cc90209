//! Leaks: each test is a way a secret could reach a place it must not — a
//! summary a provider wrote, a key written against another script, split by
//! a line break or an invisible character, stated in another language, or
//! carried in an identifier — and asserts that it does not. Generated cases
//! run every real-shaped secret of the detector's corpus through each
//! disguise, so a fix for one spelling cannot pass for a fix of the class.

mod common;

use common::*;
use ctxkernel::secrets::{self, detect};
use ctxkernel::store::MemStore;
use ctxkernel::{Command, ErrorCode, KernelError};
use proptest::prelude::*;
use serde_json::{json, Value};

const TOKEN: &str = "ghp_Qx7rT2mWz9Lk4pHs8VdYe2NfRb6JcTq1XuAo";
const LATER: &str = "2026-06-01T13:00:00Z";

/// The real-shaped secrets of the detector's corpus.
fn secrets() -> Vec<String> {
    include_str!("data/secrets/secrets.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["text"].as_str().unwrap().to_string())
        .collect()
}

fn look_alikes() -> Vec<String> {
    include_str!("data/secrets/look-alikes.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["text"].as_str().unwrap().to_string())
        .collect()
}

/// Text of other scripts, written with no space around what it holds.
const SCRIPTS: [&str; 10] = ["我的密钥是", "请保存", "キーは", "です", "내 키는", "입니다", "мой ключ", "مفتاحي", "กุญแจของฉัน", "🔑"];

fn append(store: &mut MemStore, session: &str, conv: &Conv) -> Result<Value, KernelError> {
    call(store, Command::AppendEvents, &json!({"schemaVersion": 1, "sessionId": session, "expectedHead": {"seq": 0}, "items": conv.items, "now": NOW}))
}

/// What a plan of the stored session shows `sink`: its context, as JSON text.
fn seen_by(store: &mut MemStore, session: &str, sink: &str) -> String {
    let plan = call(store, Command::PlanContext, &json!({"schemaVersion": 1, "sessionId": session, "now": LATER, "sink": sink,
        "model": {"profile": "m", "window": 64_000, "reservedOutput": 1_000, "safetyMargin": 0}}))
    .unwrap();
    assert!(!plan["context"].as_array().unwrap().is_empty(), "the plan shows {sink} something");
    plan["context"].to_string()
}

fn events(store: &mut MemStore, session: &str) -> Vec<Value> {
    let read = call(store, Command::ReadEvents, &json!({"schemaVersion": 1, "sessionId": session, "limit": 1000})).unwrap();
    read["events"].as_array().unwrap().iter().filter_map(|e| e.get("item").cloned()).collect()
}

#[test]
fn a_provider_summary_that_repeats_a_secret_is_narrowed_and_no_other_sink_sees_it() {
    for said in [
        format!("The user shared their GitHub token, {TOKEN}, for the release."),
        format!("Their GitHub token is {}\n{}.", &TOKEN[..20], &TOKEN[20..]),
        format!("保存的令牌是{TOKEN}请勿外传"),
        "They said the staging password is Hunter22!x and asked to keep it.".to_string(),
    ] {
        let mut store = MemStore::default();
        let mut conv = Conv::new();
        for i in 0..20 {
            conv.user(&format!("q{i} {}", words(200)));
        }
        append(&mut store, "s", &conv).unwrap();
        let head = call(&mut store, Command::ReadEvents, &json!({"schemaVersion": 1, "sessionId": "s", "limit": 1})).unwrap()["head"]["seq"].clone();
        let waiting = call(&mut store, Command::CompactContext, &json!({"schemaVersion": 1, "sessionId": "s", "now": NOW, "strategy": "provider",
            "sink": "model:test", "model": {"profile": "m", "window": 16_000, "reservedOutput": 1_000, "safetyMargin": 0}, "force": true,
            "keepFromSeq": head, "provider": {"model": "summarizer-1", "maxTokens": 800}}))
        .unwrap();
        let before = store.entries.clone();
        let err = call(&mut store, Command::ContinueOperation, &json!({"schemaVersion": 1, "operationId": waiting["operationId"], "now": LATER,
            "response": {"outcome": "success", "text": said, "usage": {"inputTokens": 1, "outputTokens": 1}}}))
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest, "{said:?}: {err:?}");
        assert!(err.message.contains("credential") && !err.message.contains("Qx7rT2mWz9"), "{}", err.message);
        assert_eq!(store.entries, before, "a refused answer writes nothing");
        // The host gives up on the provider: the local summary takes over.
        let done = call(&mut store, Command::ContinueOperation, &json!({"schemaVersion": 1, "operationId": waiting["operationId"], "now": LATER,
            "response": {"outcome": "failed", "error": "refused"}}))
        .unwrap();
        assert_eq!(done["compaction"]["degraded"], true, "{done}");
        for sink in ["model:test", "model:other"] {
            let seen = seen_by(&mut store, "s", sink);
            assert!(!seen.contains("Qx7rT2mWz9") && !seen.contains("Hunter22"), "{said:?} reached {sink}");
        }
    }
}

#[test]
fn every_appended_text_is_screened_and_narrows_its_item() {
    let places: Vec<(&str, Box<dyn Fn(&mut Conv)>)> = vec![
        ("a user message", Box::new(|c: &mut Conv| drop(c.user(&format!("here you go {TOKEN}"))))),
        ("a tool result", Box::new(|c: &mut Conv| {
            c.call("checking", &["c1"]);
            c.result("c1", &format!("GITHUB_TOKEN={TOKEN}"), "success");
        })),
        ("tool-call arguments", Box::new(|c: &mut Conv| {
            c.push("message", "", json!({"role": "assistant", "trust": "verified", "provenance": {"origin": "model"}, "content": "calling",
                "toolCalls": [{"callId": "c9", "name": "login", "arguments": format!("{{\"token\":\"{TOKEN}\"}}")}]}));
        })),
        ("a thinking part", Box::new(|c: &mut Conv| {
            c.push("message", "", json!({"role": "assistant", "trust": "verified", "provenance": {"origin": "model"}, "content": null,
                "parts": [{"kind": "thinking", "text": format!("the user's key is {TOKEN}"), "signature": "sig"}, {"kind": "text", "text": "done"}]}));
        })),
    ];
    for (place, add) in places {
        let mut store = MemStore::default();
        let mut conv = Conv::new();
        conv.user("hello");
        add(&mut conv);
        append(&mut store, "s", &conv).unwrap_or_else(|e| panic!("{place}: {e:?}"));
        let narrowed: Vec<Value> = events(&mut store, "s").into_iter().filter(|i| i["sensitivity"] == "secret").collect();
        assert_eq!(narrowed.len(), 1, "{place}: exactly the item with the token is secret");
        assert_eq!(narrowed[0]["allowedSinks"], json!([]), "{place}: `model:*` names no sink exactly");
        let seen = seen_by(&mut store, "s", "model:test");
        assert!(seen.contains("hello"), "{place}: the rest is seen");
        assert!(!seen.contains("Qx7rT2mWz9"), "{place}: a pattern sink saw it");
    }
    // A sink the item names exactly still gets it: the host said so.
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    conv.push("message", &format!("key {TOKEN}"), json!({"role": "user", "allowedSinks": ["model:test", "model:*"]}));
    conv.user("and hello");
    append(&mut store, "s", &conv).unwrap();
    assert_eq!(events(&mut store, "s")[0]["allowedSinks"], json!(["model:test"]));
    assert!(seen_by(&mut store, "s", "model:test").contains("Qx7rT2mWz9"));
    assert!(!seen_by(&mut store, "s", "model:other").contains("Qx7rT2mWz9"));
}

#[test]
fn an_imported_transcript_is_screened_like_any_append() {
    let mut store = MemStore::default();
    let transcript = json!({"messages": [
        {"role": "user", "content": "deploy it"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "deploy", "arguments": format!("{{\"auth\": \"{TOKEN}\"}}")}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]});
    call(&mut store, Command::ImportMessages, &json!({"schemaVersion": 1, "sessionId": "s", "format": "openai-chat", "now": NOW,
        "expectedHead": {"seq": 0}, "allowedSinks": ["model:*"], "sensitivity": "internal", "transcript": transcript}))
    .unwrap();
    let secret: Vec<Value> = events(&mut store, "s").into_iter().filter(|i| i["sensitivity"] == "secret").collect();
    assert_eq!(secret.len(), 1);
    assert!(secret[0]["toolCalls"][0]["arguments"].as_str().unwrap().contains(TOKEN), "kept byte for byte, under the narrower policy");
}

#[test]
fn keys_written_against_any_script_are_found() {
    let mut missed = Vec::new();
    for secret in secrets().iter().filter(|s| detect(s).is_some()) {
        for (before, after) in SCRIPTS.iter().zip(SCRIPTS.iter().rev()) {
            let text = format!("{before}{secret}{after}");
            if detect(&text).is_none() {
                missed.push(text);
            }
        }
    }
    assert!(missed.is_empty(), "{} missed, e.g. {:?}", missed.len(), &missed[..missed.len().min(5)]);
}

#[test]
fn look_alikes_next_to_other_scripts_stay_look_alikes() {
    let plain = look_alikes().iter().filter(|t| detect(t).is_some()).count();
    let wrapped = look_alikes().iter().filter(|t| detect(&format!("我说{t}好的")).is_some()).count();
    assert!(wrapped <= plain, "{wrapped} look-alikes flagged next to Chinese, {plain} alone");
}

/// The longest run of token characters in `text`, as a byte range.
fn longest_token(text: &str) -> std::ops::Range<usize> {
    let mut best = 0..0;
    let mut start = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        let token = c.is_ascii_alphanumeric() || "_-+/=".contains(c);
        match (token, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                if i - s > best.len() {
                    best = s..i;
                }
                start = None;
            }
            _ => {}
        }
    }
    best
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A secret stays found with an invisible character anywhere in it, or
    /// its longest token wrapped onto the next line (a break, `\r\n`, U+2028
    /// or a no-break space) past its first 16 characters, written against
    /// any script.
    #[test]
    fn disguised_secrets_are_found(pick in any::<prop::sample::Index>(), at in any::<prop::sample::Index>(),
        invisible in prop::sample::select(vec!['\u{200b}', '\u{200c}', '\u{200d}', '\u{2060}', '\u{feff}', '\u{00ad}', '\u{180e}', '\u{034f}', '\u{e0041}', '\u{fe0f}', '\u{0301}']),
        wrap in prop::sample::select(vec!["\n", "\r\n", "\u{2028}", "\u{00a0}", "\u{200a}"]),
        script in prop::sample::select(SCRIPTS.to_vec())) {
        let all: Vec<String> = secrets().into_iter().filter(|s| detect(s).is_some()).collect();
        let secret = pick.get(&all);
        let cuts: Vec<usize> = secret.char_indices().map(|(i, _)| i).skip(1).collect();
        if !cuts.is_empty() {
            let cut = *at.get(&cuts);
            let hidden = format!("{}{invisible}{}", &secret[..cut], &secret[cut..]);
            prop_assert!(detect(&hidden).is_some(), "{:?}", hidden);
        }
        let token = longest_token(secret);
        if token.len() >= 24 {
            // Wrapped where a terminal would: past the first 16 characters.
            let cut = token.start + (token.len() / 2).max(16);
            let wrapped = format!("{script}{}{wrap}{}", &secret[..cut], &secret[cut..]);
            prop_assert!(detect(&wrapped).is_some(), "{:?}", wrapped);
        }
    }
}

#[test]
fn credentials_stated_in_other_languages_totp_seeds_and_login_pairs_are_found() {
    for text in [
        "サーバーのパスワードはHunter22!xです",
        "管理画面のパスワード：Tr0ub4dor&3",
        "와이파이 비밀번호는 Qwerty123!@ 입니다",
        "мой пароль: Xk9#mPq2vL",
        "Пароль от почты — Sup3rS3cret",
        "mi contraseña es Hunter22!x",
        "le mot de passe est Azerty123!",
        "a senha do banco é Brasil2024!",
        "das Passwort ist Geheim123!",
        "het wachtwoord is Welkom2024!",
        "hasło do serwera: Zaq12wsx!",
        "mật khẩu là Matkhau@2024",
        "kata sandi saya Rahasia123!",
        "my 2FA secret is JBSWY3DPEHPK3PXP",
        "TOTP seed: jbsw y3dp ehpk 3pxp",
        "authenticator setup code JBSW-Y3DP-EHPK-3PXP-KZ4Q",
        "otpauth://totp/ACME:alice@example.com?secret=JBSWY3DPEHPK3PXP&issuer=ACME",
        "the login is alice / Hunter22!",
        "login: admin/Tr0ub4dor&3",
        "creds are bob:s3cretPass!",
        "username and password: deploy / Winter2024!",
        "the login for the router is admin / JQ122l9x",
        "My Stripe key is sk_live_4eC39HqLyjWDarjtT1zdp7dc.",
        "(sk_live_4eC39HqLyjWDarjtT1zdp7dc)",
        "Use sk_live_4eC39HqLyjWDarjtT1zdp7dc, thanks",
        "Das Passwort lautet Geheim123!",
        "Mein Kennwort ist Geheim123!",
        "la password è Ciao2024!",
        "密码就是Hunter22!x",
        "wifi密码 Hunter22!x",
        "TOTP: JBSWY3DPEHPK3PXP",
        "Authenticator code JBSWY3DPEHPK3PXP",
    ] {
        assert!(detect(text).is_some(), "{text:?}");
    }
}

#[test]
fn honest_sentences_about_credentials_are_not_secrets() {
    for text in [
        "パスワードを忘れました",
        "パスワードは明日変更します",
        "비밀번호를 잊어버렸어요",
        "Я забыл пароль от почты",
        "¿Olvidaste tu contraseña?",
        "Je change mon mot de passe demain.",
        "le mot de passe est obligatoire",
        "a senha precisa ter 12 caracteres",
        "mot de passe oublié ? voir https://example.com/reset",
        "2FA is enabled for everyone on the team",
        "use an authenticator app for the TOTP codes",
        "the login page is slow today",
        "the login is at /settings/security2",
        "sign in with Google or GitHub",
        "credentials: ask the on-call engineer",
        "Login: Monday, 9am standup",
        "I totally agree, Melanie.",
        "我们在周五部署。",
        "암호화 알고리즘은 AES-256입니다",
        "암호화폐 가격: 65000$ 돌파",
        "ο κωδικός προϊόντος είναι AB-1234",
        "La parola chiave: covid-19",
        "Minha resenha: 9.5/10",
        "Login time: 10:30:45am",
        "Last login: Tue, 10:31:07 from 10.0.0.5",
    ] {
        assert!(detect(text).is_none(), "{text:?}: {:?}", detect(text));
    }
}

/// A request whose `field` holds a token is refused by name, and the store is unchanged.
fn refused(store: &mut MemStore, command: Command, request: &Value, field: &str) {
    let before = store.entries.clone();
    let err = call(store, command, request).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidRequest, "{field}: {err:?}");
    assert!(err.message.contains(field), "{field}: {}", err.message);
    assert!(!err.message.contains("Qx7rT2mWz9"), "the error does not echo the token");
    assert_eq!(store.entries, before, "{field}: nothing written");
}

fn user_session() -> MemStore {
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    conv.user("remember that we deploy on Fridays");
    append(&mut store, "s", &conv).unwrap();
    store
}

#[test]
fn identifiers_never_carry_a_secret() {
    let mut store = user_session();
    let candidate = |scope_id: &str| json!({"scope": "project", "scopeId": scope_id, "category": "fact", "content": "we deploy on Fridays",
        "confidence": 0.7, "importance": 0.5, "provenance": {"origin": "user"}, "evidenceRefs": [{"kind": "session", "id": "s", "seq": 1}]});
    for hidden in [TOKEN.to_string(), format!("{}\u{200b}{}", &TOKEN[..10], &TOKEN[10..]), format!("项目{TOKEN}")] {
        refused(&mut store, Command::ProposeMemory, &json!({"schemaVersion": 1, "now": NOW, "candidates": [candidate(&hidden)]}), "scopeId");
        let mut conv = Conv::new();
        conv.push("message", "hi", json!({"role": "user", "itemId": hidden}));
        refused(&mut store, Command::AppendEvents, &json!({"schemaVersion": 1, "sessionId": "s2", "expectedHead": {"seq": 0}, "items": conv.items, "now": NOW}), "itemId");
        refused(&mut store, Command::AppendEvents, &json!({"schemaVersion": 1, "sessionId": hidden, "expectedHead": {"seq": 0}, "items": Conv::new().items, "now": NOW}), "sessionId");
    }
    let proposed = call(&mut store, Command::ProposeMemory, &json!({"schemaVersion": 1, "now": NOW, "candidates": [candidate("p")]})).unwrap();
    let id = proposed["receipts"][0]["memory"]["memoryId"].clone();
    refused(&mut store, Command::DecideMemory, &json!({"schemaVersion": 1, "now": NOW, "memoryId": id, "action": "activate",
        "authority": {"kind": "management", "actor": TOKEN}, "scope": "project", "scopeId": "p"}), "authority.actor");
    refused(&mut store, Command::DeleteMemory, &json!({"schemaVersion": 1, "now": NOW, "requestId": TOKEN, "subject": "alice",
        "authority": {"kind": "management", "actor": "admin"}, "selector": {"memoryIds": [id]}, "scope": "project", "scopeId": "p", "fence": 1}), "requestId");
    refused(&mut store, Command::DeleteMemory, &json!({"schemaVersion": 1, "now": NOW, "requestId": "r1", "subject": format!("token {TOKEN}"),
        "authority": {"kind": "management", "actor": "admin"}, "selector": {"memoryIds": [id]}, "scope": "project", "scopeId": "p", "fence": 1}), "subject");
}

#[test]
fn an_actor_is_something_visible_and_reads_one_way() {
    let mut store = user_session();
    let proposed = call(&mut store, Command::ProposeMemory, &json!({"schemaVersion": 1, "now": NOW, "candidates": [{"scope": "project", "scopeId": "p",
        "category": "fact", "content": "we deploy on Fridays", "confidence": 0.7, "importance": 0.5, "provenance": {"origin": "user"},
        "evidenceRefs": [{"kind": "session", "id": "s", "seq": 1}]}]}))
    .unwrap();
    let id = proposed["receipts"][0]["memory"]["memoryId"].clone();
    for actor in [" ", "\u{200b}", "\u{3000}\u{feff}", "\u{2060}\t", "adm\u{202e}nim", "\u{2066}root\u{2069}"] {
        refused(&mut store, Command::DecideMemory, &json!({"schemaVersion": 1, "now": NOW, "memoryId": id, "action": "activate",
            "authority": {"kind": "management", "actor": actor}, "scope": "project", "scopeId": "p"}), "authority.actor");
    }
}

#[test]
fn secrets_under_a_common_encoding_are_found() {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    let config = format!("{{\"github\": {{\"token\": \"{TOKEN}\"}}}}");
    for text in [
        format!("config: {}", b64.encode(&config)),
        format!("env={}", url.encode(format!("DB_PASSWORD=Hunter22!x\nGITHUB_TOKEN={TOKEN}"))),
        format!("blob {}", hex(&format!("token {TOKEN}"))),
        format!("Authorization header, encoded: {}", b64.encode("password: Tr0ub4dor&3"))
    ] {
        assert!(detect(&text).is_some(), "{text:?}");
    }
    for text in [
        format!("image {}", b64.encode((0..600u32).map(|i| (i * 7919 % 251) as u8).collect::<Vec<u8>>())),
        format!("readme {}", b64.encode("This project builds a context kernel for agents.")),
        format!("digest {}", hex("plain words, nothing more")),
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".to_string(),
    ] {
        assert!(detect(&text).is_none(), "{text:?}: {:?}", detect(&text));
    }
}

#[test]
fn content_stored_as_utf16_is_read_as_its_text() {
    let text = format!("deploy key {TOKEN}\n");
    let le: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let be_bom: Vec<u8> = [0xFE, 0xFF].into_iter().chain(text.encode_utf16().flat_map(u16::to_be_bytes)).collect();
    for (name, bytes) in [("UTF-16LE", le), ("UTF-16BE with a byte-order mark", be_bom)] {
        assert!(ctxkernel::secrets::detect_bytes(&bytes).is_some(), "{name}");
        let mut store = MemStore::default();
        let put = ctxkernel::Kernel::default()
            .put_content(&mut store, &json!({"schemaVersion": 1, "mimeType": "text/plain", "sensitivity": "internal", "allowedSinks": ["model:*"], "now": NOW}).to_string(), &bytes)
            .unwrap();
        let put: Value = serde_json::from_str(&put).unwrap();
        assert_eq!(put["sensitivity"], "secret", "{name}: {put}");
    }
    let plain: Vec<u8> = "nothing to see here\n".encode_utf16().flat_map(u16::to_le_bytes).collect();
    assert!(ctxkernel::secrets::detect_bytes(&plain).is_none());
}

/// Where a reader joins a wrapped token (the detector's rule, restated):
/// past its first 16 characters, right after a prefix's separator or an
/// assignment's `=`, or after a key-like first part (a digit, `_` or `-` in
/// it, or only capitals; not a whole `name=value` setting) with 16 more
/// characters to come.
fn wrap_points(token: &str) -> Vec<usize> {
    (3..token.len())
        .filter(|&cut| {
            let (before, after) = token.split_at(cut);
            let setting = before.find('=').is_some_and(|at| before[at..].trim_start_matches('=').len() > 0);
            let keyish = before.len() >= 4 && !setting
                && (before.contains(|c: char| c.is_ascii_digit() || c == '_' || c == '-') || before.bytes().all(|b| b.is_ascii_uppercase()));
            before.len() >= 16 || (before.len() >= 3 && before.ends_with(['_', '-', '='])) || (keyish && after.len() >= 16)
        })
        .collect()
}

/// A real-shaped secret (of those the detector finds) and a point of its
/// longest token where a reader joins a wrap; None when it has no such point.
fn wrap_cut(pick: prop::sample::Index, at: prop::sample::Index) -> Option<(String, usize)> {
    let all: Vec<String> = secrets().into_iter().filter(|s| detect(s).is_some()).collect();
    let secret = pick.get(&all).clone();
    let token = longest_token(&secret);
    let points = wrap_points(&secret[token.clone()]);
    (token.len() >= 20 && !points.is_empty()).then(|| (secret, token.start + *at.get(&points)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A secret's longest token wrapped at any point a reader would join,
    /// onto a next line that may be indented or quoted as in a reply.
    #[test]
    fn wrapped_tokens_are_read_joined(pick in any::<prop::sample::Index>(), at in any::<prop::sample::Index>(),
        wrap in prop::sample::select(vec!["\n", "\r\n", "\n\n", "\n    ", "\n\t", "\n> ", "\n>> ", "\u{2028}", " \n"]),
        quoted in any::<bool>()) {
        let cut = wrap_cut(pick, at);
        prop_assume!(cut.is_some());
        let (secret, cut) = cut.unwrap();
        let lead = if quoted { "> " } else { "" };
        let wrapped = format!("{lead}{}{wrap}{}", &secret[..cut], &secret[cut..]);
        prop_assert!(detect(&wrapped).is_some(), "{:?}", wrapped);
    }
}

#[test]
fn encoded_secrets_wrapped_over_lines_or_in_utf16_are_found() {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let wrap = |encoded: &str, width: usize, sep: &str| {
        encoded.as_bytes().chunks(width).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join(sep)
    };
    let hex = |s: &[u8]| s.iter().map(|b| format!("{b:02x}")).collect::<String>();
    // Long enough that the token crosses a line: a config file, MIME-encoded.
    let config = format!("# deploy settings for the staging cluster, kept here for now\nregion = eu-west-1\nGITHUB_TOKEN={TOKEN}\n");
    let utf16: Vec<u8> = format!("$env:GITHUB_TOKEN = '{TOKEN}'").encode_utf16().flat_map(u16::to_le_bytes).collect();
    for text in [
        wrap(&b64.encode(&config), 76, "\r\n"),
        wrap(&b64.encode(&config), 64, "\n"),
        format!("> {}", wrap(&b64.encode(&config), 76, "\n> ")),
        format!("attachment:\n    {}", wrap(&b64.encode(&config), 76, "\n    ")),
        wrap(&hex(config.as_bytes()), 32, "\n"),
        format!("powershell -EncodedCommand {}", b64.encode(&utf16)),
        // An encoded line a word follows on the next line: the word is no more of it.
        format!("{}\n\nThanks", b64.encode(format!("{TOKEN}\n\n"))),
        format!("{}\nthanks", hex(format!("token {TOKEN}").as_bytes())),
        format!("{}\n--boundary42", wrap(&b64.encode(&config), 76, "\n")),
    ] {
        assert!(detect(&text).is_some(), "{text:?}");
    }
    // Wrapped encodings of honest text and of random bytes stay unflagged.
    let prose = "The planner keeps every tool call with its results and never drops the request the user waits on.\n".repeat(3);
    let noise: Vec<u8> = (0..900u32).map(|i| (i * 7919 % 251) as u8).collect();
    for text in [wrap(&b64.encode(&prose), 76, "\r\n"), wrap(&b64.encode(&noise), 76, "\n"), wrap(&hex(&noise), 32, "\n")] {
        assert!(detect(&text).is_none(), "{text:?}: {:?}", detect(&text));
    }
}

#[test]
fn honest_lines_joined_by_a_wrap_stay_honest() {
    // Consecutive lines of real conversation, as a reply quotes them or an
    // editor indents them: joining wraps must not make a secret of prose.
    let lines: Vec<String> = include_str!("data/conversations/chatterbot-corpus.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["text"].as_str().unwrap().to_string())
        .collect();
    for sep in ["\n", "\n> ", "\n    "] {
        let flagged: Vec<String> = lines.windows(2).map(|w| format!("{}{sep}{}", w[0], w[1])).filter(|t| detect(t).is_some()).collect();
        assert!(flagged.is_empty(), "{} false positives joined by {sep:?}: {:?}", flagged.len(), &flagged[..flagged.len().min(5)]);
    }
    for text in [
        "commit 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b\n> Thanks, merged.",
        "see src/billing/tax_rates_2024_v2.rs\nand the tests next to it",
        "AKIA is the prefix of an access key id\nnot a key itself",
        "well-\nknown issue, sk_live_ keys must never be logged",
        "max_tokens=4096\nfrequency_penalty=0.5",
        "frequency_penalty=0.5\nmax_tokens=4096\ntemperature=0.2\npresence_penalty=0",
        "ts=1 tokens_out=456\n3f2a9c1e-7b4d-4e8a-9f06-d2c5b1a8e7f3 GET /v1/chat",
    ] {
        assert!(detect(text).is_none(), "{text:?}: {:?}", detect(text));
    }
}

#[test]
fn combined_disguises_and_padded_bytes_are_still_read() {
    let marked: String = TOKEN.chars().enumerate().flat_map(|(i, c)| if i % 8 == 7 { vec![c, '\u{301}'] } else { vec![c] }).collect();
    let fullwidth: String = TOKEN.chars().map(|c| char::from_u32(c as u32 + 0xFEE0).unwrap()).collect();
    for text in [
        format!("{}\n{}", &marked[..24], &marked[24..]),
        format!("{}\n{}", fullwidth.chars().take(20).collect::<String>(), fullwidth.chars().skip(20).collect::<String>()),
    ] {
        assert!(detect(&text).is_some(), "{text:?}");
    }
    // UTF-8 text padded to look like UTF-16 is read as UTF-8 too.
    let mut padded = format!("GITHUB_TOKEN={TOKEN}\n").into_bytes();
    padded.extend(b"A\0".repeat(400));
    assert!(ctxkernel::secrets::detect_bytes(&padded).is_some());
    // Bytes that are neither are read for what text they hold.
    let mut latin1 = format!("Schl\u{fc}ssel: {TOKEN}").into_bytes();
    latin1.push(0xFF);
    assert!(ctxkernel::secrets::detect_bytes(&latin1).is_some());
}

#[test]
fn escaped_arguments_and_provider_errors_are_screened() {
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    conv.push("message", "calling", json!({"role": "assistant", "trust": "verified", "provenance": {"origin": "model"},
        "toolCalls": [{"callId": "c1", "name": "login", "arguments": "{\"t\":\"ghp_\\u0051x7rT2mWz9Lk4pHs8VdYe2NfRb6JcTq1XuAo\"}"}]}));
    conv.user("ok");
    append(&mut store, "s", &conv).unwrap();
    assert_eq!(events(&mut store, "s")[0]["sensitivity"], "secret");

    // A provider's error body repeating the key it refused is not echoed.
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    for i in 0..20 {
        conv.user(&format!("q{i} {}", words(200)));
    }
    append(&mut store, "s", &conv).unwrap();
    let waiting = call(&mut store, Command::CompactContext, &json!({"schemaVersion": 1, "sessionId": "s", "now": NOW, "strategy": "provider",
        "sink": "model:test", "model": {"profile": "m", "window": 16_000, "reservedOutput": 1_000, "safetyMargin": 0}, "force": true,
        "keepFromSeq": 20, "provider": {"model": "summarizer-1", "maxTokens": 800}}))
    .unwrap();
    let answer = call(&mut store, Command::ContinueOperation, &json!({"schemaVersion": 1, "operationId": waiting["operationId"], "now": LATER,
        "response": {"outcome": "unknown", "reason": format!("Incorrect API key provided: {TOKEN}")}}));
    let seen = format!("{answer:?}{:?}", store.entries);
    assert!(!seen.contains("Qx7rT2mWz9"), "the token was echoed or stored");
}

#[test]
fn a_scope_stored_before_ids_were_screened_can_still_be_forgotten() {
    // Stored as a scope id no request may name any more: a deletion and a
    // purge may still name it, so what it holds can be forgotten.
    let mut store = user_session();
    let scope_id = format!("web-{TOKEN}");
    let admin = json!({"kind": "management", "actor": "admin"});
    let receipt = call(&mut store, Command::DeleteMemory, &json!({"schemaVersion": 1, "now": NOW, "requestId": "r1", "subject": "alice",
        "authority": admin, "selector": {"memoryIds": ["mem-0"]}, "scope": "project", "scopeId": scope_id, "fence": 1}))
    .unwrap();
    assert!(receipt.get("status").is_some(), "{receipt}");
    call(&mut store, Command::PurgeMemory, &json!({"schemaVersion": 1, "now": NOW, "authority": admin, "dryRun": true, "scope": "project", "scopeId": scope_id}))
        .unwrap();
    // Everything else still refuses it.
    refused(&mut store, Command::RecallMemory, &json!({"schemaVersion": 1, "now": NOW, "query": "deploy", "sink": "model:test",
        "scopes": [{"scope": "project", "scopeId": scope_id}]}), "scopeId");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// A secret whose longest token is split between two messages, at a
    /// point a reader would join, in one append or two: the message with
    /// the second half is narrowed to `secret`.
    #[test]
    fn a_secret_split_across_two_messages_is_found(pick in any::<prop::sample::Index>(), at in any::<prop::sample::Index>(), together in any::<bool>()) {
        let cut = wrap_cut(pick, at);
        prop_assume!(cut.is_some());
        let (secret, cut) = cut.unwrap();
        let (first, second) = (&secret[..cut], &secret[cut..]);
        prop_assume!(detect(first).is_none() && detect(second).is_none());
        let mut store = MemStore::default();
        let mut conv = Conv::new();
        conv.user(&format!("here it is: {first}"));
        conv.user(second);
        if together {
            append(&mut store, "s", &conv).unwrap();
        } else {
            let mut one = Conv::new();
            one.items = conv.items[..1].to_vec();
            append(&mut store, "s", &one).unwrap();
            let mut two = Conv::new();
            two.items = conv.items[1..].to_vec();
            call(&mut store, Command::AppendEvents, &json!({"schemaVersion": 1, "sessionId": "s", "expectedHead": {"seq": 1}, "items": two.items, "now": NOW})).unwrap();
        }
        let items = events(&mut store, "s");
        prop_assert_eq!(&items[1]["sensitivity"], "secret", "{:?} then {:?}", first, second);
    }
}

#[test]
fn consecutive_honest_messages_are_not_joined_into_a_secret() {
    let lines: Vec<String> = include_str!("data/conversations/chatterbot-corpus.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["text"].as_str().unwrap().to_string())
        .take(400)
        .collect();
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    for line in &lines {
        conv.user(line);
    }
    append(&mut store, "s", &conv).unwrap();
    let narrowed = events(&mut store, "s").iter().filter(|i| i["sensitivity"] == "secret").count();
    assert_eq!(narrowed, 0);
}

#[test]
fn a_split_is_found_past_invisible_and_fullwidth_edges_and_only_within_a_session() {
    let (first, second) = TOKEN.split_at(10);
    let fullwidth: String = second.chars().map(|c| char::from_u32(c as u32 + 0xFEE0).unwrap()).collect();
    for (a, b) in [(format!("token {first}\u{200b}"), second.to_string()), (format!("token {first}  "), format!("\u{feff}{second}")), (format!("token {first}"), fullwidth)] {
        let mut store = MemStore::default();
        let mut conv = Conv::new();
        conv.user(&a);
        conv.user(&b);
        append(&mut store, "s", &conv).unwrap();
        assert_eq!(events(&mut store, "s")[1]["sensitivity"], "secret", "{a:?} then {b:?}");
    }
    // The halves in two sessions: neither is narrowed.
    let mut store = MemStore::default();
    for (session, text) in [("one", format!("token {first}")), ("two", second.to_string())] {
        let mut conv = Conv::new();
        conv.user(&text);
        append(&mut store, session, &conv).unwrap();
        assert_eq!(events(&mut store, session)[0]["sensitivity"], "internal", "{session}");
    }
}

/// Real-shaped keys whose shape alone makes them keys.
fn shaped_keys() -> Vec<String> {
    let body = |alphabet: &str, n: usize, seed: usize| -> String {
        let chars: Vec<char> = alphabet.chars().collect();
        (0..n).map(|i| chars[(i * 7 + seed * 13 + i * i * 3) % chars.len()]).collect()
    };
    const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const B32: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    (0..4)
        .flat_map(|seed| {
            [
                format!("AKIA{}", body(B32, 16, seed)),
                format!("ghp_{}", body(ALNUM, 36, seed)),
                format!("glpat-{}", body(ALNUM, 20, seed)),
                format!("sk_live_{}", body(ALNUM, 24, seed)),
                format!("npm_{}", body(ALNUM, 36, seed)),
                format!("AIza{}", body(ALNUM, 35, seed)),
                format!("xoxb-123456789012-1234567890123-{}", body(ALNUM, 24, seed)),
                format!("hvs.{}", body(ALNUM, 92, seed)),
                format!("SG.{}.{}", body(ALNUM, 22, seed), body(ALNUM, 43, seed + 1)),
                format!("eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}", body(ALNUM, 40, seed), body(ALNUM, 43, seed + 2)),
            ]
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A key cut anywhere into two short halves, neither a key, with
    /// whatever the first message said before it (a key among them): the
    /// halves read as one token across the two messages.
    #[test]
    fn a_key_cut_anywhere_between_two_messages_is_found(pick in any::<prop::sample::Index>(), at in any::<prop::sample::Index>(), lead in 0usize..5, trail in 0usize..3) {
        let keys = shaped_keys();
        let key = pick.get(&keys);
        prop_assert!(detect(key).is_some(), "{} is a key", key);
        let cut = 1 + at.index(key.len() - 1);
        let (first, second) = key.split_at(cut);
        prop_assume!(detect(first).is_none() && detect(second).is_none());
        let lead = ["", "the aws key is ", "here: ", "ghp_Qx7rT2mWz9Lk4pHs8VdYe2NfRb6JcTq1XuAo and the other one is ", "ghp_Qx7rT2mWz9Lk4pHs8VdYe2NfRb6JcTq1XuAo-"][lead];
        let trail = ["", " thanks", ", ok?"][trail];
        let before = format!("{lead}{first}");
        let after = format!("{second}{trail}");
        prop_assert!(secrets::split_kind(&before, &after).is_some(), "{:?} then {:?}", before, after);
    }
}

#[test]
fn a_key_cut_between_two_messages_is_found_past_marks_and_compatibility_letters() {
    let (first, second) = ("AKIAZ7Q2LM", "4XW3RT5Y6U");
    let math = |s: &str| -> String {
        s.chars().map(|c| match c {
            'A'..='Z' => char::from_u32(0x1D400 + (c as u32 - 'A' as u32)).unwrap(),
            '0'..='9' => char::from_u32(0x1D7CE + (c as u32 - '0' as u32)).unwrap(),
            _ => c,
        }).collect()
    };
    for (before, after) in [
        (format!("key {}\u{301}M", &first[..9]), second.to_string()),
        (format!("key {first}\u{301}"), second.to_string()),
        (format!("key {first}"), format!("\u{301}{second}")),
        (format!("key {}", math(first)), math(second)),
    ] {
        assert!(secrets::split_kind(&before, &after).is_some(), "{before:?} then {after:?}");
    }
    // A sentence that ends is no half.
    assert_eq!(secrets::split_kind("the key is AKIAZ7Q2LM.", "4XW3RT5Y6U"), None);
}

#[test]
fn no_two_consecutive_honest_lines_make_a_key() {
    // Every pair of consecutive lines of the conversation corpus, and every
    // line after itself: none is a key split in two.
    let lines: Vec<String> = [include_str!("data/conversations/chatterbot-corpus.jsonl"), include_str!("data/conversations/spacy-examples.jsonl")]
        .iter()
        .flat_map(|corpus| corpus.lines())
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["text"].as_str().unwrap().to_string())
        .collect();
    let joined: Vec<_> = lines
        .windows(2)
        .flat_map(|w| [(&w[0], &w[1]), (&w[0], &w[0])])
        .filter(|(a, b)| secrets::split_kind(a, b).is_some())
        .collect();
    assert!(joined.is_empty(), "{joined:?}");
}
