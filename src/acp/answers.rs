//! What quorum's proxy on a host (`remote::relay`) answers there of its
//! agent's requests: its `fs/*` and `terminal/*` requests, by the very
//! handlers quorum answers them with at home (`acp::handlers`),
//! confined to the task's directory on the host. The proxy passes every
//! line between home and the agent through [`Answers`], which keeps what
//! the answers need: a prompt from home opens its session's turn here (its
//! commands may run until it is answered), a cancel kills its commands,
//! the agent's answer to the prompt ends the turn. What the answers would
//! show in the box goes home as `_quorum/relayed` lines (`acp::relayed`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::{Agent, Client, Lines};
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::fs::{Exclusions, Files};
use super::registry::AgentSpec;
use super::relayed::{QUORUM_METHODS, relayed_line};
use super::route::{Incoming, Route, Routes};
use super::terminal::Terminals;
use crate::confine::fsroot::Root;
use crate::runtime::lock;
use crate::runtime::supervisor::Supervisor;

/// The answers given on a host to one agent's file and terminal requests,
/// and what of the lines passing through them they keep.
pub struct Answers {
    /// The agent's name, for what is logged and told.
    name: String,
    routes: Routes,
    terminals: Arc<Terminals>,
    /// Each prompt's session, by its request id (as JSON).
    prompts: Mutex<HashMap<String, String>>,
    /// Where a prompt's turn here sends what would show in its box.
    turns: mpsc::UnboundedSender<(String, Incoming)>,
    /// The agent's requests answered here.
    requests: mpsc::UnboundedSender<String>,
    /// The connection that answers them.
    local: JoinHandle<()>,
    /// The agent's lines for home, which pass through the same task as
    /// what goes home of the turns' boxes ([`Answers::home`]).
    agent_lines: mpsc::UnboundedSender<Vec<u8>>,
    /// The agent's lines answered here that were not UTF-8, so far.
    lossy_lines: AtomicU64,
}

/// Just enough of a JSON-RPC message to route it.
#[derive(Deserialize)]
struct Peek {
    method: Option<String>,
    id: Option<serde_json::Value>,
    params: Option<PeekParams>,
}

#[derive(Deserialize)]
struct PeekParams {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

fn peek(line: &str) -> Option<Peek> {
    serde_json::from_str(line).ok()
}

impl Answers {
    /// Starts answering `spec`'s requests in `root`, its commands run by
    /// `supervisor`: the answers go to the agent's stdin through
    /// `to_agent`; what would show in a box goes home through `to_home`.
    pub fn start(
        spec: &AgentSpec,
        root: &Root,
        supervisor: &Supervisor,
        to_agent: mpsc::UnboundedSender<String>,
        to_home: mpsc::UnboundedSender<Vec<u8>>,
    ) -> Arc<Self> {
        let routes: Routes = Arc::default();
        let exclusions: Exclusions = Arc::default();
        let terminals = Arc::new(Terminals::new(
            spec.name.clone(),
            supervisor.clone(),
            spec.terminal_policy(),
            (root.clone(), exclusions.clone(), routes.clone()),
        ));
        let (requests, from_agent) = mpsc::unbounded_channel::<String>();
        let local = local_client(
            root,
            (&exclusions, &routes, &terminals),
            to_agent,
            from_agent,
        );
        let local = tokio::spawn(local);
        let (turns, turn_rx) = mpsc::unbounded_channel::<(String, Incoming)>();
        let (agent_lines, agent_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        // What the handlers here would show in the task's box (a request
        // refused, a command's output) goes home, as `_quorum/relayed`
        // notifications, where it is shown as a local agent's is; in one
        // task with the agent's own lines, so that it goes ahead of what the
        // agent says after it (the end of the turn among them).
        tokio::spawn(home(turn_rx, agent_rx, to_home));
        Arc::new(Self {
            name: spec.name.clone(),
            routes,
            terminals,
            prompts: Mutex::default(),
            turns,
            requests,
            local,
            agent_lines,
            lossy_lines: AtomicU64::new(0),
        })
    }

    /// A line from home, on its way to the agent: a prompt opens its
    /// session's turn here, a cancel kills its commands.
    pub fn from_home(&self, line: &str) {
        let Some(Peek {
            method: Some(method),
            id,
            params: Some(PeekParams {
                session_id: Some(session),
            }),
        }) = peek(line)
        else {
            return;
        };
        match (method.as_str(), id) {
            ("session/prompt", Some(id)) => {
                let route = Route::through(self.turns.clone());
                lock(&self.routes).insert(session.clone(), route);
                lock(&self.prompts).insert(id.to_string(), session);
            }
            ("session/cancel", _) => self.terminals.kill_sessions(&[session]),
            _ => {}
        }
    }

    /// A line from the agent (`bad`: it had bytes that were not UTF-8,
    /// replaced): whether it goes home as it came. Its file and terminal
    /// requests are answered here; a line in quorum's own name is dropped
    /// (only the proxy speaks as quorum); the answer to a prompt ends its
    /// turn here and goes home.
    pub fn from_agent(&self, line: &str, bad: bool) -> bool {
        match peek(line) {
            Some(Peek {
                method: Some(method),
                id: Some(_),
                ..
            }) if method.starts_with("fs/") || method.starts_with("terminal/") => {
                if bad {
                    let mut count = self.lossy_lines.fetch_add(1, Ordering::Relaxed);
                    super::transport::lossy(&mut count, &self.name, &self.routes);
                }
                let _ = self.requests.send(line.to_string());
                false
            }
            Some(Peek {
                method: Some(method),
                ..
            }) if method.starts_with(QUORUM_METHODS) => false,
            Some(Peek {
                method: None,
                id: Some(id),
                ..
            }) => {
                if let Some(session) = lock(&self.prompts).remove(&id.to_string()) {
                    lock(&self.routes).remove(&session);
                    self.terminals.drop_sessions(&[session]);
                }
                true
            }
            _ => true,
        }
    }

    /// Sends one of the agent's lines home; false when home is gone.
    pub fn home(&self, line: Vec<u8>) -> bool {
        self.agent_lines.send(line).is_ok()
    }

    /// No more requests are answered (home or the agent is gone).
    pub fn stop_answering(&self) {
        self.local.abort();
    }
}

impl Drop for Answers {
    fn drop(&mut self) {
        self.local.abort();
    }
}

/// Sends home the agent's lines and what the turns' boxes are told here,
/// the latter first: what a handler here told a turn before the agent
/// heard its answer reaches home before what the agent then said. Ends
/// when the agent's lines end (its [`Answers`] dropped), with what was
/// told until then.
async fn home(
    mut turn_rx: mpsc::UnboundedReceiver<(String, Incoming)>,
    mut agent_rx: mpsc::UnboundedReceiver<Vec<u8>>,
    to_home: mpsc::UnboundedSender<Vec<u8>>,
) {
    let relayed = |(session, incoming): (String, Incoming)| {
        relayed_line(&session, incoming).map(String::into_bytes)
    };
    loop {
        let line = tokio::select! {
            biased;
            Some(told) = turn_rx.recv() => relayed(told),
            line = agent_rx.recv() => match line {
                Some(line) => Some(line),
                None => break,
            },
        };
        if let Some(line) = line
            && to_home.send(line).is_err()
        {
            return;
        }
    }
    while let Ok(told) = turn_rx.try_recv() {
        if let Some(line) = relayed(told) {
            let _ = to_home.send(line);
        }
    }
}

/// The client connection that answers the agent's `fs/*` and `terminal/*`
/// requests (read from `requests`, answered into `answers`), as quorum
/// answers them at home.
fn local_client(
    root: &Root,
    (exclusions, routes, terminals): (&Exclusions, &Routes, &Arc<Terminals>),
    answers: mpsc::UnboundedSender<String>,
    requests: mpsc::UnboundedReceiver<String>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let outgoing = futures::sink::unfold(answers, async |answers, line: String| {
        answers
            .send(line)
            .map_err(|_| std::io::Error::other("the agent is gone"))?;
        Ok::<_, std::io::Error>(answers)
    });
    let incoming = futures::stream::unfold(requests, async |mut requests| {
        let line = requests.recv().await?;
        Some((Ok::<_, std::io::Error>(line), requests))
    });
    // On a host, files are the disk's there: no editor's.
    let answering = super::handlers::Answering {
        root: root.clone(),
        files: Files::default(),
        exclusions: exclusions.clone(),
        routes: routes.clone(),
        terminals: terminals.clone(),
    };
    let driver = super::handlers::files_and_terminals(Client.v1().name("quorum-proxy"), answering)
        .connect_with(
            Lines::new(outgoing, incoming),
            async move |cx: agent_client_protocol::v1::ConnectionTo<Agent>| {
                cx.incoming_closed().await;
                Ok(())
            },
        );
    async move {
        if let Err(e) = driver.await {
            tracing::warn!("the host's file and terminal answers ended: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal told here goes home ahead of the agent's lines that follow
    /// it, the end of its turn among them (with two tasks the end could
    /// overtake it, and home, the turn ended, dropped the refusal).
    #[tokio::test]
    async fn what_a_turn_is_told_here_goes_home_before_what_the_agent_says_next() {
        let (turns, turn_rx) = mpsc::unbounded_channel();
        let (agent_lines, agent_rx) = mpsc::unbounded_channel();
        let (to_home, mut home_rx) = mpsc::unbounded_channel();
        turns
            .send(("s1".to_string(), Incoming::Notice("refused".into())))
            .unwrap();
        agent_lines
            .send(b"{\"id\":7,\"result\":{}}".to_vec())
            .unwrap();
        turns
            .send(("s1".to_string(), Incoming::Notice("told last".into())))
            .unwrap();
        drop(agent_lines);
        home(turn_rx, agent_rx, to_home).await;
        let mut got = Vec::new();
        while let Ok(line) = home_rx.try_recv() {
            got.push(String::from_utf8(line).unwrap());
        }
        assert_eq!(got.len(), 3, "{got:#?}");
        assert!(got[0].contains("refused"), "{got:#?}");
        assert!(got[1].contains("told last"), "{got:#?}");
        assert_eq!(got[2], "{\"id\":7,\"result\":{}}");
    }
}
