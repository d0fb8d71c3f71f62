//! `quorum doctor`'s terminal: its colours (`TERM`, `COLORTERM`), and,
//! inside tmux (`TMUX` set), whether tmux passes notifications through
//! (`allow-passthrough`) and focus events (`focus-events`), asked of the
//! tmux server itself.

use std::path::Path;
use std::time::Duration;

use super::Check;
use crate::runtime::supervisor::Supervisor;

/// How long one `tmux show` may take.
const TMUX_WAIT: Duration = Duration::from_secs(5);

/// The terminal's line, then tmux's.
pub async fn checks(supervisor: &Supervisor, env: &dyn Fn(&str) -> Option<String>) -> Vec<Check> {
    let mut out = vec![colours(env("TERM").as_deref(), env("COLORTERM").as_deref())];
    if env("TMUX").is_none() {
        out.push(Check::ok("tmux", "not inside tmux (TMUX is not set)"));
        return out;
    }
    let Some(tmux) = crate::runtime::path::locate("tmux") else {
        out.push(Check::warn(
            "tmux",
            "TMUX is set, but there is no tmux on PATH to ask",
            "put tmux on PATH",
        ));
        return out;
    };
    let version = ask(supervisor, &tmux, &["-V"]).await;
    let version = version.unwrap_or_else(|said| format!("tmux (its version unknown: {said})"));
    out.push(Check::ok("tmux", &format!("inside {version}")));
    let passthrough = ask(supervisor, &tmux, &["show", "-gv", "allow-passthrough"]).await;
    out.push(passthrough_check(passthrough));
    let focus = ask(supervisor, &tmux, &["show", "-gv", "focus-events"]).await;
    out.push(focus_check(focus));
    out
}

/// The colours `TERM` and `COLORTERM` promise; a missing or `dumb`
/// terminal is a warning.
fn colours(term: Option<&str>, colorterm: Option<&str>) -> Check {
    const NAME: &str = "terminal";
    const FIX: &str =
        "run quorum in a terminal emulator, which sets TERM (xterm-256color, tmux-256color)";
    match term.filter(|t| !t.is_empty()) {
        None => Check::warn(
            NAME,
            "TERM is not set: quorum's screen needs a terminal",
            FIX,
        ),
        Some("dumb") => Check::warn(
            NAME,
            "TERM=dumb: no cursor movement and no colour, which quorum's screen needs",
            FIX,
        ),
        Some(term) => {
            let depth = match colorterm {
                Some("truecolor" | "24bit") => "24-bit colour",
                _ if term.contains("256color") => "256 colours",
                _ => "16 colours",
            };
            let colorterm = colorterm.map_or("unset".to_string(), |c| format!("{c:?}"));
            Check::ok(
                NAME,
                &format!(
                    "TERM={term:?}, COLORTERM {colorterm}: {depth}; quorum draws with the 16 named colours, in your terminal's own shades"
                ),
            )
        }
    }
}

/// Whether tmux passes notifications (escape sequences for the outer
/// terminal) through: `allow-passthrough` `on` or `all`.
fn passthrough_check(value: Result<String, String>) -> Check {
    const NAME: &str = "tmux passthrough";
    const FIX: &str =
        "set -g allow-passthrough on (in ~/.tmux.conf; then tmux source-file ~/.tmux.conf)";
    match value.as_deref().map(str::trim) {
        Ok(v @ ("on" | "all")) => Check::ok(
            NAME,
            &format!("allow-passthrough {v}: notifications reach your terminal"),
        ),
        Ok(v) => Check::warn(
            NAME,
            &format!("allow-passthrough {v}: tmux keeps notifications from your terminal"),
            FIX,
        ),
        Err(said) => Check::warn(
            NAME,
            &format!("tmux has no allow-passthrough ({said}): notifications stop at tmux"),
            "tmux 3.3 or later, with set -g allow-passthrough on",
        ),
    }
}

/// Whether tmux passes focus events on: `focus-events on`.
fn focus_check(value: Result<String, String>) -> Check {
    const NAME: &str = "tmux focus-events";
    match value.as_deref().map(str::trim) {
        Ok("on") => Check::ok(
            NAME,
            "on: applications inside tmux learn when you switch to them",
        ),
        Ok(v) => Check::warn(
            NAME,
            &format!("{v}: applications inside tmux do not learn when you switch to them"),
            "set -g focus-events on (in ~/.tmux.conf; then tmux source-file ~/.tmux.conf)",
        ),
        Err(said) => Check::warn(
            NAME,
            &format!("tmux did not say ({said})"),
            "set -g focus-events on (in ~/.tmux.conf)",
        ),
    }
}

/// `tmux ARGS` (of the server `TMUX` names): what it printed, or what it
/// said when it failed.
async fn ask(supervisor: &Supervisor, tmux: &Path, args: &[&str]) -> Result<String, String> {
    let mut cmd = crate::runtime::supervisor::command(tmux);
    cmd.args(args);
    let out = crate::runtime::probe::output(supervisor, cmd, "quorum doctor: tmux", TMUX_WAIT)
        .await
        .map_err(|e| e.to_string())?;
    let text = |bytes: &[u8]| crate::confine::sanitize::one_line(&String::from_utf8_lossy(bytes));
    if out.status.success() {
        Ok(text(&out.stdout))
    } else {
        let said = text(&out.stderr);
        Err(if said.is_empty() {
            out.status.to_string()
        } else {
            said
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::doctor::Status;

    #[test]
    fn colours_are_read_from_term_and_colorterm() {
        let c = colours(Some("xterm-256color"), Some("truecolor"));
        assert_eq!(c.status, Status::Ok);
        assert!(c.detail.contains("24-bit colour"), "{}", c.detail);
        let c = colours(Some("screen-256color"), None);
        assert!(
            c.detail.contains("256 colours") && c.detail.contains("COLORTERM unset"),
            "{}",
            c.detail
        );
        assert!(colours(Some("xterm"), None).detail.contains("16 colours"));
        for term in [None, Some(""), Some("dumb")] {
            let c = colours(term, None);
            assert_eq!(c.status, Status::Warn, "{term:?}");
            assert!(c.fix.unwrap().contains("terminal emulator"));
        }
    }

    #[test]
    fn passthrough_off_says_the_setting_that_turns_it_on() {
        assert_eq!(passthrough_check(Ok("on".into())).status, Status::Ok);
        assert_eq!(passthrough_check(Ok("all\n".into())).status, Status::Ok);
        let off = passthrough_check(Ok("off".into()));
        assert_eq!(off.status, Status::Warn);
        assert!(
            off.detail.contains("allow-passthrough off"),
            "{}",
            off.detail
        );
        assert!(off.fix.unwrap().starts_with("set -g allow-passthrough on"));
        let old = passthrough_check(Err("invalid option: allow-passthrough".into()));
        assert!(old.fix.unwrap().contains("3.3"));
        assert_eq!(focus_check(Ok("on".into())).status, Status::Ok);
        let off = focus_check(Ok("off".into()));
        assert_eq!(off.status, Status::Warn);
        assert!(off.fix.unwrap().starts_with("set -g focus-events on"));
    }
}
