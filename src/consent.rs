//! What a spec may do to this machine beyond sending requests, and the
//! user's consent to it. A spec is treated as if it came from a stranger's
//! pull request: it may name a server to start (`launch`, which runs a
//! command and reads the variables its `allow_env` lists), and only a flag
//! the pull request cannot set lets it (`--allow-launch`, or the
//! workflow's `INFER_BENCH_ALLOW_LAUNCH=1`). Checked before anything
//! starts, so a refused run creates nothing.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::spec::{Spec, SpecErrors};

/// Refuses a plan whose selected points launch servers, unless allowed,
/// and one whose `api_key_env` names a variable that is not set (requests
/// would silently go without an Authorization header).
pub fn check(spec: &Spec, plan: &Plan, allow_launch: bool) -> Result<()> {
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    for point in &plan.points {
        let t = &point.config.target;
        if !seen.insert(t.name.clone()) {
            continue;
        }
        if let (Some(launch), false) = (&t.launch, allow_launch) {
            let program = launch.command.first().map(String::as_str).unwrap_or("");
            let env = if launch.allow_env.is_empty() {
                String::new()
            } else {
                format!(", reading {}", launch.allow_env.join(", "))
            };
            errors.push(spec.error(
                &format!("targets.{}.launch", t.name),
                format!(
                    "target `{}` starts a server: it would run `{}` on this machine{env}",
                    t.name,
                    program.escape_debug()
                ),
                Some(
                    "infer-bench runs a spec's commands only with --allow-launch (or INFER_BENCH_ALLOW_LAUNCH=1 set by the workflow); give it for specs you trust, never for a pull request's own spec (docs/regression.md, \"Running on pull requests\")"
                        .into(),
                ),
            ));
        }
        if let Some(var) = &t.api_key_env {
            if std::env::var_os(var).is_none_or(|v| v.is_empty()) {
                errors.push(spec.error(
                    &format!("targets.{}.api_key_env", t.name),
                    format!("the environment variable {var} is not set, so requests would go without an API key"),
                    Some(format!("export {var}=..., or remove api_key_env if the server needs no key")),
                ));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Spec(SpecErrors(errors)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> (Spec, Plan) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(&path, text).unwrap();
        let spec = crate::spec::load(&path).unwrap();
        let plan = Plan::build(&spec).unwrap();
        (spec, plan)
    }

    const LAUNCH: &str = r#"name = "c"
[targets.local]
kind = "openai"
[targets.local.launch]
command = ["llama-server", "--port", "{port}", "--hf-token", "{env.HF_TOKEN}"]
allow_env = ["HF_TOKEN"]
[models.m]
[workloads.w]
api = "completions"
input_tokens = 8
output_tokens = 8
[load]
concurrency = 1
requests = 1
"#;

    #[test]
    fn a_launch_needs_consent_and_names_the_key_and_the_flag() {
        let (s, p) = spec(LAUNCH);
        let e = check(&s, &p, false).unwrap_err().to_string();
        assert!(e.contains("s.toml:4:1"), "{e}");
        assert!(e.contains("targets.local.launch"), "{e}");
        assert!(e.contains("llama-server"), "{e}");
        assert!(e.contains("reading HF_TOKEN"), "{e}");
        assert!(e.contains("--allow-launch"), "{e}");
        assert!(check(&s, &p, true).is_ok());
    }

    #[test]
    fn an_unset_api_key_variable_is_an_error_before_the_run() {
        let text = LAUNCH.replace(
            "kind = \"openai\"\n",
            "kind = \"openai\"\napi_key_env = \"INFER_BENCH_TEST_SURELY_UNSET\"\n",
        );
        let (s, p) = spec(&text);
        let e = check(&s, &p, true).unwrap_err().to_string();
        assert!(
            e.contains("INFER_BENCH_TEST_SURELY_UNSET is not set"),
            "{e}"
        );
        assert!(e.contains("targets.local.api_key_env"), "{e}");
    }
}
