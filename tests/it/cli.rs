//! The `quorum` binary as scripts and docs use it: headless screenshots and
//! clear errors for bad input.

use crate::common;
use common::shell::stderr;

use common::Bounded;

use std::process::{Command, Output};

use common::*;

fn quorum(args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    common::quorum(home.path()).args(args).output_bounded()
}

/// `quorum` at home in `dir`: its state and its config stay there.
fn quorum_in(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut c = common::quorum(dir);
    c.args(args);
    c
}

fn shot(ext: &str, extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(format!("shot.{ext}"));
    let demo = demo();
    let mut args = vec![
        "replay",
        demo.to_str().unwrap(),
        "--screenshot",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = quorum(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::read_to_string(&out).unwrap()
}

#[test]
fn text_screenshot_of_the_demo_end() {
    let text = shot("txt", &["--size", "120x40"]);
    assert_eq!(text.lines().count(), 40);
    assert!(text.lines().all(|l| l.chars().count() <= 120));
    assert!(
        text.contains("task t1 (gemini) finished ● yellow"),
        "{text}"
    );
    assert!(text.contains("Tasks · 0 running · 1 done"), "{text}");
}

#[test]
fn screenshot_at_an_event_and_size() {
    let text = shot("txt", &["--size", "80x24", "--at", "2"]);
    assert_eq!(text.lines().count(), 24);
    assert!(text.contains("I added retries"), "{text}");
    assert!(
        !text.contains("I'll start"),
        "only two events applied: {text}"
    );
    assert!(
        !text.contains("Tasks ·"),
        "no panel below 100 columns: {text}"
    );
    let empty = shot("txt", &["--at", "0"]);
    assert!(!empty.contains('›'), "{empty}");
}

#[test]
fn ansi_screenshot_carries_the_verdict_colours() {
    let ans = shot("ans", &[]);
    // Red, yellow and green foregrounds, and a reset at each line end.
    for sgr in ["\x1b[0;31m", "\x1b[0;1;33m", "\x1b[0;32m"] {
        assert!(ans.contains(sgr), "missing {sgr:?}");
    }
    assert_eq!(ans.lines().count(), 40);
    assert!(ans.lines().all(|l| l.ends_with("\x1b[0m")));
}

#[test]
fn svg_screenshot_is_an_image_with_real_colours() {
    let svg = shot("svg", &["--size", "100x30"]);
    assert!(
        svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"840\" height=\"510\"")
    );
    assert!(svg.trim_end().ends_with("</svg>"));
    // xterm's yellow and green, for the verdict-tinted borders.
    assert!(svg.contains("fill=\"#cdcd00\""), "yellow");
    assert!(svg.contains("fill=\"#00cd00\""), "green");
    // Text is escaped for XML.
    assert!(!svg.contains("<Session"), "unescaped text");
    assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
}

#[test]
fn bad_inputs_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.txt");
    let out = out.to_str().unwrap();
    let bad = fixture("bad/not_json.jsonl");
    let o = quorum(&["replay", bad.to_str().unwrap(), "--screenshot", out]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("not_json.jsonl:3: not JSON"),
        "{}",
        stderr(&o)
    );

    let demo = demo();
    let o = quorum(&[
        "replay",
        demo.to_str().unwrap(),
        "--screenshot",
        out,
        "--at",
        "100000",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--at 100000 is past the end"),
        "{}",
        stderr(&o)
    );

    let png = dir.path().join("x.png");
    let o = quorum(&[
        "replay",
        demo.to_str().unwrap(),
        "--screenshot",
        png.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("end the name with .txt, .ans or .svg"),
        "{}",
        stderr(&o)
    );

    let o = quorum(&[
        "replay",
        demo.to_str().unwrap(),
        "--screenshot",
        out,
        "--size",
        "120by40",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("not a size like 120x40"),
        "{}",
        stderr(&o)
    );

    let o = quorum(&["replay", "/no/such/file.jsonl", "--screenshot", out]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("/no/such/file.jsonl: cannot read"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn truncated_transcript_warns_and_still_renders() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.txt");
    let bad = fixture("bad/truncated.jsonl");
    let o = quorum(&[
        "replay",
        bad.to_str().unwrap(),
        "--screenshot",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning: "), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("truncated.jsonl:3: last line is cut short"),
        "{}",
        stderr(&o)
    );
    assert!(std::fs::read_to_string(&out).unwrap().contains("hello"));
}

#[test]
fn the_tui_refuses_to_start_without_a_terminal() {
    let demo = demo();
    let o = quorum(&["replay", demo.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("needs a terminal"), "{}", stderr(&o));
}

/// A user error is one line, `quorum: ` and the message with each cause
/// said once, exit code 2, and no backtrace whatever RUST_BACKTRACE says.
#[test]
fn errors_are_one_clear_line_without_a_backtrace() {
    let dir = tempfile::tempdir().unwrap();
    let o = common::quorum(dir.path())
        .args(["replay", "--screenshot", "x.txt"])
        .arg(dir.path())
        .env("RUST_BACKTRACE", "1")
        .env("HOME", dir.path())
        .output_bounded();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.starts_with("quorum: "), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(err.matches("Is a directory").count(), 1, "said once: {err}");
    assert!(!err.to_lowercase().contains("backtrace"), "{err}");
    // The same from a headless command's own setup.
    let o = common::quorum(dir.path())
        .arg("--config")
        .arg(dir.path())
        .args(["call", "--agent", "fake", "--input", "hi"])
        .env("HOME", dir.path())
        .env("XDG_STATE_HOME", dir.path())
        .output_bounded();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.starts_with("quorum: "), "{err}");
    assert_eq!(err.matches("Is a directory").count(), 1, "said once: {err}");
}

/// `quorum agents | head -1`: a reader that goes away is no error.
#[test]
fn a_closed_stdout_is_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = quorum_in(dir.path(), &["agents"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reading end closes before anything is written.
    drop(child.stdout.take());
    let o = common::wait_output_bounded(child, "quorum on a closed stdout");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
}

/// The state directory and the log are the person's alone.
#[cfg(unix)]
#[test]
fn state_directory_and_log_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let o = quorum_in(dir.path(), &["agents"]).output_bounded();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let state = dir.path().join("state/quorum");
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&state.join("quorum.log")), 0o600);
}

/// What comes from a config file reaches the terminal clean: a name with an
/// escape sequence is refused (it could never follow `@` anyway), and a
/// command's escapes are dropped from `quorum agents`.
#[test]
fn config_text_reaches_the_terminal_clean() {
    let dir = tempfile::tempdir().unwrap();
    let run = |config: &str| {
        let file = dir.path().join("quorum.toml");
        std::fs::write(&file, config).unwrap();
        quorum_in(dir.path(), &["agents", "--config", file.to_str().unwrap()]).output_bounded()
    };
    let o = run("[agents.\"ev\\u001b[31mil\"]\ncommand = \"true\"\n");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(!err.contains('\u{1b}'), "{err:?}");
    assert!(err.contains("quorum.toml"), "{err}");
    assert!(err.contains(r#"[agents."ev\u{1b}[31mil"]"#), "{err}");

    let o = run("[agents.odd]\ncommand = \"tr\\u001b]0;owned\\u0007ue\"\n");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("odd ") && l.contains("true")),
        "{out}"
    );
}

/// A misspelt key under `[model]` is named with its line, as under
/// `[agents]`, instead of being ignored.
#[test]
fn an_unknown_model_key_is_an_error_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("quorum.toml");
    std::fs::write(
        &file,
        "# mine\n[model]\nname = \"openai:x\"\nbase_ulr = \"http://127.0.0.1:9/v1\"\n",
    )
    .unwrap();
    let o = quorum_in(
        dir.path(),
        &["--config", file.to_str().unwrap(), "run", "-p", "hi"],
    )
    .output_bounded();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.starts_with("quorum: "), "{err}");
    assert!(err.contains("quorum.toml: line 4"), "{err}");
    assert!(err.contains("unknown field `base_ulr`"), "{err}");
}

/// The typos found on 2569e21, each accepted then without a word (`nmae`
/// by `quorum agents`, which read only the agents): refused with the file,
/// the line, the section and the nearest known name, on stderr, exit code 2
/// ("bad config"), by `run` and `agents` alike.
#[test]
fn config_typos_are_refused_with_their_place_and_nearest_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("quorum.toml");
    let script = dir.path().join("turns.json");
    std::fs::write(&script, r#"[{"text": "done"}]"#).unwrap();
    let model = format!("script:{}", script.display());
    let f = file.display().to_string();
    let run = [
        "--config",
        &f,
        "--model",
        &model,
        "run",
        "--no-record",
        "-p",
        "hi",
    ];
    let agents = ["--config", &f, "agents"];
    for (text, args, said) in [
        (
            "bell = true\nmax_paralel = 3\n",
            &run[..],
            "line 2, column 1: unknown field `max_paralel` at the top level; did you mean \
             `max_parallel`?",
        ),
        (
            "max_parallel = 2\n\n[limts]\nmax_read_bytes = 1000\n",
            &run[..],
            "line 3, column 2: unknown section [limts]; did you mean [limits]?",
        ),
        (
            "[mcp]\nsync_secs = 5\n",
            &run[..],
            "line 2, column 1: unknown field `sync_secs` in [mcp]; did you mean `sync_seconds`?",
        ),
        (
            "[model]\nnmae = \"openai:x\"\n",
            &agents[..],
            "line 2, column 1: unknown field `nmae` in [model]; did you mean `name`?",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let o = quorum_in(dir.path(), args)
            .current_dir(dir.path())
            .output_bounded();
        assert_eq!(stderr(&o), format!("quorum: {f}: {said}\n"), "{text}");
        assert_eq!(o.status.code(), Some(2), "{text}");
        assert_eq!(String::from_utf8_lossy(&o.stdout), "", "{text}");
    }
}

/// `quorum config`: the settings in effect and where each came from: the
/// file (with its line), the environment, a flag, quorum's default, the
/// built-in registry.
#[test]
fn config_prints_each_setting_and_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("quorum.toml");
    std::fs::write(
        &file,
        "max_parallel = 2\n\n[limits]\nmax_read_bytes = 1000\n\n[agents.gemini]\n\
         permissions = \"allow\"\n\n[agents.mine]\ncommand = \"/bin/true\"\n\n\
         [worktree]\ncheck = \"cargo test\"\ncheck_timeout = 120\n",
    )
    .unwrap();
    let f = file.display().to_string();
    let o = quorum_in(
        dir.path(),
        &[
            "config",
            "--config",
            &f,
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
    )
    .current_dir(dir.path())
    .env("QUORUM_MODEL", "openai:local")
    .output_bounded();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Each line's words, its spacing aside.
    let lines: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(lines[0], format!("config file: {f} (--config)"));
    assert_eq!(lines[1], "SETTING VALUE FROM");
    for want in [
        "bell true default".to_string(),
        format!("max_parallel 2 {f}:1"),
        "model.name openai:local $QUORUM_MODEL".to_string(),
        "model.base_url http://127.0.0.1:9/v1 --base-url".to_string(),
        "agent_depth 0 default".to_string(),
        format!("limits.max_read_bytes 1000 {f}:4"),
        "limits.max_frame_bytes 67108864 default".to_string(),
        "mcp.sync_seconds 50 default".to_string(),
        "acp.share_mcp_servers false default".to_string(),
        "internal.terminal_network false default".to_string(),
        "agents.claude claude-agent-acp built in".to_string(),
        format!("agents.gemini gemini --acp built in, changed at {f}:6"),
        format!("agents.mine /bin/true {f}:9"),
        "worktree.sign false default".to_string(),
        "worktree.setup (unset) default".to_string(),
        "worktree.share [] default".to_string(),
        format!("worktree.check cargo test {f}:13"),
        format!("worktree.check_timeout 120 {f}:14"),
    ] {
        assert!(lines.contains(&want), "no line {want:?} in {lines:#?}");
    }
}
