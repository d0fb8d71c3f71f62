//! The ACP client: the agent registry and detection, connections to agent
//! processes, sessions, turns, permissions and file-system confinement.

pub mod client;
mod fs;
pub mod mcp;
pub mod meta;
mod permission;
mod process;
pub mod registry;
mod route;
mod session;
mod translate;
mod transport;
mod turn;
