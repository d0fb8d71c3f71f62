//! The sub-agent dispatcher. So far: the severity header of code reviews.

pub mod severity;
