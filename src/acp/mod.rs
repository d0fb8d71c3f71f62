//! The ACP client: the agent registry and detection, connections to agent
//! processes, sessions, turns, permissions, file-system confinement and the
//! terminals agents run commands in.

pub mod answers;
pub mod client;
mod content;
mod elicit;
mod error;
mod fs;
mod handlers;
mod live;
pub mod mcp;
pub mod meta;
mod permission;
mod pipe;
mod process;
pub mod registry;
mod relayed;
mod route;
mod session;
mod setting;
mod stream;
mod terminal;
mod translate;
mod transport;
mod turn;

pub use fs::HostFiles;
pub use process::spawn;
pub use setting::SettingError;
