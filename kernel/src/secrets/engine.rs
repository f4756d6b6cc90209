//! Runs the rules the way gitleaks does: a keyword prefilter picks the rules
//! worth running, each rule's regex finds candidates, and a candidate is a
//! finding unless its secret is too uniform (entropy), fails the rule's own
//! check, or an allowlist admits it.
//!
//! Every rule is compiled on first use only, so a text pays for the rules its
//! words call up, not for all of them. The engine holds no hashed collection:
//! the result is the same on every host and every run.

use super::own;
use super::rules::{self, AllowlistSpec, RuleSpec, Target, GITLEAKS_GLOBAL_ALLOWLISTS, GITLEAKS_RULES};
use super::words::WordSet;
use super::Finding;
use regex_automata::meta::Regex;
use regex_automata::util::syntax;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::OnceLock;

/// Where a rule comes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Source {
    Gitleaks,
    Kernel,
}

/// A kernel rule's own test of a candidate, beyond its pattern.
pub(super) type Check = fn(&Candidate) -> bool;

/// A rule in the form the engine runs, whatever its source.
pub(super) struct Rule {
    pub id: &'static str,
    pub description: &'static str,
    pub kind: &'static str,
    pub source: Source,
    pub pattern: &'static str,
    pub secret_group: usize,
    pub entropy: f64,
    pub keywords: &'static [&'static str],
    pub allowlists: &'static [AllowlistSpec],
    pub check: Option<Check>,
}

/// One regex match, as a rule's check sees it.
pub(super) struct Candidate<'h> {
    pub hay: &'h [u8],
    pub matched: Range<usize>,
    pub secret: Range<usize>,
}

impl Candidate<'_> {
    pub fn secret(&self) -> &[u8] {
        &self.hay[self.secret.clone()]
    }
}

struct Compiled {
    regex: Regex,
    allowlists: Vec<Allowlist>,
}

struct Allowlist {
    spec: &'static AllowlistSpec,
    regex: Option<Regex>,
    stopwords: Option<WordSet>,
}

pub(super) struct Engine {
    /// In scan order: gitleaks' specific rules, the kernel's, then gitleaks'
    /// generic ones (as gitleaks prefers a specific finding to a generic one).
    rules: Vec<Rule>,
    /// Gitleaks rules that cannot apply to text, with the reason.
    skipped: Vec<(&'static str, String)>,
    keywords: WordSet,
    /// For each keyword (by pattern index), the rules it calls up.
    by_keyword: Vec<Vec<usize>>,
    /// Rules without keywords: they always run.
    always: Vec<usize>,
    compiled: Vec<OnceLock<Result<Compiled, String>>>,
    global: OnceLock<Vec<Allowlist>>,
}

/// Builds one regex with RE2's semantics for these rules: ASCII classes and
/// case folding, and matching on bytes.
pub(super) fn compile(pattern: &str) -> Result<Regex, String> {
    Regex::builder()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .configure(Regex::config().utf8_empty(false))
        .build(pattern)
        .map_err(|e| e.syntax_error().map_or_else(|| e.to_string(), |s| s.to_string()))
}

fn compile_allowlist(spec: &'static AllowlistSpec) -> Result<Allowlist, String> {
    // Joined as gitleaks joins them, so a leading flag reaches the rest too.
    let regex = (!spec.regexes.is_empty())
        .then(|| compile(&format!("(?:{})", spec.regexes.iter().map(|r| rules::translate(r)).collect::<Vec<_>>().join("|"))))
        .transpose()?;
    let stopwords = (!spec.stopwords.is_empty()).then(|| WordSet::new(spec.stopwords));
    Ok(Allowlist { spec, regex, stopwords })
}

impl Allowlist {
    /// Whether the allowlist admits a finding (gitleaks' `checkFindingAllowed`
    /// with no path and no commit).
    fn admits(&self, secret: &[u8], matched: &[u8], line: &[u8]) -> bool {
        let target = match self.spec.target {
            Target::Secret => secret,
            Target::Match => matched,
            Target::Line => line,
        };
        let by_regex = !target.is_empty() && self.regex.as_ref().is_some_and(|r| r.is_match(target));
        let by_stopword = !secret.is_empty() && self.stopwords.as_ref().is_some_and(|s| s.any_in(secret));
        if self.spec.all {
            self.spec.paths == 0
                && self.spec.commits == 0
                && (self.regex.is_none() || by_regex)
                && (self.stopwords.is_none() || by_stopword)
        } else {
            by_regex || by_stopword
        }
    }
}

impl Engine {
    fn new() -> Engine {
        let mut specific = Vec::new();
        let mut generic = Vec::new();
        let mut skipped = Vec::new();
        for spec in GITLEAKS_RULES {
            match (spec.regex, spec.path) {
                (_, Some(path)) => skipped.push((spec.id, format!("applies only to files whose path matches `{path}`; a text has no path"))),
                (None, None) => skipped.push((spec.id, "has no pattern for content".to_string())),
                (Some(pattern), None) => {
                    let rule = gitleaks_rule(spec, pattern);
                    if spec.id.starts_with("generic") { generic.push(rule) } else { specific.push(rule) }
                }
            }
        }
        let rules: Vec<Rule> = specific.into_iter().chain(own::rules()).chain(generic).collect();

        let mut keyword_rules: BTreeMap<&'static str, Vec<usize>> = BTreeMap::new();
        let mut always = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            if rule.keywords.is_empty() {
                always.push(i);
            }
            for keyword in rule.keywords {
                keyword_rules.entry(keyword).or_default().push(i);
            }
        }
        let keywords = WordSet::new(keyword_rules.keys());
        let compiled = rules.iter().map(|_| OnceLock::new()).collect();
        Engine { rules, skipped, keywords, by_keyword: keyword_rules.into_values().collect(), always, compiled, global: OnceLock::new() }
    }

    fn compiled(&self, i: usize) -> &Result<Compiled, String> {
        self.compiled[i].get_or_init(|| {
            let rule = &self.rules[i];
            let pattern = match rule.source {
                Source::Gitleaks => rules::translate(rule.pattern),
                Source::Kernel => rule.pattern.to_string(),
            };
            let regex = compile(&pattern)?;
            let allowlists = rule.allowlists.iter().map(compile_allowlist).collect::<Result<_, _>>()?;
            Ok(Compiled { regex, allowlists })
        })
    }

    fn global(&self) -> &[Allowlist] {
        self.global.get_or_init(|| {
            GITLEAKS_GLOBAL_ALLOWLISTS.iter().map(|a| compile_allowlist(a).expect("the global allowlist compiles")).collect()
        })
    }

    /// The first finding in scan order, if any.
    pub fn detect(&self, hay: &[u8]) -> Option<Finding> {
        let mut enabled = vec![false; self.rules.len()];
        for &i in &self.always {
            enabled[i] = true;
        }
        let mut pending = self.rules.len() - self.always.len();
        self.keywords.scan(hay, |word| {
            for &i in &self.by_keyword[word] {
                if !enabled[i] {
                    enabled[i] = true;
                    pending -= 1;
                }
            }
            pending > 0
        });
        (0..self.rules.len()).filter(|&i| enabled[i]).find_map(|i| self.scan(i, hay))
    }

    /// The rule's first finding in `hay`.
    #[inline(never)]
    fn scan(&self, i: usize, hay: &[u8]) -> Option<Finding> {
        let rule = &self.rules[i];
        // A rule that does not compile finds nothing; the rule test lists it.
        let compiled = self.compiled(i).as_ref().ok()?;
        for caps in compiled.regex.captures_iter(hay) {
            let Some(m) = caps.get_match() else { continue };
            let matched = trim_newlines(hay, m.range());
            let secret = if caps.group_len() < 2 {
                matched.clone()
            } else if rule.secret_group > 0 {
                caps.get_group(rule.secret_group).map_or(matched.start..matched.start, |s| s.range())
            } else {
                (1..caps.group_len()).filter_map(|g| caps.get_group(g)).map(|s| s.range()).find(|r| !r.is_empty()).unwrap_or(matched.clone())
            };
            let candidate = Candidate { hay, matched, secret };
            if rule.entropy > 0.0 && entropy(candidate.secret()) <= rule.entropy {
                continue;
            }
            if rule.check.is_some_and(|check| !check(&candidate)) {
                continue;
            }
            let (secret, matched, line) = (candidate.secret(), &hay[candidate.matched.clone()], line_of(hay, candidate.matched.clone()));
            let global: &[Allowlist] = if rule.source == Source::Gitleaks { self.global() } else { &[] };
            if global.iter().chain(&compiled.allowlists).any(|a| a.admits(secret, matched, line)) {
                continue;
            }
            return Some(Finding { rule: rule.id, kind: rule.kind, description: rule.description });
        }
        None
    }

    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter()
    }

    pub fn skipped(&self) -> &[(&'static str, String)] {
        &self.skipped
    }

    /// Compiles rule `i` (if it was not yet) and says whether that worked.
    pub fn compile_rule(&self, i: usize) -> Result<(), String> {
        self.compiled(i).as_ref().map(|_| ()).map_err(Clone::clone)
    }

    /// Compiles the global allowlist: a failure panics here, not mid-scan.
    pub fn compile_global(&self) -> Result<(), String> {
        GITLEAKS_GLOBAL_ALLOWLISTS.iter().try_for_each(|a| compile_allowlist(a).map(|_| ()))
    }
}

fn gitleaks_rule(spec: &'static RuleSpec, pattern: &'static str) -> Rule {
    Rule {
        id: spec.id,
        description: spec.description,
        kind: rules::kind_of(spec.id),
        source: Source::Gitleaks,
        pattern,
        secret_group: spec.secret_group,
        entropy: spec.entropy,
        keywords: spec.keywords,
        allowlists: spec.allowlists,
        check: None,
    }
}

pub(super) fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(Engine::new)
}

/// The match without leading or trailing newlines, as gitleaks trims it.
fn trim_newlines(hay: &[u8], mut r: Range<usize>) -> Range<usize> {
    while r.start < r.end && hay[r.start] == b'\n' {
        r.start += 1;
    }
    while r.end > r.start && hay[r.end - 1] == b'\n' {
        r.end -= 1;
    }
    r
}

/// The whole lines a match spans.
fn line_of(hay: &[u8], r: Range<usize>) -> &[u8] {
    let start = hay[..r.start].iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1);
    let end = hay[r.end..].iter().position(|&b| b == b'\n').map_or(hay.len(), |at| r.end + at);
    &hay[start..end]
}

/// Shannon entropy in bits per character, counting characters over the byte
/// length as gitleaks does; summed in character order, so it is the same
/// everywhere.
pub(super) fn entropy(data: &[u8]) -> f64 {
    if data.is_empty() {
        return 0.0;
    }
    let mut chars: Vec<char> = String::from_utf8_lossy(data).chars().collect();
    chars.sort_unstable();
    let inv = 1.0 / data.len() as f64;
    chars
        .chunk_by(|a, b| a == b)
        .map(|run| {
            let p = run.len() as f64 * inv;
            -p * p.log2()
        })
        .sum()
}
