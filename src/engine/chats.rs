//! The chats a session can have: the one quorum picks when none is chosen
//! ([`default_chat`]: an agent the person has installed, else a model whose
//! key is set), what is said when there is none ([`welcome`]), and the
//! choices `/model` offers ([`choices`]: installed agents, keyed providers,
//! the models of a local server that answers).

use std::time::Duration;

use crate::acp::registry::Registry;
use crate::llm::select;

/// The agents preferred as the default chat, in this order; after them,
/// the rest of the registry, in its order.
pub const PREFERRED: [&str; 4] = ["claude", "codex", "gemini", "opencode"];

/// How long `/model` waits for a local server to list its models.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The chat quorum takes when none is chosen (no `--model`, no
/// `QUORUM_MODEL`, no `[model] name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultChat {
    /// An agent installed here, as the chat's conductor (`acp:NAME`).
    Agent(String),
    /// No agent is installed, and `variable` (an API key) is set: its
    /// provider's default model (`spec`).
    Model {
        spec: &'static str,
        variable: &'static str,
    },
    /// No agent is installed and no key is set: no chat.
    Nothing,
}

impl DefaultChat {
    /// Its spec, as `--model` takes it (`acp:claude`,
    /// `anthropic:claude-sonnet-4-5`); `None` for [`DefaultChat::Nothing`].
    pub fn spec(&self) -> Option<String> {
        match self {
            DefaultChat::Agent(name) => Some(format!("acp:{name}")),
            DefaultChat::Model { spec, .. } => Some(spec.to_string()),
            DefaultChat::Nothing => None,
        }
    }

    /// What the session says of it at its start (once, as a notice).
    pub fn notice(&self) -> Option<String> {
        const AFTER: &str = "/model changes it; [model] name in the config keeps a choice";
        match self {
            DefaultChat::Agent(name) => Some(format!(
                "the chat is {name} (acp:{name}), an agent you have installed; {AFTER}"
            )),
            DefaultChat::Model { spec, variable } => Some(format!(
                "the chat is {spec}, as {variable} is set and no agent is installed; {AFTER}"
            )),
            DefaultChat::Nothing => None,
        }
    }
}

/// Whether `spec` keeps the chat off (`none`, however it is written).
pub fn is_off(spec: &str) -> bool {
    select::is_none(spec)
}

/// The chat quorum takes when none is chosen: the first agent installed
/// on this machine (its command found; an agent of another machine,
/// `host = "NAME"`, is not taken) of [`PREFERRED`], then of the rest of
/// the registry; else the default model of the first provider whose key
/// `env` has ([`select::DEFAULT_MODELS`]); else nothing. quorum itself
/// (`[agents.quorum] command = "quorum"`, `args = ["acp"]`) is never
/// taken: its own default would be itself again. It starts nothing: an
/// agent found is only named.
pub fn default_chat(registry: &Registry, env: &dyn Fn(&str) -> Option<String>) -> DefaultChat {
    let me = std::env::current_exe().and_then(std::fs::canonicalize).ok();
    let is_me = |command: &str| {
        let found = crate::runtime::path::locate(command).and_then(|p| p.canonicalize().ok());
        found.is_some() && found == me
    };
    let installed: Vec<&str> = registry
        .installed()
        .into_iter()
        .filter(|a| a.host.is_none() && !is_me(&a.command))
        .map(|a| a.name.as_str())
        .collect();
    pick(&installed, env)
}

/// [`default_chat`] of the agents `installed` (in the registry's order).
pub fn pick(installed: &[&str], env: &dyn Fn(&str) -> Option<String>) -> DefaultChat {
    let preferred = PREFERRED.iter().find(|p| installed.contains(p)).copied();
    if let Some(name) = preferred.or_else(|| installed.first().copied()) {
        return DefaultChat::Agent(name.to_string());
    }
    match select::keyed_defaults(env).first() {
        Some(&(variable, spec)) => DefaultChat::Model { spec, variable },
        None => DefaultChat::Nothing,
    }
}

/// How the welcome (no chat) begins, whatever follows.
pub const WELCOME_START: &str =
    "No chat model is configured, so plain messages have no one to answer them.";

/// Whether `text` is the [`welcome`].
pub fn is_welcome(text: &str) -> bool {
    text.starts_with(WELCOME_START)
}

/// What a session without a chat says at its start: an agent as the chat
/// first (`acp:NAME`, with each common agent's install line from the
/// registry, or that it is installed), then a model. `nothing_found`: no
/// chat was chosen and none could be picked (no agent, no key).
pub fn welcome(registry: &Registry, nothing_found: bool) -> String {
    let mut text = WELCOME_START.to_string();
    if nothing_found {
        text.push_str(" No agent is installed and no API key is set, so none was picked.");
    }
    let installed: Vec<String> = registry
        .installed()
        .iter()
        .map(|a| a.name.clone())
        .collect();
    let agents: Vec<String> = PREFERRED
        .iter()
        .filter_map(|name| {
            if installed.iter().any(|i| i == name) {
                return Some(format!("`acp:{name}` (installed)"));
            }
            let install = registry.all().find(|a| a.name == *name)?.install.clone()?;
            Some(format!("`acp:{name}` (`{install}`)"))
        })
        .collect();
    text.push_str(&format!(
        " An agent you use can be the chat, with your subscription: `--model acp:NAME`{}; \
         the first one installed is the chat when none is chosen.",
        if agents.is_empty() {
            String::new()
        } else {
            format!(", e.g. {}", agents.join(", "))
        }
    ));
    text.push_str(
        " Or a model: `--model PROVIDER:NAME` (`anthropic:claude-sonnet-4-5`, `openai:gpt-4o`) \
         with ANTHROPIC_API_KEY or OPENAI_API_KEY (a key alone picks its provider's model when no \
         agent is installed); for a local server (llama-server, Ollama, vLLM) add \
         `--base-url http://127.0.0.1:8080/v1`; `--model script:FILE` plays a scripted model; \
         QUORUM_MODEL or `[model] name` in the config keeps a choice (`none`: no chat). \
         Meanwhile `@NAME message` talks to an agent directly (`@NAME!` in the background, \
         `@NAME?` for a code review, `@A,B,C? message` for a review by several agents at once), \
         `/help` lists the commands, and `quorum replay FILE` replays a recorded session.",
    );
    text
}

/// One chat `/model` offers: its spec and why it is offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub spec: String,
    pub why: String,
}

/// The chats `/model` offers without asking anyone: the agents installed
/// (`acp:NAME`, in the registry's order) and the default model of each
/// provider whose key `env` has.
pub fn choices(registry: &Registry, env: &dyn Fn(&str) -> Option<String>) -> Vec<Choice> {
    let mut out: Vec<Choice> = registry
        .installed()
        .iter()
        .map(|a| Choice {
            spec: format!("acp:{}", a.name),
            why: match &a.host {
                Some(host) => format!("an agent on {host}"),
                None => "an agent you have installed".to_string(),
            },
        })
        .collect();
    out.extend(
        select::keyed_defaults(env)
            .into_iter()
            .map(|(variable, spec)| Choice {
                spec: spec.to_string(),
                why: format!("{variable} is set"),
            }),
    );
    out
}

/// The most models of a server `/model` offers (the first it lists).
pub const MAX_SERVED: usize = 40;

/// The models of the OpenAI-compatible server at `base_url` (a local
/// one: llama-server, Ollama, vLLM), when it answers within
/// [`PROBE_TIMEOUT`], as choices (`openai:ID`; the first [`MAX_SERVED`]).
pub async fn served(base_url: &str) -> Vec<Choice> {
    let Some(ids) = crate::llm::openai::list_models(base_url, PROBE_TIMEOUT).await else {
        return Vec::new();
    };
    ids.into_iter()
        .take(MAX_SERVED)
        .map(|id| Choice {
            spec: format!("openai:{id}"),
            why: format!("served at {base_url}"),
        })
        .collect()
}

/// The base URL a local server is looked for at: `base_url` (`--base-url`,
/// `[model] base_url`), else `OPENAI_BASE_URL`; none is guessed.
pub fn probe_url(base_url: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    base_url
        .map(str::to_string)
        .or_else(|| env("OPENAI_BASE_URL"))
        .map(|u| u.trim().to_string())
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
}

/// What `/model` says: the chat in use (`None`: no chat), then the
/// choices, each with why it is offered.
pub fn listing(chat: Option<&str>, choices: &[Choice]) -> String {
    let mut text = match chat {
        Some(spec) => format!("The chat: {spec}."),
        None => "No chat in this session (restart quorum with --model SPEC, or without \
                 `none`, to have one)."
            .to_string(),
    };
    if choices.is_empty() {
        text.push_str(
            " Nothing to choose from here: no agent is installed, no API key is set \
             (ANTHROPIC_API_KEY, OPENAI_API_KEY) and no local server answers at the base URL.",
        );
        return text;
    }
    text.push_str(" Choices:");
    for c in choices {
        text.push_str(&format!("\n  {} ({})", c.spec, c.why));
    }
    if chat.is_some() {
        text.push_str("\n`/model SPEC` changes it (Tab completes a choice).");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_preferred_agents_come_first_then_the_registrys_order_then_a_key() {
        let none = env_of(&[]);
        let keys = env_of(&[("OPENAI_API_KEY", "k"), ("ANTHROPIC_API_KEY", "a")]);
        let agent = |n: &str| DefaultChat::Agent(n.into());
        assert_eq!(pick(&["codex", "claude"], &none), agent("claude"));
        assert_eq!(
            pick(&["aider", "opencode", "gemini"], &keys),
            agent("gemini")
        );
        assert_eq!(pick(&["aider", "opencode"], &none), agent("opencode"));
        assert_eq!(pick(&["aider", "zed"], &keys), agent("aider"));
        assert_eq!(
            pick(&[], &keys),
            DefaultChat::Model {
                spec: "anthropic:claude-sonnet-4-5",
                variable: "ANTHROPIC_API_KEY"
            }
        );
        assert_eq!(
            pick(&[], &env_of(&[("OPENAI_API_KEY", "k")])).spec(),
            Some("openai:gpt-4o".into())
        );
        assert_eq!(pick(&[], &none), DefaultChat::Nothing);
        assert_eq!(
            agent("claude").notice().unwrap(),
            "the chat is claude (acp:claude), an agent you have installed; /model changes it; \
             [model] name in the config keeps a choice"
        );
        assert_eq!(DefaultChat::Nothing.notice(), None);
    }

    #[test]
    fn the_welcome_names_agents_first_with_the_registrys_install_lines() {
        let registry = Registry::builtin();
        let text = welcome(&registry, true);
        assert!(is_welcome(&text), "{text}");
        let agent = text.find("acp:NAME").unwrap();
        assert!(agent < text.find("PROVIDER:NAME").unwrap(), "{text}");
        for spec in ["claude", "codex", "gemini", "opencode"] {
            let install = registry.all().find(|a| a.name == spec).unwrap();
            let install = install.install.as_deref().unwrap();
            assert!(
                text.contains(&format!("`acp:{spec}` (`{install}`)"))
                    || text.contains(&format!("`acp:{spec}` (installed)")),
                "{text}"
            );
        }
        assert!(text.contains("none was picked"), "{text}");
        assert!(!welcome(&registry, false).contains("none was picked"));
    }

    #[test]
    fn the_listing_names_the_chat_and_each_choice() {
        let choices = [
            Choice {
                spec: "acp:claude".into(),
                why: "an agent you have installed".into(),
            },
            Choice {
                spec: "openai:qwen".into(),
                why: "served at http://127.0.0.1:8080/v1".into(),
            },
        ];
        assert_eq!(
            listing(Some("acp:claude"), &choices),
            "The chat: acp:claude. Choices:\n  acp:claude (an agent you have installed)\n  \
             openai:qwen (served at http://127.0.0.1:8080/v1)\n`/model SPEC` changes it (Tab \
             completes a choice)."
        );
        assert!(listing(None, &[]).contains("Nothing to choose from"));
    }
}
