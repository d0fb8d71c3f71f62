//! The client's file requests: `fs/read_text_file` and
//! `fs/write_text_file`, confined to the session's directory (and kept from
//! what the session may not read), answered from tasks of their own so the
//! dispatch loop never waits on the disk.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest, WriteTextFileResponse,
};

use super::route::{Incoming, Routes, route};
use crate::confine::fsroot::{Exclude, Root};

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
    let scopes = exclusions.lock().expect("not poisoned");
    let scope = match scopes.get(session) {
        Some(scope) => scope.clone(),
        // A child session (a nested sub-agent) is bound as the session
        // whose turn its traffic is routed to.
        None => {
            let routes = routes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            routes
                .get(session)
                .and_then(|tx| {
                    routes
                        .iter()
                        .filter(|(id, other)| id.as_str() != session && other.same_channel(tx))
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

/// `fs/read_text_file`: the read runs on a blocking thread, and the answer
/// is sent from a task of its own; a refusal is shown in the session's box.
pub(super) fn on_read_text_file(
    root: &Root,
    exclusions: &Exclusions,
    routes: &Routes,
    req: ReadTextFileRequest,
    responder: Responder<ReadTextFileResponse>,
) -> Result<(), agent_client_protocol::Error> {
    let (root, exclude) = scope_of(exclusions, routes, req.session_id.0.as_ref(), root);
    // File I/O runs on a blocking thread, and the answer
    // is sent from a task of its own: the dispatch loop
    // never waits on the disk.
    let routes = routes.clone();
    tokio::spawn(async move {
        let session = req.session_id.0.clone();
        let read = tokio::task::spawn_blocking(move || {
            root.check(&req.path, exclude.as_ref())
                .and_then(|()| root.read(&req.path, req.line, req.limit))
        })
        .await;
        let _ = match read {
            Ok(Ok(text)) => responder.respond(ReadTextFileResponse::new(text)),
            Ok(Err(e)) => {
                let _ = route(
                    &routes,
                    &session,
                    Incoming::Notice(format!("refused to read {e}")),
                );
                responder.respond_with_error(fs_error(&e))
            }
            Err(e) => responder.respond_with_error(
                agent_client_protocol::Error::internal_error()
                    .data(format!("the read stopped: {e}")),
            ),
        };
    });
    Ok(())
}

/// `fs/write_text_file`: as a read, on a blocking thread and answered from
/// a task of its own.
pub(super) fn on_write_text_file(
    root: &Root,
    exclusions: &Exclusions,
    routes: &Routes,
    req: WriteTextFileRequest,
    responder: Responder<WriteTextFileResponse>,
) -> Result<(), agent_client_protocol::Error> {
    let (root, exclude) = scope_of(exclusions, routes, req.session_id.0.as_ref(), root);
    let routes = routes.clone();
    tokio::spawn(async move {
        let session = req.session_id.0.clone();
        let path = req.path.clone();
        // What the task may not read, it may not overwrite either.
        let written = tokio::task::spawn_blocking(move || {
            root.check(&req.path, exclude.as_ref())
                .and_then(|()| root.write(&req.path, &req.content))
        })
        .await;
        let _ = match written {
            Ok(Ok(())) => responder.respond(WriteTextFileResponse::new()),
            Ok(Err(e)) => {
                let _ = route(
                    &routes,
                    &session,
                    Incoming::Notice(format!("refused to write {e}")),
                );
                responder.respond_with_error(fs_error(&e))
            }
            Err(e) => responder.respond_with_error(
                agent_client_protocol::Error::internal_error()
                    .data(format!("the write to {} stopped: {e}", path.display())),
            ),
        };
    });
    Ok(())
}

/// The JSON-RPC error for a refused or failed file request.
fn fs_error(e: &crate::confine::fsroot::FsError) -> agent_client_protocol::Error {
    use crate::confine::fsroot::FsError;
    let code = match e {
        FsError::Outside { .. }
        | FsError::Excluded { .. }
        | FsError::Protected { .. }
        | FsError::NotRegular { .. }
        | FsError::TooBig { .. } => agent_client_protocol::ErrorCode::INVALID_PARAMS,
        FsError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND
        }
        FsError::Io { .. } => agent_client_protocol::ErrorCode::INTERNAL_ERROR,
    };
    agent_client_protocol::Error::new(code, e.to_string())
}
