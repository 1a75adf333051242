//! `CatalogCell`: the engine's current catalog, rebuilt whole when MCP
//! servers' tool lists change.
//!
//! Readers take a snapshot (`load`, an `Arc` clone under a read lock) and
//! use it for the whole of one call, so a call never sees half of a
//! change. Rebuilding is rare (a server's first listing, a
//! `notifications/tools/list_changed`).

use std::sync::{Arc, RwLock};

use super::{Catalog, CatalogError, Compile, Tool};

/// An optional (MCP) tool the catalog left out: its server lists it, but it
/// cannot be called (its input schema does not compile, its name is
/// invalid or taken). Shown by `tool_search`, `codemode mcp tools` and the
/// refusal of a call of it, so it does not vanish without a word.
#[derive(Debug, Clone)]
pub(crate) struct Unavailable {
    /// Its spec (name, description, source...), as the server listed it.
    pub spec: super::ToolSpec,
    /// Why it is left out, naming the tool.
    pub why: String,
}

/// The current catalog, and the tools every rebuild starts from.
pub(crate) struct CatalogCell {
    /// Native, synthetic and host tools, in catalog order, each with when
    /// its schema is compiled.
    base: Vec<(Arc<dyn Tool>, Compile)>,
    current: RwLock<Arc<Catalog>>,
    /// The optional tools the current catalog left out.
    unavailable: RwLock<Arc<Vec<Unavailable>>>,
}

impl CatalogCell {
    /// A cell whose catalog is `base` followed by `optional` tools (see
    /// [`Catalog::with_optional`]); returns the optional tools left out.
    ///
    /// # Errors
    /// [`CatalogError`] for a fault in `base`.
    pub(crate) fn new(
        base: Vec<(Arc<dyn Tool>, Compile)>,
        optional: Vec<Arc<dyn Tool>>,
    ) -> Result<(Self, Vec<CatalogError>), CatalogError> {
        let described = descriptions(&optional);
        let (catalog, skipped) = Catalog::with_optional(base.clone(), optional)?;
        let unavailable = RwLock::new(Arc::new(unavailable(&skipped, &described)));
        Ok((CatalogCell { base, current: RwLock::new(Arc::new(catalog)), unavailable }, skipped))
    }

    /// The optional tools the current catalog left out, with why.
    pub(crate) fn unavailable(&self) -> Arc<Vec<Unavailable>> {
        self.unavailable.read().unwrap_or_else(|p| p.into_inner()).clone()
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
        let described = descriptions(&optional);
        let (catalog, skipped) = match Catalog::with_optional(self.base.clone(), optional) {
            Ok(built) => built,
            // The base tools formed a catalog when the engine was built and
            // have not changed since.
            Err(e) => return vec![e],
        };
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(catalog);
        *self.unavailable.write().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(unavailable(&skipped, &described));
        skipped
    }
}

/// Each tool's spec.
fn descriptions(tools: &[Arc<dyn Tool>]) -> Vec<super::ToolSpec> {
    tools.iter().map(|t| t.spec()).collect()
}

/// The left-out tools of `skipped`, described from `described`.
fn unavailable(skipped: &[CatalogError], described: &[super::ToolSpec]) -> Vec<Unavailable> {
    skipped
        .iter()
        .filter_map(|e| {
            let name = match e {
                CatalogError::DuplicateName { name } | CatalogError::InvalidName { name } => name,
                CatalogError::InvalidSchema { tool, .. } => tool,
            };
            let spec = described.iter().find(|s| &s.name == name)?.clone();
            let why = format!("{e}; it cannot be called until its MCP server lists it correctly");
            Some(Unavailable { spec, why })
        })
        .collect()
}
