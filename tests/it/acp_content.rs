//! Content agents send (issue 18, item 5): images, audio and resources in
//! message chunks and tool call content show as one-line placeholders
//! instead of vanishing, a resource's text as text; in `quorum call`'s
//! output, in the box, and in a replay of the recorded session.

use crate::common;

use common::app::*;
use common::shell::shell;
use quorum::agent::Permissions;
use quorum::event::{Activity, Event, ToolContent};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const IMAGE: &str = "[image · image/png · 640×480]";
const FINAL: &str = "Chart: [image · image/png · 640×480] [audio · audio/wav] \
    [resource · file:///w/report.pdf · 2.1 KB] the notes say hello \
    [resource · file:///w/data.bin · 2.9 KB]";

fn out(b: &[u8]) -> String {
    common::shell::text(b)
}

#[test]
fn call_output_shows_placeholders_and_a_replay_shows_them_too() {
    let s = shell();
    let record = s.dir.path().join("content.jsonl");
    let o = s.run(&[
        "call",
        "--agent",
        "fake",
        "--input",
        "content",
        "--record",
        record.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o.stderr));
    assert_eq!(out(&o.stdout), format!("{FINAL}\n"));
    // The tool call's content was recorded as its placeholders.
    let events = common::events(&record);
    let content: Vec<ToolContent> = events
        .iter()
        .find_map(|e| match &e.event {
            Event::SubagentActivity {
                activity: Activity::ToolCall { detail, .. },
                ..
            } => Some(detail.content.clone()),
            _ => None,
        })
        .expect("the tool call");
    assert_eq!(
        content,
        [
            ToolContent::Text { text: IMAGE.into() },
            ToolContent::Text {
                text: "[resource · file:///w/report.pdf · 2.1 KB]".into()
            },
        ]
    );
    // Replayed, the box shows the final message with its placeholders.
    let screen = common::rows(&common::screen(&events, 200, 30, Some(false))).join("\n");
    assert!(screen.contains(FINAL), "{screen}");
}

#[tokio::test]
async fn the_box_shows_the_placeholders() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(220, 30)).unwrap();
    drive(&mut terminal, &mut app, line("@fake content"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("data.bin")
    })
    .await;
    let screen = text(&terminal);
    assert!(screen.contains(FINAL), "{screen}");
}
