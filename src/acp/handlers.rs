//! What quorum answers of an agent's requests itself, for an agent at home
//! (`process`) and for one under the proxy on a host (`answers`) alike: its
//! files (`fs/read_text_file`, `fs/write_text_file`: `fs`) and its
//! terminals (`terminal/*`: `terminal`), registered on a connection by one
//! function, so the two never drift apart.

use std::sync::Arc;

use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, CreateTerminalResponse, KillTerminalRequest, KillTerminalResponse,
    ReadTextFileRequest, ReadTextFileResponse, ReleaseTerminalRequest, ReleaseTerminalResponse,
    TerminalOutputRequest, TerminalOutputResponse, WaitForTerminalExitRequest,
    WaitForTerminalExitResponse, WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::{
    Agent, Client, HandleConnectionClose, HandleDispatchFrom, RunWithConnectionTo,
};

use super::fs::{Exclusions, Files, on_read_text_file, on_write_text_file};
use super::route::Routes;
use super::terminal::Terminals;
use crate::confine::fsroot::Root;

/// What the answers need: the session directory, the editor's files (none
/// on a host), the paths each session may not read, the sessions' turns,
/// and the terminals.
#[derive(Clone)]
pub(super) struct Answering {
    pub(super) root: Root,
    pub(super) files: Files,
    pub(super) exclusions: Exclusions,
    pub(super) routes: Routes,
    pub(super) terminals: Arc<Terminals>,
}

/// `builder` with the handlers of the agent's file and terminal requests
/// added.
pub(super) fn files_and_terminals<H, R, C>(
    builder: agent_client_protocol::v1::Builder<Client, H, R, C>,
    answering: Answering,
) -> agent_client_protocol::v1::Builder<Client, impl HandleDispatchFrom<Agent>, R, C>
where
    H: HandleDispatchFrom<Agent>,
    R: RunWithConnectionTo<Agent>,
    C: HandleConnectionClose<Agent>,
{
    let terminals = answering.terminals.clone();
    let (read, write) = (answering.clone(), answering);
    let (create, output, wait, kill, release) = (
        terminals.clone(),
        terminals.clone(),
        terminals.clone(),
        terminals.clone(),
        terminals.clone(),
    );
    builder
        .on_receive_request(
            async move |req: ReadTextFileRequest, r: Responder<ReadTextFileResponse>, _cx| {
                on_read_text_file(
                    (&read.root, &read.files),
                    &read.exclusions,
                    &read.routes,
                    req,
                    r,
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: WriteTextFileRequest, r: Responder<WriteTextFileResponse>, _cx| {
                on_write_text_file(
                    (&write.root, &write.files),
                    &write.exclusions,
                    &write.routes,
                    req,
                    r,
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        // The terminals: each handler answers at once or from a task.
        .on_receive_request(
            async move |req: CreateTerminalRequest, r: Responder<CreateTerminalResponse>, _cx| {
                create.on_create(req, r)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: TerminalOutputRequest, r: Responder<TerminalOutputResponse>, _cx| {
                output.on_output(req, r)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: WaitForTerminalExitRequest,
                        r: Responder<WaitForTerminalExitResponse>,
                        _cx| { wait.on_wait_for_exit(req, r) },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: KillTerminalRequest, r: Responder<KillTerminalResponse>, _cx| {
                kill.on_kill(req, r)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ReleaseTerminalRequest, r: Responder<ReleaseTerminalResponse>, _cx| {
                release.on_release(req, r)
            },
            agent_client_protocol::on_receive_request!(),
        )
}
