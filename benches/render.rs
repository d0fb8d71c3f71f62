//! Render and reducer benchmarks (`cargo bench --bench render`).
//!
//! Targets (issue 2): one frame of a 10,000-cell transcript with 20 running
//! boxes at 200x60 under 2 ms; frame cost that does not grow with the
//! transcript's length; over 1,000,000 events applied per second.
//! Issue 16 (flat cost): a frame at 100,000 cells within 1.5x of one at
//! 1,000 (`frame`); `State::apply` as fast once the state holds 1,000,000
//! cells as at 1,000 (`apply`, the cost case); a 1,000,000-event replay in
//! at most 12x the time of a 100,000-event one (`replay`).
//!
//! `cargo bench --bench render -- frame apply replay` runs the cases named
//! (all by default); `BENCH_REPS=N` sets the repetitions of the apply
//! case. (`scripts/bench-continue.sh` times a continued session's first
//! frame.)
//!
//! Prints figures and ratios; asserts nothing, so timing noise never fails
//! a build.

use std::hint::black_box;
use std::time::{Duration, Instant};

use quorum::event::{
    Activity, AgentRef, Cost, Event, Severity, Stamped, StopReason, Summary, TaskState, ToolStatus,
    UsageShare, build,
};
use quorum::tui::app::App;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const REPORT: &str = "## Findings\n\n1. **Unchecked index** in `parse_header`: `buf[4]` panics on short input.\n2. The retry loop sleeps while holding the pool lock.\n\n```rust\nlet guard = pool.lock();\nsleep(backoff).await;\n```\n\nOtherwise the change reads well.";

/// A session of `cells` transcript cells, the last of them 20 running boxes
/// interleaved with other output.
fn session(cells: usize) -> Vec<Stamped> {
    let mut events = Vec::new();
    let mut t = 0;
    let mut push = |events: &mut Vec<Stamped>, e| {
        t += 10;
        events.push(Stamped::new(t, e));
    };
    let running_from = cells.saturating_sub(40);
    for i in 0..cells {
        let call = format!("c{i}");
        match i % 4 {
            _ if i >= running_from && i % 2 == 0 => {
                let agent = AgentRef::Acp(["claude", "gemini", "codex"][i % 3].into());
                push(
                    &mut events,
                    build::started(call.clone(), agent)
                        .input("Review the change to src/http.rs")
                        .review()
                        .background(format!("t{i}"))
                        .event(),
                );
                for j in 0..6 {
                    push(
                        &mut events,
                        build::activity(
                            call.clone(),
                            Activity::ToolCall {
                                id: format!("{j}"),
                                title: format!("Read src/file{j}.rs"),
                                status: ToolStatus::Completed,
                                detail: Default::default(),
                            },
                        ),
                    );
                }
                push(
                    &mut events,
                    build::chunk(
                        call,
                        "Looking at the retry loop now; the lock is held across",
                    ),
                );
            }
            0 => push(
                &mut events,
                Event::UserMessage {
                    text: format!("Please look at item {i} and tell me what you think about it."),
                },
            ),
            1 => {
                push(
                    &mut events,
                    Event::AssistantDelta {
                        text: REPORT.into(),
                    },
                );
                push(&mut events, Event::AssistantEnd);
            }
            2 => push(
                &mut events,
                Event::ToolCallStarted {
                    id: call,
                    name: "subagent_status".into(),
                    summary: "task t1".into(),
                },
            ),
            _ => {
                push(
                    &mut events,
                    build::started(call.clone(), AgentRef::Internal)
                        .input("Check it")
                        .review()
                        .event(),
                );
                push(
                    &mut events,
                    build::finished(call, REPORT)
                        .severity(Severity::Yellow)
                        .event(),
                );
            }
        }
    }
    events
}

fn app_with(events: &[Stamped]) -> App {
    let mut app = App::still();
    app.view.set_panel(Some(true));
    for e in events {
        app.on_event(e.clone());
    }
    app
}

/// Mean time of `frames` frames, each at a new time so spinners move and
/// running boxes are laid out afresh.
fn frame_time(app: &mut App, cols: u16, rows: u16, frames: u32) -> Duration {
    let mut terminal = Terminal::new(TestBackend::new(cols, rows)).unwrap();
    terminal.draw(|f| app.draw(f)).unwrap(); // warm the caches
    let start = Instant::now();
    for i in 0..frames {
        let tick = Stamped::new(
            app.state.now + 80 * u64::from(i + 1),
            Event::Usage {
                input_tokens: 0,
                output_tokens: 0,
            },
        );
        app.on_event(tick);
        terminal.draw(|f| app.draw(f)).unwrap();
    }
    start.elapsed() / frames
}

/// Event `n` of a long session, in rounds of 12: a question, a reply, a
/// background call with activity, the board's snapshots (waiting, then
/// usage), its end and its report. Every round adds cells, so a cost per
/// event that grows with the cells shows as a falling rate.
fn replay_event(n: usize) -> Stamped {
    let round = n / 12;
    let call = format!("c{round}");
    let task = format!("t{round}");
    let snapshot =
        |waiting: bool, state: TaskState, share: Option<UsageShare>| Event::TaskProgress {
            call_id: call.clone(),
            task_id: Some(task.clone()),
            summary: Summary {
                state,
                tool_calls: 2,
                waiting,
                share,
                ..Summary::default()
            },
        };
    let share = || {
        Some(UsageShare {
            tokens: 1_000,
            cost: Some(Cost {
                amount: 0.01,
                currency: "USD".into(),
                estimated: false,
            }),
        })
    };
    let event = match n % 12 {
        0 => Event::UserMessage {
            text: format!("Please review change {round}."),
        },
        1 => Event::AssistantDelta {
            text: "Asking an agent.".into(),
        },
        2 => Event::AssistantEnd,
        3 => build::started(call.clone(), AgentRef::Acp("claude".into()))
            .input("Review the change")
            .review()
            .background(task.clone())
            .event(),
        4 => build::activity(
            call.clone(),
            Activity::ToolCall {
                id: "1".into(),
                title: "Read src/lib.rs".into(),
                status: ToolStatus::Completed,
                detail: Default::default(),
            },
        ),
        5 => snapshot(true, TaskState::Running, None),
        6 => snapshot(false, TaskState::Running, share()),
        7 => build::chunk(call.clone(), "Looks fine to me."),
        8 => build::finished(call.clone(), "Looks fine.")
            .severity(Severity::Green)
            .event(),
        9 => snapshot(false, TaskState::Done, share()),
        10 => Event::TaskReported {
            task_id: task.clone(),
        },
        _ => Event::TurnEnded {
            stop_reason: StopReason::EndTurn,
        },
    };
    Stamped::new(n as u64 * 10, event)
}

/// Pushes `n` events through the app (`App::on_event`, as `quorum replay
/// --screenshot` does) and draws the one frame a screenshot takes: the
/// time in the events, and the frame's. Events are made in chunks, off
/// the clock.
fn replay_time(n: usize) -> (Duration, Duration) {
    let mut app = App::still();
    app.view.set_panel(Some(true));
    let mut events = Duration::ZERO;
    let mut chunk = Vec::with_capacity(10_000);
    let mut next = 0;
    while next < n {
        chunk.extend((next..n.min(next + 10_000)).map(replay_event));
        next += chunk.len();
        let start = Instant::now();
        for e in chunk.drain(..) {
            app.on_event(e);
        }
        events += start.elapsed();
    }
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).unwrap();
    let start = Instant::now();
    terminal.draw(|f| app.draw(f)).unwrap();
    (events, start.elapsed())
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// One frame at 200x60 of sessions of 1,000, 10,000 and 100,000 cells.
fn frames() {
    println!("render: one frame at 200x60, side panel open, 20 running boxes");
    let mut base = Duration::ZERO;
    for cells in [1_000, 10_000, 100_000] {
        let events = session(cells);
        let mut app = app_with(&events);
        assert_eq!(app.state.cells.len(), cells);
        assert_eq!(app.state.running(), 20);
        let mut terminal = Terminal::new(TestBackend::new(200, 60)).unwrap();
        let cold = Instant::now();
        terminal.draw(|f| app.draw(f)).unwrap();
        let cold = cold.elapsed();
        let warm = frame_time(&mut app, 200, 60, 200);
        // A resize re-wraps only what is visible.
        let mut resized = Terminal::new(TestBackend::new(160, 60)).unwrap();
        let resize = Instant::now();
        resized.draw(|f| app.draw(f)).unwrap();
        let resize = resize.elapsed();
        if cells == 1_000 {
            base = warm;
        }
        println!(
            "  {cells:>7} cells: frame {} (first frame {}, after resize {}), {:.2}x the 1,000-cell frame",
            ms(warm),
            ms(cold),
            ms(resize),
            warm.as_secs_f64() / base.as_secs_f64()
        );
    }
}

/// Repetitions of each measure (`BENCH_REPS`, default 3; 1 for profilers).
fn reps() -> usize {
    std::env::var("BENCH_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3)
}

/// Events applied after the state holds this many cells, per measure.
const WINDOW: usize = 24_000;

/// The cost case (issue 16): `State::apply` throughput once the state
/// holds 1,000, 100,000 and 1,000,000 cells. The state is filled with
/// [`replay_event`]s (off the clock), then the next [`WINDOW`] events
/// are timed; best of 3, each on a state filled afresh. Flat when no
/// per-event cost depends on the session's length.
fn apply_cost() {
    println!(
        "apply: State::apply of the next {WINDOW} events once the state holds N cells (best of 3)"
    );
    let mut first_rate = 0.0;
    for cells in [1_000, 100_000, 1_000_000] {
        let mut best = Duration::MAX;
        for _ in 0..reps() {
            let mut state = quorum::tui::state::State::new();
            let mut n = 0;
            while state.cells.len() < cells {
                state.apply(&replay_event(n));
                n += 1;
            }
            let window: Vec<Stamped> = (n..n + WINDOW).map(replay_event).collect();
            best = best.min(apply_window(&mut state, &window));
            black_box(&state);
        }
        let rate = WINDOW as f64 / best.as_secs_f64();
        if cells == 1_000 {
            first_rate = rate;
        }
        println!(
            "  {cells:>9} cells: {:.2} million events per second, {:.2}x the 1,000-cell rate",
            rate / 1e6,
            rate / first_rate
        );
    }
}

/// The timed part of [`apply_cost`] (a function of its own, for profilers).
#[inline(never)]
fn apply_window(state: &mut quorum::tui::state::State, window: &[Stamped]) -> Duration {
    let start = Instant::now();
    for e in window {
        state.apply(e);
    }
    start.elapsed()
}

/// Replay throughput (issue 16): N events through the app, then its one
/// frame, as `quorum replay --screenshot` does; best of 3 (`BENCH_REPS`).
fn replay() {
    println!(
        "replay: N events through the app (App::on_event), then one 200x60 frame (best of {})",
        reps()
    );
    let mut first_rate = 0.0;
    let mut times = Vec::new();
    for n in [10_000, 100_000, 1_000_000] {
        let (events, frame) = (0..reps())
            .map(|_| replay_time(n))
            .min()
            .expect("at least one run");
        let rate = n as f64 / events.as_secs_f64();
        if n == 10_000 {
            first_rate = rate;
        }
        times.push(events + frame);
        println!(
            "  {n:>9} events in {}: {:.2} million events per second, {:.2}x the 10,000-event rate (frame {})",
            ms(events),
            rate / 1e6,
            rate / first_rate,
            ms(frame)
        );
    }
    println!(
        "  1,000,000 events and their frame take {:.2}x the time of 100,000 (10x is flat, at most 12x)",
        times[2].as_secs_f64() / times[1].as_secs_f64()
    );
}

/// `cargo bench --bench render [-- CASE...]`: every case, or those named
/// (`frame`, `apply`, `replay`).
fn main() {
    // cargo bench passes --bench.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let run = |case: &str| args.is_empty() || args.iter().any(|a| a == case);
    if run("frame") {
        frames();
    }
    if run("apply") {
        apply_cost();
    }
    if run("replay") {
        replay();
    }
}
