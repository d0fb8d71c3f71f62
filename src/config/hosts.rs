//! `[hosts.NAME]` checked: another machine agents run on, as quorum
//! reaches it (`remote::ssh`). The registry keeps the checked tables (an
//! agent's `host = "NAME"` must name one), so the check is here, below it;
//! what is checked of the host itself when it is first used (its git, its
//! quorum) is `remote::ssh`'s probe.

use super::HostEntry;

/// `[hosts.NAME]` in the config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    pub name: String,
    /// The destination as `ssh` takes it (`user@machine`, an alias of the
    /// person's ssh config).
    pub ssh: String,
    /// More arguments for every `ssh` (`-p 2222`, `-F file`, `-i key`).
    pub ssh_args: Vec<String>,
    /// Where quorum keeps its state there (default
    /// `~/.local/state/quorum`); `~/` is the home directory there.
    pub dir: Option<String>,
}

/// What is wrong with a `[hosts.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("[hosts.{name:?}]: a host's name is letters, digits, `-`, `_` and `.` only")]
    Name { name: String },
    #[error(
        "[hosts.{name}] ssh = {ssh:?}: the destination as ssh takes it (user@machine, or an alias), \
         not empty, no spaces, not starting with `-`"
    )]
    Ssh { name: String, ssh: String },
    #[error("[hosts.{name}] ssh_args: an argument has a line break")]
    SshArgs { name: String },
    #[error("[hosts.{name}] dir = {dir:?}: a directory there (absolute, or `~/...`)")]
    Dir { name: String, dir: String },
}

/// A `[hosts.NAME]` table checked: a name as an agent's, a destination
/// that ssh cannot take for an option, no line breaks.
pub fn check_host(name: &str, host: HostEntry) -> Result<HostSpec, HostError> {
    if !super::is_name(name) {
        return Err(HostError::Name {
            name: name.to_string(),
        });
    }
    let ssh = host.ssh.trim();
    if ssh.is_empty() || ssh.starts_with('-') || ssh.contains(char::is_whitespace) {
        return Err(HostError::Ssh {
            name: name.to_string(),
            ssh: host.ssh,
        });
    }
    let bad = |s: &String| s.contains(['\n', '\r', '\0']);
    if host.ssh_args.iter().any(bad) {
        return Err(HostError::SshArgs {
            name: name.to_string(),
        });
    }
    if let Some(dir) = &host.dir
        && (dir.trim().is_empty() || bad(dir))
    {
        return Err(HostError::Dir {
            name: name.to_string(),
            dir: dir.clone(),
        });
    }
    Ok(HostSpec {
        name: name.to_string(),
        ssh: ssh.to_string(),
        ssh_args: host.ssh_args,
        dir: host.dir,
    })
}
