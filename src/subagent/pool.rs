//! The ACP agents behind the [`Agent`] interface: the pool of their
//! connections, one per agent name, whose process is started once and
//! shared by every call that waits for it, and started again when it has
//! exited.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared, WeakShared};
use tokio::sync::watch;

use super::lock;
use super::picks::ModelPicks;
use crate::acp::HostFiles;
use crate::acp::client::{AcpError, Connection};
use crate::acp::registry::{Registry, UnknownAgent};
use crate::agent::{Agent, Elicit, Permissions, TurnControl, TurnInput, TurnRequest, TurnSink};
use crate::confine::fsroot::Root;
use crate::event::{Activity, Event, NoticeLevel, Outcome, StopReason};
use crate::remote::RemoteError;
use crate::remote::ssh::Hosts;
use crate::runtime::bus::Emitter;
use crate::runtime::cancel::cancelled;
use crate::runtime::supervisor::Supervisor;

/// Why an agent's connection was not made: the agent is not known or not
/// installed, its worktree is no session directory, its process did not
/// start or answer (`AcpError`: not found, spawn, protocol, timeout), or
/// its host was not reached or could not start it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Unknown(#[from] UnknownAgent),
    /// The worktree a sandboxed agent would start in.
    #[error("{agent}: {}: {error}", dir.display())]
    Worktree {
        agent: String,
        dir: std::path::PathBuf,
        error: Arc<std::io::Error>,
    },
    #[error(transparent)]
    Agent(Arc<AcpError>),
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The agent's start on its host (`ssh` running quorum's proxy there).
    #[error("{error} (on host {host})")]
    OnHost { host: String, error: Arc<AcpError> },
}

type Starting = Shared<BoxFuture<'static, Result<Arc<Connection>, StartError>>>;

/// An agent's connection: being started (shared by every call waiting for
/// it, and dropped, process and all, when the last of them gives up), or
/// ready.
enum Slot {
    Starting(WeakShared<BoxFuture<'static, Result<Arc<Connection>, StartError>>>),
    Ready(Arc<Connection>),
}

/// The session's ACP agents and their connections.
pub struct Pool {
    registry: Arc<Registry>,
    root: Root,
    emitter: Emitter,
    /// The session's answer for agents whose own policy is `ask`.
    permissions: Permissions,
    connections: Mutex<HashMap<String, Slot>>,
    /// Owns the agent processes.
    supervisor: Supervisor,
    /// The model a person picked for each agent.
    picks: ModelPicks,
    /// What agents' elicitations get (set once the session is built).
    elicit: Mutex<Elicit>,
    /// The editor's files, when quorum serves one that offers them.
    files: Mutex<Option<Arc<dyn HostFiles>>>,
    /// The other machines agents run on, and their connections.
    hosts: Arc<Hosts>,
    /// The directory on its host of each connection to a host's agent.
    remote_dirs: Arc<Mutex<HashMap<String, std::path::PathBuf>>>,
    /// Where on their hosts worktree tasks work, by their directory here.
    remote_workdirs: Mutex<HashMap<std::path::PathBuf, std::path::PathBuf>>,
}

/// One ACP agent, by name, as the dispatcher runs it.
struct AcpAgent {
    name: String,
    /// The permission policy its turns follow.
    policy: Permissions,
    pool: Arc<Pool>,
}

impl Pool {
    /// The supervisor every process of the session is started under.
    pub(in crate::subagent) fn supervisor(&self) -> &Supervisor {
        &self.supervisor
    }

    /// Whether a person answers what a turn asks (the session's policy is
    /// `ask`: the TUI, or an editor through `quorum acp`).
    pub fn asks_person(&self) -> bool {
        self.permissions == Permissions::Ask
    }

    pub fn new(
        registry: Arc<Registry>,
        root: Root,
        emitter: Emitter,
        permissions: Permissions,
        supervisor: Supervisor,
        picks: ModelPicks,
    ) -> Arc<Self> {
        let hosts = Arc::new(Hosts::new(registry.hosts().clone(), supervisor.clone()));
        Arc::new(Self {
            hosts,
            remote_dirs: Arc::default(),
            remote_workdirs: Mutex::default(),
            registry,
            root,
            emitter,
            permissions,
            connections: Default::default(),
            supervisor,
            picks,
            elicit: Mutex::new(Elicit::Ask),
            files: Mutex::new(None),
        })
    }

    /// The host `agent` runs on, if it runs on one.
    pub(super) fn host_of(&self, agent: &str) -> Option<String> {
        self.registry.get(agent).ok()?.host.clone()
    }

    /// The hosts agents run on.
    pub(super) fn hosts(&self) -> &Arc<Hosts> {
        &self.hosts
    }

    /// A host's worktree task in `here` works in `there` on its host.
    pub(super) fn set_remote_workdir(&self, here: &std::path::Path, there: std::path::PathBuf) {
        lock(&self.remote_workdirs).insert(here.to_path_buf(), there);
    }

    /// What agents' elicitations get from now on.
    pub fn set_elicit(&self, elicit: Elicit) {
        *lock(&self.elicit) = elicit;
    }

    /// Agents' file requests in the session directory go to `host` (for
    /// the connections made from now on).
    pub fn set_files(&self, host: Arc<dyn HostFiles>) {
        *lock(&self.files) = Some(host);
    }

    /// The agent called `name`, if it is known and installed.
    pub fn agent(self: &Arc<Self>, name: &str) -> Result<Arc<dyn Agent>, UnknownAgent> {
        let spec = self.registry.get(name)?;
        Ok(Arc::new(AcpAgent {
            name: name.to_string(),
            policy: spec.permissions.resolve(self.permissions),
            pool: self.clone(),
        }))
    }

    /// Remembers `model` as picked for `agent`'s next sessions; true if
    /// that is news.
    pub fn pick(&self, agent: &str, model: &str) -> bool {
        self.picks.set(agent, model)
    }

    /// `agent`'s live connection, if it has one (none is started).
    pub fn live(&self, agent: &str) -> Option<Arc<Connection>> {
        match lock(&self.connections).get(agent) {
            Some(Slot::Ready(conn)) if conn.alive() => Some(conn.clone()),
            _ => None,
        }
    }

    /// The connection to `agent` for a turn in `worktree` (a worktree
    /// task's, else the session directory): a live one, the start already
    /// under way (two calls share one start), or a new start. No lock is
    /// held while an agent starts. An agent whose process is sandboxed
    /// for a worktree gets a process of its own there (its writes are
    /// bound to that worktree); the second value is that policy.
    fn connection(
        &self,
        agent: &str,
        worktree: Option<&std::path::Path>,
        tell: crate::remote::Tell,
    ) -> Result<(String, Starting), StartError> {
        let spec = self.registry.get(agent)?.clone();
        if spec.host.is_some() {
            return Ok(self.remote_connection(spec, worktree, tell));
        }
        let policy = spec.process_policy(worktree.is_some());
        let (key, root) = match (worktree, &policy) {
            (Some(dir), Some(_)) => (
                format!("{agent}\u{0}{}", dir.display()),
                crate::runtime::git::root(dir)
                    .map_err(|e| StartError::Worktree {
                        agent: agent.to_string(),
                        dir: dir.to_path_buf(),
                        error: Arc::new(e),
                    })?
                    .with_max_read(self.root.max_read()),
            ),
            _ => (agent.to_string(), self.root.clone()),
        };
        let mut connections = lock(&self.connections);
        match connections.get(&key) {
            Some(Slot::Ready(conn)) if conn.alive() => {
                let conn = conn.clone();
                return Ok((key, async move { Ok(conn) }.boxed().shared()));
            }
            Some(Slot::Ready(conn)) => self.emitter.emit(Event::Notice {
                level: NoticeLevel::Info,
                text: format!("{agent} had exited ({}); starting it again", conn.death()),
            }),
            Some(Slot::Starting(weak)) => {
                if let Some(start) = weak.upgrade() {
                    return Ok((key, start));
                }
            }
            None => {}
        }
        let supervisor = self.supervisor.clone();
        let files = lock(&self.files).clone();
        let start = async move {
            let conn = Connection::start(&spec, &root, &supervisor, policy.as_ref())
                .await
                .map_err(|e| StartError::Agent(Arc::new(e)))?;
            if let Some(host) = files {
                conn.serve_files(host);
            }
            Ok(conn)
        }
        .boxed()
        .shared();
        let weak = start.downgrade().expect("not yet polled");
        connections.insert(key.clone(), Slot::Starting(weak));
        Ok((key, start))
    }

    /// The connection to a host's agent (`spec.host`): quorum started
    /// there over ssh, as a proxy between this quorum and the agent, in a
    /// directory of its own there (`scratch`, or the task's worktree).
    fn remote_connection(
        &self,
        spec: crate::acp::registry::AgentSpec,
        worktree: Option<&std::path::Path>,
        tell: crate::remote::Tell,
    ) -> (String, Starting) {
        let host = spec.host.clone().unwrap_or_default();
        let there = worktree.and_then(|w| lock(&self.remote_workdirs).get(w).cloned());
        let leaf = match (&there, worktree) {
            (Some(there), _) => there.display().to_string(),
            (None, Some(dir)) => crate::remote::launch::leaf(dir),
            (None, None) => "scratch".to_string(),
        };
        let key = format!("{}\u{0}@{host}\u{0}{leaf}", spec.name);
        let mut connections = lock(&self.connections);
        match connections.get(&key) {
            Some(Slot::Ready(conn)) if conn.alive() => {
                let conn = conn.clone();
                return (key, async move { Ok(conn) }.boxed().shared());
            }
            Some(Slot::Starting(weak)) => {
                if let Some(start) = weak.upgrade() {
                    return (key, start);
                }
            }
            _ => {}
        }
        let (hosts, dirs, supervisor) = (
            self.hosts.clone(),
            self.remote_dirs.clone(),
            self.supervisor.clone(),
        );
        let (root, isolated, k) = (self.root.clone(), worktree.is_some(), key.clone());
        let start = async move {
            let place = (there, leaf.as_str());
            let (launch, dir) =
                crate::remote::launch::on_host(&hosts, &spec, place, isolated, Some(tell)).await?;
            lock(&dirs).insert(k, dir);
            Connection::start(&launch, &root, &supervisor, None)
                .await
                .map_err(|e| StartError::OnHost {
                    host,
                    error: Arc::new(e),
                })
        }
        .boxed()
        .shared();
        let weak = start.downgrade().expect("not yet polled");
        connections.insert(key.clone(), Slot::Starting(weak));
        (key, start)
    }

    /// Waits for `agent`'s connection (for a turn in `worktree`, if
    /// given) unless the call is cancelled first; with the directory it
    /// works in on its host, if it runs on one.
    async fn connect(
        &self,
        agent: &str,
        worktree: Option<&std::path::Path>,
        cancel: &mut watch::Receiver<bool>,
        sink: &dyn TurnSink,
    ) -> Result<(Arc<Connection>, Option<std::path::PathBuf>), Outcome> {
        // What takes long in starting it (quorum copied to a new host),
        // told in this call's box while it starts.
        let (tell, mut told) = tokio::sync::mpsc::unbounded_channel();
        let (key, mut start) = self
            .connection(agent, worktree, tell)
            .map_err(|e| Outcome::error(e.to_string()))?;
        let started = loop {
            tokio::select! {
                biased;
                Some(text) = told.recv() => sink.activity(Activity::Notice { text }),
                started = &mut start => break started,
                _ = cancelled(cancel) => {
                    return Err(Outcome::new(
                        StopReason::Cancelled,
                        format!("{agent}: cancelled while starting"),
                    ));
                }
            }
        };
        while let Ok(text) = told.try_recv() {
            sink.activity(Activity::Notice { text });
        }
        let mut connections = lock(&self.connections);
        match started {
            Ok(conn) => {
                // Its commands, announced while no call runs, are known to
                // the screen too (Tab after `@NAME /`).
                let (emitter, name) = (self.emitter.clone(), agent.to_string());
                conn.on_announced(move |_session, activity| {
                    if let Activity::Commands { commands } = activity {
                        emitter.emit(Event::AgentCommands {
                            agent: name.clone(),
                            commands,
                        });
                    }
                });
                if matches!(connections.get(&key), Some(Slot::Starting(_))) {
                    connections.insert(key.clone(), Slot::Ready(conn.clone()));
                }
                Ok((conn, lock(&self.remote_dirs).get(&key).cloned()))
            }
            Err(e) => {
                if matches!(connections.get(&key), Some(Slot::Starting(_))) {
                    connections.remove(&key);
                }
                Err(Outcome::error(e.to_string()))
            }
        }
    }

    /// Closes the agents' sessions quorum is done with (see
    /// `Connection::close_sessions`): every one open on a live connection
    /// that no turn runs on (`busy`). Says which were closed.
    pub async fn close_sessions(&self, busy: &std::collections::HashSet<(String, String)>) {
        let live: Vec<Arc<Connection>> = lock(&self.connections)
            .values()
            .filter_map(|slot| match slot {
                Slot::Ready(conn) if conn.alive() => Some(conn.clone()),
                _ => None,
            })
            .collect();
        for conn in live {
            let agent = conn.agent.clone();
            let closed = conn
                .close_sessions(&|id| busy.contains(&(agent.clone(), id.to_string())))
                .await;
            if !closed.is_empty() {
                tracing::info!("{agent}: closed sessions {}", closed.join(", "));
            }
        }
    }

    /// Stops every agent process (starts under way stop with their calls).
    pub fn shutdown(&self) {
        for (_, slot) in lock(&self.connections).drain() {
            if let Slot::Ready(conn) = slot {
                conn.close();
            }
        }
        // The hosts' connections too: their proxies end their agents.
        self.hosts.close();
    }
}

impl Agent for AcpAgent {
    fn turn<'a>(
        &'a self,
        input: TurnInput<'a>,
        sink: &'a dyn TurnSink,
        control: &'a mut TurnControl,
    ) -> BoxFuture<'a, Outcome> {
        async move {
            let pool = &self.pool;
            let agent = self.name.as_str();
            match pool.connect(agent, input.root, &mut control.cancel, sink).await {
                Ok((conn, remote_dir)) => {
                    let spec = pool.registry.get(agent).ok();
                    if input.root.is_some() && remote_dir.is_none() && !conn.sandboxed() {
                        let why = match spec.and_then(|s| s.sandbox) {
                            Some(_) => "sandbox = \"none\" in its config",
                            None => "bubblewrap (bwrap) is not installed",
                        };
                        sink.notice(&format!(
                            "{agent}: its own tools are not sandboxed ({why}): what it runs itself can write outside the worktree"
                        ));
                    }
                    // A model picked through the agent wins over the config's.
                    let model = pool
                        .picks
                        .get(agent)
                        .or_else(|| spec.and_then(|s| s.model.clone()));
                    let request = TurnRequest {
                        prompt: input.prompt,
                        root: remote_dir
                            .as_deref()
                            .or(input.root)
                            .unwrap_or(pool.root.path()),
                        resume: input.resume,
                        policy: self.policy,
                        model: model.as_deref(),
                        mode: spec.and_then(|s| s.mode.as_deref()),
                        exclude: input.exclude,
                        elicit: *lock(&pool.elicit),
                        trusted_mcp: None,
                        person: input.person,
                    };
                    conn.turn(request, sink, control).await
                }
                Err(outcome) => outcome,
            }
        }
        .boxed()
    }

    fn keeps_sessions(&self) -> bool {
        true
    }
}
