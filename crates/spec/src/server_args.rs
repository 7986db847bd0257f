//! A launched server's settings as a matrix axis (`[matrix] server_args`):
//! one value is a table of flags, e.g. `{ max_num_seqs = 256,
//! enable_prefix_caching = true }`, turned into argv with vLLM's `bench
//! sweep serve` convention: `--max-num-seqs 256 --enable-prefix-caching`.
//!
//! A spec is a stranger's pull request, so what a value may hold is narrow:
//! keys are identifiers (`[a-z0-9][a-z0-9_-]*`), values are scalars
//! (a boolean, an integer, a finite float or a string without control
//! characters that does not start with `-`), and the result is argv given
//! to the program directly, never a shell.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The key of an entry that names it instead of setting a flag.
pub const NAME_KEY: &str = "name";

/// The most flags one entry may set.
pub const MAX_ARGS: usize = 64;

/// The longest string value, in bytes.
pub const MAX_VALUE_BYTES: usize = 4096;

/// One value of the `server_args` axis: its name and the flags it sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerArgs {
    /// The entry's `name`, else its settings written `key=value` joined
    /// by `,` (in key order).
    pub name: String,
    /// The flags, by their key as written (underscores kept).
    pub args: BTreeMap<String, ArgValue>,
}

/// A flag's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ArgValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
}

impl std::fmt::Display for ArgValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgValue::Bool(b) => write!(f, "{b}"),
            ArgValue::Int(i) => write!(f, "{i}"),
            ArgValue::Float(x) => write!(f, "{x}"),
            ArgValue::String(s) => f.write_str(s),
        }
    }
}

impl ServerArgs {
    /// The name an unnamed entry gets: `key=value` pairs joined by `,`.
    pub fn default_name(args: &BTreeMap<String, ArgValue>) -> String {
        if args.is_empty() {
            return "defaults".into();
        }
        args.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The flags as argv, in key order: `--key-with-dashes VALUE`; a true
    /// boolean is the flag alone, a false one is left out.
    pub fn argv(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in &self.args {
            let flag = format!("--{}", k.replace('_', "-"));
            match v {
                ArgValue::Bool(true) => out.push(flag),
                ArgValue::Bool(false) => {}
                other => {
                    out.push(flag);
                    out.push(other.to_string());
                }
            }
        }
        out
    }
}

/// Whether `k` may name a flag: `[a-z0-9][a-z0-9_-]*`, at most 64 bytes.
pub fn is_flag_key(k: &str) -> bool {
    let mut chars = k.chars();
    k.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'))
}

/// Why a value cannot be a flag's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadValue {
    #[error("expected a finite number, found nan or inf")]
    NotFinite,
    #[error("expected a string of at most 4096 bytes")]
    TooLong,
    #[error("expected a string without control characters (newlines, tabs, escapes, NUL)")]
    Control,
    #[error(
        "expected a value that does not start with `-`, which the server would read as another flag"
    )]
    Dash,
    #[error("expected a boolean, a number or a string, found a date-time")]
    DateTime,
    #[error("expected a boolean, a number or a string, found a list")]
    List,
    #[error("expected a boolean, a number or a string, found a table")]
    Table,
}

/// The flag value `v` is, or why it cannot be one.
pub fn check_value(v: &toml::Value) -> Result<ArgValue, BadValue> {
    match v {
        toml::Value::Boolean(b) => Ok(ArgValue::Bool(*b)),
        toml::Value::Integer(i) => Ok(ArgValue::Int(*i)),
        toml::Value::Float(x) if x.is_finite() => Ok(ArgValue::Float(*x)),
        toml::Value::Float(_) => Err(BadValue::NotFinite),
        toml::Value::String(s) if s.len() > MAX_VALUE_BYTES => Err(BadValue::TooLong),
        toml::Value::String(s) if s.chars().any(char::is_control) => Err(BadValue::Control),
        toml::Value::String(s) if s.starts_with('-') => Err(BadValue::Dash),
        toml::Value::String(s) => Ok(ArgValue::String(s.clone())),
        toml::Value::Datetime(_) => Err(BadValue::DateTime),
        toml::Value::Array(_) => Err(BadValue::List),
        toml::Value::Table(_) => Err(BadValue::Table),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(pairs: &[(&str, ArgValue)]) -> ServerArgs {
        let args: BTreeMap<String, ArgValue> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        ServerArgs {
            name: ServerArgs::default_name(&args),
            args,
        }
    }

    #[test]
    fn argv_follows_vllm_sweep_convention() {
        let a = args(&[
            ("max_num_seqs", ArgValue::Int(256)),
            ("enable_prefix_caching", ArgValue::Bool(true)),
            ("enforce_eager", ArgValue::Bool(false)),
            ("gpu_memory_utilization", ArgValue::Float(0.9)),
            ("kv-cache-dtype", ArgValue::String("fp8".into())),
        ]);
        assert_eq!(
            a.argv(),
            [
                "--enable-prefix-caching",
                "--gpu-memory-utilization",
                "0.9",
                "--kv-cache-dtype",
                "fp8",
                "--max-num-seqs",
                "256"
            ]
        );
        assert_eq!(
            a.name,
            "enable_prefix_caching=true,enforce_eager=false,gpu_memory_utilization=0.9,kv-cache-dtype=fp8,max_num_seqs=256"
        );
        assert_eq!(args(&[]).name, "defaults");
        assert!(args(&[]).argv().is_empty());
    }

    #[test]
    fn keys_are_identifiers() {
        for ok in ["np", "max_num_seqs", "ctx-size", "4bit"] {
            assert!(is_flag_key(ok), "{ok}");
        }
        for bad in [
            "",
            "-x",
            "_x",
            "Max",
            "a b",
            "a=b",
            "a;rm",
            "a\nb",
            "ä",
            &*"x".repeat(65),
        ] {
            assert!(!is_flag_key(bad), "{bad:?}");
        }
    }

    #[test]
    fn values_are_plain_scalars() {
        let v = |s: &str| -> toml::Value {
            let t: toml::Table = toml::from_str(&format!("v = {s}")).unwrap();
            t["v"].clone()
        };
        assert_eq!(check_value(&v("true")), Ok(ArgValue::Bool(true)));
        assert_eq!(check_value(&v("-1")), Ok(ArgValue::Int(-1)));
        assert_eq!(check_value(&v("0.5")), Ok(ArgValue::Float(0.5)));
        assert_eq!(
            check_value(&v("\"fp8\"")),
            Ok(ArgValue::String("fp8".into()))
        );
        for bad in [
            "nan",
            "inf",
            "\"a\\nb\"",
            "\"\\u001b[31m\"",
            "\"--trust-remote-code\"",
            "[1, 2]",
            "{ a = 1 }",
            "1979-05-27",
        ] {
            assert!(check_value(&v(bad)).is_err(), "{bad}");
        }
    }
}
