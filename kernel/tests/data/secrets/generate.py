#!/usr/bin/env python3
"""Writes the secret-detection corpus beside this file.

secrets.jsonl     texts that carry a secret: real-shaped (right prefix, length
                  and alphabet, random body), never real credentials
look-alikes.jsonl texts that only look like they might: ids, digests, prose
                  about keys and passwords, placeholders, documented examples

Each line is {"text": ..., "label": ...}; the label says which provider or
shape the line stands for. The output is the same on every run (seeded).
Run: python3 kernel/tests/data/secrets/generate.py
"""

import base64
import json
import os
import random
import string

rng = random.Random(20260601)

UPPER = string.ascii_uppercase
LOWER = string.ascii_lowercase
DIGITS = string.digits
ALNUM = UPPER + LOWER + DIGITS
HEX = "0123456789abcdef"
B32 = UPPER + "234567"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


def rand(alphabet, n):
    """n random characters with, where the alphabet has them, an upper and a
    lower case letter and a digit (as a random key of that length has)."""
    while True:
        s = "".join(rng.choice(alphabet) for _ in range(n))
        need = [c for c in (UPPER, LOWER, DIGITS) if set(c) & set(alphabet)]
        if n < 12 or all(set(s) & set(c) for c in need):
            return s


def b64url(data):
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def pick(*options):
    return rng.choice(options)


secrets = []
lookalikes = []


def secret(label, text):
    secrets.append({"text": text, "label": label})


def benign(label, text):
    lookalikes.append({"text": text, "label": label})


# ---- secrets

def contexts(value, name):
    """A value as people paste it: bare, in a sentence, assigned, in JSON or YAML."""
    return [
        value,
        f"{name}={value}",
        f'export {name}="{value}"',
        f'{{"{name.lower()}": "{value}"}}',
        f"{name.lower()}: {value}",
        f"use this one: {value} (rotate it next week)",
        f"the key for staging is {value}",
    ]


def several(label, make, name, n):
    ctx = None
    for i in range(n):
        value = make()
        ctx = contexts(value, name)
        secret(label, ctx[i % len(ctx)])


several("aws-access-key-id", lambda: pick("AKIA", "ASIA") + rand(B32, 16), "AWS_ACCESS_KEY_ID", 10)
secret("aws-secret-key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
secret("aws-secret-key", "the aws secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
for template in [
    "aws_secret_access_key = {}",
    "AWS_SECRET_ACCESS_KEY={}",
    '"SecretAccessKey": "{}"',
    "the aws secret is {}",
    "our AWS secret key: {}",
    "secret_key: {}",
    "aws creds are AKIA" + rand(B32, 16) + " / {}",
    "set the secret to {} in the deploy job",
]:
    secret("aws-secret-key", template.format(rand(B64, 40)))

for prefix in ["ghp_", "gho_", "ghs_", "ghu_", "ghr_"] * 3:
    secret("github-token", pick("{}", "GITHUB_TOKEN={}", "token: {}", "push with {} please").format(prefix + rand(ALNUM, 36)))
for _ in range(6):
    secret("github-fine-grained-pat", pick("{}", "GH_PAT={}", "my fine-grained token is {}").format("github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59)))
for _ in range(6):
    secret("gitlab-pat", pick("{}", "GITLAB_TOKEN={}", "private-token: {}", "the gitlab token is {}").format("glpat-" + rand(URLSAFE, 20)))
for _ in range(8):
    kind = pick("xoxb", "xoxp")
    digits = lambda: "".join(rng.choice(DIGITS) for _ in range(rng.randint(10, 13)))
    token = f"{kind}-{digits()}-{digits()}-" + (rand(ALNUM, 24) if kind == "xoxb" else f"{digits()}-" + rand(HEX, 32))
    secret("slack-token", pick("{}", "SLACK_BOT_TOKEN={}", "slack token: {}").format(token))
for _ in range(8):
    key = pick("sk_live_", "rk_live_", "sk_test_") + rand(ALNUM, pick(24, 34, 99))
    secret("stripe-key", pick("{}", "STRIPE_SECRET_KEY={}", "stripe.api_key = '{}'", "charge with {}").format(key))
for _ in range(8):
    if rng.random() < 0.5:
        key = "sk-proj-" + rand(URLSAFE, 74) + "T3BlbkFJ" + rand(URLSAFE, 74)
    else:
        key = "sk-" + rand(ALNUM, 20) + "T3BlbkFJ" + rand(ALNUM, 20)
    secret("openai-key", pick("{}", "OPENAI_API_KEY={}", "openai key is {}").format(key))
for _ in range(6):
    secret("anthropic-key", pick("{}", "ANTHROPIC_API_KEY={}", "claude key: {}").format("sk-ant-api03-" + rand(URLSAFE, 93) + "AA"))
for _ in range(6):
    secret("google-api-key", pick("{}", "GOOGLE_API_KEY={}", "maps key {}").format("AIza" + rand(URLSAFE, 35)))
for _ in range(4):
    secret("twilio-api-key", pick("{}", "TWILIO_API_KEY={}").format("SK" + rand(HEX, 32)))
for _ in range(4):
    secret("sendgrid-key", pick("{}", "SENDGRID_API_KEY={}").format("SG." + rand(URLSAFE, 22) + "." + rand(URLSAFE, 43)))
for _ in range(4):
    secret("npm-token", pick("{}", "//registry.npmjs.org/:_authToken={}").format("npm_" + rand(ALNUM, 36)))
for _ in range(4):
    secret("pypi-token", pick("{}", "password = {}", "TWINE_PASSWORD={}").format("pypi-AgEIcHlwaS5vcmc" + rand(URLSAFE, 70)))
for _ in range(4):
    secret("digitalocean-token", pick("{}", "DIGITALOCEAN_TOKEN={}").format(pick("dop_v1_", "doo_v1_") + rand(HEX, 64)))
for _ in range(4):
    secret("shopify-token", pick("{}", "SHOPIFY_ACCESS_TOKEN={}").format(pick("shpat_", "shpss_", "shpca_") + rand("0123456789abcdef", 32)))
for _ in range(4):
    secret("vault-token", pick("{}", "VAULT_TOKEN={}").format("hvs." + rand(URLSAFE, 92)))
for _ in range(4):
    secret("azure-ad-client-secret", pick("{}", "AZURE_CLIENT_SECRET={}").format(rand(ALNUM, 3) + rng.choice(DIGITS) + "Q~" + rand(ALNUM + "_~.-", 34)))
for _ in range(3):
    key = base64.b64encode(bytes(rng.randrange(256) for _ in range(64))).decode()
    secret("azure-storage-key", f"DefaultEndpointsProtocol=https;AccountName=acct{rng.randint(1, 99)};AccountKey={key};EndpointSuffix=core.windows.net")
for _ in range(3):
    secret("huggingface-token", pick("{}", "HF_TOKEN={}").format("hf_" + rand(LOWER + UPPER, 34)))
for _ in range(2):
    secret("databricks-token", "DATABRICKS_TOKEN=dapi" + rand(HEX, 32))
for _ in range(2):
    secret("age-secret-key", "AGE-SECRET-KEY-1" + "".join(rng.choice("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L") for _ in range(58)))
for _ in range(2):
    secret("postman-key", "PMAK-" + rand(HEX, 24) + "-" + rand(HEX, 34))
for _ in range(2):
    secret("linear-key", "LINEAR_API_KEY=lin_api_" + rand(ALNUM, 40))

# Private keys: whole blocks and bare headers.
for kind in ["RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "DSA PRIVATE KEY", "PGP PRIVATE KEY BLOCK", "PGP PRIVATE KEY BLOCK"]:
    body = base64.b64encode(bytes(rng.randrange(256) for _ in range(rng.randint(120, 400)))).decode()
    lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    secret("private-key", f"-----BEGIN {kind}-----\n{lines}\n-----END {kind}-----")
for kind in ["RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK", "EC PRIVATE KEY"]:
    secret("private-key", f"here is the deploy key: -----BEGIN {kind}----- {rand(B64, 24)}")

# JSON web tokens, signed and not.
for _ in range(8):
    header = b64url(json.dumps({"alg": pick("HS256", "RS256", "ES256"), "typ": "JWT"}).encode())
    payload = b64url(json.dumps({"sub": str(rng.randint(1, 10**9)), "name": pick("Ada", "Lin", "Wei"), "iat": rng.randint(1_600_000_000, 1_800_000_000)}).encode())
    sig = b64url(bytes(rng.randrange(256) for _ in range(32)))
    secret("jwt", pick("{}", "Authorization token {}", "jwt={}").format(f"{header}.{payload}.{sig}"))
for _ in range(4):
    header = b64url(json.dumps({"alg": "none"}, separators=(",", ":")).encode())
    payload = b64url(json.dumps({"sub": str(rng.randint(1, 999))}, separators=(",", ":")).encode())
    secret("jwt-unsigned", pick("{}", "session {}").format(f"{header}.{payload}."))
secret("jwt-unsigned", "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.")

# Passwords in URLs.
for scheme, port in [("postgres", 5432), ("postgresql", 5432), ("mysql", 3306), ("mongodb+srv", None), ("redis", 6379), ("amqp", 5672), ("https", None), ("ftp", 21), ("smtp", 587), ("mssql", 1433)]:
    user = pick("admin", "app", "deploy", "svc_" + rand(LOWER, 5))
    pw = rand(ALNUM + "!*-_", rng.randint(10, 20))
    host = pick("db.internal", "10.0.3.12", "cluster0.x1y2z.example.net", "mq.prod")
    url = f"{scheme}://{user}:{pw}@{host}" + (f":{port}" if port else "") + "/app"
    secret("url-credentials", pick("{}", "DATABASE_URL={}", "connect with {}").format(url))

# Passwords stated in prose or assigned.
for template in [
    "my password is {}",
    "The wifi password is {}",
    "password: {}",
    "the db password: {}",
    "pw is {}",
    "PASSWORD={}",
    "db_password = '{}'",
    "the admin password was changed to {}",
    "my bank password has been set to {}",
    "password for the staging db is {}",
    "root pw: {}",
    "passphrase is {}",
    "密码是{}",
    "我的密码是 {}",
    "登录密码：{}",
]:
    pw = rand(ALNUM, rng.randint(4, 8)) + pick("!", "#", "-", "@", "2", "9") + rand(LOWER + DIGITS, rng.randint(2, 6))
    secret("password", template.format(pw))
secret("password", "my password is hunter2-correct-horse")

# Generic assignments (gitleaks' generic rule).
for name in ["api_key", "apiKey", "client_secret", "SECRET_TOKEN", "auth_token", "access_token", "private_token", "app_secret", "x-api-key", "API_SECRET", "credentials", "service_key"]:
    value = rand(pick(ALNUM, HEX, URLSAFE), rng.randint(24, 48))
    secret("generic-assignment", pick('{} = "{}"', "{}: {}", "{}={}", '"{}": "{}"').format(name, value))

# Bearer and basic authorization, cookies, recovery codes.
for _ in range(5):
    secret("bearer-token", pick("Authorization: Bearer {}", "use bearer {} for the API", "curl -H 'Authorization: Bearer {}' https://api.example.net").format(rand(URLSAFE + ".", rng.randint(28, 60))))
for _ in range(3):
    cred = base64.b64encode(f"{pick('admin', 'ops', 'ci')}:{rand(ALNUM, 14)}".encode()).decode()
    secret("basic-auth", f"Authorization: Basic {cred}")
for name in ["sessionid", "connect.sid", "session_token", "auth_token"]:
    secret("auth-cookie", f"Cookie: {name}={rand(ALNUM, 32)}; theme=dark")
for _ in range(3):
    codes = " ".join(rand(LOWER + DIGITS, 4) + "-" + rand(LOWER + DIGITS, 4) for _ in range(4))
    secret("recovery-codes", pick("recovery codes: {}", "My GitHub backup codes are {}", "recovery code list {}").format(codes))

# Disguised: split by invisible characters, written in fullwidth forms.
for sep in ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200b", "\u2060"]:
    token = pick("ghp_" + rand(ALNUM, 36), "glpat-" + rand(URLSAFE, 20), "AKIA" + rand(B32, 16), "sk_live_" + rand(ALNUM, 24), "xoxb-" + rand(DIGITS, 11) + "-" + rand(DIGITS, 12) + "-" + rand(ALNUM, 24))
    at = rng.randint(2, 6)
    secret("split-token", f"token {token[:at]}{sep}{token[at:]}")


def fullwidth(s):
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s)


for token in ["ghp_" + rand(ALNUM, 36), "glpat-" + rand(URLSAFE, 20), "AKIA" + rand(B32, 16), "sk-ant-api03-" + rand(URLSAFE, 93) + "AA", "xoxb-" + rand(DIGITS, 11) + "-" + rand(DIGITS, 12) + "-" + rand(ALNUM, 24), "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59)]:
    prefix_len = token.index("_") + 1 if "_" in token[:12] else token.index("-") + 1 if "-" in token[:8] else 4
    secret("fullwidth-token", fullwidth(token[:prefix_len]) + token[prefix_len:])
secret("fullwidth-token", "ｍｙ ｐａｓｓｗｏｒｄ ｉｓ ｈｕｎｔｅｒ２－ｃｏｒｒｅｃｔ－ｈｏｒｓｅ")

# Harder shapes, written without tuning the rules to them: some are expected misses.
secret("hard", "My Gmail app password is " + " ".join(rand(LOWER, 4) for _ in range(4)))
secret("hard", "password hunter" + rand(DIGITS, 3))
secret("hard", "here's my token: " + rand(HEX, 32))
secret("hard", "HEROKU_API_KEY=" + "-".join(rand(HEX, n) for n in (8, 4, 4, 4, 12)))
secret("hard", "telegram bot token " + rand(DIGITS, 10) + ":AA" + rand(URLSAFE, 33))
secret("hard", "mailgun api key key-" + rand(HEX, 32))
secret("hard", "```\nexport DB_PASS='" + rand(ALNUM, 10) + "!'\n```")
secret("hard", "- name: DB_PASSWORD\n  value: \"" + rand(ALNUM, 16) + "\"")
secret("hard", "the login for the router is admin / " + rand(ALNUM, 6) + "9x")
secret("hard", "ssh-keygen printed SHA256:" + rand(B64, 43) + " and the private key -----BEGIN OPENSSH PRIVATE KEY-----")
secret("hard", "sentry dsn https://" + rand(HEX, 32) + "@o" + rand(DIGITS, 6) + ".ingest.sentry.io/" + rand(DIGITS, 7))
secret("hard", "Datadog: DD_API_KEY=" + rand(HEX, 32))

# ---- look-alikes

for _ in range(12):
    u = "-".join(rand(HEX, n) for n in (8, 4, 4, 4, 12))
    benign("uuid", pick("request id {}", "trace_id: {}", "user {} signed in", "{}", "job_id={}", "idempotency key {}").format(u))
for _ in range(12):
    sha = rand(HEX, 40)
    benign("git-sha", pick("commit {}", "merged {} into main", "HEAD is now at {}", "{}", "revision: {}", "reverted {}").format(sha))
for _ in range(4):
    benign("git-sha", f"fixed in {rand(HEX, 7)} and {rand(HEX, 7)}")
for _ in range(10):
    digest = rand(HEX, 64)
    benign("sha256", pick("sha256:{}", "checksum {}", "image digest sha256:{}", "{}  release.tar.gz", "content hash is {}").format(digest))
for text in ["hello world, this is fine", "the quick brown fox jumps", "meeting notes for tuesday", "please review the pull request", "deploy window is wednesday", "ordinary text, nothing else", "version two of the spec", "lunch at noon on friday"]:
    encoded = base64.b64encode(text.encode()).decode()
    benign("base64-text", pick("encoded: {}", "payload {}", "the body was {}", "{}").format(encoded))
benign("base64-image", "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")

for text in [
    "reset your password in settings",
    "password: ******",
    "password: <redacted>",
    "password = ${DB_PASSWORD}",
    "the password is required",
    "Password must be at least 12 characters long",
    "forgot password? use the reset link",
    "the password_hash column is bcrypt",
    "password reset link expires in 24 hours",
    "the password is incorrect, try again",
    "enter your password to continue",
    "passwords are rotated every 90 days",
    "PASSWORD=",
    "password: (empty)",
    "password = os.environ['DB_PASSWORD']",
    "password: config.db.password",
    "password = getpass.getpass()",
    "if password != confirm_password: raise ValueError",
    "the password field is hidden",
    "password policy: min length 12",
    "密码错误，请重试",
    "请输入密码",
    "密码必须至少包含八个字符",
    "忘记密码？点击这里重置",
    "remember that the staging password rotates monthly",
    "my password manager is 1Password",
    "the password is stored in the vault",
    "passport number is required at check-in",
    "bypass: true",
    "pw reset requested by the user",
]:
    benign("password-without-value", text)

for text in [
    "token budget is 2000",
    "TOKEN_LIMIT=4096",
    "max_tokens: 1024",
    "tokens per second: 45.2",
    "the tokenizer splits on whitespace",
    "token_count = 8192",
    "csrf token missing from the form",
    "refresh the access token every hour",
    "the context window is 200000 tokens",
    "prompt_tokens=1532 completion_tokens=211",
    "ask for a bearer token in the header",
    "Authorization: Bearer <token>",
    "Authorization: Bearer $TOKEN",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "the session expired, please sign in again",
    "session_id: 42",
    "cookie consent banner is shown once",
    "backup codes are in the settings page",
    "recovery codes can be regenerated at any time",
]:
    benign("token-talk", text)

for text in [
    "the api_key field is required",
    "set API_KEY in your environment",
    "api_key: YOUR_API_KEY",
    "api_key = os.environ['API_KEY']",
    "const apiKey = process.env.API_KEY;",
    "valueFrom: secretKeyRef: name: db-secret",
    "api_key=xxxxxxxxxxxxxxxxxxxxxxxx",
    "OPENAI_API_KEY=sk-...",
    "sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "github_pat_YOUR_TOKEN_HERE",
    "xoxb-your-bot-token-here",
    "AWS_SECRET_ACCESS_KEY=<your secret key>",
    "client_secret: \"{{ client_secret }}\"",
    "SECRET_KEY = env('SECRET_KEY')",
    "secret: true",
    "the secret sauce is more butter",
    "keyboard shortcuts: ctrl+k opens search",
    "primary_key: id",
    "foreign key constraint failed on orders.user_id",
    "public_key: see keys/id_ed25519.pub",
    "monkey patching the client in tests",
    "api_version: 2024-06-01",
    "access: read-only",
    "the key insight is that caching helps",
    "keyring backend: secretservice",
]:
    benign("key-talk", text)

for text in [
    "AKIAIOSFODNN7EXAMPLE",
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "AKIAI44QH8DHBEXAMPLE",
    "the docs use AKIAIOSFODNN7EXAMPLE as the sample key id",
    "AIzaSyabcdefghijklmnopqrstuvwxyz1234567",
]:
    benign("documented-example", text)

for text in [
    "https://example.com/path?query=1",
    "http://localhost:8080/",
    "git@github.com:org/repo.git",
    "ssh://git@git.example.org:22/team/repo.git",
    "https://user@bitbucket.org/team/repo.git",
    "postgres://localhost:5432/app",
    "redis://redis:6379/0",
    "docs live at https://docs.example.org/guide:intro",
    "postgres://user:password@localhost:5432/db",
    "mysql://root:${MYSQL_PASSWORD}@db:3306/app",
    "https://api.github.com/repos/org/repo/pulls?state=open&per_page=100",
    "amqp://guest:guest@localhost:5672/",
    "https://cdn.example.net/assets/app.3f9a8b7c.js",
    "http://[::1]:9000/health",
]:
    benign("url", text)

for _ in range(8):
    user = pick("ada", "lin.wei", "ops", "j.doe", "support", "noreply")
    benign("email", pick("{}@example.com", "contact {}@mail.example.org", "from: {}@company.io", "cc {}@lists.example.net").format(user))
for _ in range(8):
    benign("semver", pick("v{}.{}.{}", "version {}.{}.{}", "bumped to {}.{}.{}-rc.1", "requires node >= {}.{}.{}").format(rng.randint(0, 20), rng.randint(0, 40), rng.randint(0, 99)))
for _ in range(8):
    benign("css-color", pick("color: #{}", "background: #{};", "border-color: #{}", "accent #{}").format(rand(HEX, pick(3, 6, 8))))
for _ in range(8):
    benign("hex-id", pick("object {}", "span_id={}", "container {} exited", "mongo _id {}").format(rand(HEX, pick(12, 16, 24, 32))))
for text in [
    "ip 10.0.3.12 port 5432",
    "2026-06-01T09:00:00Z build started",
    "order number ORD-2024-000123",
    "ISBN 978-3-16-148410-0",
    "call +1 415 555 0134 after nine",
    "tracking number 1Z999AA10123456784",
    "the build took 3m12s on 2 cores",
    "matrix: [ubuntu-22.04, macos-14, windows-2022]",
]:
    benign("other-id", text)

for text in [
    "keep the API keys in the vault, never in the repo",
    "tokens are short-lived and scoped to one repository",
    "rotate the signing key every quarter",
    "we store secrets in a secret manager and read them at start",
    "the user prefers pnpm over npm",
    "an access token lets the app call the API on the user's behalf",
    "use a long passphrase rather than a short password",
    "password rotation happens monthly; the token bucket refills at 10/s",
    "the private key never leaves the hardware module",
    "JWTs carry claims; check the signature before trusting them",
    "the bearer of this letter is a friend",
    "the key to the office is under the mat",
    "tickets look like ABCD-1234 and sk-short",
    "the mapping is key: value, ratio = 3",
    "secret santa draw is on friday",
    "API keys should be scoped to the least privilege",
    "store the token in an httpOnly cookie",
    "the ssh key was added to the deploy user",
]:
    benign("prose", text)
for text in [
    "请把API密钥保存在保险库里",
    "令牌的有效期是一小时",
    "不要把私钥提交到仓库",
    "访问令牌只对一个仓库有效",
    "密钥每季度轮换一次",
    "部署窗口是每周三下午",
    "用户喜欢用制表符缩进",
    "密码管理器可以生成强密码",
    "这个接口需要鉴权",
    "会话过期后需要重新登录",
]:
    benign("prose-zh", text)
for text in [
    "secretKeyRef",
    "TOKEN_LIMIT=4096",
    "def rotate_secret(secret_id: str) -> None:",
    "const passwordInput = document.getElementById('password');",
    "user.password = hash_password(raw)",
    "kind: Secret",
    "getApiKey()",
    "if (token.isExpired()) { refresh(); }",
    "private static final String TOKEN_HEADER = \"X-Auth-Token\";",
    "import { KeyValueStore } from './store';",
    "let key_len = key.len();",
    "#[serde(rename = \"apiKey\")]",
    "fn verify_token(token: &str) -> bool",
    "SECRET_NAME=prod/db/credentials",
    "keyFile: /etc/ssl/private/server.key",
    "tokenizer = AutoTokenizer.from_pretrained(name)",
]:
    benign("code", text)
for text in [
    "GET /api/v1/tokens 200 12ms",
    "INFO refreshed token for user 1234",
    "WARN key rotation scheduled for 2026-07-01",
    "DEBUG cache key=user:42:profile hit",
    "ERROR invalid api key provided (401)",
    "auth: login succeeded for ada@example.com",
    "POST /login 302 password=<hidden>",
    "token refresh failed: upstream timeout after 30s",
    "INFO secret rotation complete: 3 secrets updated",
    "key=orders partition=3 offset=118273",
]:
    benign("log", text)

# Harder look-alikes, written without tuning the rules to them.
for text in [
    "secret santa list: " + base64.b64encode(b"Secret santa list for 2026 is").decode(),
    "the aws docs example secret is in the guide, not here",
    "the default rabbitmq login is guest/guest",
    "api_key_id = 7c0b2a6e",
    "secret_version: 3",
    "the token is valid for 3600 seconds",
    "key fingerprint SHA256:" + rand(B64, 43),
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + rand(B64, 43) + " ada@laptop",
    "Authorization header format: Bearer <access_token>",
    "export PATH=$HOME/.cargo/bin:$PATH",
    "cache_key = sha1(url + etag)",
    "session_id = request.cookies.get('sessionid')",
]:
    benign("hard", text)

here = os.path.dirname(os.path.abspath(__file__))
for name, rows in [("secrets.jsonl", secrets), ("look-alikes.jsonl", lookalikes)]:
    with open(os.path.join(here, name), "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=True) + "\n")
print(f"{len(secrets)} secrets, {len(lookalikes)} look-alikes")
