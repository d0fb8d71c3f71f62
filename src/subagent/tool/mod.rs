//! The sub-agent tool as the model sees it.

pub mod description;
pub mod input;
pub mod reply;
pub mod status;
