//! The rmcp client handler of a connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::{ClientHandler, model};
use tokio::sync::mpsc;

use crate::mcp::era;
use crate::mcp::requests::{self, ServerRequests};

/// The rmcp client handler: identifies codemode, declares its
/// capabilities ([`requests::capabilities`]), answers the server's
/// `elicitation/create` and `roots/list` requests through the connection's
/// [`ServerRequests`], and forwards `notifications/tools/list_changed`.
/// (`notifications/progress` reach their calls from the raw stream, in
/// order: `ListingTap`.)
/// Sampling is left to rmcp's default (`-32601 Method not found`).
pub(crate) struct Handler {
    pub(super) list_changed: mpsc::UnboundedSender<()>,
    /// Where the notification is counted when no [`BoundedLines`] counts
    /// it (HTTP).
    pub(super) count: Option<Arc<AtomicU64>>,
    pub(super) requests: Arc<ServerRequests>,
    /// Whether `roots` is declared (the server's config).
    pub(super) roots: bool,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(count) = &self.count {
            count.fetch_add(1, Ordering::AcqRel);
        }
        let _ = self.list_changed.send(());
    }

    async fn create_elicitation(
        &self,
        request: model::ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<model::ElicitResult, model::ErrorData> {
        let asker = self.requests.asker();
        Ok(asker.elicit(request, context.ct.cancelled_owned()).await)
    }

    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<model::ListRootsResult, model::ErrorData> {
        Ok(self.requests.asker().roots())
    }

    fn get_info(&self) -> model::ClientConfig {
        model::ClientConfig::new(
            requests::capabilities(self.roots),
            model::Implementation::new("codemode", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(era::INITIALIZE_VERSION)
    }
}
