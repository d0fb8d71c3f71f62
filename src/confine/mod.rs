//! Untrusted input, kept in bounds: paths confined to the session's root
//! (`fsroot`), text bound for a terminal (`sanitize`), files only the user
//! may read (`private`), and what one piece of outside input may cost
//! (`limits`).

pub mod fsroot;
pub mod limits;
pub mod private;
pub mod sanitize;
