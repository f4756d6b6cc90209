//! The secret detector: precision and recall on a corpus of real-shaped
//! secrets and look-alikes (`data/secrets/`, written by its `generate.py`),
//! every rule compiling, and the same answer every time.

use ctxkernel::secrets::{self, detect, Source};
use ctxkernel::text;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The floors the corpus must clear.
const RECALL_FLOOR: f64 = 0.97;
const PRECISION_FLOOR: f64 = 0.97;

/// (text, label) for each line of a corpus file.
fn corpus(name: &str) -> Vec<(String, String)> {
    let path = format!("{}/tests/data/secrets/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(|line| {
            let row: Value = serde_json::from_str(line).unwrap();
            (row["text"].as_str().unwrap().to_string(), row["label"].as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn the_corpus_is_caught_with_high_precision_and_recall() {
    let secrets = corpus("secrets.jsonl");
    let lookalikes = corpus("look-alikes.jsonl");
    assert!(secrets.len() >= 200 && lookalikes.len() >= 200, "{} secrets, {} look-alikes", secrets.len(), lookalikes.len());

    let misses: Vec<&(String, String)> = secrets.iter().filter(|(text, _)| detect(text).is_none()).collect();
    let false_positives: Vec<(&str, &str, &str)> =
        lookalikes.iter().filter_map(|(text, label)| detect(text).map(|f| (label.as_str(), text.as_str(), f.rule))).collect();
    let caught = secrets.len() - misses.len();
    let recall = caught as f64 / secrets.len() as f64;
    let precision = caught as f64 / (caught + false_positives.len()) as f64;

    let mut by_rule: BTreeMap<&str, usize> = BTreeMap::new();
    for (text, _) in &secrets {
        if let Some(finding) = detect(text) {
            *by_rule.entry(finding.rule).or_default() += 1;
        }
    }
    let mut report = format!(
        "{} secrets, {} look-alikes: recall {recall:.4} ({caught}/{}), precision {precision:.4} ({} false positives)\n",
        secrets.len(),
        lookalikes.len(),
        secrets.len(),
        false_positives.len()
    );
    report += &format!("findings by rule: {by_rule:?}\n");
    for (text, label) in &misses {
        report += &format!("  missed [{label}] {text:?}\n");
    }
    for (label, text, rule) in &false_positives {
        report += &format!("  false positive [{label}] by {rule}: {text:?}\n");
    }
    println!("{report}");
    assert!(recall >= RECALL_FLOOR && precision >= PRECISION_FLOOR, "{report}");
}

#[test]
fn the_probes_that_slipped_through_before_are_caught() {
    for (text, rule) in [
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "kernel-aws-secret-key"),
        ("the aws secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "kernel-aws-secret-key"),
        ("github_pat_11ABCDEFG0Qx7rT2mWz9Lk_4pHs8VdYe2NfRb6JcTq1XuAo3GiWlZ5KyMn0BvCx7DsEr9FtGu2HwIj4Ok6Pl8", "github-fine-grained-pat"),
        ("glpat-xR4nd0mT0k3nV4lu3zzZ", "gitlab-pat"),
        ("-----BEGIN PGP PRIVATE KEY BLOCK-----", "kernel-private-key-header"),
        ("eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", "kernel-jwt"),
        ("my password is hunter2-correct-horse", "kernel-password"),
        ("ghp_\u{200b}Qx7rT2mWz9Lk4pHs8VdYe2NfRb6JcTq1XuAo", "github-pat"),
        ("ｇｈｐ＿Qx7rT2mWz9Lk4pHs8VdYe2NfRb6JcTq1XuAo", "github-pat"),
        ("密码是hunter2horse", "kernel-password-zh"),
        ("pw is Tr0ub4dor&3", "kernel-password"),
    ] {
        assert_eq!(detect(text).map(|f| f.rule), Some(rule), "{text:?}");
    }
}

#[test]
fn a_key_closed_by_a_mark_is_caught_and_a_hash_after_a_word_is_not() {
    for text in [
        "my npm token is npm_h7Kq2mZx9Lp4Rt8Vw3Ny6Bc1Fd5Gj0Hs2Qa7, keep it",
        "use (npm_h7Kq2mZx9Lp4Rt8Vw3Ny6Bc1Fd5Gj0Hs2Qa7) for the registry",
        "my npm token is npm_h7Kq2mZx9Lp4Rt8V\nw3Ny6Bc1Fd5Gj0Hs2Qa7.",
        "**AIzaSyB7x2Kq9Lm4Np8Rt3Vw6Yz1Ac5Df0Gh2Jk**",
        "https://юзер:Hunter2x@example.com/repo",
        "ftp://用户:Passw0rd@ftp.example.cn",
        "postgres://пользователь:Hunter2x@db.local/app",
        "password for the веб-сервер-БД: Hunter22!",
        "Registry: https://registry.npmjs.org/some-long-package-name\nnpm_h7Kq2mZx9Lp4Rt8Vw3Ny6Bc1Fd5Gj0Hs2Qa7, keep it safe",
        "यह चाबी 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सुरक्षित रखें",
    ] {
        assert!(detect(text).is_some(), "{text:?}");
    }
    for text in [
        "Key commit: 620b07097e1a177cd9539b9fcae21250301f25f7, then 9b0526d.",
        "Token counts differ between builds (API trace: 7f3a9c2e41b84d0e9a6b5c3d2e1f0a9b)!",
        "Tokens: 4b825dc642cb6eb9a060e54bf8d69288fbee4904?",
        "The key file is src/secrets/encodings_and_wraps.rs, see there.",
        "See https://example.org/docs/getting-started/authentication, then retry.",
    ] {
        assert_eq!(detect(text), None, "{text:?}");
    }
}

#[test]
fn findings_keep_the_kinds_the_kernel_reported_before() {
    // The kind is what memory errors and consolidation's skip reasons name.
    for (text, kind) in [
        ("the deploy token is ghp_0123456789abcdefghijklmnopqrstuvwxyz", "source-host token"),
        ("remember that the db password: Tr0ub4dor&3xx", "password"),
        ("clone https://deploy:hunter2pass@git.example.org/repo.git", "password in a URL"),
        ("-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjE=", "private key"),
        ("recovery codes: 8f3k-29dj 1k2m-0ppq", "recovery codes"),
        ("cookie sessionid=3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c", "auth cookie"),
        ("use Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789", "bearer token"),
    ] {
        assert_eq!(detect(text).map(|f| f.kind), Some(kind), "{text:?}");
    }
}

#[test]
fn every_vendored_rule_compiles_or_is_skipped_for_a_reason() {
    let statuses = secrets::rule_statuses();
    let failed: Vec<_> = statuses.iter().filter(|s| s.status.as_ref().is_err_and(|e| !e.starts_with("skipped: "))).collect();
    assert!(failed.is_empty(), "rules that do not compile: {failed:#?}");
    let skipped: Vec<&str> = statuses.iter().filter(|s| s.status.is_err()).map(|s| s.rule).collect();
    // Rules scoped to file paths: a text has no path, so gitleaks itself never
    // applies them to one.
    assert_eq!(skipped, ["freemius-secret-key", "hashicorp-tf-password", "kubernetes-secret-yaml", "nuget-config-password", "pkcs12-file"]);
    let gitleaks = statuses.iter().filter(|s| s.source == Source::Gitleaks && s.rule != "gitleaks global allowlist").count();
    assert_eq!(gitleaks, 222, "every rule of gitleaks {} is accounted for", secrets::GITLEAKS_VERSION);
    assert!(statuses.iter().any(|s| s.source == Source::Kernel));
}

#[test]
fn normalization_removes_invisible_characters_and_folds_compatibility_forms() {
    assert_eq!(text::normalize("gh\u{200b}p_\u{2060}a\u{feff}b\u{00ad}c\u{202e}d"), "ghp_abcd");
    assert_eq!(text::normalize("ｇｈｐ＿ＡＢＣ１２３"), "ghp_ABC123");
    assert_eq!(text::normalize("ＳＹＳＴＥＭ：𝐩𝐚𝐬𝐬"), "SYSTEM:pass");
    assert_eq!(text::normalize("密码是"), "密码是", "CJK text is unchanged");
    assert!(matches!(text::normalize("plain ascii"), std::borrow::Cow::Borrowed(_)));
}

#[test]
fn conversation_text_holds_no_secret() {
    // chatterbot-corpus 1.3.3 (BSD-3): 13 998 distinct lines in 28 languages.
    let lines: Vec<(String, String)> = include_str!("data/conversations/chatterbot-corpus.jsonl")
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["lang"].as_str().unwrap().to_string(), v["text"].as_str().unwrap().to_string())
        })
        .collect();
    assert!(lines.len() > 13_000);
    let flagged: Vec<_> = lines.iter().filter_map(|(lang, text)| detect(text).map(|f| (lang, f.rule, text))).collect();
    assert!(flagged.is_empty(), "{} false positives: {flagged:?}", flagged.len());
    // Held out: spaCy's example sentences in 68 languages.
    let held_out: Vec<&str> = include_str!("data/conversations/spacy-examples.jsonl").lines().collect();
    assert!(held_out.len() > 400);
    let flagged: Vec<_> = held_out.iter().filter(|line| detect(line).is_some()).collect();
    assert!(flagged.is_empty(), "{} false positives: {flagged:?}", flagged.len());
}

/// Every corpus text's finding, as one line each.
fn findings(texts: &[(String, String)]) -> Vec<String> {
    texts.iter().map(|(text, _)| format!("{:?}", detect(text).map(|f| (f.rule, f.kind)))).collect()
}

#[test]
fn detection_is_deterministic() {
    let mut all = corpus("secrets.jsonl");
    all.extend(corpus("look-alikes.jsonl"));
    let first = findings(&all);
    assert_eq!(findings(&all), first, "the same on a second pass");
    let mut reversed = all.clone();
    reversed.reverse();
    let mut again = findings(&reversed);
    again.reverse();
    assert_eq!(again, first, "the same in another order");

    // And from fresh state: a new process, whose rules compile in another order.
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "print_findings_in_reverse", "--ignored", "--nocapture", "--test-threads=1"])
        .output()
        .unwrap();
    assert!(child.status.success(), "{}", String::from_utf8_lossy(&child.stderr));
    let stdout = String::from_utf8(child.stdout).unwrap();
    let mut fresh: Vec<String> = stdout.lines().filter_map(|l| l.split_once("finding\t")).map(|(_, f)| f.to_string()).collect();
    fresh.reverse();
    assert_eq!(fresh, first, "the same in a fresh process");
}

/// Run by `detection_is_deterministic` in a child process.
#[test]
#[ignore]
fn print_findings_in_reverse() {
    let mut all = corpus("secrets.jsonl");
    all.extend(corpus("look-alikes.jsonl"));
    all.reverse();
    for line in findings(&all) {
        println!("finding\t{line}");
    }
}

/// Log-like text of about `bytes` bytes: it speaks of tokens, keys and
/// passwords but holds none.
fn tool_log(bytes: usize) -> String {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = String::with_capacity(bytes + 200);
    let mut n = 0u64;
    while out.len() < bytes {
        let r = next();
        n += 1;
        let line = match r % 8 {
            0 => format!("2026-06-01T09:{:02}:{:02}Z INFO request_id={:016x} path=/api/v1/items status=200 tokens_in={} tokens_out={}", n % 60, r % 60, r >> 8, r % 4000, r % 900),
            1 => format!("2026-06-01T09:{:02}:{:02}Z WARN password reset requested for user {}; email queued", n % 60, r % 60, r % 100_000),
            2 => format!("2026-06-01T09:{:02}:{:02}Z DEBUG token bucket refill: 10/s, remaining={}", n % 60, r % 60, r % 50),
            3 => format!("2026-06-01T09:{:02}:{:02}Z DEBUG cache key=user:{}:profile hit ratio=0.{}", n % 60, r % 60, r % 10_000, r % 100),
            4 => format!("    at com.example.auth.TokenService.refresh(TokenService.java:{})", r % 400),
            5 => format!("2026-06-01T09:{:02}:{:02}Z INFO api key rotation scheduled, {} keys pending", n % 60, r % 60, r % 9),
            6 => format!("test secrets::rotation_{} ... ok ({} ms)", r % 300, r % 90),
            _ => format!("2026-06-01T09:{:02}:{:02}Z ERROR invalid credentials for user {} (401), retry in {}s", n % 60, r % 60, r % 100_000, r % 30),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn time(runs: u32, f: impl Fn()) -> Duration {
    let start = Instant::now();
    for _ in 0..runs {
        f();
    }
    start.elapsed() / runs
}

/// The timings `docs/SECURITY.md` quotes. Run alone, so the first call is
/// really the first: `cargo test --release -p ctxkernel --test secrets -- --ignored timings --nocapture`.
#[test]
#[ignore]
fn timings() {
    let memory = "Remember that the staging deploy uses the blue cluster; the api key rotation runs monthly and the token budget is 2000 per call. Ask ops before changing the password policy, and keep notes short.";
    assert!((190..=210).contains(&memory.len()), "{}", memory.len());
    let start = Instant::now();
    assert_eq!(detect(memory), None);
    let first = start.elapsed();
    let log16 = tool_log(16 << 10);
    let log1m = tool_log(1 << 20);
    assert_eq!(detect(&log16), None);
    assert_eq!(detect(&log1m), None);
    let statuses = Instant::now();
    let rules = secrets::rule_statuses().len();
    let all_rules = statuses.elapsed();
    println!("first call (200-char memory text, rules compiled on demand): {first:?}");
    println!("compiling every rule that was not yet ({rules} rules): {all_rules:?}");
    println!("200-char memory text: {:?}", time(2000, || assert!(detect(memory).is_none())));
    println!("16 KiB tool log: {:?}", time(100, || assert!(detect(&log16).is_none())));
    println!("1 MiB tool log: {:?}", time(5, || assert!(detect(&log1m).is_none())));
    let secret = format!("{}\nAuthorization: Bearer Qx7rT2mWz9Lk4pHs8VdYe2NfRb6JcTq1XuAo\n", &log16[..8 << 10]);
    println!("16 KiB tool log with a bearer token halfway: {:?}", time(100, || assert!(detect(&secret).is_some())));
}

/// A deterministic source of key bodies (xorshift), so the sets below are
/// the same on every run.
struct Keys(u64);

impl Keys {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `n` characters of `alphabet` holding, where it has them, an upper
    /// and a lower case letter and a digit, as a random key of that length does.
    fn body(&mut self, alphabet: &str, n: usize) -> String {
        let chars: Vec<char> = alphabet.chars().collect();
        loop {
            let s: String = (0..n).map(|_| chars[(self.next() % chars.len() as u64) as usize]).collect();
            let has = |f: fn(&char) -> bool| !chars.iter().any(f) || s.chars().any(|c| f(&c));
            if n < 12 || (has(char::is_ascii_uppercase) && has(char::is_ascii_lowercase) && has(char::is_ascii_digit)) {
                return s;
            }
        }
    }

    /// One real-shaped credential: a provider's prefix, length and alphabet
    /// with a random body.
    fn key(&mut self, shape: usize) -> String {
        const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        const URLSAFE: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        const HEX: &str = "0123456789abcdef";
        const B32: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        let digits = |k: &mut Keys, n: usize| k.body("0123456789", n);
        match shape % 16 {
            0 => format!("AKIA{}", self.body(B32, 16)),
            1 => format!("{}{}", ["ghp_", "gho_", "ghs_", "ghu_"][(self.next() % 4) as usize], self.body(ALNUM, 36)),
            2 => format!("github_pat_{}_{}", self.body(ALNUM, 22), self.body(ALNUM, 59)),
            3 => format!("glpat-{}", self.body(URLSAFE, 20)),
            4 => format!("xoxb-{}-{}-{}", digits(self, 12), digits(self, 13), self.body(ALNUM, 24)),
            5 => {
                let n = 24 + (self.next() % 3) as usize * 10;
                format!("sk_live_{}", self.body(ALNUM, n))
            }
            6 => format!("sk-proj-{}T3BlbkFJ{}", self.body(URLSAFE, 74), self.body(URLSAFE, 74)),
            7 => format!("sk-ant-api03-{}AA", self.body(URLSAFE, 93)),
            8 => format!("AIza{}", self.body(URLSAFE, 35)),
            9 => format!("SG.{}.{}", self.body(URLSAFE, 22), self.body(URLSAFE, 43)),
            10 => format!("npm_{}", self.body(ALNUM, 36)),
            11 => format!("pypi-AgEIcHlwaS5vcmc{}", self.body(URLSAFE, 70)),
            12 => format!("dop_v1_{}", self.body(HEX, 64)),
            13 => format!("shpat_{}", self.body(HEX, 32)),
            14 => format!("hvs.{}", self.body(URLSAFE, 92)),
            _ => format!("eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}", self.body(URLSAFE, 40), self.body(URLSAFE, 43)),
        }
    }
}

/// Sentences that hand over a credential, `{}` where it goes: written
/// against the key with no space, with spaces, in the script's own quotes,
/// colons and stops. The detector was adjusted to what these showed (a key
/// closed by a sentence mark, a key ending in `-` against kana).
const SCRIPTS_TUNED: &[(&str, &[&str])] = &[
    ("en", &["my token is {}, keep it safe", "the key ({}) expires Friday", "Here it is: {}."]),
    ("zh", &["我的密钥是{}请保存", "密钥：{}。", "用这个「{}」部署，别外传", "令牌是 {} ，记住"]),
    ("ja", &["APIキーは{}です", "トークン：{}を使ってください。", "『{}』が本番のキーです"]),
    ("ko", &["제 토큰은 {}입니다", "키: {} 저장해 주세요", "비밀키는「{}」이에요"]),
    ("ru", &["мой токен {}, сохрани", "ключ:{}не теряй", "«{}» — это ключ от прода"]),
    ("ar", &["المفتاح هو {} احفظه", "الرمز:{}،شكرا", "استخدم \u{200f}{}\u{200f} للنشر"]),
    ("hi", &["मेरी कुंजी {} है", "टोकन:{}।", "यह चाबी{}सुरक्षित रखें"]),
    ("th", &["โทเค็นคือ{}นะครับ", "คีย์: {} อย่าบอกใคร"]),
    ("he", &["המפתח שלי הוא {} תשמור", "טוקן:{}."]),
    ("el", &["το κλειδί είναι {} κράτα το", "κλειδί·{}·"]),
    ("ka", &["ჩემი გასაღებია {} შეინახე", "ტოკენი:{}"]),
    ("hy", &["իմ բանալին {} է", "թոքեն՝{}։"]),
    ("am", &["ቁልፉ {} ነው።", "ቶከን፡{}፡"]),
    ("bn", &["আমার চাবি {} রাখুন", "টোকেন:{}।"]),
    ("ta", &["என் சாவி {} சேமி", "டோக்கன்:{}"]),
    ("fa", &["کلید من {} است", "توکن:{}،"]),
    ("uk", &["мій ключ — {}; збережи", "токен:{}…"]),
    ("my", &["ကျွန်ုပ်၏သော့{}ဖြစ်သည်။", "တိုကင်: {}"]),
    ("km", &["កូនសោរបស់ខ្ញុំ{}។", "ថូខឹន៖{}"]),
    ("vi", &["khóa của tôi là {} nhé", "mã:{}."]),
    ("zh-Hant", &["我的金鑰是【{}】請保管", "權杖＝{}，別外洩"]),
    ("ja-fw", &["キー：“{}”です", "トークン（{}）を保存"]),
];

/// The same in scripts and forms nothing was adjusted to: written after the
/// adjustment above and measured as they stood (recall 0.9914: a key in
/// Markdown bold was missed, and is caught since).
const SCRIPTS_HELD_OUT: &[(&str, &[&str])] = &[
    ("bo", &["ངའི་ལྡེ་མིག་{}ཡིན།", "ལྡེ་མིག {} ཉར་ཚགས་གནང་།"]),
    ("si", &["මගේ යතුර {} වේ.", "ටෝකනය:{}"]),
    ("gu", &["મારી ચાવી {} છે", "ટોકન—{}—સાચવો"]),
    ("pa", &["ਮੇਰੀ ਕੁੰਜੀ {} ਹੈ।", "ਟੋਕਨ:{}"]),
    ("te", &["నా కీ {} దాచుకో", "టోకెన్={}"]),
    ("ml", &["എന്റെ കീ {} ആണ്", "ടോക്കൺ: `{}`"]),
    ("lo", &["ກະແຈຂອງຂ້ອຍແມ່ນ{}ເດີ", "ໂທເຄັນ:{}"]),
    ("mn", &["миний түлхүүр {}!", "токен -> {}"]),
    ("ur", &["میری کلید {} ہے۔", "ٹوکن؟ {}؟"]),
    ("yi", &["מײַן שליסל איז \"{}\"", "טאָקען: **{}**"]),
    ("sr", &["мој кључ је „{}“.", "токен = {}?"]),
    ("kk", &["менің кілтім: {}...", "токен [{}]"]),
    ("zh-mixed", &["token是{}吗？", "把{}放到.env里", "key：\n{}\n谢谢"]),
    ("ja-mixed", &["鍵は\u{3000}{}\u{3000}です", "キー→{}←コピー"]),
];
/// (script, text) for every template, each with keys of every shape.
fn in_scripts(scripts: &[(&str, &[&str])], seed: u64) -> Vec<(String, String)> {
    let mut keys = Keys(seed);
    let mut out = Vec::new();
    for (script, templates) in scripts {
        for template in *templates {
            for shape in 0..16 {
                out.push((script.to_string(), template.replacen("{}", &keys.key(shape), 1)));
            }
        }
    }
    out
}

#[test]
fn real_shaped_keys_are_caught_in_any_script() {
    // Keys written in sentences of other scripts, against the words or
    // apart, are caught as often as alone: recall at least 0.99 on each
    // half, the held-out half included. The keys themselves are caught
    // alone (the first check), so a miss here is the script's doing.
    let mut report = String::new();
    let mut failed = false;
    for (name, scripts, seed) in [("tuned", SCRIPTS_TUNED, 0x5eed_0001), ("held out", SCRIPTS_HELD_OUT, 0x5eed_0002)] {
        let texts = in_scripts(scripts, seed);
        let mut keys = Keys(seed);
        for shape in 0..16 {
            let key = keys.key(shape);
            assert!(detect(&key).is_some(), "the bare key of shape {shape} is caught: {key}");
        }
        let misses: Vec<_> = texts.iter().filter(|(_, text)| detect(text).is_none()).collect();
        let recall = 1.0 - misses.len() as f64 / texts.len() as f64;
        report += &format!("{name}: recall {recall:.4} ({} of {} in {} scripts)\n", texts.len() - misses.len(), texts.len(), scripts.len());
        for (script, text) in &misses {
            report += &format!("  missed [{script}] {text:?}\n");
        }
        failed |= recall < 0.99;
    }
    println!("{report}");
    assert!(!failed, "{report}");
}
