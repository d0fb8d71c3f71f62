//! The sub-agent tool as the model sees it.

pub mod status;
