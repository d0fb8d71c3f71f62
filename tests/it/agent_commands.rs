//! The agent's own commands, modes and config options, through the whole
//! app (keys → engine → the fake agent with `--commands` → events → the
//! screen): listed by `/agents NAME` and in the opened box, completed with
//! Tab after `@NAME /`, sent as `/name args`; the mode and options in the
//! box's badges; `/mode` and `/set` changing them on the agent's session
//! (the agent's own report proves it), invalid values refused, and a
//! model picked this way used by the agent's next session.

use crate::common;

use common::app::*;
use quorum::agent::Permissions;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;

const AGENT: &str = "args = [\"--commands\"]\n";

fn terminal() -> Terminal<TestBackend> {
    Terminal::new(TestBackend::new(170, 50)).unwrap()
}

#[tokio::test]
async fn commands_are_listed_completed_and_sent_as_the_agent_expects() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), AGENT, None, Permissions::Ask, None);
    let mut terminal = terminal();

    // Before any session the agent has announced nothing.
    drive(&mut terminal, &mut app, line("/agents fake"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("fake: no session open yet, so nothing announced")
    })
    .await;
    // Nor does Tab know its commands.
    drive(&mut terminal, &mut app, chars("@fake /"), vec![]).await;
    drive(&mut terminal, &mut app, vec![key(KeyCode::Tab)], vec![]).await;
    assert!(
        text(&terminal).contains("fake has announced no commands yet"),
        "{}",
        text(&terminal)
    );
    // Clear the draft.
    drive(&mut terminal, &mut app, vec![ctrl('u')], vec![]).await;

    // A first call: the session announces its commands, mode and options.
    drive(&mut terminal, &mut app, line("@fake settings"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("received \"settings\"; mode ask; model fast; effort low")
    })
    .await;
    let screen = text(&terminal);
    assert!(
        screen.contains("╭─ fake · acp · fresh · mode Ask · model fast · effort low"),
        "badges: {screen}"
    );

    // Its commands come when the agent has them (the fake agent, as real
    // ones, sends them a moment after the session opened, here after its
    // turn): the screen learns them all the same.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !app.state.agent_commands.contains_key("fake") {
        assert!(
            std::time::Instant::now() < deadline,
            "the commands never came"
        );
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), ev_rx.recv())
            .await
            .expect("an event")
            .expect("the session runs");
        drive(&mut terminal, &mut app, vec![], vec![e]).await;
    }
    // `/agents fake`: what it announced, from the agent's connection.
    drive(&mut terminal, &mut app, line("/agents fake"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("/review <what to review> — Review the changes")
    })
    .await;
    let screen = text(&terminal);
    for want in [
        "Commands (send `@fake /command args`):",
        "/compact — Compact the context",
        "Mode: ask (offers: ask, code, plan)",
        "Option model (Model): fast (takes: fast, smart)",
        "Option effort (Effort): low (takes: low, high)",
    ] {
        assert!(screen.contains(want), "{want}: {screen}");
    }

    // Tab after `@fake /`: both commands are offered...
    drive(&mut terminal, &mut app, chars("@fake /"), vec![]).await;
    drive(&mut terminal, &mut app, vec![key(KeyCode::Tab)], vec![]).await;
    assert!(
        text(&terminal).contains("/compact  /review"),
        "{}",
        text(&terminal)
    );
    // ...and `/r` completes to `/review ` (its space is the one that
    // separates the argument typed next).
    drive(&mut terminal, &mut app, chars("r"), vec![]).await;
    drive(&mut terminal, &mut app, vec![key(KeyCode::Tab)], vec![]).await;
    assert!(
        text(&terminal).contains("› @fake /review"),
        "{}",
        text(&terminal)
    );
    // Sent, the agent gets exactly `/review src/a.rs`.
    drive(&mut terminal, &mut app, line("src/a.rs"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("received \"/review src/a.rs\"; mode ask")
    })
    .await;

    // The opened box lists them all.
    drive(
        &mut terminal,
        &mut app,
        vec![alt(KeyCode::Up), key(KeyCode::Enter)],
        vec![],
    )
    .await;
    let opened = text(&terminal);
    for want in [
        "mode: Ask (of ask, code, plan)",
        "options: model fast (of fast, smart) · effort low (of low, high)",
        "commands: 2",
        "/review <what to review> — Review the changes",
        "/compact — Compact the context",
    ] {
        assert!(opened.contains(want), "{want}: {opened}");
    }
}

#[tokio::test]
async fn mode_and_set_change_the_agents_session_and_a_model_is_remembered() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("s.jsonl");
    let (_session, mut app, mut ev_rx) = live_session(
        dir.path(),
        AGENT,
        None,
        Permissions::Ask,
        Some(record.clone()),
    );
    let mut terminal = terminal();

    // No session yet: said plainly.
    drive(&mut terminal, &mut app, line("/mode fake plan"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("/mode: fake has no open session to change: `@fake message` opens one")
    })
    .await;

    drive(&mut terminal, &mut app, line("@fake settings"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("received \"settings\"; mode ask; model fast; effort low")
    })
    .await;

    for (command, answer) in [
        ("/mode fake plan", "fake: mode plan"),
        ("/set fake effort high", "fake: effort high"),
        (
            "/set fake model smart",
            "fake: model smart; its next sessions start with this model",
        ),
    ] {
        drive(&mut terminal, &mut app, line(command), vec![]).await;
        until(&mut terminal, &mut app, &mut ev_rx, |s| s.contains(answer)).await;
    }
    // Values the agent does not offer are refused, naming those it does.
    for (command, answer) in [
        (
            "/mode fake fly",
            "/mode: fake offers no mode \"fly\"; its modes: ask, code, plan",
        ),
        (
            "/set fake effort max",
            "/set: fake: effort takes low, high, not \"max\"",
        ),
        (
            "/set fake colour red",
            "/set: fake has no option \"colour\"; its options: model, effort",
        ),
        (
            "/set fake model",
            "/set NAME OPTION VALUE: give the agent, the option and its value",
        ),
    ] {
        drive(&mut terminal, &mut app, line(command), vec![]).await;
        until(&mut terminal, &mut app, &mut ev_rx, |s| s.contains(answer)).await;
    }

    // The agent's session has them: its report says so, and so do the
    // new box's badges.
    // (Waited for until its box closes: a call still running when
    // `/new` comes keeps its session, and `/mode` would change it.)
    drive(&mut terminal, &mut app, line("@fake settings"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("received \"settings\"; mode plan; model smart; effort high")
            && s.lines()
                .any(|l| l.contains("continued · mode Plan") && l.contains('✓'))
    })
    .await;
    assert!(
        text(&terminal)
            .contains("╭─ fake · acp · continued · mode Plan · model smart · effort high"),
        "{}",
        text(&terminal)
    );

    // A new conversation: the agent's next session starts with the model
    // picked (its mode and effort are that session's own again).
    drive(&mut terminal, &mut app, line("/new"), vec![]).await;
    // The session is forgotten: there is none to change until the next
    // call opens one. (An earlier refusal is on screen too: this waits
    // for the one under this command, so it is answered before the next
    // call opens a session it could change.)
    drive(&mut terminal, &mut app, line("/mode fake code"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.split("› /mode fake code")
            .nth(1)
            .is_some_and(|after| after.contains("/mode: fake has no open session to change"))
    })
    .await;
    drive(&mut terminal, &mut app, line("@fake settings"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("received \"settings\"; mode ask; model smart; effort low")
    })
    .await;
    assert!(
        text(&terminal).contains("╭─ fake · acp · fresh · mode Ask · model smart · effort low"),
        "{}",
        text(&terminal)
    );

    // All of it was recorded: the transcript replays to the same boxes.
    let replayed = common::rows(&common::screen(
        &common::events(&record),
        170,
        50,
        Some(false),
    ))
    .join("\n");
    assert!(
        replayed.contains("╭─ fake · acp · fresh · mode Ask · model smart · effort low"),
        "{replayed}"
    );
    assert!(replayed.contains("fake: model smart; its next sessions start with this model"));
}

/// The config file's `mode` goes through `session/set_mode` for an agent
/// that offers modes as such (not as a config option), its `model` through
/// the model option; a mode it does not offer is said, and not sent.
#[tokio::test]
async fn the_config_files_mode_and_model_apply_to_new_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let extra = format!("{AGENT}mode = \"plan\"\nmodel = \"smart\"\n");
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), &extra, None, Permissions::Ask, None);
    let mut terminal = terminal();
    drive(&mut terminal, &mut app, line("@fake settings"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("received \"settings\"; mode plan; model smart; effort low")
    })
    .await;
    assert!(
        text(&terminal).contains("╭─ fake · acp · fresh · mode Plan · model smart · effort low"),
        "{}",
        text(&terminal)
    );

    let dir = tempfile::tempdir().unwrap();
    let extra = format!("{AGENT}mode = \"fly\"\n");
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), &extra, None, Permissions::Ask, None);
    drive(&mut terminal, &mut app, line("@fake settings"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("received \"settings\"; mode ask; model fast")
    })
    .await;
    assert!(
        text(&terminal)
            .contains("fake: mode \"fly\" is not one it offers (ask, code, plan); it keeps ask"),
        "{}",
        text(&terminal)
    );
}

/// Commands announced after the call that opened the session ended (no
/// turn runs to carry them into a box) still reach the screen: Tab after
/// `@fake /` offers them.
#[tokio::test]
async fn commands_announced_after_the_call_ended_still_reach_the_screen() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(
        dir.path(),
        "args = [\"--commands\", \"--announce-after\", \"500\"]\n",
        None,
        Permissions::Ask,
        None,
    );
    let mut terminal = terminal();
    drive(&mut terminal, &mut app, line("@fake settings"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("received \"settings\"")
    })
    .await;
    // The call is over, and nothing of its commands came with it.
    assert!(!app.state.agent_commands.contains_key("fake"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let announced = loop {
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), ev_rx.recv())
            .await
            .expect("the commands come")
            .expect("the session runs");
        let is = matches!(&e.event, quorum::event::Event::AgentCommands { .. });
        drive(&mut terminal, &mut app, vec![], vec![e]).await;
        if is {
            break true;
        }
        assert!(std::time::Instant::now() < deadline);
    };
    assert!(announced);
    drive(&mut terminal, &mut app, chars("@fake /"), vec![]).await;
    drive(&mut terminal, &mut app, vec![key(KeyCode::Tab)], vec![]).await;
    assert!(
        text(&terminal).contains("/compact  /review"),
        "{}",
        text(&terminal)
    );
}
