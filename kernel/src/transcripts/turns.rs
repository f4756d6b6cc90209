//! The neutral turn every format reads into and writes from, the violations
//! a reader collects, and the checks every format shares: a call id is used
//! once, a result answers a call made before it, and only once.

pub use crate::contracts::Format;
use crate::contracts::{
    CacheControl, Carrier, CustomFormat, CustomFormatKind, CustomTool, GrammarSyntax, Part, PartKind, ProviderFields, ToolCall, ToolDefinition, ToolOutcome,
};
use crate::error::KernelError;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Who speaks a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    System,
    Developer,
    User,
    Assistant,
    /// A tool result answering one call.
    Tool,
}

impl Speaker {
    pub fn name(self) -> &'static str {
        match self {
            Speaker::System => "system",
            Speaker::Developer => "developer",
            Speaker::User => "user",
            Speaker::Assistant => "assistant",
            Speaker::Tool => "tool",
        }
    }

    pub fn instructs(self) -> bool {
        matches!(self, Speaker::System | Speaker::Developer)
    }
}

/// One turn of a transcript in provider-neutral terms: what becomes one
/// context item on import, and what one context item renders as.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub speaker: Speaker,
    /// The text view: the text parts joined by newlines, or the plain text.
    pub text: String,
    /// Empty when the provider sent plain text.
    pub parts: Vec<Part>,
    pub calls: Vec<ToolCall>,
    /// For `Tool` turns: the call answered, and its outcome.
    pub result: Option<(String, ToolOutcome)>,
    /// What the provider sent with the message that the kernel does not read.
    pub provider_fields: Option<ProviderFields>,
    /// The provider's id of the message (`msg_…`).
    pub provider_id: Option<String>,
    /// Base64 payloads of binary parts not stored yet: (part index, data).
    pub blobs: Vec<(usize, String)>,
    /// Where the turn starts in the body.
    pub path: String,
    /// Instructions in the body's own field rather than a message
    /// (Anthropic `system`, OpenAI Responses `instructions`).
    pub preamble: bool,
}

impl Turn {
    pub fn new(speaker: Speaker, path: &str) -> Turn {
        Turn {
            speaker,
            text: String::new(),
            parts: Vec::new(),
            calls: Vec::new(),
            result: None,
            provider_fields: None,
            provider_id: None,
            blobs: Vec::new(),
            path: path.to_string(),
            preamble: false,
        }
    }

    /// An answer given without content: a refusal or spoken audio (a Chat
    /// answer's `refusal`, `audio`), kept in the provider's own fields.
    pub fn answered_otherwise(&self) -> bool {
        self.provider_fields.as_ref().is_some_and(|f| f.fields.contains_key("refusal") || f.fields.contains_key("audio"))
    }

    /// Sets `text` from the parts, as an item's `content` is (plain text,
    /// without parts, stays as it is).
    pub fn join_text(&mut self) {
        if !self.parts.is_empty() {
            self.text = crate::contracts::text_of(&self.parts);
        }
    }
}

contract! {
/// One broken rule: where, which, and what.
pub struct Violation {
    pub message: String,
    /// Where in the body, e.g. `messages[3].content[0]`.
    pub path: String,
    /// The rule's name, e.g. `call-without-result`.
    pub rule: String,
}
}

impl Violation {
    /// The typed error a command answers for a body that breaks rules: the
    /// first one named in the message, all of them in the detail.
    pub fn refuse(what: &str, violations: &[Violation]) -> KernelError {
        let first = &violations[0];
        let more = match violations.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        KernelError::invalid(format!("{what} at `{}`: {} ({}){more}", first.path, first.message, first.rule))
            .with_detail(json!({"path": first.path, "rule": first.rule, "violations": violations}))
    }
}

/// What reading a body gave: its turns, its tool definitions, and every rule it broke.
#[derive(Debug, Default)]
pub struct Reading {
    pub turns: Vec<Turn>,
    pub tools: Vec<ToolDefinition>,
    pub violations: Vec<Violation>,
    /// Conversation elements left unread: the reader says what it read around them.
    pub gap: Gap,
    /// Where `turns` holds the conversation's first turn (after the body's
    /// own system text).
    pub opening: usize,
    /// Each point between conversation elements where the reader was at
    /// rest: (elements before it, the conversation's turns they hold,
    /// counting the gap's).
    pub rests: Vec<(usize, usize)>,
    /// Read for the rules alone: the turns keep no text (see [`for_rules`](Self::for_rules)).
    pub rules_only: bool,
}

/// A run of conversation elements a reader skips, read before from the
/// same bytes: the reader is at rest at both its ends, so what follows it
/// reads as it would after reading it. Their turns are not in `turns`.
#[derive(Debug, Default)]
pub struct Gap {
    /// The first element skipped, and the first one read again after it.
    pub elements: std::ops::Range<usize>,
    /// How many turns the skipped elements hold.
    pub turns: usize,
    /// The calls they make and the calls they answer, for the pairing checks.
    pub calls: Vec<String>,
    pub answered: Vec<String>,
}

impl Reading {
    /// A reading that skips `gap`.
    pub fn skipping(gap: Gap) -> Reading {
        Reading { gap, ..Reading::default() }
    }

    /// A reading for the rules alone, whose turns keep no text: no rule
    /// reads one, and copying every text out of a body is most of what
    /// reading it costs. `validate-request` reads this way, and rendering
    /// checks each body it writes so.
    pub fn for_rules() -> Reading {
        Reading { rules_only: true, ..Reading::default() }
    }

    /// A text as this reading keeps it: none, when it reads for the rules alone.
    pub fn text(&self, text: &str) -> String {
        if self.rules_only { String::new() } else { text.to_string() }
    }

    /// Marks where the conversation's elements start.
    pub fn open_conversation(&mut self) {
        self.opening = self.turns.len();
    }

    /// Notes that the reader is at rest after element `i`.
    pub fn rest(&mut self, i: usize) {
        let hidden = if i >= self.gap.elements.end { self.gap.turns } else { 0 };
        self.rests.push((i + 1, self.turns.len() - self.opening + hidden));
    }

    /// Where the skipped turns would stand in `turns`.
    pub fn gap_at(&self) -> usize {
        let start = self.gap.elements.start;
        self.opening + self.rests.iter().find(|(e, _)| *e == start).map_or(0, |(_, t)| *t)
    }
    pub fn fail(&mut self, path: impl Into<String>, rule: &str, message: impl Into<String>) {
        self.violations.push(Violation { path: path.into(), rule: rule.to_string(), message: message.into() });
    }

    /// An object's field, or a violation naming it.
    pub fn field<'v>(&mut self, object: &'v Map<String, Value>, at: &str, name: &str) -> Option<&'v Value> {
        let value = object.get(name).filter(|v| !v.is_null());
        if value.is_none() {
            self.fail(format!("{at}.{name}"), "missing-field", format!("`{name}` is required here"));
        }
        value
    }

    /// A required string field.
    pub fn string(&mut self, object: &Map<String, Value>, at: &str, name: &str) -> Option<String> {
        self.str_field(object, at, name).map(str::to_string)
    }

    /// A required string field that holds text (a block's `text`), kept as [`text`](Self::text) keeps it.
    pub fn text_field(&mut self, object: &Map<String, Value>, at: &str, name: &str) -> Option<String> {
        let text = self.str_field(object, at, name)?;
        Some(self.text(text))
    }

    fn str_field<'v>(&mut self, object: &'v Map<String, Value>, at: &str, name: &str) -> Option<&'v str> {
        match self.field(object, at, name)? {
            Value::String(s) => Some(s),
            _ => {
                self.fail(format!("{at}.{name}"), "wrong-type", format!("`{name}` must be a string"));
                None
            }
        }
    }

    /// A required string field that must not be empty (ids, names).
    pub fn id(&mut self, object: &Map<String, Value>, at: &str, name: &str) -> Option<String> {
        let id = self.string(object, at, name)?;
        if id.is_empty() || id.len() > crate::contracts::MAX_ID_BYTES || id.chars().any(char::is_control) {
            self.fail(format!("{at}.{name}"), "bad-id", format!("`{name}` must be 1 to 256 bytes without control characters"));
            return None;
        }
        Some(id)
    }

    /// An optional string field.
    pub fn optional_string(&mut self, object: &Map<String, Value>, at: &str, name: &str) -> Option<String> {
        match object.get(name) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.fail(format!("{at}.{name}"), "wrong-type", format!("`{name}` must be a string"));
                None
            }
        }
    }

    /// The value as an object, or a violation.
    pub fn object<'v>(&mut self, value: &'v Value, at: &str) -> Option<&'v Map<String, Value>> {
        let object = value.as_object();
        if object.is_none() {
            self.fail(at, "wrong-type", "must be an object");
        }
        object
    }

    /// The value as an array, or a violation.
    pub fn array<'v>(&mut self, value: &'v Value, at: &str) -> Option<&'v Vec<Value>> {
        let array = value.as_array();
        if array.is_none() {
            self.fail(at, "wrong-type", "must be an array");
        }
        array
    }

    /// Refuses fields a block of this type does not have: the kernel keeps
    /// what it reads exactly, so it will not quietly drop what it cannot
    /// keep. A field given as null is a field left out: SDKs write every
    /// optional field of what they parsed.
    pub fn only(&mut self, object: &Map<String, Value>, at: &str, allowed: &[&str]) {
        self.only_of(object, at, &[allowed]);
    }

    /// [`only`](Self::only), for fields allowed by any of `allowed`.
    fn only_of(&mut self, object: &Map<String, Value>, at: &str, allowed: &[&[&str]]) {
        let known = |k: &str| allowed.iter().any(|a| a.contains(&k));
        for (key, _) in object.iter().filter(|(k, v)| !v.is_null() && !known(k)) {
            self.fail(format!("{at}.{key}"), "unknown-field", format!("`{key}` is not a field of this block the kernel knows"));
        }
    }

    /// [`only`](Self::only) for a block whose fields are `read` by the
    /// kernel or the provider's own that `format` keeps on what carries them
    /// (citations, a status), kept unread to go back with the block. Returns those given.
    pub fn carry(&mut self, object: &Map<String, Value>, at: &str, format: Format, on: Carrier, read: &[&str]) -> Option<ProviderFields> {
        let carried = format.kept(on);
        self.only_of(object, at, &[read, carried]);
        let fields: Map<String, Value> =
            object.iter().filter(|(k, v)| !v.is_null() && carried.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
        (!fields.is_empty()).then_some(ProviderFields { fields, format })
    }

    /// A request body's top level: `transcript` are the keys a transcript
    /// has; a request (`strict`) may also carry `config`, and needs `required`.
    pub fn top(&mut self, top: &Map<String, Value>, strict: bool, transcript: &[&str], config: &[&str], required: &[&str]) {
        for key in top.keys() {
            let known = transcript.contains(&key.as_str()) || (strict && config.contains(&key.as_str()));
            if !known {
                let why = if strict || !config.contains(&key.as_str()) {
                    format!("`{key}` is not a field of this request")
                } else {
                    format!("`{key}` is request configuration, not transcript: import the transcript fields ({})", transcript.join(", "))
                };
                self.fail(format!("$.{key}"), "unknown-field", why);
            }
        }
        if strict {
            for key in required {
                if top.get(*key).is_none_or(Value::is_null) {
                    self.fail(format!("$.{key}"), "missing-field", format!("a request needs `{key}`"));
                }
            }
        }
    }

    /// Checks arguments are JSON text within the nesting a body can hold; `Some` when they are.
    pub fn arguments(&mut self, arguments: Option<String>, at: &str) -> Option<String> {
        let arguments = arguments?;
        if let Err(why) = crate::contracts::check_arguments(&arguments) {
            self.fail(at, "arguments-not-json", why);
            return None;
        }
        Some(arguments)
    }

    /// A `cache_control` hint (Anthropic's shape: `{"type": "ephemeral", "ttl"?}`).
    pub fn cache_control(&mut self, b: &Map<String, Value>, at: &str) -> Option<CacheControl> {
        let value = b.get("cache_control").filter(|v| !v.is_null())?;
        let at = format!("{at}.cache_control");
        let c = self.object(value, &at)?;
        self.only(c, &at, &["type", "ttl"]);
        if c.get("type").and_then(Value::as_str) != Some("ephemeral") {
            self.fail(format!("{at}.type"), "unknown-block-type", "cache_control.type must be `ephemeral`");
            return None;
        }
        let ttl = self.optional_string(c, &at, "ttl");
        if ttl.as_deref().is_some_and(|t| t != "5m" && t != "1h") {
            self.fail(format!("{at}.ttl"), "wrong-type", "ttl must be `5m` or `1h`");
            return None;
        }
        Some(CacheControl { ttl })
    }

    /// The tools of a request's `tools` (both OpenAI formats): each
    /// `function` or `custom` entry is handed to `read` with its path and
    /// type, and the definition it returns is kept. A tool of another type
    /// is the provider's own (a hosted one): kept whole where the format
    /// has them (`hosted`), else refused.
    pub fn request_tools(
        &mut self,
        top: &Map<String, Value>,
        strict: bool,
        hosted: Option<Format>,
        read: impl Fn(&mut Reading, &str, &str, &Map<String, Value>) -> Option<ToolDefinition>,
    ) {
        let tools = match top.get("tools") {
            None | Some(Value::Null) => return,
            Some(Value::Array(tools)) => tools,
            Some(_) => return self.fail("$.tools", "wrong-type", "tools must be an array"),
        };
        for (k, tool) in tools.iter().enumerate() {
            let at = format!("tools[{k}]");
            let Some(t) = self.object(tool, &at) else { continue };
            let kind = t.get("type").and_then(Value::as_str).unwrap_or("");
            if kind != "function" && kind != "custom" {
                match hosted {
                    Some(format) if !kind.is_empty() => {
                        if let Some(tool) = self.provider_tool(&at, t, format) {
                            self.push_tool(&at, tool);
                        }
                    }
                    Some(_) => self.fail(format!("{at}.type"), "missing-field", "a tool says its `type`"),
                    None if !strict => self.fail(format!("{at}.type"), "unknown-block-type", "only function and custom tools are imported"),
                    None => {}
                }
                continue;
            }
            if let Some(tool) = read(self, &at, kind, t) {
                self.push_tool(&at, tool);
            }
        }
    }

    /// A tool definition's common checks: its name and an object schema.
    pub fn tool(&mut self, at: &str, name: Option<String>, description: Option<String>, schema: Option<&Value>) -> Option<ToolDefinition> {
        let name = name?;
        if !crate::contracts::tool_name_ok(&name) {
            self.fail(format!("{at}.name"), "name-pattern", format!("tool name `{name}` must match ^[a-zA-Z0-9_-]{{1,64}}$"));
        }
        let schema = match schema {
            Some(schema @ Value::Object(_)) => schema.clone(),
            None => json!({"type": "object"}),
            Some(_) => {
                self.fail(at, "wrong-type", "a tool's schema must be a JSON object");
                return None;
            }
        };
        Some(ToolDefinition { cache_control: None, custom: None, description, input_schema: schema, name, provider_tool: None })
    }

    /// A provider's own tool, kept whole: named by its `name`, else its
    /// `server_label`, else its `type`.
    pub fn provider_tool(&mut self, at: &str, t: &Map<String, Value>, format: Format) -> Option<ToolDefinition> {
        let own = ProviderFields { fields: t.clone(), format };
        if let Err(e) = own.validate_tool(at) {
            // The check names `at.fields.<field>`; the transcript holds it at `at.<field>`.
            let path = e.detail.get("path").and_then(Value::as_str).unwrap_or(at).replacen(".fields", "", 1);
            let rule = match own.tool_name() {
                _ if path.ends_with(".type") => "unknown-block-type",
                None => "wrong-type",
                Some(_) => "name-pattern",
            };
            self.fail(path, rule, e.message.split_once(": ").map_or(e.message.as_str(), |(_, m)| m).to_string());
            return None;
        }
        let name = own.tool_name()?.to_string();
        Some(ToolDefinition { cache_control: None, custom: None, description: None, input_schema: json!({"type": "object"}), name, provider_tool: Some(own) })
    }

    /// Keeps a tool read at `at`, unless the request already names one so:
    /// providers refuse two tools of one name.
    pub fn push_tool(&mut self, at: &str, tool: ToolDefinition) {
        if self.tools.iter().any(|t| t.name == tool.name) {
            return self.fail(format!("{at}.name"), "duplicate-tool", format!("two tools are named `{}`", tool.name));
        }
        self.tools.push(tool);
    }

    /// A custom tool's definition: its name, and the input format at
    /// `at.format` (Chat nests a grammar's fields in `grammar`, Responses
    /// does not).
    pub fn custom_tool(&mut self, at: &str, t: &Map<String, Value>, nested: bool) -> Option<ToolDefinition> {
        let (name, description) = (self.string(t, at, "name"), self.optional_string(t, at, "description"));
        let format = match t.get("format") {
            None | Some(Value::Null) => None,
            Some(format) => Some(self.custom_format(format, &format!("{at}.format"), nested)?),
        };
        let tool = self.tool(at, name, description, None)?;
        Some(ToolDefinition { custom: Some(CustomTool { format }), ..tool })
    }

    fn custom_format(&mut self, format: &Value, at: &str, nested: bool) -> Option<CustomFormat> {
        let f = self.object(format, at)?;
        match f.get("type").and_then(Value::as_str) {
            Some("text") => {
                self.only(f, at, &["type"]);
                Some(CustomFormat { definition: None, syntax: None, kind: CustomFormatKind::Text })
            }
            Some("grammar") => {
                let (g, gat) = if nested {
                    self.only(f, at, &["type", "grammar"]);
                    let gat = format!("{at}.grammar");
                    let grammar = self.field(f, at, "grammar")?;
                    let g = self.object(grammar, &gat)?;
                    self.only(g, &gat, &["definition", "syntax"]);
                    (g, gat)
                } else {
                    self.only(f, at, &["type", "definition", "syntax"]);
                    (f, at.to_string())
                };
                let definition = self.string(g, &gat, "definition")?;
                let syntax = match self.string(g, &gat, "syntax")?.as_str() {
                    "lark" => GrammarSyntax::Lark,
                    "regex" => GrammarSyntax::Regex,
                    _ => {
                        self.fail(format!("{gat}.syntax"), "wrong-type", "a grammar's syntax is `lark` or `regex`");
                        return None;
                    }
                };
                Some(CustomFormat { definition: Some(definition), syntax: Some(syntax), kind: CustomFormatKind::Grammar })
            }
            _ => {
                self.fail(format!("{at}.type"), "wrong-type", "a custom tool's format is `text` or `grammar`");
                None
            }
        }
    }
}

/// The checks every format shares, over turns in order. `known` are the
/// calls made before this transcript (a session's earlier events).
pub fn check_pairing(reading: &mut Reading, known: &BTreeSet<String>) {
    let mut calls: BTreeSet<&str> = reading.gap.calls.iter().map(String::as_str).collect();
    let mut answered: BTreeSet<&str> = reading.gap.answered.iter().map(String::as_str).collect();
    let mut broken = Vec::new();
    for turn in &reading.turns {
        for call in &turn.calls {
            if !calls.insert(call.call_id.as_str()) {
                broken.push((turn.path.clone(), "duplicate-call-id", format!("call id `{}` is used by two tool calls", call.call_id)));
            }
        }
        if let Some((id, _)) = &turn.result {
            if !calls.contains(id.as_str()) && !known.contains(id) {
                broken.push((turn.path.clone(), "result-without-call", format!("the result for `{id}` answers no call made before it")));
            } else if !answered.insert(id.as_str()) {
                broken.push((turn.path.clone(), "duplicate-result", format!("call `{id}` is answered twice")));
            }
        }
    }
    for (path, rule, message) in broken {
        reading.fail(path, rule, message);
    }
}

/// A block or item of a type the kernel does not read, kept whole: `None`
/// (and a violation) when it has no `type` to say what it is.
pub fn opaque(r: &mut Reading, object: &Map<String, Value>, at: &str, format: Format) -> Option<Part> {
    match object.get("type").and_then(Value::as_str) {
        None => {
            r.fail(format!("{at}.type"), "missing-field", "a block says its `type`");
            return None;
        }
        Some(kind) if format.reads(kind) => {
            r.fail(format!("{at}.type"), "unknown-block-type", format!("a `{kind}` does not belong here"));
            return None;
        }
        Some(_) => {}
    }
    Some(Part { provider_fields: Some(ProviderFields { fields: object.clone(), format }), ..Part::empty(PartKind::Opaque) })
}

/// A JSON object of `members`, each value moved in (`json!` would copy a
/// value given by name, a whole conversation for a body's messages).
pub fn object<const N: usize>(members: [(&str, Value); N]) -> Value {
    Value::Object(members.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// Adds a part's or turn's provider fields to the block written for it,
/// never over a field the writer set: a kept field cannot turn a user turn
/// into a system one. Writers set their defaults for such fields after.
pub fn merge(block: &mut Value, fields: &Option<ProviderFields>) {
    if let (Value::Object(block), Some(fields)) = (block, fields) {
        for (k, v) in &fields.fields {
            block.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// An opaque part's block, as it came.
pub fn unread(part: &Part) -> Option<Value> {
    part.provider_fields.as_ref().filter(|_| part.kind == PartKind::Opaque).map(|f| Value::Object(f.fields.clone()))
}

/// A `data:` URL's media type and base64 payload.
pub fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (media, data) = rest.split_once(',')?;
    let media = media.strip_suffix(";base64")?;
    Some((media, data))
}

/// A text part, with its cache hint when the block had one.
pub fn text_part(text: String, cache: Option<CacheControl>) -> Part {
    Part { cache_control: cache, ..Part::text(text) }
}

/// What a writer needs besides the turns: the model and its output
/// reservation, the tools, and the base64 of every stored object it embeds.
#[derive(Debug, Default)]
pub struct Body {
    pub model: String,
    pub max_tokens: u64,
    pub tools: Vec<ToolDefinition>,
    /// Base64 by object id; filled by rendering, which checks each object may go to the sink.
    pub blobs: BTreeMap<String, String>,
}

impl Body {
    pub fn base64(&self, object_id: &str) -> &str {
        self.blobs.get(object_id).map_or("", String::as_str)
    }

    /// A media part's source as a `data:` URL (OpenAI's form), or its own URL.
    pub fn data_url(&self, part: &Part) -> String {
        match (&part.url, &part.content_ref) {
            (Some(url), _) => url.clone(),
            (None, Some(reference)) => {
                format!("data:{};base64,{}", part.media_type.as_deref().unwrap_or("application/octet-stream"), self.base64(&reference.object_id))
            }
            (None, None) => String::new(),
        }
    }
}

/// Points a media part read from a URL at its bytes: a `data:` URL's payload
/// is stored, any other URL is kept.
pub fn attach(turn: &mut Turn, part: &mut Part, url: String) {
    match data_url(&url) {
        Some((media, data)) => {
            part.media_type = Some(media.to_string());
            turn.blobs.push((turn.parts.len(), data.to_string()));
        }
        None => part.url = Some(url),
    }
}
