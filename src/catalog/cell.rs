//! `CatalogCell`: the engine's current catalog, replaced whole when MCP
//! servers' tool lists change.
//!
//! Readers take a snapshot (`load`, an `Arc` clone under a read lock) and
//! use it for the whole of one call, so a call never sees half of a
//! change. Replacing is rare (a server's first listing, a
//! `notifications/tools/list_changed`).

use std::sync::{Arc, RwLock};

use super::Catalog;

/// The current catalog.
pub(crate) struct CatalogCell {
    current: RwLock<Arc<Catalog>>,
}

impl CatalogCell {
    /// A cell holding `catalog`.
    pub(crate) fn new(catalog: Catalog) -> Self {
        CatalogCell { current: RwLock::new(Arc::new(catalog)) }
    }

    /// The current catalog.
    pub(crate) fn load(&self) -> Arc<Catalog> {
        // A poisoned lock only means a writer panicked between taking the
        // lock and storing an `Arc`; the stored value is whole either way.
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Makes `catalog` the current one.
    pub(crate) fn replace(&self, catalog: Catalog) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(catalog);
    }
}
