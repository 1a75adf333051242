//! `CatalogCell`: the engine's current catalog, rebuilt whole when MCP
//! servers' tool lists change.
//!
//! Readers take a snapshot (`load`, an `Arc` clone under a read lock) and
//! use it for the whole of one call, so a call never sees half of a
//! change. Rebuilding is rare (a server's first listing, a
//! `notifications/tools/list_changed`).

use std::sync::{Arc, RwLock};

use super::{Catalog, CatalogError, Tool};

/// The current catalog, and the tools every rebuild starts from.
pub(crate) struct CatalogCell {
    /// Native, synthetic and host tools, in catalog order.
    base: Vec<Arc<dyn Tool>>,
    current: RwLock<Arc<Catalog>>,
}

impl CatalogCell {
    /// A cell whose catalog is `base` followed by `optional` tools (see
    /// [`Catalog::with_optional`]); returns the optional tools left out.
    ///
    /// # Errors
    /// [`CatalogError`] for a fault in `base`.
    pub(crate) fn new(
        base: Vec<Arc<dyn Tool>>,
        optional: Vec<Arc<dyn Tool>>,
    ) -> Result<(Self, Vec<CatalogError>), CatalogError> {
        let (catalog, skipped) = Catalog::with_optional(base.clone(), optional)?;
        Ok((CatalogCell { base, current: RwLock::new(Arc::new(catalog)) }, skipped))
    }

    /// The current catalog.
    pub(crate) fn load(&self) -> Arc<Catalog> {
        // A poisoned lock only means a writer panicked between taking the
        // lock and storing an `Arc`; the stored value is whole either way.
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the catalog with the base tools followed by `optional`;
    /// returns the optional tools left out (bad name or schema).
    pub(crate) fn rebuild(&self, optional: Vec<Arc<dyn Tool>>) -> Vec<CatalogError> {
        let (catalog, skipped) = match Catalog::with_optional(self.base.clone(), optional) {
            Ok(built) => built,
            // The base tools formed a catalog when the engine was built and
            // have not changed since.
            Err(e) => return vec![e],
        };
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(catalog);
        skipped
    }
}
