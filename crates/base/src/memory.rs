//! Giving freed memory back to the system.
//!
//! glibc's allocator keeps memory a process freed in its arenas (one per
//! thread that allocated, up to eight per core), so a long-lived server
//! whose sessions came and went holds on to their peak: a serve process
//! that ended a hundred idle sessions, each with its own engine and
//! threads, kept tens of MiB it no longer used (docs/PERFORMANCE.md,
//! "W11_serve_load"). [`give_back`] asks glibc to return what it can
//! (`malloc_trim(0)`: every arena's free pages, not only the top of the
//! heap). It costs a walk of the free lists, so callers use it after a
//! large release (a session's engine dropped), not per request. Elsewhere
//! (musl, macOS) it does nothing.

/// Returns the allocator's free memory to the system where the platform
/// allows it (glibc); does nothing elsewhere.
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists under
    // its locks; it takes no pointer and may be called from any thread.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}
