//! The kernel's own rules: secrets a memory text carries that gitleaks,
//! written for source code, does not look for or looks for too narrowly.
//!
//! - passwords stated in prose or assigned, in English and other languages
//!   (`my password is …`, `pw: …`, `密码是…`, `パスワードは…`), and a login
//!   given as a user name and a password (`alice / Hunter2!`): gitleaks'
//!   generic rule wants an assignment and high entropy;
//! - one-time password seeds (base32 next to `2FA`/`TOTP`, `otpauth://`);
//! - credentials in a URL (`scheme://user:pass@host`), bearer tokens, basic
//!   authorization headers, session cookies and recovery codes: no gitleaks
//!   rule outside `curl` command lines;
//! - a bare AWS secret access key next to the words `aws` or `secret`;
//! - JSON web tokens without a signature (gitleaks wants 17 characters in each
//!   part), and vendor tokens by prefix alone where gitleaks demands an exact
//!   length or entropy (`ghp_…`, `github_pat_…`, `glpat-…`, `xox?-…`, `sk-…`,
//!   `hvs.…`, `AKIA…`): a shortened or partly masked token is still a token.
//!
//! Patterns are in Rust regex syntax, run with ASCII classes on bytes.

use super::engine::{entropy, Candidate, Check, Rule, Source};

struct Own {
    id: &'static str,
    kind: &'static str,
    description: &'static str,
    pattern: &'static str,
    keywords: &'static [&'static str],
    check: Option<Check>,
}

const OWN: &[Own] = &[
    Own {
        id: "kernel-private-key-header",
        kind: "private key",
        description: "A private key's armour header, with or without its body.",
        pattern: r"(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----",
        keywords: &["-----begin"],
        check: None,
    },
    Own {
        id: "kernel-url-credentials",
        kind: "password in a URL",
        description: "A URL carrying a user name and a password.",
        pattern: r"\b[A-Za-z][A-Za-z0-9+.-]{1,30}://[^\s/?#@:]+:([^\s/?#@]+)@[A-Za-z0-9\[]",
        keywords: &["://"],
        check: Some(|c| !is_placeholder(c.secret())),
    },
    Own {
        id: "kernel-password",
        kind: "password",
        description: "A password stated or assigned: `password: …`, `my password is …`, `pw = …`.",
        pattern: concat!(
            r"(?i)(?:^|[^a-z0-9])(?:[a-z0-9]+[_.-])*(?:password|passwd|passwort|passphrase|passcode|pass|pwd|pw)",
            // "… for the staging db"
            r"(?:[ \t]+(?:for|of|on|to)(?:[ \t]+[^\s:=]{1,30}){1,3})?",
            // ": ", " = ", " is ", " was changed to ", " has been set to "
            r"(?:[ \t]*(?:=>|:=|==|[=:])|[ \t]+(?:is|was|ist|war|lautet|è|e)(?:[ \t]+now)?(?:[ \t]+(?:set|changed|reset)[ \t]+to)?[ \t]*:?|[ \t]+has[ \t]+been[ \t]+(?:set|changed|reset)[ \t]+to)",
            r#"[ \t]*["'`]?([^\s"'`,;]{6,})"#,
        ),
        keywords: &["pass", "pw"],
        check: Some(|c| is_password(c.secret())),
    },
    Own {
        id: "kernel-password-zh",
        kind: "password",
        description: "A password stated in Chinese: `密码是…`, `口令：…`.",
        // `密码是…`, `密码就是…`, `密码改为…`, `wifi密码 …`
        pattern: r"(?:密码|密碼|口令)(?:[ \t]*(?:就是|是|改为|改為|改成|为|為|:|=)|[ \t])[ \t]*([\x21-\x7E]{6,})",
        keywords: &["密码", "密碼", "口令"],
        check: Some(|c| is_password(c.secret())),
    },
    Own {
        id: "kernel-password-intl",
        kind: "password",
        description: "A password stated in another language: `パスワードは…です`, `비밀번호는 …`, `пароль: …`, `contraseña es …`.",
        // The word, a few words or particles of any script on the same line
        // (`は`, `는`, `es`, `ist`, `:`), then the value: printable ASCII up
        // to a space, the line's end or the next non-ASCII word.
        pattern: concat!(
            // Words that mean nothing but a password: `암호` (also "cipher"),
            // `κωδικός` ("code") and `parola` ("word") are left out.
            r"(?:パスワード|暗証番号|비밀번호|пароль|Пароль|ПАРОЛЬ|κωδικός πρόσβασης|Κωδικός πρόσβασης|סיסמה|סיסמא|كلمة المرور|كلمة السر|पासवर्ड|รหัสผ่าน",
            // Latin words as the rules read them (without their accents), as
            // whole words: `resenha` is a review, not a `senha`.
            r"|(?i:(?:^|[^a-z])(?:contrasena|mot de passe|senha|wachtwoord|hasło|haslo|sifre|mat khau|kata sandi|losenord|adgangskode|passord|salasana|jelszo|heslo|kennwort)))",
            // The value has a digit or a symbol, so the words between are
            // passed over (`hasło do serwera: …`, `mot de passe actuel est …`).
            r"[^\r\n]{0,32}?[ \t:=]([\x21-\x7E]*[0-9!@#$%^&*+=?~\\|][\x21-\x7E]*)(?:[^\x21-\x7E]|$)",
        ),
        keywords: &[
            "パスワード", "暗証番号", "비밀번호", "пароль", "Пароль", "ПАРОЛЬ", "κωδικός", "Κωδικός", "סיסמ", "كلمة", "पासवर्ड", "รหัสผ่าน",
            "contrasena", "mot de passe", "senha", "wachtwoord", "hasło", "haslo", "sifre", "mat khau", "kata sandi", "losenord",
            "adgangskode", "passord", "salasana", "jelszo", "heslo", "kennwort",
        ],
        check: Some(|c| c.secret().len() >= 6 && is_password(c.secret()) && !is_link(c.secret())),
    },
    Own {
        id: "kernel-login-pair",
        kind: "password",
        description: "A login given as a user name and a password: `the login is alice / Hunter2!`, `creds: bob:s3cret!`.",
        pattern: concat!(
            r"(?i)(?:^|[^a-z0-9_])(?:log[ -]?in|sign[ -]?in|credentials?|creds|user(?:name)?[ \t]*(?:and|&|/)[ \t]*password)s?",
            // "… for the router"
            r"(?:[ \t]+(?:for|of|on|to)(?:[ \t]+[^\s:=/]{1,30}){1,3}?)?",
            r"[ \t]*(?:is|are|:|=|-)?[ \t]*[\x22'`]?[A-Za-z0-9._@+-]{2,64}[ \t]*(?:/|:|,|\|)[ \t]*[\x22'`]?([^\s\x22'`,;]{6,})",
        ),
        keywords: &["login", "log-in", "log in", "signin", "sign-in", "sign in", "credential", "creds", "username", "user and password", "user/password", "user & password"],
        // A path is not a password (`the login is at /settings/login2`).
        check: Some(|c| is_password(c.secret()) && !c.secret().contains(&b'/') && !is_time(c.secret())),
    },
    Own {
        id: "kernel-otp-seed",
        kind: "one-time password seed",
        description: "A TOTP or HOTP seed: base32 next to `2FA`, `TOTP`, `authenticator`, or an `otpauth://` link's secret.",
        pattern: concat!(
            r"(?i)(?:otpauth://[a-z]otp/[^\s?]*\?(?:[^\s#]*&)?secret=([a-z2-7]{16,})",
            r"|(?:totp|hotp|2fa|mfa|otp|authenticator|two[ -]factor)[^\r\n]{0,40}?(?:secret|seed|key|setup code|code|:)[ \t]*(?:is|:|=)?[ \t]*[\x22'`]?",
            r"((?:[a-z2-7]{4}[ -]?){3,}[a-z2-7]{4,}=*))",
        ),
        keywords: &["otpauth", "totp", "hotp", "2fa", "mfa", "otp", "authenticator", "two-factor", "two factor"],
        check: Some(|c| {
            let seed: Vec<u8> = c.secret().iter().copied().filter(|b| b.is_ascii_alphanumeric()).collect();
            seed.len() >= 16 && seed.iter().any(|b| (b'2'..=b'7').contains(b)) && seed.iter().any(u8::is_ascii_alphabetic) && !is_placeholder(&seed)
        }),
    },
    Own {
        id: "kernel-bearer-token",
        kind: "bearer token",
        description: "A bearer token.",
        pattern: r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/=-]{20,})",
        keywords: &["bearer"],
        check: Some(|c| token_like(c.secret())),
    },
    Own {
        id: "kernel-basic-auth",
        kind: "password",
        description: "An HTTP basic authorization header (a user name and password, base64).",
        pattern: r"(?i)\bauthorization[ \t]*[:=][ \t]*[`'\x22]?basic[ \t]+([A-Za-z0-9+/]{8,}={0,2})",
        keywords: &["authorization"],
        check: Some(|c| !is_placeholder(c.secret())),
    },
    Own {
        id: "kernel-auth-cookie",
        kind: "auth cookie",
        description: "A session or authentication cookie.",
        pattern: r"(?i)(?:^|[^a-z0-9_])(?:session[_-]?id|session[_-]?token|sid|auth[_-]?token|connect\.sid|remember[_-]?token)[ \t]*[=:][ \t]*([A-Za-z0-9._~+/%-]{16,})",
        keywords: &["session", "sid", "token"],
        check: Some(|c| token_like(c.secret())),
    },
    Own {
        id: "kernel-recovery-codes",
        kind: "recovery codes",
        description: "Account recovery or backup codes.",
        pattern: r"(?i)\b(?:recovery|backup)[ \t]+codes?\b",
        keywords: &["recovery", "backup"],
        check: Some(recovery_codes_follow),
    },
    Own {
        id: "kernel-aws-secret-key",
        kind: "cloud access key",
        description: "A 40-character AWS secret access key in a text that speaks of AWS or secrets.",
        pattern: r"(?:^|[^A-Za-z0-9/+=])([A-Za-z0-9/+]{40,})",
        keywords: &["aws", "secret"],
        check: Some(|c| {
            let s = c.secret();
            s.len() == 40 && c.hay.get(c.secret.end) != Some(&b'=') && mixed(s) && entropy(s) > 3.5
        }),
    },
    Own {
        id: "kernel-aws-access-key-id",
        kind: "cloud access key",
        description: "An AWS access key id (AKIA…, ASIA…), other than AWS's documented examples.",
        pattern: r"\b((?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16})\b",
        keywords: &["akia", "asia", "abia", "acca", "a3t"],
        check: Some(|c| !c.secret().ends_with(b"EXAMPLE")),
    },
    Own {
        id: "kernel-jwt",
        kind: "JSON web token",
        description: "A JSON web token, signed or not.",
        pattern: r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*",
        keywords: &["eyj"],
        check: None,
    },
    Own {
        id: "kernel-source-host-token",
        kind: "source-host token",
        description: "A GitHub or GitLab token, by its prefix.",
        pattern: r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|gl(?:pat|dt|rt|ptt|ft|cbt|oas|soat|imt|agent)-[A-Za-z0-9_-]{16,})",
        keywords: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glcbt-", "gloas-", "glsoat-", "glimt-", "glagent-"],
        check: Some(|c| !is_placeholder(c.secret())),
    },
    Own {
        id: "kernel-chat-token",
        kind: "chat token",
        description: "A Slack token, by its prefix.",
        pattern: r"\bxox[abeoprs]-[A-Za-z0-9-]{10,}",
        keywords: &["xoxa-", "xoxb-", "xoxe-", "xoxo-", "xoxp-", "xoxr-", "xoxs-"],
        check: Some(|c| !is_placeholder(c.secret())),
    },
    Own {
        id: "kernel-api-key",
        kind: "API key",
        description: "An OpenAI or Anthropic API key, a Stripe secret or restricted key, or a Vault token, by its prefix, whatever follows it.",
        pattern: r"\b(?:sk-(?:ant-(?:api|admin)\d\d-|proj-|svcacct-|admin-)?([A-Za-z0-9_-]{20,})|[sr]k_(?:live|test|prod)_([A-Za-z0-9]{16,})|hv[sb]\.([A-Za-z0-9_-]{24,}))",
        keywords: &["sk-", "sk_live_", "sk_test_", "sk_prod_", "rk_live_", "rk_test_", "rk_prod_", "hvs.", "hvb."],
        check: Some(|c| mixed(c.secret())),
    },
];

pub(super) fn rules() -> impl Iterator<Item = Rule> {
    OWN.iter().map(|own| Rule {
        id: own.id,
        description: own.description,
        kind: own.kind,
        source: Source::Kernel,
        pattern: own.pattern,
        secret_group: 0,
        entropy: 0.0,
        keywords: own.keywords,
        allowlists: &[],
        check: own.check,
    })
}

/// Upper and lower case letters and a digit: random, not a word.
fn mixed(s: &[u8]) -> bool {
    s.iter().any(u8::is_ascii_uppercase) && s.iter().any(u8::is_ascii_lowercase) && s.iter().any(u8::is_ascii_digit)
}

/// A token rather than a word or a stand-in: letters and digits, not a placeholder.
fn token_like(s: &[u8]) -> bool {
    s.iter().any(u8::is_ascii_digit) && s.iter().any(u8::is_ascii_alphabetic) && !is_placeholder(s)
}

/// Text that stands in for a secret: a mask (`******`, `xxxxxx`), a template
/// (`<token>`, `${PASSWORD}`, `{{ secret }}`, `%PASS%`), or words that say so.
fn is_placeholder(s: &[u8]) -> bool {
    let lower = s.to_ascii_lowercase();
    let first = lower.first().copied().unwrap_or(b'*');
    matches!(lower.as_slice(), b"password" | b"passwd" | b"pass" | b"pwd" | b"secret" | b"token" | b"apikey" | b"api_key")
        || lower.iter().all(|&b| b == first || !b.is_ascii_alphanumeric())
        || matches!(first, b'<' | b'$' | b'{' | b'%' | b'[' | b'(')
        || ["your", "example", "placeholder", "redacted", "changeme", "change_me", "dummy", "sample", "xxxx", "****", "..."]
            .iter()
            .any(|w| lower.windows(w.len()).any(|win| win == w.as_bytes()))
}

/// A time or a date rather than a secret: `10:30:45am`, `2026-06-01`.
fn is_time(s: &[u8]) -> bool {
    let lower = s.to_ascii_lowercase();
    let bare = lower.strip_suffix(b"am").or_else(|| lower.strip_suffix(b"pm")).unwrap_or(&lower);
    bare.iter().all(|b| b.is_ascii_digit() || matches!(b, b':' | b'.' | b'/' | b'-'))
}

/// A link rather than a secret: `https://…`, `www.…`.
fn is_link(s: &[u8]) -> bool {
    s.windows(3).any(|w| w == b"://") || s.to_ascii_lowercase().starts_with(b"www.")
}

/// A value said to be a password that reads like one: not a placeholder, not
/// code (`os.environ["PW"]`, `config.password`, `getpass()`), and with a
/// digit or a symbol, so "the password is required" is not one.
fn is_password(s: &[u8]) -> bool {
    let is_ident = |part: &[u8]| !part.is_empty() && !part[0].is_ascii_digit() && part.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_');
    let code = s.contains(&b'(') || s.contains(&b'[') || (s.contains(&b'.') && s.split(|&b| b == b'.').all(is_ident));
    let strong = s.iter().any(|&b| b.is_ascii_digit() || b"!@#$%^&*+=?~/\\|".contains(&b));
    !is_placeholder(s) && !code && strong
}

/// Recovery codes (`8f3k-29dj`, with a digit) among the next words of the line.
fn recovery_codes_follow(c: &Candidate) -> bool {
    let rest = &c.hay[c.matched.end..];
    let line = rest.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let window = &line[..line.len().min(160)];
    window.split(|b| !(b.is_ascii_alphanumeric() || *b == b'-')).any(|word| {
        let mut parts = word.split(|&b| b == b'-');
        let (Some(a), Some(b), None) = (parts.next(), parts.next(), parts.next()) else { return false };
        a.len() >= 4 && b.len() >= 4 && word.iter().any(u8::is_ascii_digit) && word.iter().any(u8::is_ascii_alphabetic)
    })
}
