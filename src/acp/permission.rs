//! Permission requests: the option a policy picks, the answer sent, what
//! the request is shown as, and the sniffing of the paths it names, so that
//! nothing outside the session directory is allowed whatever the policy.

use std::path::Path;

use agent_client_protocol::v1::schema::{
    PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome,
};

use super::translate::update_detail;
use crate::confine::fsroot::Root;
use crate::event::ToolDetail;

/// The option to pick for a policy: an allow option (once before always),
/// or a reject option (once before always).
pub(super) fn pick_option(req: &RequestPermissionRequest, allow: bool) -> Option<(String, String)> {
    let kinds: &[PermissionOptionKind] = if allow {
        &[
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ]
    } else {
        &[
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ]
    };
    kinds.iter().find_map(|kind| {
        req.options
            .iter()
            .find(|o| o.kind == *kind)
            .map(|o| (o.option_id.0.to_string(), o.name.clone()))
    })
}

pub(super) fn outcome_for(option_id: Option<String>) -> RequestPermissionResponse {
    RequestPermissionResponse::new(match option_id {
        Some(id) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id)),
        None => RequestPermissionOutcome::Cancelled,
    })
}

/// A path a permission request names (its locations, an absolute path as
/// its title, or any string in its raw input, however deeply nested, that
/// looks like a path, `~` expanded) that lies outside `root`.
pub(super) fn outside_path(req: &RequestPermissionRequest, root: &Root) -> Option<String> {
    let fields = &req.tool_call.fields;
    let mut candidates: Vec<(String, Option<std::path::PathBuf>)> = fields
        .locations
        .iter()
        .flatten()
        .map(|l| (l.path.display().to_string(), Some(l.path.clone())))
        .collect();
    if let Some(title) = &fields.title
        && title.starts_with('/')
        && !title.contains(char::is_whitespace)
    {
        candidates.push((title.clone(), Some(title.into())));
    }
    if let Some(input) = &fields.raw_input {
        let mut strings = Vec::new();
        strings_in(input, &mut strings);
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        candidates.extend(
            strings
                .into_iter()
                .filter(|s| looks_like_path(s))
                .map(|s| (s.to_string(), expand_home(s, home.as_deref()))),
        );
    }
    candidates
        .into_iter()
        .find(|(_, path)| match path {
            Some(p) => matches!(
                root.resolve_new(p),
                Err(crate::confine::fsroot::FsError::Outside { .. })
            ),
            None => true,
        })
        .map(|(text, _)| crate::confine::sanitize::sanitize(&text).into_owned())
}

/// Every string in `value`, at any depth (object values and arrays), but
/// the program of a command line: `["/bin/bash", "-lc", ..]` runs bash, it
/// does not touch it.
fn strings_in<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    use serde_json::Value;
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => {
            let program = matches!(items.first(), Some(Value::String(first)) if is_program(first));
            items
                .iter()
                .skip(usize::from(program))
                .for_each(|v| strings_in(v, out));
        }
        Value::Object(map) => map.values().for_each(|v| strings_in(v, out)),
        _ => {}
    }
}

/// Whether `s` names an executable file: the first word of a command line.
fn is_program(s: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    Path::new(s).is_absolute()
        && std::fs::metadata(s).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether a string of a tool's input reads as a file path: absolute,
/// from home (`~`), relative with `.`/`..`, or a word with a `/` in it (not
/// a URL, not a command line).
fn looks_like_path(s: &str) -> bool {
    if s.is_empty() || s.len() > 4096 || s.contains(['\n', '\0']) {
        return false;
    }
    s.starts_with(['/', '~'])
        || s == "."
        || s == ".."
        || s.starts_with("./")
        || s.starts_with("../")
        || (s.contains('/') && !s.contains(char::is_whitespace) && !s.contains("://"))
}

/// `~` and `~/rest` under `home`. `None` for a path that cannot be placed:
/// another user's home (`~name`), or `~` without a home; it counts as
/// outside.
fn expand_home(s: &str, home: Option<&Path>) -> Option<std::path::PathBuf> {
    match (s.strip_prefix('~'), home) {
        (Some(""), Some(home)) => Some(home.to_path_buf()),
        (Some(rest), Some(home)) if rest.starts_with('/') => {
            Some(home.join(rest.trim_start_matches('/')))
        }
        (Some(_), _) => None,
        (None, _) => Some(std::path::PathBuf::from(s)),
    }
}

/// Whether a permission request asks to call a tool of the MCP server
/// `server` (as real agents name them: claude's `mcp__quorum__subagent`,
/// codex's MCP tool call naming the server and the tool in its input).
pub(super) fn calls_mcp_server(req: &RequestPermissionRequest, server: &str) -> bool {
    let fields = &req.tool_call.fields;
    let title = fields.title.as_deref().unwrap_or("");
    let input = fields
        .raw_input
        .as_ref()
        .map(|v| v.to_string())
        .unwrap_or_default();
    super::mcp::names_mcp_tool(title, &input, server)
}

pub(super) fn permission_title(req: &RequestPermissionRequest) -> String {
    req.tool_call
        .fields
        .title
        .clone()
        .unwrap_or_else(|| format!("tool call {}", req.tool_call.tool_call_id.0))
}

/// What a permission request asks about: its tool call's kind, paths,
/// input and content.
pub(super) fn permission_detail(req: &RequestPermissionRequest) -> Box<ToolDetail> {
    Box::new(update_detail(&req.tool_call.fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// A permission request as an agent sends it, for `tool_call`.
    fn request(tool_call: Value) -> RequestPermissionRequest {
        serde_json::from_value(json!({
            "sessionId": "s1",
            "toolCall": tool_call,
            "options": [
                {"optionId": "always", "name": "Always allow", "kind": "allow_always"},
                {"optionId": "once", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "never", "name": "Never", "kind": "reject_always"},
                {"optionId": "no", "name": "Reject", "kind": "reject_once"},
            ],
        }))
        .expect("a permission request")
    }

    fn root() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        let root = Root::new(dir.path()).unwrap();
        (dir, root)
    }

    #[test]
    fn a_location_outside_the_root_is_found() {
        let (_dir, root) = root();
        let req = request(json!({
            "toolCallId": "t1",
            "title": "Edit files",
            "locations": [{"path": root.path().join("src/main.rs")}, {"path": "/etc/passwd"}],
        }));
        assert_eq!(outside_path(&req, &root).as_deref(), Some("/etc/passwd"));
    }

    #[test]
    fn an_absolute_title_outside_the_root_is_found() {
        let (_dir, root) = root();
        let req = request(json!({"toolCallId": "t1", "title": "/etc/shadow"}));
        assert_eq!(outside_path(&req, &root).as_deref(), Some("/etc/shadow"));
        // A title with words in it is prose, not a path.
        let req = request(json!({"toolCallId": "t1", "title": "/etc/shadow is read"}));
        assert_eq!(outside_path(&req, &root), None);
    }

    #[test]
    fn a_path_nested_in_the_raw_input_is_found() {
        let (_dir, root) = root();
        let req = request(json!({
            "toolCallId": "t1",
            "title": "Copy",
            "rawInput": {"args": {"from": ["src/lib.rs", {"to": "../elsewhere/lib.rs"}]}},
        }));
        assert_eq!(
            outside_path(&req, &root).as_deref(),
            Some("../elsewhere/lib.rs")
        );
    }

    #[test]
    fn a_path_from_home_is_outside() {
        // The root is a fresh temporary directory: home is not inside it
        // (and without a home, `~` cannot be placed and counts as outside).
        let (_dir, root) = root();
        let req = request(json!({
            "toolCallId": "t1",
            "title": "Read",
            "rawInput": {"path": "~/.ssh/id_ed25519"},
        }));
        assert_eq!(
            outside_path(&req, &root).as_deref(),
            Some("~/.ssh/id_ed25519")
        );
    }

    #[test]
    fn the_program_of_a_command_line_is_not_a_path() {
        let (_dir, root) = root();
        // An executable outside the root: this test's own binary.
        let program = std::env::current_exe().unwrap();
        assert!(is_program(program.to_str().unwrap()));
        let req = request(json!({
            "toolCallId": "t1",
            "title": "Run",
            "rawInput": {"command": [program, "-lc", "cargo test"], "cwd": "./src"},
        }));
        assert_eq!(outside_path(&req, &root), None);
        // Later in the command line it is a path, and outside.
        let req = request(json!({
            "toolCallId": "t1",
            "title": "Run",
            "rawInput": {"command": ["cat", program]},
        }));
        assert_eq!(
            outside_path(&req, &root),
            Some(program.display().to_string())
        );
    }

    #[test]
    fn paths_inside_the_root_are_fine() {
        let (_dir, root) = root();
        let inside = root.path().join("src/new.rs");
        let req = request(json!({
            "toolCallId": "t1",
            "title": inside,
            "locations": [{"path": inside, "line": 3}],
            "rawInput": {
                "paths": ["src/lib.rs", "./README.md", ".", "src/../Cargo.toml"],
                "url": "https://example.com/a/b",
                "message": "fix a/b in place",
                "count": 3,
            },
        }));
        assert_eq!(outside_path(&req, &root), None);
    }

    #[test]
    fn what_is_found_is_sanitised() {
        let (_dir, root) = root();
        let req = request(json!({
            "toolCallId": "t1",
            "title": "Write",
            "locations": [{"path": "/tmp/\u{1b}[2Jx"}],
        }));
        let found = outside_path(&req, &root).expect("outside");
        assert!(!found.contains('\u{1b}'), "{found:?}");
        assert!(found.starts_with("/tmp/"), "{found:?}");
    }

    #[test]
    fn what_reads_as_a_path() {
        for path in [
            "/etc",
            "~",
            "~/x",
            ".",
            "..",
            "./a",
            "../a",
            "src/main.rs",
            "a/b/c",
        ] {
            assert!(looks_like_path(path), "{path}");
        }
        for not in [
            "",
            "main.rs",
            "https://example.com/a",
            "git commit -m a/b",
            "two\nlines/x",
            "nul\0/x",
        ] {
            assert!(!looks_like_path(not), "{not:?}");
        }
        assert!(!looks_like_path(&format!("/{}", "a".repeat(4096))));
    }

    #[test]
    fn home_expands_and_other_homes_cannot_be_placed() {
        let home = Path::new("/home/me");
        assert_eq!(expand_home("~", Some(home)), Some("/home/me".into()));
        assert_eq!(
            expand_home("~/a/b", Some(home)),
            Some("/home/me/a/b".into())
        );
        assert_eq!(expand_home("~bob/a", Some(home)), None);
        assert_eq!(expand_home("~/a", None), None);
        assert_eq!(expand_home("src/a", None), Some("src/a".into()));
    }

    #[test]
    fn every_string_but_a_programs_name_is_looked_at() {
        let program = std::env::current_exe().unwrap();
        let input = json!({"a": ["x", {"b": "y"}], "c": 1, "d": [program, "z"]});
        let mut strings = Vec::new();
        strings_in(&input, &mut strings);
        strings.sort();
        assert_eq!(strings, ["x", "y", "z"]);
        // A first word that is no executable is a string like the rest.
        let input = json!(["/no/such/program", "z"]);
        let mut strings = Vec::new();
        strings_in(&input, &mut strings);
        assert_eq!(strings, ["/no/such/program", "z"]);
    }

    #[test]
    fn a_policy_picks_once_before_always() {
        let req = request(json!({"toolCallId": "t1"}));
        assert_eq!(
            pick_option(&req, true),
            Some(("once".into(), "Allow once".into()))
        );
        assert_eq!(
            pick_option(&req, false),
            Some(("no".into(), "Reject".into()))
        );
        let mut only_always = req.clone();
        only_always
            .options
            .retain(|o| o.option_id.0.as_ref() == "always");
        assert_eq!(
            pick_option(&only_always, true),
            Some(("always".into(), "Always allow".into()))
        );
        // Nothing to reject with: no pick.
        assert_eq!(pick_option(&only_always, false), None);
    }

    #[test]
    fn no_option_is_a_cancelled_answer() {
        assert_eq!(
            outcome_for(None).outcome,
            RequestPermissionOutcome::Cancelled
        );
        assert_eq!(
            outcome_for(Some("once".into())).outcome,
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new("once"))
        );
    }

    #[test]
    fn a_request_without_a_title_is_named_by_its_call() {
        assert_eq!(
            permission_title(&request(json!({"toolCallId": "t7"}))),
            "tool call t7"
        );
        assert_eq!(
            permission_title(&request(json!({"toolCallId": "t7", "title": "Read a"}))),
            "Read a"
        );
    }
}
