//! The client's terminals: `terminal/create`, `terminal/output`,
//! `terminal/wait_for_exit`, `terminal/kill` and `terminal/release`.
//!
//! Each terminal is a command run for an agent's session in a process group
//! owned by the supervisor: in a directory inside the session's, confined
//! as the internal agent's shell is (`runtime::sandbox`), and ended when it
//! is released, when its turn is cancelled or ends, and with the
//! connection or quorum (its [`Group`] is dropped, or the supervisor's
//! shutdown, reaper and parent-death signal end it, as for every process).
//!
//! Its output is kept twice: the raw bytes (the newest, up to the agent's
//! `outputByteLimit`) for the agent to read, and, cleaned for the screen,
//! as appended chunks sent to the turn's box at most every [`FLUSH`]
//! (recorded as `TerminalOutput` events, so a replay shows them too).
//! Handlers never wait inside the dispatch loop: waits run in tasks.

use crate::runtime::lock;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, CreateTerminalResponse, KillTerminalRequest, KillTerminalResponse,
    ReleaseTerminalRequest, ReleaseTerminalResponse, TerminalExitStatus, TerminalOutputRequest,
    TerminalOutputResponse, WaitForTerminalExitRequest, WaitForTerminalExitResponse,
};
use agent_client_protocol::{Error, ErrorCode};
use tokio::sync::{mpsc, watch};

use super::fs::{Exclusions, scope_of};
use super::route::{Incoming, Routes, route};
use crate::confine::fsroot::Root;
// The most output a terminal keeps for the agent when it gives no
// `outputByteLimit` (the newest is kept): the internal agent's shell's too.
use crate::confine::limits::MAX_OUTPUT;
use crate::confine::sanitize::{Stream, sanitize};
use crate::event::Activity;
use crate::runtime::sandbox::{self, Sandbox};
use crate::runtime::supervisor::{self, Group, Supervisor};

/// How often a terminal's new output is sent to its box, at most.
const FLUSH: Duration = Duration::from_millis(100);
/// The most output one chunk for the box carries (the newest is kept): a
/// command that writes faster than the box can show costs no more.
const MAX_CHUNK: usize = 16 * 1024;
/// How long, once a command exited, its pipes may stay open (a background
/// child holding them) before its exit is told anyway.
const PIPE_GRACE: Duration = Duration::from_millis(200);
/// How long a killed command's exit is waited for before `terminal/kill`
/// is answered.
const EXIT_WAIT: Duration = Duration::from_secs(1);

/// One connection's terminals.
pub(crate) struct Terminals {
    agent: String,
    supervisor: Supervisor,
    /// `terminal_sandbox` and `terminal_network` from the agent's config
    /// (no sandbox named: bubblewrap when it is installed).
    policy: sandbox::Policy,
    /// The connection's directory; a session's own (a worktree) wins.
    root: Root,
    exclusions: Exclusions,
    routes: Routes,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next: u64,
    live: HashMap<String, Arc<Term>>,
    /// Sessions already told that their commands are not sandboxed (until
    /// their turn ends).
    told: HashSet<String>,
    /// Sessions whose turn is ending (until its routes are gone): they may
    /// start no command, which nothing would end.
    closed: HashSet<String>,
}

/// A terminal: its command's process group, its output, its exit.
struct Term {
    id: String,
    session: String,
    output: Arc<Mutex<Output>>,
    exit: watch::Receiver<Option<TerminalExitStatus>>,
    /// Dropped with the terminal: the group is ended then.
    group: Group,
    /// Set when quorum ends it (kill, release, cancel, the turn's end).
    killed: Arc<AtomicBool>,
}

/// The newest output, as the agent reads it.
struct Output {
    bytes: Vec<u8>,
    limit: usize,
    truncated: bool,
}

impl Output {
    fn new(limit: usize) -> Self {
        Self {
            bytes: Vec::new(),
            limit,
            truncated: false,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        // Trimmed now and then, not on every chunk (at read time exactly).
        if self.bytes.len() > self.limit.saturating_mul(2).max(4096) {
            let cut = self.bytes.len() - self.limit;
            self.bytes.drain(..cut);
            self.truncated = true;
        }
    }

    /// The output as text (bytes that are not UTF-8 replaced), the newest
    /// `limit` bytes of it cut at a character boundary, and whether any
    /// was cut.
    fn read(&self) -> (String, bool) {
        let text = String::from_utf8_lossy(&self.bytes);
        newest(&text, self.limit, self.truncated)
    }
}

/// The newest `limit` bytes of `text`, cut at a character boundary (so
/// maybe a little less), and whether anything was cut.
fn newest(text: &str, limit: usize, truncated: bool) -> (String, bool) {
    if text.len() <= limit {
        return (text.to_string(), truncated);
    }
    let mut cut = text.len() - limit;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    (text[cut..].to_string(), true)
}

/// A JSON-RPC error with a message of its own.
fn error(code: ErrorCode, message: String) -> Error {
    Error::new(code, message)
}

impl Terminals {
    pub(super) fn new(
        agent: String,
        supervisor: Supervisor,
        policy: sandbox::Policy,
        (root, exclusions, routes): (Root, Exclusions, Routes),
    ) -> Self {
        Self {
            agent,
            supervisor,
            policy,
            root,
            exclusions,
            routes,
            table: Mutex::default(),
        }
    }

    fn notice(&self, session: &str, text: String) {
        let _ = route(&self.routes, session, Incoming::Notice(text));
    }

    fn activity(&self, session: &str, activity: Activity) {
        to_box(&self.routes, session, activity);
    }

    /// The turn of these sessions is gone without ending (its future was
    /// dropped): their terminals are dropped, and so their groups ended.
    pub(super) fn drop_sessions(&self, sessions: &[String]) {
        let terms = self.of(sessions, true);
        drop(terms);
    }

    /// The live terminal `id` of `session`, or the error to answer.
    fn get(&self, session: &str, id: &str) -> Result<Arc<Term>, Error> {
        lock(&self.table)
            .live
            .get(id)
            .filter(|t| t.session == session)
            .cloned()
            .ok_or_else(|| {
                error(
                    ErrorCode::INVALID_PARAMS,
                    format!(
                        "unknown terminal {id:?} in session {session}: never created, or released"
                    ),
                )
            })
    }

    /// `terminal/create`: answered from a task of its own.
    pub(super) fn on_create(
        self: &Arc<Self>,
        req: CreateTerminalRequest,
        responder: Responder<CreateTerminalResponse>,
    ) -> Result<(), Error> {
        let this = self.clone();
        tokio::spawn(async move {
            let _ = match this.create(req) {
                Ok(id) => responder.respond(CreateTerminalResponse::new(id)),
                Err(e) => responder.respond_with_error(e),
            };
        });
        Ok(())
    }

    /// Starts the command of `req`; its terminal's id.
    fn create(self: &Arc<Self>, req: CreateTerminalRequest) -> Result<String, Error> {
        let session = req.session_id.0.to_string();
        let (root, _) = scope_of(&self.exclusions, &self.routes, &session, &self.root);
        let line = command_line(&req.command, &req.args);
        let refuse = |why: String| {
            self.notice(
                &session,
                format!("{}: refused to run `{line}`: {why}", self.agent),
            );
            error(ErrorCode::INVALID_PARAMS, why)
        };
        if !self.running(&session) {
            return Err(refuse(format!(
                "no turn of session {session} is running (a command must end with its turn)"
            )));
        }
        if req.command.trim().is_empty() {
            return Err(refuse("the command is empty".into()));
        }
        let cwd = working_dir(&root, req.cwd.as_deref()).map_err(&refuse)?;
        let sandbox::Confined {
            cmd,
            sandboxed,
            weaker,
        } = self.confine(&req, (&root, &cwd)).map_err(&refuse)?;
        let (child, group, reader) = self.spawn(cmd, &session, &line)?;
        let limit = req
            .output_byte_limit
            .map_or(MAX_OUTPUT, |l| usize::try_from(l).unwrap_or(MAX_OUTPUT))
            .min(MAX_OUTPUT);
        let output = Arc::new(Mutex::new(Output::new(limit)));
        let (exit_tx, exit) = watch::channel(None);
        let killed = Arc::new(AtomicBool::new(false));
        let term = Term {
            // Its id is given as it is kept.
            id: String::new(),
            session: session.clone(),
            output: output.clone(),
            exit,
            group,
            killed: killed.clone(),
        };
        let id = match self.keep(&session, term, (sandboxed, weaker)) {
            Ok(id) => id,
            // Its group goes with it, once the refusal is told.
            Err(_ended) => return Err(refuse(format!("the turn of session {session} ended"))),
        };
        tracing::info!(
            "{}: terminal {id}: `{line}` in {} ({})",
            self.agent,
            cwd.display(),
            if sandboxed { "bwrap" } else { "not sandboxed" }
        );
        self.activity(
            &session,
            Activity::TerminalStarted {
                terminal_id: id.clone(),
                command: sanitize(&line).into_owned(),
            },
        );
        // Without the network, a failure that speaks of it gets a line
        // from quorum saying why.
        let offline = (sandboxed && !self.policy.network)
            .then(|| format!("terminal_network = true under [agents.{}]", self.agent));
        // Not the terminals themselves: a command that runs keeps none of
        // them alive.
        let (routes, agent) = (self.routes.clone(), self.agent.clone());
        let (tid, sid) = (id.clone(), session);
        tokio::spawn(async move {
            let status = pump(
                routes,
                child,
                (reader, output, offline),
                (&sid, &tid),
                (exit_tx, killed),
            )
            .await;
            tracing::info!("{agent}: terminal {tid} ended: {status:?}");
        });
        Ok(id)
    }

    /// Runs `cmd` in a process group of its own, owned by the supervisor,
    /// its output and errors into one pipe, as a terminal has (the output
    /// keeps its order): the child, its group, and the pipe's reading end.
    fn spawn(
        &self,
        mut cmd: tokio::process::Command,
        session: &str,
        line: &str,
    ) -> Result<(tokio::process::Child, Group, std::io::PipeReader), Error> {
        let pipe = std::io::pipe().and_then(|(r, w)| Ok((r, w.try_clone()?, w)));
        let (reader, out, err) = pipe.map_err(|e| {
            error(
                ErrorCode::INTERNAL_ERROR,
                format!("cannot make a pipe for {line}: {e}"),
            )
        })?;
        cmd.stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err);
        let (child, group) = self.supervisor.spawn(cmd, "terminal").map_err(|e| {
            self.notice(session, format!("{}: cannot run `{line}`: {e}", self.agent));
            error(ErrorCode::INTERNAL_ERROR, format!("cannot run {line}: {e}"))
        })?;
        Ok((child, group, reader))
    }

    /// `req`'s command, run in `cwd` (inside `root`) and confined as the
    /// agent's terminal policy says, with the environment the agent asks
    /// for; or why it cannot be.
    fn confine(
        &self,
        req: &CreateTerminalRequest,
        (root, cwd): (&Root, &Path),
    ) -> Result<sandbox::Confined, String> {
        // What the agent asks for is set inside the sandbox, on the command.
        let env: Vec<(String, String)> = req
            .env
            .iter()
            .map(|v| (v.name.clone(), v.value.clone()))
            .collect();
        sandbox::command(
            &req.command,
            &req.args,
            (root.path(), cwd),
            &self.policy,
            sandbox::Env::Command(&env),
        )
        .map_err(|e| e.to_string())
    }

    /// Keeps `session`'s new terminal in the table, under a new id, and
    /// tells the session once that its commands are not sandboxed (or
    /// less than they should be). Its turn ended while it started: its
    /// command is ended at once, and the terminal given back.
    fn keep(
        &self,
        session: &str,
        mut term: Term,
        (sandboxed, weaker): (bool, Option<String>),
    ) -> Result<String, Term> {
        let mut table = lock(&self.table);
        // Its turn ended while it started: it goes at once (the group
        // is ended as it is dropped). Ended and closed, or ended and
        // its routes gone already (and so no longer kept closed): the
        // routes are read under the table's lock, which the turn's end
        // takes to close it.
        let routed = lock(&self.routes).contains_key(session);
        if !routed || table.closed.contains(session) {
            drop(table);
            // Killed outright, no grace: just started, bubblewrap may
            // not have made the sandbox's init yet, which a `SIGTERM`
            // sent now would miss (and it ignores one from outside).
            self.supervisor
                .terminate_blocking(&term.group, std::time::Duration::ZERO);
            return Err(term);
        }
        table.next += 1;
        let id = format!("term-{}", table.next);
        term.id = id.clone();
        table.live.insert(id.clone(), Arc::new(term));
        if !sandboxed && table.told.insert(session.to_string()) {
            let why = match self.policy.mode {
                Some(Sandbox::None) => "terminal_sandbox = \"none\" in its config",
                _ => "bubblewrap (bwrap) is not installed",
            };
            drop(table);
            self.notice(
                session,
                format!(
                    "{}: terminal commands are not sandboxed ({why}): they can write outside the session directory",
                    self.agent
                ),
            );
        } else if let Some(weaker) = weaker
            && table.told.insert(session.to_string())
        {
            drop(table);
            self.notice(session, format!("{}: {weaker}", self.agent));
        }
        Ok(id)
    }

    /// `terminal/output`: what the command wrote so far (the newest, up to
    /// the limit), and its exit status once it exited.
    pub(super) fn on_output(
        &self,
        req: TerminalOutputRequest,
        responder: Responder<TerminalOutputResponse>,
    ) -> Result<(), Error> {
        match self.get(&req.session_id.0, &req.terminal_id.0) {
            Ok(term) => {
                let (text, truncated) = lock(&term.output).read();
                let exit = term.exit.borrow().clone();
                responder.respond(TerminalOutputResponse::new(text, truncated).exit_status(exit))
            }
            Err(e) => responder.respond_with_error(e),
        }
    }

    /// `terminal/wait_for_exit`: answered from a task once the command
    /// exits.
    pub(super) fn on_wait_for_exit(
        &self,
        req: WaitForTerminalExitRequest,
        responder: Responder<WaitForTerminalExitResponse>,
    ) -> Result<(), Error> {
        let term = match self.get(&req.session_id.0, &req.terminal_id.0) {
            Ok(term) => term,
            Err(e) => return responder.respond_with_error(e),
        };
        let mut exit = term.exit.clone();
        // Not the terminal itself: a wait does not keep it alive.
        drop(term);
        tokio::spawn(async move {
            let _ = match exit.wait_for(Option::is_some).await {
                Ok(status) => {
                    let status = status.clone().unwrap_or_default();
                    responder.respond(WaitForTerminalExitResponse::new(status))
                }
                Err(_) => responder.respond_with_error(error(
                    ErrorCode::INTERNAL_ERROR,
                    "the terminal ended before its command's exit was known".into(),
                )),
            };
        });
        Ok(())
    }

    /// `terminal/kill`: the command's group is ended; the terminal stays
    /// (its output can be read) until it is released.
    pub(super) fn on_kill(
        self: &Arc<Self>,
        req: KillTerminalRequest,
        responder: Responder<KillTerminalResponse>,
    ) -> Result<(), Error> {
        let term = match self.get(&req.session_id.0, &req.terminal_id.0) {
            Ok(term) => term,
            Err(e) => return responder.respond_with_error(e),
        };
        let this = self.clone();
        tokio::spawn(async move {
            this.end(&term).await;
            let _ = responder.respond(KillTerminalResponse::new());
        });
        Ok(())
    }

    /// `terminal/release`: ended if it still runs, and forgotten.
    pub(super) fn on_release(
        self: &Arc<Self>,
        req: ReleaseTerminalRequest,
        responder: Responder<ReleaseTerminalResponse>,
    ) -> Result<(), Error> {
        let term = match self.get(&req.session_id.0, &req.terminal_id.0) {
            Ok(term) => term,
            Err(e) => return responder.respond_with_error(e),
        };
        lock(&self.table).live.remove(&term.id);
        let this = self.clone();
        tokio::spawn(async move {
            this.end(&term).await;
            let _ = responder.respond(ReleaseTerminalResponse::new());
        });
        Ok(())
    }

    /// Ends a terminal's process group, and waits a little for its exit to
    /// be known.
    async fn end(&self, term: &Term) {
        term.killed.store(true, Ordering::SeqCst);
        self.supervisor
            .terminate(&term.group, supervisor::GRACE)
            .await;
        let mut exit = term.exit.clone();
        let _ = tokio::time::timeout(EXIT_WAIT, exit.wait_for(Option::is_some)).await;
    }

    /// The person cancelled the turn of these sessions: their commands are
    /// ended (their terminals stay until released, or the turn ends).
    pub(super) fn kill_sessions(self: &Arc<Self>, sessions: &[String]) {
        let terms = self.of(sessions, false);
        if terms.is_empty() {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            for term in terms {
                this.end(&term).await;
            }
        });
    }

    /// Whether a turn of `session` runs (its traffic is routed to one),
    /// and it has not ended.
    fn running(&self, session: &str) -> bool {
        let routed = lock(&self.routes).contains_key(session);
        routed && !lock(&self.table).closed.contains(session)
    }

    /// The ended turn's routes are gone (no command can start for its
    /// sessions now): they need not be kept closed any more.
    pub(super) fn forget(&self, sessions: &[String]) {
        let mut table = lock(&self.table);
        for s in sessions {
            table.closed.remove(s);
        }
    }

    /// The turn of these sessions ended: their terminals are ended and
    /// released, their exits told before the turn's last events; from now
    /// on they may start none.
    pub(super) async fn end_sessions(&self, sessions: &[String]) {
        {
            let mut table = lock(&self.table);
            for s in sessions {
                table.told.remove(s);
                table.closed.insert(s.clone());
            }
        }
        let terms = self.of(sessions, true);
        for term in terms {
            self.end(&term).await;
        }
    }

    /// The live terminals of `sessions`; taken out of the table if `take`.
    fn of(&self, sessions: &[String], take: bool) -> Vec<Arc<Term>> {
        let mut table = lock(&self.table);
        let ids: Vec<String> = table
            .live
            .values()
            .filter(|t| sessions.contains(&t.session))
            .map(|t| t.id.clone())
            .collect();
        ids.iter()
            .filter_map(|id| {
                if take {
                    table.live.remove(id)
                } else {
                    table.live.get(id).cloned()
                }
            })
            .collect()
    }
}

/// Reads the command's output until it has exited and its pipes are
/// closed; tells its exit (to the agent's waits and to the box) once
/// it exited and its pipes closed or [`PIPE_GRACE`] passed.
async fn pump(
    routes: Routes,
    mut child: tokio::process::Child,
    (pipe, output, offline): (std::io::PipeReader, Arc<Mutex<Output>>, Option<String>),
    (session, id): (&str, &str),
    (exit_tx, killed): (watch::Sender<Option<TerminalExitStatus>>, Arc<AtomicBool>),
) -> Option<TerminalExitStatus> {
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(16);
    tokio::task::spawn_blocking(move || read_pipe(pipe, tx));
    let mut screen = Screen::default();
    let mut open = true;
    let mut status: Option<TerminalExitStatus> = None;
    let mut told = false;
    let tell_at = tokio::time::sleep(Duration::MAX / 4);
    tokio::pin!(tell_at);
    let mut ticker = tokio::time::interval(FLUSH);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let flush = |screen: &mut Screen| {
        if let Some(text) = screen.take() {
            to_box(
                &routes,
                session,
                Activity::TerminalOutput {
                    terminal_id: id.to_string(),
                    text,
                },
            );
        }
    };
    let tell = |screen: &mut Screen, status: &TerminalExitStatus| {
        let failed_offline = offline.as_deref().filter(|_| status.exit_code != Some(0));
        // The lock is let go before the note is pushed.
        let note = failed_offline
            .and_then(|setting| sandbox::no_network_note(&lock(&output).read().0, setting));
        if let Some(note) = note {
            let line = format!("\n{note}\n");
            lock(&output).push(line.as_bytes());
            screen.push(line.as_bytes());
        }
        screen.finish();
        flush(screen);
        to_box(
            &routes,
            session,
            Activity::TerminalExit {
                terminal_id: id.to_string(),
                exit_code: status.exit_code,
                signal: status.signal.clone(),
            },
        );
        let _ = exit_tx.send(Some(status.clone()));
    };
    loop {
        tokio::select! {
            chunk = rx.recv(), if open => match chunk {
                Some(bytes) => {
                    lock(&output).push(&bytes);
                    screen.push(&bytes);
                }
                None => open = false,
            },
            ended = child.wait(), if status.is_none() => {
                status = Some(exit_status(ended, killed.load(Ordering::SeqCst)));
                tell_at.as_mut().reset(tokio::time::Instant::now() + PIPE_GRACE);
            }
            _ = &mut tell_at, if status.is_some() && !told => {
                if let Some(s) = &status {
                    tell(&mut screen, s);
                }
                told = true;
            }
            _ = ticker.tick() => flush(&mut screen),
        }
        if !open && let Some(s) = &status {
            if !told {
                tell(&mut screen, s);
            } else {
                flush(&mut screen);
            }
            break;
        }
    }
    status
}

/// Activity for the box of `session`'s turn.
fn to_box(routes: &Routes, session: &str, activity: Activity) {
    let _ = route(routes, session, Incoming::Activity(activity));
}

/// `cwd` as the agent gave it (absolute, or relative to the session's
/// directory; none: the session's directory), if it is a directory inside
/// the session's.
fn working_dir(root: &Root, cwd: Option<&Path>) -> Result<PathBuf, String> {
    let Some(cwd) = cwd else {
        return Ok(root.path().to_path_buf());
    };
    let resolved = root.resolve_existing(cwd).map_err(|e| match e {
        crate::confine::fsroot::FsError::Outside { .. } => format!(
            "cwd {} is outside the session directory {}",
            cwd.display(),
            root.path().display()
        ),
        other => format!("cwd {}: {other}", cwd.display()),
    })?;
    if !resolved.is_dir() {
        return Err(format!("cwd {} is not a directory", cwd.display()));
    }
    Ok(resolved)
}

/// The command line as the person reads it: the command and its
/// arguments, each quoted when it needs to be.
fn command_line(command: &str, args: &[String]) -> String {
    let quote = |s: &str| {
        if !s.is_empty()
            && s.chars()
                .all(|c| c.is_alphanumeric() || "-_./=:,+@%".contains(c))
        {
            s.to_string()
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        }
    };
    std::iter::once(command.to_string())
        .chain(args.iter().map(|a| quote(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// How a command ended, as ACP says it. The group's leader (quorum's
/// reaper, or bubblewrap) reports a command ended by a signal as the
/// shell does, 128 + the signal: when quorum sent it, it is told as the
/// signal.
fn exit_status(
    ended: std::io::Result<std::process::ExitStatus>,
    killed: bool,
) -> TerminalExitStatus {
    use std::os::unix::process::ExitStatusExt;
    const TERM: i32 = 128 + nix::libc::SIGTERM;
    const KILL: i32 = 128 + nix::libc::SIGKILL;
    match ended {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code @ (TERM | KILL)), _) if killed => {
                TerminalExitStatus::new().signal(signal_name(code - 128))
            }
            (Some(code), _) => TerminalExitStatus::new().exit_code(u32::try_from(code).ok()),
            (None, Some(sig)) => TerminalExitStatus::new().signal(signal_name(sig)),
            (None, None) => TerminalExitStatus::new(),
        },
        Err(e) => {
            tracing::warn!("a terminal's command could not be waited for: {e}");
            TerminalExitStatus::new()
        }
    }
}

fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// Reads a pipe to its end (on a blocking thread: it ends when the last
/// writer, the command's group, has gone), handing on what it reads.
fn read_pipe(mut pipe: std::io::PipeReader, tx: mpsc::Sender<Vec<u8>>) {
    use std::io::Read;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
            Ok(n) => {
                if tx.blocking_send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        }
    }
}

/// A terminal's output on its way to the box: decoded across chunks (a
/// character cut between two reads is kept for the next), cleaned across
/// chunks, and gathered until the next flush (its newest [`MAX_CHUNK`]).
#[derive(Default)]
struct Screen {
    carry: Vec<u8>,
    stream: Stream,
    pending: String,
}

impl Screen {
    fn push(&mut self, bytes: &[u8]) {
        let text = decode(&mut self.carry, bytes);
        let clean = self.stream.push(&text);
        self.pending.push_str(&clean);
        if self.pending.len() > MAX_CHUNK * 2 {
            self.pending = newest(&self.pending, MAX_CHUNK, false).0;
        }
    }

    /// The end of the output: what was held back, as it is.
    fn finish(&mut self) {
        if !self.carry.is_empty() {
            let rest = String::from_utf8_lossy(&std::mem::take(&mut self.carry)).into_owned();
            let clean = self.stream.push(&rest).into_owned();
            self.pending.push_str(&clean);
        }
        let held = self.stream.finish();
        self.pending.push_str(&held);
    }

    /// What gathered since the last flush.
    fn take(&mut self) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        let text = std::mem::take(&mut self.pending);
        Some(newest(&text, MAX_CHUNK, false).0)
    }
}

/// `bytes` after `carry` as text: invalid bytes replaced, an unfinished
/// character at the end kept in `carry`.
fn decode(carry: &mut Vec<u8>, bytes: &[u8]) -> String {
    carry.extend_from_slice(bytes);
    let mut out = String::new();
    loop {
        match std::str::from_utf8(carry) {
            Ok(s) => {
                out.push_str(s);
                carry.clear();
                return out;
            }
            Err(e) => {
                let valid = e.valid_up_to();
                out.push_str(&String::from_utf8_lossy(&carry[..valid]));
                match e.error_len() {
                    Some(n) => {
                        out.push('\u{fffd}');
                        carry.drain(..valid + n);
                    }
                    None => {
                        carry.drain(..valid);
                        return out;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_output_is_kept_cut_at_a_character_boundary() {
        let mut out = Output::new(5);
        out.push("aé€z".as_bytes()); // 1 + 2 + 3 + 1 = 7 bytes
        let (text, truncated) = out.read();
        // The newest 5 bytes start inside "é": the cut moves past it.
        assert_eq!(text, "€z");
        assert!(truncated);
        let mut small = Output::new(100);
        small.push(b"hi\n");
        assert_eq!(small.read(), ("hi\n".to_string(), false));
        // Much more than the limit: trimmed as it comes, still exact.
        let mut big = Output::new(10);
        for i in 0..10_000 {
            big.push(format!("{i}\n").as_bytes());
        }
        let (text, truncated) = big.read();
        assert_eq!(text, "9998\n9999\n");
        assert!(truncated);
        assert!(big.bytes.len() <= 4096 * 2);
    }

    #[test]
    fn output_for_the_box_is_decoded_and_cleaned_across_chunks() {
        let mut s = Screen::default();
        let bytes = "é\u{1b}[31mred\u{1b}[0m\n".as_bytes();
        // Split inside "é" and inside the escape sequence.
        s.push(&bytes[..1]);
        s.push(&bytes[1..4]);
        s.push(&bytes[4..]);
        s.finish();
        assert_eq!(s.take().as_deref(), Some("éred\n"));
        assert_eq!(s.take(), None);
        let mut carry = Vec::new();
        assert_eq!(decode(&mut carry, b"a\xffb"), "a\u{fffd}b");
    }

    #[test]
    fn command_lines_quote_what_needs_it() {
        assert_eq!(
            command_line("sh", &["-c".into(), "echo hi; sleep 1".into()]),
            "sh -c 'echo hi; sleep 1'"
        );
        assert_eq!(command_line("ls", &["-la".into(), "".into()]), "ls -la ''");
    }

    #[test]
    fn a_cwd_outside_the_session_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let root = Root::new(dir.path()).unwrap();
        assert_eq!(working_dir(&root, None).unwrap(), root.path());
        assert_eq!(
            working_dir(&root, Some(Path::new("sub"))).unwrap(),
            root.path().join("sub")
        );
        let outside = working_dir(&root, Some(Path::new("/"))).unwrap_err();
        assert!(
            outside.contains("outside the session directory"),
            "{outside}"
        );
        let up = working_dir(&root, Some(Path::new("sub/../.."))).unwrap_err();
        assert!(up.contains("outside"), "{up}");
    }
}
