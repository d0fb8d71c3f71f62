//! `[notify] command`: a program run for each notification the session's
//! events make due ([`Watch`]), with the notification as one JSON object
//! on its stdin, for ntfy, a webhook, a chat bot. Every front end has it
//! (the TUI and the headless commands alike); the desktop notification is
//! the screen's own (`tui::notify`).
//!
//! It never holds the session up: the notifier reads the bus's events on
//! a channel of its own, in a task of its own, and runs the program there,
//! one notification at a time (so they arrive in order), each owned by the
//! session's supervisor and ended after [`TIMEOUT`]. What goes wrong with
//! it (a program that is not there, one that fails or hangs) is said once,
//! as a notice; nothing else stops.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

use crate::event::notify::{Notification, NotifyKind, Watch};
use crate::event::{Event, NoticeLevel, Stamped};
use crate::runtime::bus::Emitter;
use crate::runtime::supervisor::{self, Supervisor};

/// How long the program may run before it is ended.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// How long a program past its [`TIMEOUT`] has to end after `SIGTERM`.
const KILL_GRACE: Duration = Duration::from_millis(250);

/// How long the end of a session waits for the notifications still due.
const DRAIN: Duration = Duration::from_secs(6);

/// `[notify]` as the session takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The kinds that notify.
    pub kinds: Vec<NotifyKind>,
    /// The program and its arguments (`None`: none is run).
    pub command: Option<Vec<String>>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            kinds: NotifyKind::ALL.to_vec(),
            command: None,
        }
    }
}

/// The session's notifier: its task ends with the session.
pub(super) struct Notifier {
    task: tokio::task::JoinHandle<()>,
    drain: mpsc::UnboundedSender<oneshot::Sender<()>>,
}

impl Notifier {
    /// Starts reading `emitter`'s events, when there is a program to run
    /// (`None` otherwise, or outside a tokio runtime). `session`: the
    /// name the JSON's `session` carries.
    pub(super) fn start(
        settings: Settings,
        emitter: &Emitter,
        supervisor: &Supervisor,
        session: Option<String>,
    ) -> Option<Self> {
        let command = settings.command.clone()?;
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let events = emitter.tap(Watch::wants);
        let (drain, drains) = mpsc::unbounded_channel();
        let run = Runner {
            command,
            kinds: settings.kinds,
            session,
            emitter: emitter.clone(),
            supervisor: supervisor.clone(),
            told: Arc::new(AtomicBool::new(false)),
        };
        let task = runtime.spawn(run.read(events, drains));
        Some(Self { task, drain })
    }

    /// Waits (up to a few seconds) until every notification the events so
    /// far made due has been run: the end of a headless run, before its
    /// processes are stopped.
    pub(super) async fn drain(&self, emitter: &Emitter) {
        emitter.flush();
        let (done, wait) = oneshot::channel();
        if self.drain.send(done).is_ok() {
            let _ = tokio::time::timeout(DRAIN, wait).await;
        }
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What runs the program.
struct Runner {
    command: Vec<String>,
    kinds: Vec<NotifyKind>,
    session: Option<String>,
    emitter: Emitter,
    supervisor: Supervisor,
    /// A failure was said (it is said once).
    told: Arc<AtomicBool>,
}

impl Runner {
    /// Reads the events until the bus goes; a drain is answered once every
    /// event before it has been seen to.
    async fn read(
        self,
        mut events: mpsc::UnboundedReceiver<Stamped>,
        mut drains: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    ) {
        let mut watch = Watch::new();
        loop {
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Some(event) => self.observe(&mut watch, &event.event).await,
                    None => return,
                },
                Some(done) = drains.recv() => {
                    while let Ok(event) = events.try_recv() {
                        self.observe(&mut watch, &event.event).await;
                    }
                    let _ = done.send(());
                }
            }
        }
    }

    async fn observe(&self, watch: &mut Watch, event: &Event) {
        for mut notification in watch.observe(event) {
            if self.kinds.contains(&notification.event) {
                notification.session = self.session.clone();
                // Agent text, for a program that may show it on a screen.
                notification.text = crate::confine::sanitize::one_line(&notification.text);
                if let Err(why) = self.run(&notification).await {
                    self.fail(&why);
                }
            }
        }
    }

    /// Runs the program for `notification`: its JSON on stdin, ended
    /// after [`TIMEOUT`]. What went wrong, in words.
    async fn run(&self, notification: &Notification) -> Result<(), String> {
        let program = &self.command[0];
        let found = crate::runtime::path::locate(program)
            .filter(|p| p.is_file())
            .ok_or_else(|| format!("{program} was not found"))?;
        let mut cmd = supervisor::command(found);
        cmd.args(&self.command[1..])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let (mut child, group) = self
            .supervisor
            .spawn(cmd, "notify")
            .map_err(|e| format!("{program} could not start: {e}"))?;
        let json = serde_json::to_string(notification).expect("a notification is JSON") + "\n";
        let fed = async {
            if let Some(mut stdin) = child.stdin.take() {
                // A program that does not read its stdin is no failure.
                let _ = stdin.write_all(json.as_bytes()).await;
            }
            child.wait().await
        };
        match tokio::time::timeout(TIMEOUT, fed).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(exit_words(program, status)),
            Ok(Err(e)) => Err(format!("{program}: {e}")),
            Err(_) => {
                // No grace to speak of: it had its seconds.
                self.supervisor.terminate(&group, KILL_GRACE).await;
                Err(format!(
                    "{program} was still running after {} s and was ended",
                    TIMEOUT.as_secs()
                ))
            }
        }
    }

    /// Says what went wrong, the first time only.
    fn fail(&self, why: &str) {
        tracing::warn!("[notify] command: {why}");
        if !self.told.swap(true, Ordering::SeqCst) {
            self.emitter.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: format!(
                    "[notify] command: {why} (said once; the session goes on, later failures \
                     are only logged)"
                ),
            });
        }
    }
}

/// `PROGRAM exited with 3`.
fn exit_words(program: &str, status: std::process::ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("{program} exited with {code}"),
        None => format!("{program} was ended by a signal"),
    }
}
