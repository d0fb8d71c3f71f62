//! Between quorum's proxy on a host (`remote::relay`, through
//! `acp::answers`) and quorum at home (the transport's fast path):
//! what the proxy's own answers would show in a turn's box there (a
//! request refused, a client terminal's command, output and exit), sent
//! home as `_quorum/relayed` notifications and shown in the box here.
//! Both ends are here, with the one format between them.

use super::route::Incoming;

/// The extension methods of quorum's own between the proxy and home.
pub(super) const QUORUM_METHODS: &str = "_quorum/";

/// The proxy's notification of what would show in a turn's box at home:
/// params `{sessionId, notice}` (a request refused) or `{sessionId,
/// activity}` (a client terminal's command, output and exit).
pub(super) const RELAYED: &str = "_quorum/relayed";

/// How a [`RELAYED`] line starts (the proxy writes it so).
const RELAYED_START: &str = r#"{"jsonrpc":"2.0","method":"_quorum/relayed","params":"#;

/// What the handlers here routed to `session`'s turn, as a line for home.
pub(super) fn relayed_line(session: &str, incoming: Incoming) -> Option<String> {
    let params = match incoming {
        Incoming::Notice(text) => serde_json::json!({"sessionId": session, "notice": text}),
        Incoming::Activity(activity) if relayable(&activity) => {
            serde_json::json!({"sessionId": session, "activity": activity})
        }
        _ => return None,
    };
    Some(format!("{RELAYED_START}{params}}}"))
}

/// What a proxy's handlers show in a box: its terminals' commands, output
/// and exits (a refusal is a notice). Nothing else is taken from a host.
fn relayable(activity: &crate::event::Activity) -> bool {
    use crate::event::Activity;
    matches!(
        activity,
        Activity::TerminalStarted { .. }
            | Activity::TerminalOutput { .. }
            | Activity::TerminalExit { .. }
    )
}

/// A [`RELAYED`] line from a host's proxy: its session and what goes in
/// that turn's box; `None` for any other line.
pub(super) fn relayed_from(line: &str) -> Option<(String, Incoming)> {
    #[derive(serde::Deserialize)]
    struct Frame {
        method: String,
        params: Params,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "sessionId")]
        session_id: String,
        notice: Option<String>,
        activity: Option<crate::event::Activity>,
    }
    // Cheap first: most lines are not.
    if !line.starts_with(RELAYED_START) {
        return None;
    }
    let frame: Frame = serde_json::from_str(line).ok()?;
    if frame.method != RELAYED {
        return None;
    }
    let p = frame.params;
    match (p.notice, p.activity) {
        (Some(text), _) => Some((p.session_id, Incoming::Notice(text))),
        (None, Some(activity)) if relayable(&activity) => {
            Some((p.session_id, Incoming::Activity(activity)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Activity;

    fn back(line: Option<String>) -> Option<(String, String)> {
        let (session, incoming) = relayed_from(&line?)?;
        let shown = match incoming {
            Incoming::Notice(text) => format!("notice {text}"),
            Incoming::Activity(a) => format!("{a:?}"),
            _ => "other".into(),
        };
        Some((session, shown))
    }

    #[test]
    fn what_a_proxy_relays_is_read_back_and_nothing_else() {
        let notice = relayed_line("s1", Incoming::Notice("refused to read x".into()));
        assert_eq!(
            back(notice),
            Some(("s1".into(), "notice refused to read x".into()))
        );
        let exit = Activity::TerminalExit {
            terminal_id: "term-1".into(),
            exit_code: Some(0),
            signal: None,
        };
        let shown = format!("{exit:?}");
        assert_eq!(
            back(relayed_line("s2", Incoming::Activity(exit))),
            Some(("s2".into(), shown))
        );
        // Only a terminal's activity: nothing a host could pass off as
        // the agent's (its plan, its commands).
        let plan = Activity::Plan { entries: vec![] };
        assert_eq!(relayed_line("s", Incoming::Activity(plan.clone())), None);
        let forged = format!(
            "{RELAYED_START}{}}}",
            serde_json::json!({"sessionId": "s", "activity": plan})
        );
        assert!(relayed_from(&forged).is_none());
        // Other lines are not read.
        assert!(
            relayed_from(r#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#).is_none()
        );
    }
}
