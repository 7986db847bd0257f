//! Redaction: the one layer every writer passes text through so that no
//! secret reaches a file, a report or the terminal.
//!
//! A [`Redactor`] holds literal secret values (API keys, header values,
//! URL passwords, the values of environment variables a spec reads) and
//! masks each as `<redacted>` wherever it appears, in the forms it takes in
//! our outputs too (JSON-escaped, percent-encoded, HTML-escaped, and a
//! `user:password` pair as the base64 of a Basic auth header). Whatever it
//! holds, it also strips the userinfo of every URL (`scheme://user:pass@host`
//! becomes `scheme://<redacted>@host`) and masks query-string values whose
//! names say they are credentials (`?api_key=...`, `token`, `signature`...).
//! Text without a secret comes back unchanged.
//!
//! [`spec_source`] redacts a spec's TOML text: every header value under
//! `targets.*.headers` (tables, inline tables and dotted keys), and then
//! everything [`Redactor::text`] masks.
//!
//! Results are redacted as data ([`Results::redact`]): every string and map
//! key, whatever field it sits in, so a field added later is covered too.
//! A process-wide redactor ([`install`], [`global`]) serves the code that
//! prints errors far from the run that knows the secrets.

use std::borrow::Cow;
use std::sync::OnceLock;

use base64::Engine as _;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Results;

/// What a secret is replaced with.
pub const MASK: &str = "<redacted>";

/// Secrets shorter than this (in characters) are not masked: masking "1"
/// or "abc" would mangle every output while protecting nothing.
pub const MIN_SECRET_CHARS: usize = 4;

/// Masks secrets in text. Cheap to clone; empty by default (then it only
/// strips URL userinfo and credential query values).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Every form of every secret, longest first.
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new() -> Redactor {
        Redactor::default()
    }

    /// Adds a secret value (ignored when shorter than
    /// [`MIN_SECRET_CHARS`]), with the forms it takes in our outputs.
    pub fn add(&mut self, secret: &str) {
        if secret.trim().chars().count() < MIN_SECRET_CHARS {
            return;
        }
        let mut forms = vec![secret.to_string()];
        let json = serde_json::to_string(secret).expect("a string serializes");
        forms.push(json[1..json.len() - 1].to_string());
        forms.push(percent_encode(secret));
        forms.push(html_escape(secret));
        if let Some(decoded) = percent_decode(secret) {
            forms.push(decoded);
        }
        for f in forms {
            // A secret inside the mask itself ("dact") cannot be told from
            // the mask: masking it would rewrite every mask again.
            if f.trim().chars().count() >= MIN_SECRET_CHARS
                && !MASK.contains(f.as_str())
                && !self.secrets.contains(&f)
            {
                self.secrets.push(f);
            }
        }
        self.secrets
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    }

    /// Adds a URL's credentials: the password, and the `user:password`
    /// pair as a Basic auth header carries it (base64), in case a server
    /// reflects the header. A user name alone is not a secret.
    pub fn add_userinfo(&mut self, user: &str, password: &str) {
        if password.is_empty() {
            return;
        }
        self.add(password);
        let user = percent_decode(user).unwrap_or_else(|| user.to_string());
        let pass = percent_decode(password).unwrap_or_else(|| password.to_string());
        self.add(&base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}")));
        self.add(&base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")));
    }

    /// Adds the credentials in `url`'s userinfo, if any.
    pub fn add_url(&mut self, url: &str) {
        if let Some((user, password)) = userinfo(url) {
            self.add_userinfo(user, password.unwrap_or(""));
        }
    }

    /// Builder form of [`Redactor::add`].
    pub fn with(mut self, secret: &str) -> Redactor {
        self.add(secret);
        self
    }

    /// How many forms of secrets it masks.
    pub fn len(&self) -> usize {
        self.secrets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `s` with every secret masked, URL userinfo stripped and credential
    /// query values masked.
    pub fn text(&self, s: &str) -> String {
        self.text_cow(s).into_owned()
    }

    /// [`Redactor::text`], borrowing when nothing changed.
    pub fn text_cow<'a>(&self, s: &'a str) -> Cow<'a, str> {
        let literal = self.literals(s);
        match urls(&literal) {
            Some(out) => Cow::Owned(out),
            None => literal,
        }
    }

    fn literals<'a>(&self, s: &'a str) -> Cow<'a, str> {
        if self.secrets.is_empty() || !self.secrets.iter().any(|x| s.contains(lead(x))) {
            return Cow::Borrowed(s);
        }
        let mut out = String::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            // The secret (or its cut-off head) that starts earliest; the
            // longest of those that start at the same place.
            let hit = self
                .secrets
                .iter()
                .filter_map(|x| {
                    let at = i + s[i..].find(lead(x))?;
                    Some((at, common_prefix(x, &s[at..])))
                })
                .min_by_key(|&(at, len)| (at, std::cmp::Reverse(len)));
            match hit {
                Some((at, len)) => {
                    out.push_str(&s[i..at]);
                    out.push_str(MASK);
                    i = at + len;
                }
                None => {
                    out.push_str(&s[i..]);
                    break;
                }
            }
        }
        Cow::Owned(out)
    }

    /// Redacts every string (and map key) in a JSON value; whether any
    /// changed.
    pub fn value(&self, v: &mut serde_json::Value) -> bool {
        use serde_json::Value;
        match v {
            Value::String(s) => match self.text_cow(s) {
                Cow::Borrowed(_) => false,
                Cow::Owned(o) => {
                    *s = o;
                    true
                }
            },
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, x| self.value(x) | changed),
            Value::Object(map) => {
                let mut changed = false;
                if map
                    .keys()
                    .any(|k| matches!(self.text_cow(k), Cow::Owned(_)))
                {
                    let old = std::mem::take(map);
                    for (k, x) in old {
                        map.insert(self.text(&k), x);
                    }
                    changed = true;
                }
                map.values_mut()
                    .fold(changed, |changed, x| self.value(x) | changed)
            }
            _ => false,
        }
    }

    /// Redacts every string of any serializable data, through its JSON
    /// form. Data without a secret is left untouched (not even rebuilt);
    /// whether anything changed.
    pub fn data<T: Serialize + DeserializeOwned>(&self, x: &mut T) -> serde_json::Result<bool> {
        let mut v = serde_json::to_value(&*x)?;
        if !self.value(&mut v) {
            return Ok(false);
        }
        *x = serde_json::from_value(v)?;
        Ok(true)
    }
}

impl<C: Serialize + DeserializeOwned> Results<C> {
    /// Masks every secret `r` knows (and URL userinfo) in every string of
    /// the results: the spec's text, configurations, error examples,
    /// server commands and logs, warnings. Results without a secret are
    /// left as they are.
    pub fn redact(&mut self, r: &Redactor) {
        if r.data(self).is_ok() {
            return;
        }
        // A file that does not survive its own JSON form (it could not be
        // read back either): redact the free text field by field.
        self.spec.source = r.text(&self.spec.source);
        for p in &mut self.points {
            let _ = r.data(&mut p.config);
            let t = |s: &mut String| *s = r.text(s);
            p.failure.as_mut().map(t);
            for reason in p.warnings.iter_mut().chain(&mut p.invalid_reasons) {
                t(&mut reason.message);
                reason.fix.as_mut().map(t);
            }
            if let Some(s) = &mut p.server {
                let _ = r.data(s);
            }
            let _ = r.data(&mut p.merged.error_examples);
            let _ = r.data(&mut p.merged.http_status_examples);
            for run in &mut p.runs {
                let _ = r.data(&mut run.stats.error_examples);
                let _ = r.data(&mut run.stats.http_status_examples);
                if let Some(shard) = &mut run.shard {
                    let _ = r.data(&mut shard.tally.error_examples);
                    let _ = r.data(&mut shard.tally.http_status_examples);
                }
            }
        }
    }
}

/// A spec's TOML text with every header value (`targets.*.headers`, as a
/// table, an inline table or dotted keys) replaced by `"<redacted>"`, then
/// passed through [`Redactor::text`]. Text that is not TOML is only
/// passed through the redactor.
pub fn spec_source(source: &str, r: &Redactor) -> String {
    let mut spans: Vec<std::ops::Range<usize>> = Vec::new();
    if let Ok(doc) = toml_edit::Document::parse(source) {
        if let Some(targets) = doc
            .as_table()
            .get("targets")
            .and_then(|t| t.as_table_like())
        {
            for (_, target) in targets.iter() {
                let Some(headers) = target
                    .as_table_like()
                    .and_then(|t| t.get("headers"))
                    .and_then(|h| h.as_table_like())
                else {
                    continue;
                };
                for (_, value) in headers.iter() {
                    spans.extend(value.span());
                }
            }
        }
    }
    spans.sort_by_key(|s| s.start);
    let mut out = String::with_capacity(source.len());
    let mut at = 0;
    for s in spans {
        if s.start < at || s.end > source.len() {
            continue;
        }
        out.push_str(&source[at..s.start]);
        out.push('"');
        out.push_str(MASK);
        out.push('"');
        at = s.end;
    }
    out.push_str(&source[at..]);
    r.text(&out)
}

/// The user and password (if any) in a URL's userinfo.
pub fn userinfo(url: &str) -> Option<(&str, Option<&str>)> {
    let start = url.find("://")? + 3;
    let authority = &url[start..];
    let end = authority.find(is_authority_end).unwrap_or(authority.len());
    let at = authority[..end].rfind('@')?;
    let info = &authority[..at];
    Some(match info.split_once(':') {
        Some((u, p)) => (u, Some(p)),
        None => (info, None),
    })
}

static GLOBAL: OnceLock<Redactor> = OnceLock::new();

/// Installs the process-wide redactor (the first call wins): what the
/// run knows of its secrets, for code that prints far from it (the error
/// printer of `main`).
pub fn install(r: Redactor) {
    let _ = GLOBAL.set(r);
}

/// The process-wide redactor: the installed one, or an empty one (which
/// still strips URL userinfo).
pub fn global() -> &'static Redactor {
    static EMPTY: Redactor = Redactor {
        secrets: Vec::new(),
    };
    GLOBAL.get().unwrap_or(&EMPTY)
}

/// A secret's head this long or longer is masked on its own: an excerpt
/// cut off in the middle of a secret (an error body shown up to 120
/// bytes) must not give away its first half.
pub const HEAD_CHARS: usize = 8;

/// What a search for `secret` looks for: its first [`HEAD_CHARS`]
/// characters (the whole of a shorter one).
fn lead(secret: &str) -> &str {
    match secret.char_indices().nth(HEAD_CHARS) {
        Some((end, _)) => &secret[..end],
        None => secret,
    }
}

/// The length in bytes of the longest common prefix of `a` and `b`, on a
/// character boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((at, _), _)| at)
}

/// Query parameter names whose values are credentials.
fn secret_param(name: &str) -> bool {
    let n = name.to_ascii_lowercase().replace(['-', '_'], "");
    [
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "auth",
        "authorization",
        "signature",
        "sig",
        "credential",
        "credentials",
        "accesstoken",
        "accesskey",
        "sessiontoken",
        "clientsecret",
        "xamzsignature",
        "xamzcredential",
        "xamzsecuritytoken",
    ]
    .iter()
    .any(|s| n == *s || (s.len() > 4 && n.ends_with(s)))
}

fn is_authority_end(c: char) -> bool {
    matches!(
        c,
        '/' | '?' | '#' | '"' | '\'' | '<' | '>' | '\\' | '`' | '|'
    ) || c.is_whitespace()
        || c.is_control()
}

fn is_url_end(c: char) -> bool {
    matches!(c, '"' | '\'' | '<' | '>' | '\\' | '`' | '|') || c.is_whitespace() || c.is_control()
}

/// Strips userinfo and masks credential query values in every URL of `s`;
/// `None` when nothing changed.
fn urls(s: &str) -> Option<String> {
    if !s.contains("://") {
        return None;
    }
    let mut out = String::with_capacity(s.len());
    let mut changed = false;
    let mut i = 0;
    while let Some(rel) = s[i..].find("://") {
        let sep = i + rel;
        let start = sep + 3;
        // A scheme: letters, digits, '+', '-', '.' right before "://".
        let scheme_ok = s[..sep]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        out.push_str(&s[i..start]);
        i = start;
        if !scheme_ok {
            continue;
        }
        let rest = &s[start..];
        let auth_end = rest.find(is_authority_end).unwrap_or(rest.len());
        if let Some(at) = rest[..auth_end].rfind('@') {
            out.push_str(MASK);
            out.push('@');
            i = start + at + 1;
            changed = true;
        }
        // The query, up to a fragment or the end of the URL.
        let rest = &s[i..];
        let url_end = rest.find(is_url_end).unwrap_or(rest.len());
        let url = &rest[..url_end];
        if let Some(q) = url.find('?') {
            out.push_str(&url[..=q]);
            let (query, fragment) = match url[q + 1..].find('#') {
                Some(h) => (&url[q + 1..q + 1 + h], &url[q + 1 + h..]),
                None => (&url[q + 1..], ""),
            };
            let mut first = true;
            for pair in query.split('&') {
                if !first {
                    out.push('&');
                }
                first = false;
                match pair.split_once('=') {
                    Some((name, value)) if secret_param(name) && !value.is_empty() => {
                        out.push_str(name);
                        out.push('=');
                        out.push_str(MASK);
                        changed |= value != MASK;
                    }
                    _ => out.push_str(pair),
                }
            }
            out.push_str(fragment);
            i += url_end;
        }
    }
    out.push_str(&s[i..]);
    changed.then_some(out)
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `s` with `%XX` escapes decoded, when it has any and decodes to UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return None;
    }
    let bytes = s.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).ok().filter(|d| d != s)
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "s3cr3t-key-0123";

    #[test]
    fn literal_secrets_are_masked_wherever_they_appear() {
        let r = Redactor::new().with(KEY);
        assert_eq!(
            r.text(&format!("401: invalid key Bearer {KEY}, again {KEY}.")),
            "401: invalid key Bearer <redacted>, again <redacted>."
        );
        assert_eq!(r.text("nothing here"), "nothing here");
        assert!(matches!(r.text_cow("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_secret_cut_off_is_masked_from_its_head_on() {
        let r = Redactor::new().with(KEY);
        // An excerpt that ends inside the key (the first 11 characters).
        assert_eq!(
            r.text("expected value: x-key: s3cr3t-key)"),
            "expected value: x-key: <redacted>)"
        );
        // Shorter than the head: not masked (it could be anything).
        assert_eq!(r.text("s3cr3t"), "s3cr3t");
        // A short secret is masked only whole.
        let r = Redactor::new().with("abcdef");
        assert_eq!(r.text("abcde abcdef"), "abcde <redacted>");
    }

    #[test]
    fn short_and_empty_secrets_are_ignored() {
        let r = Redactor::new()
            .with("")
            .with("abc")
            .with("   x  ")
            .with("1");
        assert!(r.is_empty());
        assert_eq!(r.text("abc 1 x"), "abc 1 x");
    }

    #[test]
    fn the_longest_secret_wins_and_masks_are_not_masked_again() {
        let r = Redactor::new().with("abcd").with("abcdefgh").with("dact");
        assert_eq!(r.text("xabcdefghy abcd"), "x<redacted>y <redacted>");
        // "dact" is in "<redacted>": it is not kept, so masks stay masks.
        assert_eq!(r.len(), 2);
        let once = r.text("abcd dact");
        assert_eq!(once, "<redacted> dact");
        assert_eq!(r.text(&once), once);
    }

    #[test]
    fn escaped_and_encoded_forms_are_masked() {
        let secret = "p@ss\"w/rd&x";
        let r = Redactor::new().with(secret);
        let json = serde_json::to_string(&format!("key={secret}")).unwrap();
        assert!(!r.text(&json).contains("w/rd"), "{}", r.text(&json));
        assert_eq!(
            r.text(&format!("q={}", percent_encode(secret))),
            "q=<redacted>"
        );
        assert_eq!(
            r.text(&format!("<b>{}</b>", html_escape(secret))),
            "<b><redacted></b>"
        );
    }

    #[test]
    fn url_userinfo_is_always_stripped() {
        let r = Redactor::new();
        assert_eq!(
            r.text("error sending request for url (http://user:pw@127.0.0.1:8000/v1/completions)"),
            "error sending request for url (http://<redacted>@127.0.0.1:8000/v1/completions)"
        );
        assert_eq!(
            r.text("\"base_url\": \"https://tok@host/v1\""),
            "\"base_url\": \"https://<redacted>@host/v1\""
        );
        // Not userinfo: an '@' in the path, an e-mail address, no URL.
        for s in [
            "http://host/v1/@models",
            "mail me at a@b.c",
            "http://127.0.0.1:8000/v1",
        ] {
            assert_eq!(r.text(s), s);
        }
        // Idempotent.
        let once = r.text("http://u:p@h/x");
        assert_eq!(r.text(&once), once);
    }

    #[test]
    fn credential_query_values_are_masked() {
        let r = Redactor::new();
        assert_eq!(
            r.text("GET https://h/v1?model=m&api_key=abc123&x=1#top done"),
            "GET https://h/v1?model=m&api_key=<redacted>&x=1#top done"
        );
        assert_eq!(
            r.text("https://h/v1?X-Amz-Signature=ff00&page=2"),
            "https://h/v1?X-Amz-Signature=<redacted>&page=2"
        );
        let plain = "http://h/metrics?format=prometheus&keys=3";
        assert_eq!(r.text(plain), plain);
        // Query values that are secrets are masked by value, whatever their name.
        let r = Redactor::new().with("envvalue-42");
        assert_eq!(
            r.text("http://h/v1?q=envvalue-42"),
            "http://h/v1?q=<redacted>"
        );
    }

    #[test]
    fn basic_auth_of_a_url_is_masked_too() {
        let mut r = Redactor::new();
        r.add_url("http://alice:hunter22@127.0.0.1:9/v1");
        let basic = base64::engine::general_purpose::STANDARD.encode("alice:hunter22");
        assert_eq!(
            r.text(&format!("got Authorization: Basic {basic}; hunter22")),
            "got Authorization: Basic <redacted>; <redacted>"
        );
        assert_eq!(userinfo("http://a@h/"), Some(("a", None)));
        assert_eq!(userinfo("http://h/a@b"), None);
    }

    #[test]
    fn json_values_are_redacted_in_strings_and_keys() {
        let r = Redactor::new().with(KEY);
        let mut v = serde_json::json!({
            "a": [1, format!("x {KEY}"), {"b": "http://u:p@h/"}],
            format!("k-{KEY}"): true,
            "n": 2.5,
        });
        assert!(r.value(&mut v));
        let text = v.to_string();
        assert!(!text.contains(KEY) && !text.contains("u:p@"), "{text}");
        let mut clean = serde_json::json!({"a": "b", "n": [1, 2]});
        assert!(!r.value(&mut clean));
    }

    #[test]
    fn spec_source_masks_every_header_value_form() {
        let src = r#"name = "t"
[targets.a]
kind = "openai"
base_url = "http://bob:pw12345@127.0.0.1:1/v1"
headers = { "X-Api-Key" = "short", Other = 'lit' }

[targets.b]
kind = "openai"
base_url = "http://127.0.0.1:2/v1"
headers.X-Token = "tok"

[targets.c.headers]
Authorization = """Bearer
abc"""
X-Plain = "value"
"#;
        let out = spec_source(src, &Redactor::new());
        for s in [
            "short",
            "'lit'",
            "tok\"",
            "Bearer",
            "abc",
            "\"value\"",
            "pw12345",
        ] {
            assert!(!out.contains(s), "{s} in:\n{out}");
        }
        assert!(
            out.contains("headers = { \"X-Api-Key\" = \"<redacted>\", Other = \"<redacted>\" }")
        );
        assert!(out.contains("X-Plain = \"<redacted>\""));
        assert!(out.contains("base_url = \"http://<redacted>@127.0.0.1:1/v1\""));
        assert!(out.contains("base_url = \"http://127.0.0.1:2/v1\""));
        // A spec without secrets is unchanged; non-TOML passes through.
        let plain = "name = \"q\"\n[targets.s]\nkind = \"sim\"\n";
        assert_eq!(spec_source(plain, &Redactor::new()), plain);
        assert_eq!(
            spec_source("not [toml", &Redactor::new().with("toml")),
            "not [<redacted>"
        );
    }

    #[test]
    fn results_without_a_secret_are_untouched() {
        let r = Redactor::new().with(KEY);
        let mut v: serde_json::Value = serde_json::json!({"x": 1.0000000000000002});
        assert!(!r.data(&mut v).unwrap());
        assert_eq!(v["x"], 1.0000000000000002);
    }
}
