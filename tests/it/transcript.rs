//! Transcripts: recorder → player round trip, and a clear error for every
//! kind of bad file.

use crate::common;

use common::*;
use quorum::event::{Event, Stamped};
use quorum::transcript::{self, Header, Recorder, TerminalSize, TranscriptError, Warning};

fn header() -> Header {
    Header::now(
        std::path::Path::new("/work/x"),
        TerminalSize {
            cols: 120,
            rows: 40,
        },
    )
}

#[test]
fn recorder_to_player_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let events = events(&demo());
    let mut recorder = Recorder::create(&path, &header()).unwrap();
    for e in &events {
        recorder.record(e).unwrap();
    }
    drop(recorder);
    let loaded = transcript::load(&path).unwrap();
    assert_eq!(loaded.header, header_of(&loaded.header));
    assert_eq!(loaded.header.version, transcript::VERSION);
    assert_eq!(
        loaded.header.terminal,
        TerminalSize {
            cols: 120,
            rows: 40
        }
    );
    assert!(loaded.warnings.is_empty());
    assert_eq!(loaded.events, events);
}

fn header_of(h: &Header) -> Header {
    Header {
        started_at: h.started_at.clone(),
        ..header()
    }
}

#[test]
fn every_recorded_event_is_on_disk_before_the_recorder_is_dropped() {
    // What a process that dies right after `record` leaves behind: the file
    // as another reader sees it while the recorder is still open.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.jsonl");
    let mut recorder = Recorder::create(&path, &header()).unwrap();
    for i in 0..50u64 {
        let e = Stamped::new(
            i,
            Event::UserMessage {
                text: format!("m{i}"),
            },
        );
        recorder.record(&e).unwrap();
        let seen = transcript::load(&path).unwrap();
        assert_eq!(seen.events.len() as u64, i + 1);
        assert_eq!(seen.events.last(), Some(&e));
    }
}

#[cfg(unix)]
#[test]
fn transcripts_are_private_and_never_overwritten() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("private.jsonl");
    drop(Recorder::create(&path, &header()).unwrap());
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let again = Recorder::create(&path, &header()).unwrap_err();
    assert!(
        matches!(&again, quorum::transcript::RecordError::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists),
        "{again}"
    );
}

fn error_of(name: &str) -> String {
    let path = fixture(&format!("bad/{name}"));
    let err = transcript::load(&path).expect_err("a bad file is an error");
    err.to_string()
}

#[test]
fn not_json_names_the_line() {
    let msg = error_of("not_json.jsonl");
    assert!(msg.contains("not_json.jsonl:3: not JSON"), "{msg}");
}

#[test]
fn unknown_event_type_names_line_and_type() {
    let path = fixture("bad/unknown_event.jsonl");
    match transcript::load(&path) {
        Err(TranscriptError::UnknownEvent { line, name, .. }) => {
            assert_eq!((line, name.as_str()), (3, "teleport"))
        }
        other => panic!("{other:?}"),
    }
    let msg = error_of("unknown_event.jsonl");
    assert!(
        msg.contains("unknown_event.jsonl:3: unknown event type \"teleport\""),
        "{msg}"
    );
    assert!(
        msg.contains("subagent_started"),
        "lists the known types: {msg}"
    );
}

#[test]
fn newer_format_version_says_to_upgrade() {
    let msg = error_of("newer_version.jsonl");
    assert!(
        msg.contains("newer_version.jsonl:1: transcript format version 3 is newer"),
        "{msg}"
    );
    assert!(msg.contains("upgrade quorum"), "{msg}");
}

#[test]
fn missing_field_names_line_event_and_field() {
    let msg = error_of("missing_field.jsonl");
    assert!(
        msg.contains("missing_field.jsonl:3: bad \"subagent_finished\" event"),
        "{msg}"
    );
    assert!(msg.contains("stop_reason"), "{msg}");
}

#[test]
fn not_a_transcript_and_empty_file() {
    let msg = error_of("not_a_transcript.jsonl");
    assert!(
        msg.contains("not_a_transcript.jsonl:1: not a quorum transcript header"),
        "{msg}"
    );
    let msg = error_of("empty.jsonl");
    assert!(msg.contains("empty.jsonl: empty file"), "{msg}");
}

#[test]
fn truncated_last_line_is_reported_and_the_rest_replays() {
    let path = fixture("bad/truncated.jsonl");
    let loaded = transcript::load(&path).expect("a cut-short last line is not fatal");
    assert_eq!(loaded.events.len(), 1);
    assert_eq!(
        loaded.warnings,
        [Warning::TruncatedLastLine {
            path: path.clone(),
            line: 3
        }]
    );
    let msg = loaded.warnings[0].to_string();
    assert!(
        msg.contains("truncated.jsonl:3: last line is cut short"),
        "{msg}"
    );
}

#[test]
fn a_bad_line_in_the_middle_is_an_error_even_without_newline_elsewhere() {
    // Only the *last* line may be cut short; a bad line before it is fatal.
    let text = format!(
        "{}\n{{\"t\":0,\"type\":\"user_message\",\"te\n{{\"t\":1,\"type\":\"assistant_end\"}}",
        serde_json::to_string(&header()).unwrap()
    );
    let err = transcript::parse(std::path::Path::new("mid.jsonl"), &text).unwrap_err();
    assert!(
        err.to_string().starts_with("mid.jsonl:2: not JSON"),
        "{err}"
    );
}

/// Version-1 transcripts still replay: their task snapshots are made by the
/// same task board the engine uses, so the demo as first recorded (whose
/// panel said 6 tools while its box said 5) now shows one number in both.
#[test]
fn version_1_replays_with_box_and_panel_agreeing() {
    let v1 = fixture("demo_v1.jsonl");
    let raw = std::fs::read_to_string(&v1).unwrap();
    assert!(raw.starts_with("{\"format\": \"quorum-transcript\", \"version\": 1"));
    assert!(
        raw.contains("\"type\": \"task_progress\", \"task_id\""),
        "a real v1 file"
    );
    let loaded = transcript::load(&v1).unwrap();
    assert_eq!(loaded.header.version, 1);
    assert_eq!(
        loaded.events,
        events(&demo()),
        "the same events as the demo converted to version 2"
    );
    let buf = screen(&loaded.events, 120, 200, Some(true));
    let text = rows(&buf).join("\n");
    // gemini's background review: its box and its panel entry.
    let panel = text
        .lines()
        .find_map(|l| l.split("done · yellow · ").nth(1))
        .and_then(|rest| rest.split(" tools").next())
        .unwrap_or_else(|| panic!("no panel entry for t1:\n{text}"));
    let gemini_box = text
        .split("╭─ gemini")
        .nth(1)
        .and_then(|b| b.split(" tool calls ─╯").next())
        .and_then(|b| b.rsplit(' ').next())
        .unwrap_or_else(|| panic!("no gemini box:\n{text}"));
    assert_eq!(panel, gemini_box, "{text}");
}

/// Version 1's `task_completed` and old-shape `task_progress` lines give
/// way to the board's snapshots; its `task_reported` keeps only the task id.
#[test]
fn version_1_task_lines_become_board_snapshots() {
    let text = concat!(
        r#"{"format":"quorum-transcript","version":1,"quorum_version":"0.1.0","cwd":"/w","started_at":"2026-11-30T10:00:00Z","terminal":{"cols":80,"rows":24}}"#,
        "\n",
        r#"{"t":1,"type":"subagent_started","call_id":"c","task_id":"t1","agent":{"acp":"fake"},"input":"go","background":true}"#,
        "\n",
        r#"{"t":2,"type":"subagent_activity","call_id":"c","activity":{"kind":"tool_call","id":"a","title":"Read"}}"#,
        "\n",
        r#"{"t":2,"type":"task_progress","task_id":"t1","state":"running","tool_calls":1}"#,
        "\n",
        r#"{"t":3,"type":"subagent_finished","call_id":"c","output":"ok","stop_reason":"end_turn"}"#,
        "\n",
        r#"{"t":3,"type":"task_completed","task_id":"t1","output":"ok","stop_reason":"end_turn"}"#,
        "\n",
        r#"{"t":4,"type":"task_reported","task_id":"t1","output":"ok","stop_reason":"end_turn"}"#,
        "\n",
    );
    let loaded = transcript::parse(std::path::Path::new("old.jsonl"), text).unwrap();
    let types: Vec<&str> = loaded.events.iter().map(|e| e.event.type_name()).collect();
    assert_eq!(
        types,
        [
            "subagent_started",
            "subagent_activity",
            "task_progress",
            "subagent_finished",
            "task_progress",
            "task_reported"
        ]
    );
    assert!(matches!(
        &loaded.events[2].event,
        Event::TaskProgress { call_id, task_id: Some(t), summary } if call_id == "c" && t == "t1" && summary.tool_calls == 1
    ));
}

/// The first two lines of the demo: a header and one event.
fn demo_start() -> Vec<u8> {
    let text = std::fs::read_to_string(demo()).unwrap();
    text.lines()
        .take(2)
        .flat_map(|l| format!("{l}\n").into_bytes())
        .collect()
}

#[test]
fn an_invalid_byte_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.jsonl");
    let mut bytes = demo_start();
    bytes.extend_from_slice(b"{\"t\":5,\"type\":\"notice\",\"text\":\"caf\xe9\"}\n");
    std::fs::write(&path, bytes).unwrap();
    let msg = transcript::load(&path).unwrap_err().to_string();
    assert!(
        msg.ends_with(
            "latin1.jsonl:3: not UTF-8 text (byte 35 of the line); a transcript is JSON lines"
        ),
        "{msg}"
    );
}

#[test]
fn a_character_cut_at_the_end_is_a_cut_short_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.jsonl");
    let mut bytes = demo_start();
    // `é` is two bytes; the writer was stopped after the first.
    bytes.extend_from_slice(b"{\"t\":5,\"type\":\"notice\",\"text\":\"caf\xc3");
    std::fs::write(&path, bytes).unwrap();
    let loaded = transcript::load(&path).expect("the lines before replay");
    assert_eq!(loaded.events.len(), 1);
    assert_eq!(
        loaded.warnings,
        [Warning::TruncatedLastLine { path, line: 3 }]
    );
}

#[test]
fn read_each_hands_on_the_events_load_keeps_in_order() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // A version-1 file too: its snapshots are made as it is read.
    for file in [
        "assets/demo.jsonl",
        "tests/fixtures/demo_v1.jsonl",
        "tests/fixtures/batch.jsonl",
    ] {
        let path = root.join(file);
        let loaded = transcript::load(&path).unwrap();
        let mut events = Vec::new();
        let read = transcript::read_each(
            &path,
            quorum::confine::limits::MAX_TRANSCRIPT_LINE,
            &mut |e| events.push(e),
        )
        .unwrap();
        assert_eq!(events, loaded.events, "{file}");
        assert_eq!(read.header, loaded.header, "{file}");
        assert_eq!(read.warnings, loaded.warnings, "{file}");
    }
    // A bad line: an error, as load says it, after the events before it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    let demo = std::fs::read_to_string(root.join("assets/demo.jsonl")).unwrap();
    let mut lines: Vec<&str> = demo.lines().take(4).collect();
    lines.insert(3, "not json");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let mut seen = 0;
    let err = transcript::read_each(&path, 1 << 20, &mut |_| seen += 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        transcript::load(&path).unwrap_err().to_string()
    );
    assert_eq!(seen, 2, "the two events before the bad line");
}
