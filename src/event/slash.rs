//! The slash commands: the one table of what the person may type after
//! `/` in [`Op::Submit`](super::Op::Submit). `/help`, the composer's Tab
//! completion, the commands `quorum acp` offers a host, and a test that
//! the docs list them all come from it; the engine runs each [`Slash`] (a
//! `match` the compiler checks is whole).

/// A slash command, as the engine runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slash {
    Agents,
    Mode,
    Set,
    Tasks,
    Spend,
    Cancel,
    Msg,
    Retry,
    Merge,
    Discard,
    New,
    Model,
    Record,
    Help,
}

/// One row of [`SLASH_COMMANDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlashCommand {
    pub command: Slash,
    /// Its name, without the slash: what Tab completes.
    pub name: &'static str,
    /// How it is written: `/name`, then its arguments in capitals
    /// (`[...]`: may be left out).
    pub usage: &'static str,
    /// Other spellings, written the same way (`/merge! TASK`): taken, and
    /// documented, but not completed.
    pub also: &'static [&'static str],
    /// What it does, for `/help` (empty: its usage says it).
    pub help: &'static str,
    /// What a host's menu says of it when `quorum acp` offers it; `None`:
    /// not offered (it needs quorum's own screen or files).
    pub host: Option<&'static str>,
}

impl SlashCommand {
    /// Its usage, then its other spellings'.
    pub fn usages(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.usage).chain(self.also.iter().copied())
    }

    /// What follows its name in its usage, brackets dropped (`/msg TASK
    /// message`: `TASK message`; `/cancel [TASK]`: `TASK`): the input hint
    /// a host shows.
    pub fn arguments(&self) -> Option<String> {
        let (_, args) = self.usage.split_once(' ')?;
        Some(args.replace(['[', ']'], ""))
    }
}

/// Every slash command, in the order `/help` lists them.
pub const SLASH_COMMANDS: &[SlashCommand] = &[
    SlashCommand {
        command: Slash::Agents,
        name: "agents",
        usage: "/agents [NAME]",
        also: &[],
        help: "the agents you can call; with a name, the commands, modes and options it announced",
        host: Some("the agents quorum can call (with a name: what it announced)"),
    },
    SlashCommand {
        command: Slash::Mode,
        name: "mode",
        usage: "/mode NAME MODE",
        also: &[],
        help: "change an agent's mode",
        host: Some("change an agent's mode"),
    },
    SlashCommand {
        command: Slash::Set,
        name: "set",
        usage: "/set NAME OPTION VALUE",
        also: &[],
        help: "change one of its options: model, effort, ...; a model is remembered",
        host: Some("change an agent's option (model, effort, ...)"),
    },
    SlashCommand {
        command: Slash::Tasks,
        name: "tasks",
        usage: "/tasks",
        also: &[],
        help: "background tasks",
        host: Some("the background tasks"),
    },
    SlashCommand {
        command: Slash::Spend,
        name: "spend",
        usage: "/spend",
        also: &[],
        help: "what the session spent, agent by agent, and its caps",
        host: Some("what the session spent, agent by agent"),
    },
    SlashCommand {
        command: Slash::Cancel,
        name: "cancel",
        usage: "/cancel [TASK]",
        also: &[],
        help: "cancel a task, else the running turn",
        host: Some("cancel a task (else what runs)"),
    },
    SlashCommand {
        command: Slash::Msg,
        name: "msg",
        usage: "/msg TASK message",
        also: &[],
        help: "a follow-up turn for a task's agent",
        host: Some("a follow-up turn for a background task's agent"),
    },
    SlashCommand {
        command: Slash::Retry,
        name: "retry",
        usage: "/retry TASK",
        also: &[],
        help: "run an interrupted or failed task again",
        host: Some("run an interrupted or failed task again"),
    },
    SlashCommand {
        command: Slash::Merge,
        name: "merge",
        usage: "/merge TASK",
        also: &["/merge! TASK"],
        help: "merge a worktree task's branch into your branch (/merge best: the last arena's \
               winner); refused while its review quorum is red, /merge! TASK merges anyway",
        host: None,
    },
    SlashCommand {
        command: Slash::Discard,
        name: "discard",
        usage: "/discard TASK",
        also: &[],
        help: "remove a worktree task's worktree and branch (/discard others: every writer of \
               the last arena but its winner)",
        host: None,
    },
    SlashCommand {
        command: Slash::New,
        name: "new",
        usage: "/new",
        also: &[],
        help: "new conversation; sessions forgotten",
        host: Some("a new conversation: the chat's context and agents' sessions forgotten"),
    },
    SlashCommand {
        command: Slash::Model,
        name: "model",
        usage: "/model [SPEC]",
        also: &[],
        help: "show the chat and the choices, or change it",
        host: None,
    },
    SlashCommand {
        command: Slash::Record,
        name: "record",
        usage: "/record FILE",
        also: &[],
        help: "record this session",
        host: None,
    },
    SlashCommand {
        command: Slash::Help,
        name: "help",
        usage: "/help",
        also: &[],
        help: "",
        host: Some("quorum's commands, and @NAME message"),
    },
];

/// The command `word` (what follows the slash, up to a space) names, and
/// the usage of that spelling.
pub fn slash_command(word: &str) -> Option<(&'static SlashCommand, &'static str)> {
    SLASH_COMMANDS.iter().find_map(|c| {
        c.usages()
            .find(|u| u.split(' ').next() == Some(&format!("/{word}")))
            .map(|u| (c, u))
    })
}

/// The names Tab completes.
pub fn slash_names() -> Vec<&'static str> {
    SLASH_COMMANDS.iter().map(|c| c.name).collect()
}

/// The sentence `/help` starts with: every command's usage and what it
/// does.
pub fn slash_help() -> String {
    let each: Vec<String> = SLASH_COMMANDS
        .iter()
        .map(|c| match c.help {
            "" => c.usage.to_string(),
            help => format!("{} ({help})", c.usage),
        })
        .collect();
    format!("Commands: {}.", each.join(" · "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page that lists the slash commands for people, and the heading
    /// of its table; each row's first cell is a command's usage as a code
    /// span: `` | `/merge TASK` | … | ``.
    const DOC: &str = "docs/keys.md";
    const DOC_LIST: &str = "## Slash commands";

    /// The first cells of the table rows under [`DOC_LIST`] in `doc`, up
    /// to the next heading: the code spans that start with `/`.
    fn listed(doc: &str) -> Vec<String> {
        let start = doc
            .find(DOC_LIST)
            .unwrap_or_else(|| panic!("{DOC} has no {DOC_LIST:?}"));
        doc[start + DOC_LIST.len()..]
            .lines()
            .take_while(|l| !l.starts_with('#'))
            .filter_map(|l| l.strip_prefix('|'))
            .filter_map(|row| row.split('|').next())
            .filter_map(|cell| {
                let cell = cell.trim();
                let code = cell.strip_prefix('`')?.strip_suffix('`')?;
                code.starts_with('/')
                    .then(|| code.split_whitespace().collect::<Vec<_>>().join(" "))
            })
            .collect()
    }

    /// The docs' list of slash commands is the table's: every command with
    /// its usage (and its other spellings), and none the table lacks.
    #[test]
    fn the_docs_list_the_commands_of_the_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(DOC);
        let doc = std::fs::read_to_string(&path).unwrap();
        let listed = listed(&doc);
        for usage in SLASH_COMMANDS.iter().flat_map(SlashCommand::usages) {
            assert!(
                listed.iter().any(|l| l == usage),
                "{DOC} does not list `{usage}` after {DOC_LIST:?}: {listed:?}"
            );
        }
        for l in &listed {
            let word = l.split(' ').next().unwrap_or_default();
            assert!(
                slash_command(&word[1..]).is_some_and(|(_, usage)| usage == l),
                "{DOC} lists `{l}`, which is no usage in the table"
            );
        }
    }

    #[test]
    fn the_list_is_the_first_cells_of_the_table_under_its_heading() {
        let doc = "Intro `/tmp`.\n## Slash commands\n\nText `/x`.\n\n| command | what |\n|---|---|\n\
                   | `/a [X]` | see [b](#b.c) |\n| `/b  Y` | `/nope` |\n| plain | x |\n\n## Next\n| `/e` | x |\n";
        assert_eq!(listed(doc), ["/a [X]", "/b Y"]);
    }

    #[test]
    fn names_and_spellings_are_one_each_and_usages_start_with_them() {
        for (i, c) in SLASH_COMMANDS.iter().enumerate() {
            assert!(c.usage.split(' ').next() == Some(&format!("/{}", c.name)));
            for u in c.usages() {
                let word = &u.split(' ').next().unwrap()[1..];
                assert_eq!(slash_command(word), Some((c, u)), "{u}");
            }
            assert_eq!(
                SLASH_COMMANDS[..i].iter().find(|o| o.command == c.command),
                None,
                "one row per command"
            );
        }
        assert_eq!(slash_command("merge!").map(|(c, _)| c.name), Some("merge"));
        assert_eq!(slash_command("mer"), None);
        assert_eq!(slash_command(""), None);
        assert!(slash_names().contains(&"merge") && !slash_names().contains(&"merge!"));
    }

    #[test]
    fn help_lists_usage_and_help_and_hosts_get_the_arguments() {
        let help = slash_help();
        assert!(help.starts_with("Commands: /agents [NAME] (the agents you can call;"));
        assert!(help.contains(" · /model [SPEC] (show the chat and the choices, or change it) · "));
        assert!(help.ends_with(" · /record FILE (record this session) · /help."));
        let args = |name: &str| {
            let c = SLASH_COMMANDS.iter().find(|c| c.name == name).unwrap();
            c.arguments()
        };
        assert_eq!(args("msg").as_deref(), Some("TASK message"));
        assert_eq!(args("cancel").as_deref(), Some("TASK"));
        assert_eq!(args("tasks"), None);
    }
}
