//! Untrusted input, kept in bounds: paths confined to the session's root
//! (`fsroot`), and pinned while another program opens them (`pin`), text
//! bound for a terminal (`sanitize`), files and folders only the user may
//! read (`private`), what one piece of outside input may cost (`limits`),
//! and lines of it read the one way everywhere (`lines`).

pub mod fsroot;
pub mod limits;
pub mod lines;
pub mod pin;
pub mod private;
pub mod sanitize;
