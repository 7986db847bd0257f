//! Where a run's secrets come from, gathered into the [`Redactor`] every
//! writer of the run passes its text through (results, requests.jsonl,
//! the terminal, errors): the value of each target's `api_key_env`
//! variable, every header value, the credentials in each `base_url` and
//! `metrics_url`, and the current value of every environment variable the
//! spec names, through `{env.NAME}` placeholders (launch command, launch
//! environment and folder, URLs, headers) or a launch block's `allow_env`.

use infer_bench_results::redact::Redactor;
use infer_bench_spec::Spec;
use infer_bench_spec::model::Target;

/// The redactor of a run of `spec`, from this process's environment.
pub fn redactor(spec: &Spec) -> Redactor {
    redactor_with(spec, &|name| std::env::var(name).ok())
}

/// [`redactor`] with the environment read through `env` (tests).
pub fn redactor_with(spec: &Spec, env: &dyn Fn(&str) -> Option<String>) -> Redactor {
    let mut r = Redactor::new();
    for t in spec.targets.values() {
        add_target(&mut r, t, env);
    }
    r
}

fn add_target(r: &mut Redactor, t: &Target, env: &dyn Fn(&str) -> Option<String>) {
    if let Some(key) = t.api_key_env.as_deref().and_then(env) {
        r.add(&key);
    }
    let mut templates: Vec<&str> = Vec::new();
    for v in t.headers.values() {
        r.add(v);
        templates.push(v);
    }
    templates.extend(t.base_url.as_deref());
    templates.extend(t.metrics_url.as_deref());
    if let Some(l) = &t.launch {
        templates.extend(l.command.iter().map(String::as_str));
        templates.extend(l.env.values().map(String::as_str));
        templates.extend(l.cwd.as_deref());
        for var in &l.allow_env {
            if let Some(v) = env(var) {
                r.add(&v);
            }
        }
    }
    for text in &templates {
        for var in env_names(text) {
            if let Some(v) = env(var) {
                r.add(&v);
            }
        }
    }
    for url in [t.base_url.as_deref(), t.metrics_url.as_deref()]
        .into_iter()
        .flatten()
    {
        r.add_url(url);
        r.add_url(&fill_env(url, env));
    }
}

/// The names in `{env.NAME}` placeholders of `text`.
fn env_names(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{env.") {
        let after = &rest[open + 5..];
        let Some(close) = after.find('}') else { break };
        out.push(&after[..close]);
        rest = &after[close + 1..];
    }
    out
}

/// `text` with its `{env.NAME}` placeholders filled (unset ones left).
fn fill_env(text: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut s = text.to_string();
    for var in env_names(text) {
        if let Some(v) = env(var) {
            s = s.replace(&format!("{{env.{var}}}"), &v);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_of_a_secret_is_gathered() {
        let source = r#"name = "t"
[targets.a]
kind = "openai"
base_url = "http://bob:pw-in-url@127.0.0.1:1/v1"
api_key_env = "KEY_VAR"
headers = { X-Api = "header-value" }
metrics_url = "http://127.0.0.1:1/metrics?token=abc"

[targets.b]
kind = "openai"
base_url = "http://u:{env.URL_PW}@127.0.0.1:{port}/v1"
launch = { command = ["srv", "--key={env.ARG_VAR}", "--port", "{port}"], env = { T = "{env.ENV_VAR}" }, allow_env = ["URL_PW", "ARG_VAR", "ENV_VAR", "EXTRA"] }

[models.m]
served_name = "m"
[workloads.w]
input_tokens = 8
output_tokens = 4
[load]
concurrency = 1
requests = 1
[matrix]
target = ["a", "b"]
"#;
        let spec = infer_bench_spec::compile("s.toml", source, std::path::Path::new("."))
            .expect("compiles");
        let env = |name: &str| {
            Some(
                match name {
                    "KEY_VAR" => "the-api-key",
                    "URL_PW" => "url-env-pw",
                    "ARG_VAR" => "arg-env-value",
                    "ENV_VAR" => "env-env-value",
                    "EXTRA" => "extra-allowed",
                    _ => return None,
                }
                .to_string(),
            )
        };
        let r = redactor_with(&spec, &env);
        for s in [
            "the-api-key",
            "header-value",
            "pw-in-url",
            "url-env-pw",
            "arg-env-value",
            "env-env-value",
            "extra-allowed",
        ] {
            assert_eq!(r.text(&format!("[{s}]")), "[<redacted>]", "{s}");
        }
        assert_eq!(r.text("nothing secret"), "nothing secret");
    }
}
