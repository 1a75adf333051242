//! Replaying a journal (filled in below).
