//! `--model PROVIDER:NAME` to a model.
//!
//! | spec | model | base URL | key |
//! | --- | --- | --- | --- |
//! | `openai:NAME` | chat completions | `--base-url`, else `OPENAI_BASE_URL`, else OpenAI's | `OPENAI_API_KEY`; optional with a base URL |
//! | `anthropic:NAME` | Messages | `--base-url`, else `ANTHROPIC_BASE_URL`, else Anthropic's | `ANTHROPIC_API_KEY`; optional with a base URL |
//! | `script:FILE` | [`ScriptModel`] | | |
//!
//! | `none` | no chat at all | | |
//!
//! Without `--model`, `QUORUM_MODEL` is the spec.

use std::path::Path;
use std::sync::Arc;

use super::anthropic::{ANTHROPIC_BASE_URL, Anthropic};
use super::openai::{OPENAI_BASE_URL, OpenAi};
use super::script::ScriptModel;
use super::{LlmError, Model};

/// The providers, as `--model` names them.
pub const PROVIDERS: [&str; 3] = ["openai", "anthropic", "script"];

/// The spec that keeps the chat off (`--model none`, `QUORUM_MODEL=none`,
/// `[model] name = "none"`): no model and no conductor, not even the
/// default one.
pub const NONE: &str = "none";

/// Whether `spec` is [`NONE`].
pub fn is_none(spec: &str) -> bool {
    spec.trim().eq_ignore_ascii_case(NONE)
}

/// Each provider's default model, and the variable whose key picks it
/// when nothing else is chosen (in this order): what `/model` offers for
/// a key that is set.
pub const DEFAULT_MODELS: [(&str, &str); 2] = [
    ("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-5"),
    ("OPENAI_API_KEY", "openai:gpt-4o"),
];

/// The default models whose key `env` has, each with its variable, in
/// [`DEFAULT_MODELS`]' order.
pub fn keyed_defaults(env: &dyn Fn(&str) -> Option<String>) -> Vec<(&'static str, &'static str)> {
    DEFAULT_MODELS
        .into_iter()
        .filter(|(variable, _)| nonempty(env(variable)).is_some())
        .collect()
}

/// The spec to use when `--model` is not given: `QUORUM_MODEL`.
pub fn default_spec(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    nonempty(env("QUORUM_MODEL"))
}

/// The variable whose base URL the model `spec` names takes when it is
/// given none (`OPENAI_BASE_URL` for `openai:NAME`, ...); `None` for a
/// provider that takes none.
pub fn base_url_variable(spec: &str) -> Option<&'static str> {
    match spec.trim().split_once(':')?.0 {
        "openai" => Some("OPENAI_BASE_URL"),
        "anthropic" => Some("ANTHROPIC_BASE_URL"),
        _ => None,
    }
}

/// The model that `spec` names. `base_url` (from `--base-url`) wins over
/// the environment's; `env` reads the environment (tests pass their own).
pub fn from_spec(
    spec: &str,
    base_url: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Model>, LlmError> {
    let spec = spec.trim();
    if is_none(spec) {
        return Err(LlmError::Config(format!(
            "`{NONE}` is no model: it keeps the chat off (--model {NONE})"
        )));
    }
    let Some((provider, name)) = spec.split_once(':') else {
        return Err(LlmError::Config(format!(
            "the model {spec:?} names no provider: write PROVIDER:NAME, where PROVIDER is one of {} (e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, script:turns.json)",
            PROVIDERS.join(", ")
        )));
    };
    let name = name.trim();
    if name.is_empty() {
        let what = if provider == "script" {
            "a file"
        } else {
            "a model name"
        };
        return Err(LlmError::Config(format!(
            "the model {spec:?} lacks {what} after `{provider}:`"
        )));
    }
    let base_url = base_url.map(str::trim).filter(|b| !b.is_empty());
    match provider {
        "openai" => {
            let variable = base_url_variable(spec).unwrap_or_default();
            let base = base_url
                .map(str::to_string)
                .or_else(|| nonempty(env(variable)));
            let key = key(env, "OPENAI_API_KEY", base.is_some(), "openai")?;
            let base = base.unwrap_or_else(|| OPENAI_BASE_URL.to_string());
            check_url(&base)?;
            Ok(Arc::new(OpenAi::new(name, &base, key)))
        }
        "anthropic" => {
            let variable = base_url_variable(spec).unwrap_or_default();
            let base = base_url
                .map(str::to_string)
                .or_else(|| nonempty(env(variable)));
            let key = key(env, "ANTHROPIC_API_KEY", base.is_some(), "anthropic")?;
            let base = base.unwrap_or_else(|| ANTHROPIC_BASE_URL.to_string());
            check_url(&base)?;
            Ok(Arc::new(Anthropic::new(name, &base, key)))
        }
        "script" => Ok(Arc::new(ScriptModel::load(Path::new(name))?)),
        other => Err(LlmError::Config(format!(
            "unknown model provider {other:?} in {spec:?}: the providers are {}",
            PROVIDERS.join(", ")
        ))),
    }
}

fn key(
    env: &dyn Fn(&str) -> Option<String>,
    var: &str,
    has_base_url: bool,
    provider: &str,
) -> Result<Option<String>, LlmError> {
    match nonempty(env(var)) {
        Some(key) => Ok(Some(key)),
        None if has_base_url => Ok(None),
        None => Err(LlmError::Config(format!(
            "{var} is not set: the {provider} provider needs an API key (or a --base-url for a local server)"
        ))),
    }
}

fn check_url(url: &str) -> Result<(), LlmError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(LlmError::Config(format!(
            "the base URL {url:?} is not an http:// or https:// URL"
        )))
    }
}

fn nonempty(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    fn error(spec: &str, base: Option<&str>, env: &[(&str, &str)]) -> String {
        match from_spec(spec, base, &env_of(env)) {
            Ok(m) => panic!("{spec} gave {}", m.name()),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn providers_and_names() {
        let env = env_of(&[("OPENAI_API_KEY", "sk"), ("ANTHROPIC_API_KEY", "ak")]);
        let m = from_spec("openai:gpt-4o-mini", None, &env).unwrap();
        assert_eq!(m.name(), "openai:gpt-4o-mini");
        let m = from_spec("anthropic:claude-sonnet-4-5", None, &env).unwrap();
        assert_eq!(m.name(), "anthropic:claude-sonnet-4-5");
        // A local server needs no key; the name may hold colons.
        let m = from_spec(
            "openai:qwen2.5-coder:0.5b",
            Some("http://127.0.0.1:1/v1"),
            &env_of(&[]),
        )
        .unwrap();
        assert_eq!(m.name(), "openai:qwen2.5-coder:0.5b");
        let env = env_of(&[("OPENAI_BASE_URL", "http://localhost:11434/v1")]);
        assert!(from_spec("openai:llama3", None, &env).is_ok());
    }

    #[test]
    fn a_missing_key_names_its_variable() {
        let e = error("openai:gpt-4o", None, &[("ANTHROPIC_API_KEY", "x")]);
        assert!(e.contains("OPENAI_API_KEY"), "{e}");
        let e = error(
            "anthropic:claude",
            None,
            &[("OPENAI_API_KEY", "x"), ("ANTHROPIC_API_KEY", " ")],
        );
        assert!(e.contains("ANTHROPIC_API_KEY"), "{e}");
        // Another provider's base URL does not stand in for a key.
        let e = error("anthropic:claude", None, &[("OPENAI_BASE_URL", "http://x")]);
        assert!(e.contains("ANTHROPIC_API_KEY"), "{e}");
    }

    #[test]
    fn bad_specs_say_what_is_known() {
        let e = error("gemini:pro", None, &[]);
        assert!(
            e.contains("\"gemini\"") && e.contains("openai, anthropic, script"),
            "{e}"
        );
        let e = error("gpt-4o", None, &[]);
        assert!(
            e.contains("PROVIDER:NAME") && e.contains("openai, anthropic, script"),
            "{e}"
        );
        let e = error("openai:", Some("http://h"), &[]);
        assert!(e.contains("model name"), "{e}");
        let e = error("openai:m", Some("localhost:8080"), &[]);
        assert!(e.contains("not an http"), "{e}");
        let e = error("script:/nonexistent/turns.json", None, &[]);
        assert!(e.contains("/nonexistent/turns.json"), "{e}");
    }

    #[test]
    fn scripts_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("turns.json");
        std::fs::write(&path, r#"[{"text": "hi"}]"#).unwrap();
        let m = from_spec(&format!("script:{}", path.display()), None, &env_of(&[])).unwrap();
        assert_eq!(m.name(), format!("script:{}", path.display()));
    }

    #[test]
    fn none_is_no_model_and_keys_pick_their_providers_default() {
        assert!(is_none("none") && is_none(" None ") && !is_none("openai:none"));
        let e = error("none", None, &[("OPENAI_API_KEY", "k")]);
        assert!(e.contains("keeps the chat off"), "{e}");
        let both = env_of(&[("OPENAI_API_KEY", "k"), ("ANTHROPIC_API_KEY", "a")]);
        assert_eq!(
            keyed_defaults(&both),
            [
                ("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-5"),
                ("OPENAI_API_KEY", "openai:gpt-4o")
            ]
        );
        let openai = env_of(&[("OPENAI_API_KEY", "k"), ("ANTHROPIC_API_KEY", " ")]);
        assert_eq!(
            keyed_defaults(&openai),
            [("OPENAI_API_KEY", "openai:gpt-4o")]
        );
        // Each default is a model its key makes.
        for (variable, spec) in DEFAULT_MODELS {
            let pairs = [(variable, "k")];
            let env = env_of(&pairs);
            assert_eq!(from_spec(spec, None, &env).unwrap().name(), spec);
        }
    }

    #[test]
    fn the_default_spec_comes_from_quorum_model() {
        assert_eq!(
            default_spec(&env_of(&[("QUORUM_MODEL", "anthropic:claude")])),
            Some("anthropic:claude".into())
        );
        assert_eq!(default_spec(&env_of(&[("QUORUM_MODEL", "")])), None);
        assert_eq!(default_spec(&env_of(&[])), None);
    }
}
