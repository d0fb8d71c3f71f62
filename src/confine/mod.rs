//! Untrusted input, kept in bounds: paths confined to the session's root
//! (`fsroot`), and pinned while another program opens them (`pin`), text
//! bound for a terminal (`sanitize`), files and folders only the user may
//! read (`private`), and what one piece of outside input may cost
//! (`limits`).

pub mod fsroot;
pub mod limits;
pub mod pin;
pub mod private;
pub mod sanitize;
