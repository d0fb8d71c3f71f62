//! The routing of what an agent sends to the turn it belongs to: each
//! running turn's channel by session id (its own session's and its child
//! sessions'), and the handlers for session updates and permission requests
//! that hand them on.

use crate::confine::lock;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SessionNotification, SessionUpdate,
};
use tokio::sync::mpsc;

pub(super) use super::stream::Chunk;
use super::stream::Stream;

/// Something the agent sent that belongs to one session's turn.
pub(super) enum Incoming {
    Update(Box<SessionUpdate>),
    /// A message or thought chunk of text: the commonest update, read by
    /// the transport straight into this.
    Chunk(Chunk),
    Permission(
        Box<RequestPermissionRequest>,
        Responder<RequestPermissionResponse>,
    ),
    /// Something the person should know of, shown in the box: a file
    /// request refused, a message with bytes that are not UTF-8.
    Notice(String),
    /// A question for the person (`elicitation/create`).
    Elicitation(
        Box<agent_client_protocol::v1::schema::CreateElicitationRequest>,
        Responder<agent_client_protocol::v1::schema::CreateElicitationResponse>,
    ),
    /// The agent says a URL elicitation is done (`elicitation/complete`),
    /// by the agent's elicitation id.
    ElicitationComplete(String),
    /// Activity quorum itself records for the turn: a client terminal's
    /// command, output and exit.
    Activity(crate::event::Activity),
    /// quorum's own question for the person: may the agent write a file
    /// other programs run, in their own tree (`fs/write_text_file`).
    Ask(Box<WriteAsk>),
}

/// A write to a file other programs run (`runtime::machinery`), in the
/// person's own tree, put to the person by the turn it belongs to.
pub(super) struct WriteAsk {
    /// As the agent named it.
    pub(super) path: PathBuf,
    /// Below the session directory, where it lands.
    pub(super) below: PathBuf,
    /// Which program runs it, and how.
    pub(super) why: &'static str,
    /// What would be written.
    pub(super) content: String,
    /// What is there now (`None`: nothing, or nothing to show).
    pub(super) old: Option<String>,
    pub(super) reply: tokio::sync::oneshot::Sender<Consent>,
}

/// The answer to a [`WriteAsk`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Consent {
    Allowed,
    /// The person said no, or the turn ended first.
    Refused,
    /// Nobody to ask: headless, or no turn of the session runs.
    NobodyToAsk,
}

/// Each running turn's route, by session id: the turn's own session and
/// the child sessions its agent announced.
pub(super) type Routes = Arc<Mutex<HashMap<String, Route>>>;

/// Where what comes for one session goes: its turn's channel (what is
/// sent carries the session it came for), and the part of the turn the
/// reading may update itself.
#[derive(Clone)]
pub(super) struct Route {
    pub(super) tx: mpsc::UnboundedSender<(String, Incoming)>,
    pub(super) stream: Arc<Stream>,
    /// A child session's route: all of it goes through the turn.
    pub(super) child: bool,
}

impl Route {
    /// A route whose all goes through `tx` (nothing taken on the spot).
    pub(super) fn through(tx: mpsc::UnboundedSender<(String, Incoming)>) -> Self {
        Self {
            tx,
            stream: Arc::new(Stream::new(None)),
            child: false,
        }
    }

    /// Whether `other` goes to the same turn.
    pub(super) fn same_turn(&self, other: &Route) -> bool {
        self.tx.same_channel(&other.tx)
    }

    /// Queues `incoming` for the turn; gives it back if the turn is gone.
    fn send(&self, session: String, incoming: Incoming) -> Option<Incoming> {
        self.stream.queue();
        self.tx.send((session, incoming)).err().map(|e| e.0.1)
    }
}

/// Sends what `incoming` makes to every turn on the connection, once each
/// (a turn's child sessions share its route).
pub(super) fn tell_each_turn(routes: &Routes, incoming: impl Fn() -> Incoming) {
    let routes = routes.lock().unwrap_or_else(|p| p.into_inner());
    let mut told: Vec<&Route> = Vec::new();
    for (session, route) in routes.iter() {
        if told.iter().any(|t| t.same_turn(route)) {
            continue;
        }
        let _ = route.send(session.clone(), incoming());
        told.push(route);
    }
}

/// Hands `incoming` to its session's turn; gives it back if no turn runs.
/// A `subagent_update` announcing a child session routes the child's
/// traffic to the same turn from now on (before any of it is read).
///
/// A chunk of the turn's own session, with nothing queued for the turn
/// ahead of it, is taken here, on the reader's task (see
/// [`Stream`]): the commonest update then costs no wake-up
/// of the turn's task.
pub(super) fn route(routes: &Routes, session: &str, incoming: Incoming) -> Option<Incoming> {
    let mut routes = lock(routes);
    if let Incoming::Update(update) = &incoming
        && let SessionUpdate::SubagentUpdate(child) = update.as_ref()
        && let Some(route) = routes.get(session).cloned()
    {
        routes
            .entry(child.session_id.0.to_string())
            .or_insert(Route {
                child: true,
                ..route
            });
    }
    let Some(route) = routes.get(session) else {
        return Some(incoming);
    };
    let incoming = match incoming {
        // Under the table's lock: the turn cannot end (and its call be
        // told ended) while its chunk is still going out. A turn given up
        // (its channel closed) takes nothing more.
        Incoming::Chunk(chunk)
            if !route.child && !route.tx.is_closed() && route.stream.takes_chunks() =>
        {
            route.stream.chunk(chunk);
            return None;
        }
        incoming => incoming,
    };
    route.send(session.to_string(), incoming)
}

/// `session/update` that the transport's fast path left to the SDK: handed
/// to its session's turn (dropped if none runs).
pub(super) fn on_session_update(routes: &Routes, n: SessionNotification) {
    let _ = route(
        routes,
        &n.session_id.0,
        Incoming::Update(Box::new(n.update)),
    );
}

/// `session/request_permission`: the turn decides; an unknown session gets
/// `cancelled`.
pub(super) fn on_permission_request(
    routes: &Routes,
    req: RequestPermissionRequest,
    responder: Responder<RequestPermissionResponse>,
) -> Result<(), agent_client_protocol::Error> {
    let session = req.session_id.0.to_string();
    if let Some(Incoming::Permission(_, responder)) = route(
        routes,
        &session,
        Incoming::Permission(Box::new(req), responder),
    ) {
        responder.respond(RequestPermissionResponse::new(
            RequestPermissionOutcome::Cancelled,
        ))?;
    }
    Ok(())
}

/// Shows `text` in the box of every turn running on the connection.
pub(super) fn notify_all(routes: &Routes, text: &str) {
    tell_each_turn(routes, || Incoming::Notice(text.to_string()));
}
