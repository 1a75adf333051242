//! Cancel requests (`codemode runs cancel`, docs/JOURNAL.md "Waiting and
//! cancelling"): a row in `codemode_cancels` per run asked to cancel (schema
//! version 2), gone with the run. The process running runs reads, every
//! 300 ms, which of them have one: one query for all of them.

use codemode::journal::{NotResumableState, StoreError};

use super::{Inner, check_run_id, not_resumable};

impl Inner {
    /// Records a cancel request for run `run_id`.
    pub(super) async fn request_cancel(&self, run_id: &str) -> Result<(), StoreError> {
        check_run_id(run_id)?;
        let conn = self.conn().await?;
        let added = conn
            .execute(
                "INSERT INTO codemode_cancels (run_id) SELECT run_id FROM codemode_runs WHERE run_id = $1 \
                 ON CONFLICT (run_id) DO NOTHING",
                &[&run_id],
            )
            .await
            .map_err(|e| self.fail(format_args!("cannot ask run `{run_id}` to cancel"), &e))?;
        conn.done();
        if added == 0 && !self.exists(run_id).await? {
            return Err(not_resumable(run_id, NotResumableState::Unknown));
        }
        Ok(())
    }

    /// Of `run_ids`, those with a cancel request.
    pub(super) async fn cancel_requests(&self, run_ids: &[String]) -> Result<Vec<String>, StoreError> {
        let conn = self.conn().await?;
        let rows = conn
            .query("SELECT run_id FROM codemode_cancels WHERE run_id = ANY($1)", &[&run_ids])
            .await
            .map_err(|e| self.fail("cannot read cancel requests", &e))?;
        conn.done();
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
