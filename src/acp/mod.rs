//! The ACP client: the agent registry and detection, connections to agent
//! processes, sessions, turns, permissions and file-system confinement.

pub mod client;
mod permission;
pub mod registry;
mod translate;
