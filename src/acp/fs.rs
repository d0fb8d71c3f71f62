//! The client's file requests: `fs/read_text_file` and
//! `fs/write_text_file`, confined to the session's directory (and kept from
//! what the session may not read), answered from tasks of their own so the
//! dispatch loop never waits on the disk. In the person's own tree a write
//! of a file other programs run (`runtime::machinery`) is asked of the
//! person first, through the session's turn, whatever the agent's policy;
//! with nobody to ask it is refused. Where quorum itself serves an
//! editor that offers files (`quorum acp`), the session directory's reads
//! and writes go to the editor, after the same checks, by a path with no
//! link in it, pinned while the editor has it and checked again when it
//! answers (`confine::pin`, which says what window remains).

use crate::confine::lock;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest, WriteTextFileResponse,
};

use super::route::{Consent, Incoming, Routes, WriteAsk, route};
use crate::confine::fsroot::{Exclude, FsError, Root};
use crate::confine::pin::{Changed, Pinned};

/// Runs `write` (a check or a write on `root`); when it is refused as a
/// file other programs run, asks the person through the session's turn and,
/// allowed, runs it again with their leave for that path. The error to
/// answer says what happened.
async fn with_leave<T: Send + 'static>(
    root: Root,
    (routes, session): (&Routes, &str),
    content: &str,
    write: impl Fn(&Root) -> Result<T, FsError> + Send + Clone + 'static,
) -> Result<Result<T, FsError>, String> {
    let first = {
        let (root, write) = (root.clone(), write.clone());
        tokio::task::spawn_blocking(move || write(&root))
            .await
            .map_err(|e| format!("stopped: {e}"))?
    };
    let Err(FsError::Unasked { path, below, why }) = first else {
        return Ok(first);
    };
    let old = {
        let (root, below) = (root.clone(), below.clone());
        tokio::task::spawn_blocking(move || root.read(&below, None, None).ok())
            .await
            .ok()
            .flatten()
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    let asked = WriteAsk {
        path: path.clone(),
        below: below.clone(),
        why,
        content: content.to_string(),
        old,
        reply,
    };
    // No turn to ask through: dropped, and so nobody to ask.
    let _ = route(routes, session, Incoming::Ask(Box::new(asked)));
    match answer.await.unwrap_or(Consent::NobodyToAsk) {
        Consent::Allowed => {
            let root = root.with_consent(&below);
            tokio::task::spawn_blocking(move || write(&root))
                .await
                .map_err(|e| format!("stopped: {e}"))
        }
        Consent::Refused => Ok(Err(FsError::Protected {
            path,
            why: format!("{why}, and you did not allow the agent to write it"),
        })),
        Consent::NobodyToAsk => Ok(Err(FsError::Unasked { path, below, why })),
    }
}

/// Files as the editor that runs quorum has them (its unsaved buffers
/// too): `fs/read_text_file` and `fs/write_text_file` asked of it in turn.
/// Its errors are handed to the agent as they came.
pub trait HostFiles: Send + Sync {
    fn read(
        &self,
        path: PathBuf,
        line: Option<u32>,
        limit: Option<u32>,
    ) -> BoxFuture<'static, Result<String, agent_client_protocol::Error>>;
    fn write(
        &self,
        path: PathBuf,
        content: String,
    ) -> BoxFuture<'static, Result<(), agent_client_protocol::Error>>;
}

/// A connection's editor files, once the session sets them.
pub(super) type Files = Arc<Mutex<Option<Arc<dyn HostFiles>>>>;

/// The editor's files for a request the session directory bounds (a
/// worktree task's own directory is not the editor's: it stays on disk).
fn host_for(files: &Files, root: &Root, connection: &Root) -> Option<Arc<dyn HostFiles>> {
    if root.path() != connection.path() {
        return None;
    }
    lock(files).clone()
}

/// Each running session's bounds: what it may not read
/// (`exclude_files_pattern`), and its own directory when it is not the
/// connection's (a worktree task's worktree).
pub(super) type Exclusions = Arc<Mutex<HashMap<String, Scope>>>;

/// One session's bounds.
#[derive(Clone, Default)]
pub(super) struct Scope {
    pub(super) exclude: Option<Exclude>,
    pub(super) root: Option<Root>,
}

/// The session's bounds: its own root (else the connection's) and what it
/// may not read.
pub(super) fn scope_of(
    exclusions: &Exclusions,
    routes: &Routes,
    session: &str,
    root: &Root,
) -> (Root, Option<Exclude>) {
    let scopes = lock(exclusions);
    let scope = match scopes.get(session) {
        Some(scope) => scope.clone(),
        // A child session (a nested sub-agent) is bound as the session
        // whose turn its traffic is routed to.
        None => {
            let routes = lock(routes);
            routes
                .get(session)
                .and_then(|route| {
                    routes
                        .iter()
                        .filter(|(id, other)| id.as_str() != session && other.same_turn(route))
                        .find_map(|(id, _)| scopes.get(id))
                })
                .cloned()
                .unwrap_or_default()
        }
    };
    drop(scopes);
    // A session's own root reads as much as the connection's.
    let own = scope.root.map(|r| r.with_max_read(root.max_read()));
    (own.unwrap_or_else(|| root.clone()), scope.exclude)
}

/// Where a request's file is: on disk, or the editor's (its buffers).
enum Backend {
    Disk,
    Editor(Arc<dyn HostFiles>),
}

/// Why a file request was not done, and so what the agent and the box are
/// told.
enum Failed {
    /// Refused by the session's bounds, or the file could not be had: the
    /// box says so, the agent gets the error.
    Refused(FsError),
    /// A part of the path swapped while the editor had it: said in the
    /// box and to the agent.
    Unsafe(String),
    /// The editor's own error, handed to the agent as it came.
    Editor(agent_client_protocol::Error),
    /// The blocking work stopped (a panic): the agent only.
    Stopped(String),
}

/// The one pipeline of both requests: the session's bounds, the backend
/// chosen (the editor's for the session directory where it offers files,
/// else the disk), the request run on a task of its own (its file I/O on a
/// blocking thread, so the dispatch loop never waits on the disk), its
/// refusal shown in the session's box, its answer sent.
fn answer_from_task<Req, Resp, T>(
    (connection, files): (&Root, &Files),
    exclusions: &Exclusions,
    routes: &Routes,
    (req, session): (Req, String),
    (responder, respond): (Responder<Resp>, fn(T) -> Resp),
    verb: &'static str,
    run: impl FnOnce(
        Backend,
        (Root, Option<Exclude>),
        Routes,
        Req,
    ) -> BoxFuture<'static, Result<T, Failed>>,
) -> Result<(), agent_client_protocol::Error>
where
    Resp: agent_client_protocol::JsonRpcResponse + Send + 'static,
    T: Send + 'static,
{
    let (root, exclude) = scope_of(exclusions, routes, &session, connection);
    let backend = match host_for(files, &root, connection) {
        Some(host) => Backend::Editor(host),
        None => Backend::Disk,
    };
    let routes = routes.clone();
    let done = run(backend, (root, exclude), routes.clone(), req);
    tokio::spawn(async move {
        let error = match done.await {
            Ok(answer) => return drop(responder.respond(respond(answer))),
            Err(Failed::Refused(e)) => {
                let _ = route(
                    &routes,
                    &session,
                    Incoming::Notice(format!("refused to {verb} {e}")),
                );
                fs_error(&e)
            }
            Err(Failed::Unsafe(message)) => {
                let _ = route(&routes, &session, Incoming::Notice(message.clone()));
                agent_client_protocol::Error::new(
                    agent_client_protocol::ErrorCode::INVALID_PARAMS,
                    message,
                )
            }
            Err(Failed::Editor(e)) => e,
            Err(Failed::Stopped(what)) => agent_client_protocol::Error::internal_error().data(what),
        };
        let _ = responder.respond_with_error(error);
    });
    Ok(())
}

/// `fs/read_text_file`.
pub(super) fn on_read_text_file(
    at: (&Root, &Files),
    exclusions: &Exclusions,
    routes: &Routes,
    req: ReadTextFileRequest,
    responder: Responder<ReadTextFileResponse>,
) -> Result<(), agent_client_protocol::Error> {
    let session = req.session_id.0.to_string();
    answer_from_task(
        at,
        exclusions,
        routes,
        (req, session),
        (responder, ReadTextFileResponse::new),
        "read",
        |backend, bounds, _, req| Box::pin(read(backend, bounds, req)),
    )
}

/// `fs/write_text_file`: what the session may not read, it may not
/// overwrite either; a file other programs run, only once the person
/// allowed it.
pub(super) fn on_write_text_file(
    at: (&Root, &Files),
    exclusions: &Exclusions,
    routes: &Routes,
    req: WriteTextFileRequest,
    responder: Responder<WriteTextFileResponse>,
) -> Result<(), agent_client_protocol::Error> {
    let session = req.session_id.0.to_string();
    answer_from_task(
        at,
        exclusions,
        routes,
        (req, session),
        (responder, |()| WriteTextFileResponse::new()),
        "write",
        |backend, bounds, routes, req| Box::pin(write(backend, bounds, routes, req)),
    )
}

/// A read: from the disk, or from the editor, the path checked as a read
/// of the disk is, then asked of the editor (pinned, and checked again
/// when it answers: a part swapped for a link meanwhile keeps the text
/// from the agent); a text over the read limit is refused as a file would
/// be.
async fn read(
    backend: Backend,
    (root, exclude): (Root, Option<Exclude>),
    req: ReadTextFileRequest,
) -> Result<String, Failed> {
    let stopped = |e| Failed::Stopped(format!("the read stopped: {e}"));
    let (asked, line, limit) = (req.path, req.line, req.limit);
    let host = match backend {
        Backend::Disk => {
            return tokio::task::spawn_blocking(move || {
                root.check(&asked, exclude.as_ref())
                    .and_then(|()| root.read(&asked, line, limit))
            })
            .await
            .map_err(stopped)?
            .map_err(Failed::Refused);
        }
        Backend::Editor(host) => host,
    };
    let max = root.max_read();
    let path = asked.clone();
    let pinned = tokio::task::spawn_blocking(move || {
        root.check(&asked, exclude.as_ref())
            .and_then(|()| root.resolve_new(&asked))
            .and_then(|real| Pinned::new(&root, &asked, &real))
    })
    .await
    .map_err(stopped)?
    .map_err(Failed::Refused)?;
    let read = host.read(pinned.path().to_path_buf(), line, limit).await;
    // Read through a part swapped meanwhile: not the agent's.
    recheck(pinned).await.map_err(|changed| {
        Failed::Unsafe(format!(
            "refused to read {changed}: the editor may have read a file \
             outside the session directory"
        ))
    })?;
    let text = read.map_err(Failed::Editor)?;
    let size = text.len() as u64;
    if size > max {
        return Err(Failed::Refused(FsError::TooBig {
            path,
            size,
            limit: max,
        }));
    }
    Ok(text)
}

/// A write: to the disk, or by the editor, refused as a write to the disk
/// is (outside, inside `.git`, a hooks folder, excluded), else asked of the
/// editor, which writes it (quorum makes nothing), by a path with no link
/// in it, pinned; a part of it swapped meanwhile is named to the agent and
/// the person when the editor answers.
async fn write(
    backend: Backend,
    (root, exclude): (Root, Option<Exclude>),
    routes: Routes,
    req: WriteTextFileRequest,
) -> Result<(), Failed> {
    let session = req.session_id.0.to_string();
    let path = req.path;
    let stopped = |e| Failed::Stopped(format!("the write to {} {e}", path.display()));
    let content = Arc::new(req.content);
    let host = match backend {
        Backend::Disk => {
            let (to, text) = (path.clone(), content.clone());
            let written = with_leave(root, (&routes, &session), &content, move |root| {
                root.check(&to, exclude.as_ref())
                    .and_then(|()| root.write(&to, &text))
            })
            .await;
            return written.map_err(stopped)?.map_err(Failed::Refused);
        }
        Backend::Editor(host) => host,
    };
    let checked = {
        let path = path.clone();
        with_leave(root, (&routes, &session), &content, move |root: &Root| {
            root.check(&path, exclude.as_ref())
                .and_then(|()| root.resolve_write(&path))
                .and_then(|real| Pinned::new(root, &path, &real))
        })
        .await
    };
    let pinned = checked.map_err(stopped)?.map_err(Failed::Refused)?;
    let content = Arc::try_unwrap(content).unwrap_or_else(|c| c.as_ref().clone());
    let written = host.write(pinned.path().to_path_buf(), content).await;
    recheck(pinned).await.map_err(|changed| {
        Failed::Unsafe(format!(
            "unsafe write to {changed}: the editor may have written \
             outside the session directory"
        ))
    })?;
    written.map_err(Failed::Editor)
}

/// A pinned path checked again once the editor has answered, on a
/// blocking thread.
async fn recheck(pinned: Pinned) -> Result<(), Changed> {
    let path = pinned.path().to_path_buf();
    tokio::task::spawn_blocking(move || pinned.verify())
        .await
        .unwrap_or_else(|e| {
            Err(Changed {
                path,
                what: format!("cannot be checked again ({e})"),
            })
        })
}

/// The JSON-RPC error for a refused or failed file request.
fn fs_error(e: &crate::confine::fsroot::FsError) -> agent_client_protocol::Error {
    let code = match e {
        FsError::Outside { .. }
        | FsError::Excluded { .. }
        | FsError::Protected { .. }
        | FsError::Unasked { .. }
        | FsError::NotRegular { .. }
        | FsError::TooBig { .. }
        | FsError::TooDeep { .. } => agent_client_protocol::ErrorCode::INVALID_PARAMS,
        FsError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND
        }
        FsError::Io { .. } => agent_client_protocol::ErrorCode::INTERNAL_ERROR,
    };
    agent_client_protocol::Error::new(code, e.to_string())
}
