//! A generated memory corpus with labelled queries, for the recall
//! evaluation and the memory benchmarks. Deterministic: the same size gives
//! the same records and queries.
//!
//! The records are what a coding agent's team memory holds: service facts
//! (deployment, ownership, storage, runbooks) in English, the same kind of
//! facts in Chinese, and notes about code identifiers. Some deployment facts
//! were superseded by newer ones. Queries are phrased the way people ask,
//! not copied from the records: other word forms, other word order, only
//! part of an identifier.

pub struct Record {
    pub content: String,
    /// The slot it fills; a later record with the same key supersedes it.
    pub key: String,
    pub valid_from: &'static str,
    /// Superseded by a later record: present in the store, never the answer.
    pub superseded: bool,
}

pub struct Query {
    pub text: String,
    pub kind: &'static str,
    /// Index of the one record that answers it.
    pub answer: usize,
}

pub struct Corpus {
    pub records: Vec<Record>,
    pub queries: Vec<Query>,
}

const ADJECTIVES: [&str; 25] = [
    "amber", "brisk", "cobalt", "dusty", "ember", "frosty", "granite", "hollow", "ivory", "jade", "keen", "lunar", "misty",
    "noble", "onyx", "pale", "quiet", "rapid", "silver", "tidal", "umber", "vivid", "woven", "young", "zesty",
];
const NOUNS: [&str; 20] = [
    "ledger", "harbor", "beacon", "canyon", "falcon", "garden", "lantern", "meadow", "orchard", "pylon", "quarry", "ridge",
    "summit", "thicket", "vault", "willow", "anchor", "bridge", "comet", "delta",
];
const REGIONS: [&str; 8] = ["eu-west-1", "eu-central-1", "us-east-2", "us-west-2", "ap-southeast-1", "ap-northeast-1", "sa-east-1", "ca-central-1"];
const TOOLS: [&str; 6] = ["Argo CD", "Spinnaker", "Flux", "GitHub Actions", "Jenkins", "Buildkite"];
const DAYS: [&str; 5] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"];
const PEOPLE: [&str; 12] = ["Priya", "Mateo", "Chen Wei", "Amara", "Lukas", "Sofia", "Kenji", "Noor", "Olga", "Tariq", "Ines", "Dmitri"];
const DATABASES: [&str; 6] = ["PostgreSQL", "MySQL", "DynamoDB", "Cassandra", "MongoDB", "CockroachDB"];
const METRICS: [&str; 6] = ["latency", "error rate", "queue depth", "memory pressure", "disk usage", "connection count"];
const COMPONENTS: [&str; 6] = ["ingest worker", "cache sidecar", "scheduler", "gateway", "consumer pool", "indexer"];

const ZH_PREFIXES: [&str; 20] = [
    "订单", "支付", "库存", "用户", "消息", "搜索", "日志", "报表", "结算", "推荐", "风控", "物流", "客服", "会员", "优惠", "评论", "广告", "账单", "认证", "通知",
];
const ZH_SUFFIXES: [&str; 10] = ["网关", "服务", "中心", "平台", "引擎", "队列", "系统", "模块", "接口", "任务"];
const ZH_REGIONS: [&str; 6] = ["华东一区", "华北二区", "华南三区", "西南一区", "香港", "新加坡"];
const ZH_TEAMS: [&str; 6] = ["基础架构", "交易", "数据平台", "增长", "安全", "运维"];

const VERBS: [(&str, &str); 10] = [
    ("validate", "validates"), ("parse", "parses"), ("render", "renders"), ("compute", "computes"), ("serialize", "serializes"),
    ("fetch", "fetches"), ("merge", "merges"), ("reconcile", "reconciles"), ("archive", "archives"), ("schedule", "schedules"),
];
const OBJECTS: [(&str, &str); 20] = [
    ("invoice", "total"), ("user", "session"), ("tax", "rate"), ("order", "line"), ("cart", "item"), ("refund", "request"),
    ("ledger", "entry"), ("payment", "intent"), ("shipping", "label"), ("coupon", "code"), ("audit", "log"), ("search", "index"),
    ("price", "table"), ("stock", "level"), ("email", "digest"), ("webhook", "event"), ("report", "page"), ("currency", "quote"),
    ("account", "profile"), ("delivery", "slot"),
];
const MODULES: [&str; 8] = ["billing", "checkout", "accounts", "catalog", "shipping", "reporting", "payments", "notifications"];

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

fn service(i: usize) -> String {
    let base = format!("{}-{}", ADJECTIVES[i % ADJECTIVES.len()], NOUNS[(i / ADJECTIVES.len()) % NOUNS.len()]);
    let round = i / (ADJECTIVES.len() * NOUNS.len());
    if round == 0 { base } else { format!("{base}-{round}") }
}

fn zh_entity(i: usize) -> String {
    let base = format!("{}{}", ZH_PREFIXES[i % ZH_PREFIXES.len()], ZH_SUFFIXES[(i / ZH_PREFIXES.len()) % ZH_SUFFIXES.len()]);
    let round = i / (ZH_PREFIXES.len() * ZH_SUFFIXES.len());
    if round == 0 { base } else { format!("{base}{round}号") }
}

/// `count` distinct indexes below `n`, spread over it by a prime stride (so
/// picks do not fall into the cycles of the name parts).
fn picks(n: usize, count: usize) -> impl Iterator<Item = usize> {
    (0..count.min(n)).map(move |k| k * 7919 % n)
}

impl Corpus {
    /// About `size` records: 60% English service facts (eight per service;
    /// every fifth service moved and its old deployment fact superseded), 20%
    /// Chinese, 20% code; about `queries` labelled queries.
    pub fn generate(size: usize, queries: usize) -> Corpus {
        let mut records = Vec::with_capacity(size + 16);
        let mut out = Vec::new();
        let services = size * 6 / 10 / 8;
        let superseded_every = 5;
        let zh = size * 2 / 10 / 4;
        let code = size * 2 / 10 / 2;
        let push = |records: &mut Vec<Record>, content: String, key: String, valid_from: &'static str| {
            records.push(Record { content, key, valid_from, superseded: false });
            records.len() - 1
        };

        let mut deploy = Vec::new();
        let mut owner = Vec::new();
        let mut storage = Vec::new();
        let mut runbook = Vec::new();
        let mut moved = Vec::new();
        for i in 0..services {
            let svc = service(i);
            let (region, tool, day) = (REGIONS[i % 8], TOOLS[(i / 8) % 6], DAYS[(i / 3) % 5]);
            if i % superseded_every == 0 {
                let old = format!("The {svc} service is deployed to {} by {} every {day}.", REGIONS[(i + 3) % 8], TOOLS[(i + 1) % 6]);
                let at = push(&mut records, old, format!("{svc}.deploy"), "2025-01-01T00:00:00Z");
                records[at].superseded = true;
            }
            let d = push(&mut records, format!("The {svc} service is deployed to {region} by {tool} every {day}."), format!("{svc}.deploy"), "2026-01-01T00:00:00Z");
            if i % superseded_every == 0 {
                moved.push((i, d));
            }
            deploy.push((i, d));
            let person = PEOPLE[(i * 7) % 12];
            owner.push((i, push(&mut records, format!("{person} owns the {svc} service and reviews its pull requests."), format!("{svc}.owner"), "2026-01-01T00:00:00Z")));
            let (db, days) = (DATABASES[(i * 5) % 6], 7 + (i * 11) % 80);
            storage.push((i, push(&mut records, format!("The {svc} service stores its data in {db} and keeps nightly backups for {days} days."), format!("{svc}.storage"), "2026-01-01T00:00:00Z")));
            let (metric, component) = (METRICS[(i * 3) % 6], COMPONENTS[(i * 5) % 6]);
            runbook.push((i, push(&mut records, format!("Runbook: when {svc} alerts on {metric}, restart its {component} before paging anyone."), format!("{svc}.runbook"), "2026-01-01T00:00:00Z")));
            // Facts that name the service without answering the questions above,
            // some of them about its neighbours: what makes recall hard.
            let (peer, other) = (service((i + 1) % services), service((i + services - 1) % services));
            let facts = [
                ("oncall", format!("The {svc} on-call rotation hands over on {day} mornings; escalate to {} after 30 minutes.", PEOPLE[(i * 5) % 12])),
                ("dependency", format!("{svc} calls {peer} for pricing data and caches the answers for {} minutes.", 5 + i % 25)),
                ("flags", format!("Feature flags for {svc} live in the {other} config repository under flags/{}.yaml.", NOUNS[i % 20])),
                ("slo", format!("{svc} promises 99.{}% availability, measured monthly; its error budget resets on the first.", 5 + i % 5)),
            ];
            for (slot, text) in facts {
                push(&mut records, text, format!("{svc}.{slot}"), "2026-01-01T00:00:00Z");
            }
        }
        let mut zh_deploy = Vec::new();
        let mut zh_backup = Vec::new();
        for i in 0..zh {
            let e = zh_entity(i);
            let (region, team) = (ZH_REGIONS[i % 6], ZH_TEAMS[(i / 6) % 6]);
            zh_deploy.push((i, push(&mut records, format!("{e}部署在{region}机房，由{team}团队负责维护。"), format!("zh.{i}.deploy"), "2026-01-01T00:00:00Z")));
            let (db, days) = (DATABASES[(i * 5) % 6], 7 + (i * 13) % 80);
            zh_backup.push((i, push(&mut records, format!("{e}的数据保存在{db}中，备份保留{days}天。"), format!("zh.{i}.storage"), "2026-01-01T00:00:00Z")));
            let peer = zh_entity((i + 1) % zh);
            push(&mut records, format!("{e}的值班在每周{}交接，告警先发给{}。", ["一", "二", "三", "四", "五"][i % 5], PEOPLE[(i * 7) % 12]), format!("zh.{i}.oncall"), "2026-01-01T00:00:00Z");
            push(&mut records, format!("{e}依赖{peer}提供的配置，超时时间为{}秒。", 2 + i % 9), format!("zh.{i}.dependency"), "2026-01-01T00:00:00Z");
        }
        let mut defs = Vec::new();
        let mut helpers = Vec::new();
        for i in 0..code {
            let (verb, verbs) = VERBS[i % 10];
            let (a, b) = OBJECTS[(i / 10) % 20];
            let round = i / 200;
            let suffix = if round == 0 { String::new() } else { format!("V{round}") };
            let camel = format!("{verb}{}{}{suffix}", capitalize(a), capitalize(b));
            let snake = format!("{verb}_{a}_{b}{}", suffix.to_lowercase());
            let module = MODULES[(i * 3) % 8];
            let svc = service(i * 7 % services.max(1));
            defs.push((i, push(&mut records, format!("`{camel}` in src/{module}/{a}_{b}.rs {verbs} the {a} {b} before it is stored."), format!("code.{camel}"), "2026-01-01T00:00:00Z")));
            helpers.push((i, push(&mut records, format!("The {module}::{snake} helper runs for the {svc} worker on every retry."), format!("code.{snake}.helper"), "2026-01-01T00:00:00Z")));
        }

        // Queries: a fixed share per record type, spread evenly over the
        // entities, cycling through ways of asking (exact words, other word
        // forms, synonyms no lexical index can know).
        let mut ask = |list: &[(usize, usize)], percent: usize, templates: &[(&'static str, &dyn Fn(usize) -> String)]| {
            for (n, k) in picks(list.len(), (queries * percent / 100).max(1)).enumerate() {
                let (i, answer) = list[k];
                let (kind, template) = templates[n % templates.len()];
                out.push(Query { text: template(i), kind, answer });
            }
        };
        let pascal = |i: usize| service(i).split('-').map(capitalize).collect::<String>();
        ask(&deploy, 10, &[
            ("en", &|i| format!("where is {} deployed", service(i))),
            ("en-morphology", &|i| format!("which region are {} deployments going to", service(i))),
            ("en-synonym", &|i| format!("where does {} ship to", service(i))),
            ("en-morphology", &|i| format!("what tool deploys {} each week", pascal(i))),
        ]);
        ask(&owner, 10, &[
            ("en", &|i| format!("who owns {}", service(i))),
            ("en-morphology", &|i| format!("who is reviewing pull requests on {}", service(i))),
            ("en-synonym", &|i| format!("who maintains {}", service(i))),
        ]);
        ask(&storage, 10, &[
            ("en", &|i| format!("what database does {} store data in", service(i))),
            ("en-morphology", &|i| format!("how many days of backup does {} keep", service(i))),
            ("en-synonym", &|i| format!("how long do we retain {} snapshots", service(i))),
        ]);
        ask(&runbook, 8, &[
            ("en", &|i| format!("{} {} alert what should I restart", service(i), METRICS[(i * 3) % 6])),
            ("en-morphology", &|i| format!("restarting {} after {} alerting", service(i), METRICS[(i * 3) % 6])),
            ("en-synonym", &|i| format!("{} is paging about {}, how do I fix it", service(i), METRICS[(i * 3) % 6])),
        ]);
        ask(&moved, 12, &[
            ("superseded", &|i| format!("where is {} deployed now", service(i))),
            ("superseded", &|i| format!("{} deployment region", service(i))),
        ]);
        ask(&zh_deploy, 14, &[
            ("zh", &|i| format!("{}部署在哪个机房", zh_entity(i))),
            ("zh-synonym", &|i| format!("{}在哪个区域上线", zh_entity(i))),
            ("zh", &|i| format!("谁负责维护{}", zh_entity(i))),
            ("zh-synonym", &|i| format!("{}归哪个团队管", zh_entity(i))),
        ]);
        ask(&zh_backup, 8, &[
            ("zh", &|i| format!("{}的备份保留多久", zh_entity(i))),
            ("zh-synonym", &|i| format!("{}的数据存在什么库里", zh_entity(i))),
        ]);
        let identifier = |i: usize, pascal: bool| {
            let (verb, _) = VERBS[i % 10];
            let (a, b) = OBJECTS[(i / 10) % 20];
            let round = i / 200;
            let suffix = if round == 0 { String::new() } else { format!("V{round}") };
            let head = if pascal { capitalize(verb) } else { verb.to_string() };
            format!("{head}{}{}{suffix}", capitalize(a), capitalize(b))
        };
        ask(&defs, 16, &[
            ("code", &|i| format!("which file defines {}", identifier(i, false))),
            ("code", &|i| identifier(i, true)),
            ("code-words", &|i| {
                let (a, b) = OBJECTS[(i / 10) % 20];
                format!("where do we {} the {a} {b}{}", VERBS[i % 10].0, if i >= 200 { format!(" v{}", i / 200) } else { String::new() })
            }),
            ("code", &|i| {
                let (a, b) = OBJECTS[(i / 10) % 20];
                format!("{a}_{b}.rs {}", identifier(i, false))
            }),
        ]);
        ask(&helpers, 12, &[
            ("code", &|i| {
                let (a, b) = OBJECTS[(i / 10) % 20];
                let suffix = if i >= 200 { format!("v{}", i / 200) } else { String::new() };
                format!("{}::{}_{a}_{b}{suffix}", MODULES[(i * 3) % 8], VERBS[i % 10].0)
            }),
            ("code-words", &|i| {
                let (a, b) = OBJECTS[(i / 10) % 20];
                format!("{} helper that retries {} {a} {b}", MODULES[(i * 3) % 8], VERBS[i % 10].0)
            }),
        ]);
        Corpus { records, queries: out }
    }
}
