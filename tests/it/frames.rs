//! The app loop's redraws under a flood of engine events: frames are
//! coalesced (at most `app::FRAMES_A_SECOND`, none without a change), and
//! a key typed during the flood is drawn in the very next frame.
//!
//! No timed assertions: the frame bound is computed from the time the run
//! actually took, and every wait is bounded.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::rows;
use quorum::event::{AgentRef, Event, Stamped, build};
use quorum::tui::app::{self, App, Input};
use ratatui::Terminal;
use ratatui::backend::{Backend, ClearType, TestBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Position, Size};
use tokio::sync::mpsc;

type Frames = Arc<Mutex<Vec<String>>>;

/// A `TestBackend` that keeps the text of every frame drawn and calls
/// `on_frame(n)` after the n-th (1-based).
struct Watched {
    inner: TestBackend,
    frames: Frames,
    on_frame: Box<dyn FnMut(usize) + Send>,
}

impl Watched {
    fn new(on_frame: impl FnMut(usize) + Send + 'static) -> (Self, Frames) {
        let frames = Frames::default();
        let backend = Self {
            inner: TestBackend::new(120, 40),
            frames: frames.clone(),
            on_frame: Box::new(on_frame),
        };
        (backend, frames)
    }
}

impl Backend for Watched {
    type Error = <TestBackend as Backend>::Error;

    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        self.inner.draw(content)
    }
    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.hide_cursor()
    }
    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.show_cursor()
    }
    fn get_cursor_position(&mut self) -> Result<Position, Self::Error> {
        self.inner.get_cursor_position()
    }
    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> Result<(), Self::Error> {
        self.inner.set_cursor_position(position)
    }
    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()
    }
    fn clear_region(&mut self, clear_type: ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(clear_type)
    }
    fn size(&self) -> Result<Size, Self::Error> {
        self.inner.size()
    }
    fn window_size(&mut self) -> Result<WindowSize, Self::Error> {
        self.inner.window_size()
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        self.inner.flush()?;
        let screen = rows(self.inner.buffer()).join("\n");
        let n = {
            let mut frames = self.frames.lock().unwrap();
            frames.push(screen);
            frames.len()
        };
        (self.on_frame)(n);
        Ok(())
    }
}

const AGENTS: usize = 16;

fn started(i: usize) -> Stamped {
    Stamped::new(
        0,
        build::started(format!("c{i}"), AgentRef::Acp(format!("fake{i}")))
            .input("trickle")
            .background(format!("t{i}"))
            .event(),
    )
}

/// Chunk `n` of the flood, for agent `n % AGENTS`.
fn chunk(n: usize) -> Stamped {
    let end = if n % 12 == 11 { "\n" } else { " " };
    Stamped::new(
        1,
        build::chunk(format!("c{}", n % AGENTS), format!("w{n}{end}")),
    )
}

fn live() -> App {
    // The engine is not needed: commands go nowhere.
    let (ops, _) = mpsc::unbounded_channel();
    App::live(ops, Instant::now())
}

fn key(c: char) -> Input {
    Input::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

/// The composer's row (its text starts with `›` at the left margin).
fn composer(screen: &str) -> &str {
    screen
        .lines()
        .rev()
        .find(|l| l.starts_with("› "))
        .unwrap_or("")
}

#[tokio::test]
async fn a_flood_of_events_is_drawn_in_coalesced_frames_and_none_without_a_change() {
    const CHUNKS: usize = 20_000;
    let (backend, frames) = Watched::new(|_| {});
    let mut terminal = Terminal::new(backend).unwrap();
    let mut app = live();
    let (in_tx, mut in_rx) = mpsc::unbounded_channel::<Input>();
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();

    // The engine: sixteen boxes, then 20,000 chunks in batches of 40 with
    // the loop free to run between batches, then every box finishes.
    let watched = frames.clone();
    let engine = tokio::spawn(async move {
        for i in 0..AGENTS {
            ev_tx.send(started(i)).unwrap();
        }
        for n in 0..CHUNKS {
            ev_tx.send(chunk(n)).unwrap();
            if n % 40 == 39 {
                tokio::task::yield_now().await;
            }
        }
        for i in 0..AGENTS {
            let finished = build::finished(format!("c{i}"), format!("fake{i} is done"));
            ev_tx.send(Stamped::new(2, finished.event())).unwrap();
        }
        // Wait (bounded) until a frame shows the last box finished...
        let deadline = Instant::now() + Duration::from_secs(20);
        let last = format!("fake{} is done", AGENTS - 1);
        while !watched
            .lock()
            .unwrap()
            .last()
            .is_some_and(|f| f.contains(&last))
        {
            assert!(Instant::now() < deadline, "the end never showed");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // ...then nothing changes: nothing may be drawn for a while.
        let drawn = watched.lock().unwrap().len();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let idle = watched.lock().unwrap().len() - drawn;
        drop(in_tx);
        idle
    });
    let start = Instant::now();
    app::run(&mut terminal, &mut app, &mut in_rx, &mut ev_rx)
        .await
        .unwrap();
    let took = start.elapsed();
    let idle = engine.await.unwrap();

    assert_eq!(
        app.state.applied as usize,
        2 * AGENTS + CHUNKS,
        "every event applied"
    );
    let drawn = app.frame_stats().frames;
    assert_eq!(drawn as usize, frames.lock().unwrap().len());
    // At most FRAMES_A_SECOND frames a second, plus the first and the last.
    let bound = (took.as_secs_f64() * app::FRAMES_A_SECOND as f64).ceil() as u64 + 2;
    assert!(
        drawn <= bound,
        "{drawn} frames for {} batches of events in {took:?} (at most {bound})",
        CHUNKS / 40
    );
    assert_eq!(idle, 0, "frames drawn while nothing changed");
}

#[tokio::test]
async fn a_key_typed_during_a_flood_of_events_is_drawn_in_the_next_frame() {
    let (in_tx, mut in_rx) = mpsc::unbounded_channel::<Input>();
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    for i in 0..AGENTS {
        ev_tx.send(started(i)).unwrap();
    }
    // Each frame drawn brings 400 more chunks; the key comes with the
    // fifth frame's chunks, and both channels close after the thirtieth.
    const KEY_AFTER: usize = 5;
    let mut senders = Some((in_tx, ev_tx));
    let mut n_chunk = 0;
    let (backend, frames) = Watched::new(move |n| {
        let Some((in_tx, ev_tx)) = &senders else {
            return;
        };
        for _ in 0..400 {
            ev_tx.send(chunk(n_chunk)).unwrap();
            n_chunk += 1;
        }
        if n == KEY_AFTER {
            in_tx.send(key('z')).unwrap();
        }
        if n == 30 {
            senders = None;
        }
    });
    let mut terminal = Terminal::new(backend).unwrap();
    let mut app = live();
    app::run(&mut terminal, &mut app, &mut in_rx, &mut ev_rx)
        .await
        .unwrap();

    let frames = frames.lock().unwrap();
    assert!(frames.len() > KEY_AFTER + 1, "{} frames", frames.len());
    for (i, frame) in frames.iter().enumerate() {
        let shown = composer(frame).starts_with("› z");
        assert_eq!(
            shown,
            i >= KEY_AFTER,
            "frame {} of {}: composer {:?}",
            i + 1,
            frames.len(),
            composer(frame)
        );
    }
    // The flood was drawn too, not only the key.
    assert!(
        frames.last().unwrap().contains("w11999"),
        "{}",
        frames.last().unwrap()
    );
}

/// The cells laid out for one frame drawn with `events` applied first.
fn laid_out_by(terminal: &mut Terminal<TestBackend>, app: &mut App, events: &[Stamped]) -> u64 {
    for e in events {
        app.on_event(e.clone());
    }
    let before = app.view.laid_out();
    terminal.draw(|f| app.draw(f)).unwrap();
    app.view.laid_out() - before
}

#[test]
fn only_the_boxes_that_changed_are_laid_out_again() {
    let mut terminal = Terminal::new(TestBackend::new(120, 60)).unwrap();
    let mut app = App::still();
    let at = |t: u64, e: Stamped| Stamped::new(t, e.event);
    let starts: Vec<Stamped> = (0..4).map(|i| at(1000, started(i))).collect();
    assert_eq!(laid_out_by(&mut terminal, &mut app, &starts), 4);
    // Box 1 streams; the others are not laid out again.
    let chunks: Vec<Stamped> = (0..3).map(|k| at(1010, chunk(16 * k + 1))).collect();
    assert_eq!(laid_out_by(&mut terminal, &mut app, &chunks), 1);
    // Time passes but neither the spinner's frame nor any elapsed second
    // turns (1000 ms and 1030 ms share both): nothing is laid out.
    let notice = Event::Notice {
        level: quorum::event::NoticeLevel::Info,
        text: "tick".into(),
    };
    assert_eq!(
        laid_out_by(
            &mut terminal,
            &mut app,
            &[Stamped::new(1030, notice.clone())]
        ),
        1,
        "the new notice only"
    );
    // The spinner turns: the running boxes show it in their title rows,
    // which alone are laid out again; of the cells only the new notice is.
    let ticked = app.view.ticked();
    assert_eq!(
        laid_out_by(&mut terminal, &mut app, &[Stamped::new(1100, notice)]),
        1
    );
    assert_eq!(app.view.ticked() - ticked, 4, "the four titles");
}

/// A screen drawn frame after frame, whose cells' rows were kept and only
/// their animated rows laid out again as time moved, is the screen a
/// fresh layout of the same events draws, colours and all: running boxes,
/// boxes grouped in a batch, a quorum's header.
#[test]
fn a_screen_kept_across_frames_is_the_screen_laid_out_afresh() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for file in [
        "assets/demo.jsonl",
        "tests/fixtures/batch.jsonl",
        "tests/fixtures/quorum.jsonl",
    ] {
        let events = quorum::transcript::load(&root.join(file)).unwrap().events;
        let mut kept = App::still();
        let mut terminal = Terminal::new(TestBackend::new(120, 60)).unwrap();
        for (n, event) in events.iter().enumerate() {
            kept.on_event(event.clone());
            terminal.draw(|f| kept.draw(f)).unwrap();
            let mut fresh = App::still();
            for e in &events[..=n] {
                fresh.on_event(e.clone());
            }
            let mut again = Terminal::new(TestBackend::new(120, 60)).unwrap();
            again.draw(|f| fresh.draw(f)).unwrap();
            assert_eq!(
                terminal.backend().buffer(),
                again.backend().buffer(),
                "{file} after event {}",
                n + 1
            );
        }
        assert!(
            kept.view.ticked() > 0,
            "{file}: no row moved with time alone"
        );
    }
}

#[test]
fn a_long_stream_shows_its_last_lines_in_its_box() {
    let mut app = App::still();
    app.on_event(started(0));
    // 300 lines of 12 words: more than a box keeps, far more than it shows.
    for n in 0..3600 {
        let end = if n % 12 == 11 { "\n" } else { " " };
        let text = format!("w{n}{end}");
        app.on_event(Stamped::new(1, build::chunk("c0", text)));
    }
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    terminal.draw(|f| app.draw(f)).unwrap();
    let screen = rows(terminal.backend().buffer()).join("\n");
    let last = screen
        .lines()
        .rfind(|l| l.contains("w35"))
        .expect("streamed text shows");
    assert!(last.contains("w3597 w3598 w3599"), "{screen}");
    let body = screen.lines().filter(|l| l.contains(" w")).count();
    assert_eq!(body, 5, "five rows of activity\n{screen}");
}

/// An event that comes alone while the screen is idle (the last of a turn:
/// its "turn cancelled" notice, say) is drawn: the loop woke for it,
/// applied it, and used to forget that it had, so nothing was drawn until
/// something else changed (an Esc test saw the turn end without its
/// notice).
#[tokio::test]
async fn an_event_that_comes_alone_while_idle_is_drawn() {
    let (in_tx, mut in_rx) = mpsc::unbounded_channel::<Input>();
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    let (backend, frames) = Watched::new(|_| {});
    let watched = frames.clone();
    let engine = tokio::spawn(async move {
        // The first frame drawn, and then a while with nothing to draw.
        let deadline = Instant::now() + Duration::from_secs(20);
        while watched.lock().unwrap().is_empty() {
            assert!(Instant::now() < deadline, "no first frame");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(app::FRAME * 3).await;
        let notice = Event::Notice {
            level: quorum::event::NoticeLevel::Warning,
            text: "turn cancelled".into(),
        };
        ev_tx.send(Stamped::new(5, notice)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let shown = loop {
            if watched
                .lock()
                .unwrap()
                .last()
                .is_some_and(|f| f.contains("turn cancelled"))
            {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        drop(in_tx);
        drop(ev_tx);
        shown
    });
    let mut terminal = Terminal::new(backend).unwrap();
    let mut app = live();
    app::run(&mut terminal, &mut app, &mut in_rx, &mut ev_rx)
        .await
        .unwrap();
    assert!(
        engine.await.unwrap(),
        "the notice was applied but not drawn while the loop ran; frames drawn: {}",
        frames.lock().unwrap().len()
    );
}
