//! The `subagent` tool's description: what the tool does, which ACP
//! agents are installed to run it, and the note on the internal agent.

use crate::acp::registry::AgentSpec;

/// The `subagent` tool's description. A note (for example, that omitting
/// `agent` runs the internal agent) is woven into its prose by
/// [`ToolDescription::set_note`]; an empty note leaves the text as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDescription {
    head: String,
    tail: String,
    note: String,
}

impl ToolDescription {
    /// The description naming the `installed` agents.
    pub fn new(installed: &[&AgentSpec]) -> Self {
        let agents = if installed.is_empty() {
            "No ACP agents are installed on this machine.".to_string()
        } else {
            let list: Vec<String> = installed
                .iter()
                .map(|a| {
                    if a.description.is_empty() {
                        format!("`{}`", a.name)
                    } else {
                        format!("`{}` ({})", a.name, a.description)
                    }
                })
                .collect();
            format!("Set `agent` to one of: {}.", list.join(", "))
        };
        Self {
            head: format!("Delegate a task to a sub-agent and get back its final report. {agents}"),
            tail: " Each agent's last session is resumed unless `continue_session` is false. \
                   With `code_review`, the report starts with a severity verdict \
                   (green, yellow or red). With `run_in_background`, the call returns a \
                   `task_id` at once and the report arrives later; `subagent_status` shows \
                   progress. `tasks` (instead of `input`) runs several tasks in parallel, a \
                   few at a time while the rest wait queued; the result is a summary (total, \
                   succeeded, failed, worst verdict) and one entry per task, and a batch of \
                   code reviews also gets a quorum: the worst verdict and how many reviewers \
                   agree; with `verify`, the quorum checks itself: each red or yellow finding \
                   only one reviewer made goes to another reviewer to confirm or refute, and a \
                   refuted one no longer counts toward the verdict. `output_requirements` is added to the sub-agent's message under its \
                   own heading; `include_main_summary` puts a short summary of this \
                   conversation before it. `exclude_files_pattern` (a regex on paths relative \
                   to the session directory) keeps matching files out of what the internal \
                   agent reads, lists and greps, and ACP agents are refused them when they \
                   ask quorum for a file; it does not cover agents that read the disk on \
                   their own (most external agents do, and so does the internal agent's \
                   shell), so do not rely on it to hide secrets from them."
                .to_string(),
            note: String::new(),
        }
    }

    /// Weaves `note` into the description, after the list of agents.
    pub fn set_note(&mut self, note: &str) {
        self.note = note.trim().to_string();
    }

    pub fn text(&self) -> String {
        if self.note.is_empty() {
            format!("{}{}", self.head, self.tail)
        } else {
            format!("{} {}{}", self.head, self.note, self.tail)
        }
    }
}

/// The note that says what omitting `agent` does.
pub const INTERNAL_AGENT_NOTE: &str = "Leave `agent` out to run quorum's internal agent instead: \
a fresh helper with no memory of this conversation that works inside the session directory.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::registry::Registry;
    use std::io::Write;

    fn write_config(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn description_names_installed_agents_and_weaves_the_note() {
        let f =
            write_config("[agents.zz-here]\ncommand = \"/bin/sh\"\ndescription = \"a shell\"\n");
        let r = Registry::load(Some(f.path())).unwrap();
        let mut d = ToolDescription::new(&r.installed());
        let plain = d.text();
        assert!(plain.contains("`zz-here` (a shell)"), "{plain}");
        assert!(
            !plain.contains("vibe"),
            "vibe-acp is not installed here: {plain}"
        );
        d.set_note("");
        assert_eq!(d.text(), plain, "an empty note changes nothing");
        d.set_note(INTERNAL_AGENT_NOTE);
        let woven = d.text();
        let at = woven.find("Leave `agent` out").expect("note present");
        assert!(at > woven.find("zz-here").unwrap(), "after the agent list");
        assert!(
            at < woven.find("continue_session").unwrap(),
            "inside the prose, not appended"
        );
        for said in [
            "`tasks` (instead of `input`)",
            "quorum",
            "`output_requirements`",
            "`include_main_summary`",
            "with `verify`, the quorum checks itself",
            "it does not cover agents that read the disk on their own",
        ] {
            assert!(woven.contains(said), "{said}: {woven}");
        }
    }
}
