//! (filled by the defence's work)
