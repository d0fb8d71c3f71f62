//! The terminal UI: a pure state built from events, a view that draws it,
//! and an app loop generic over the backend.

pub mod app;
pub mod cells;
pub mod composer;
pub mod detail;
pub mod diff;
pub mod earlier;
pub mod form;
pub mod history;
pub mod markdown;
pub mod modes;
mod panel;
pub mod picker;
pub mod readback;
pub mod replay;
pub mod screenshot;
pub mod state;
pub mod terminal;
pub mod theme;
pub mod view;
pub mod wrap;
