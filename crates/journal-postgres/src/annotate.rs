//! [`JournalStore::annotate`](codemode::journal::JournalStore::annotate):
//! one line appended to the journal of a run no process holds (how a
//! rollback marks the calls it undid).

use codemode::journal::{NotResumableState, StoreError};

use super::{Inner, check_run_id, lock_key, not_resumable};

impl Inner {
    /// Appends `line` to run `run_id`'s rows, after its last, holding the
    /// run's lock meanwhile (a held run is refused as busy). Committed
    /// durably.
    pub(super) async fn annotate(&self, run_id: &str, line: String) -> Result<(), StoreError> {
        check_run_id(run_id)?;
        if !self.exists(run_id).await? {
            return Err(not_resumable(run_id, NotResumableState::Unknown));
        }
        let Some(hold) = self.holder.hold(run_id, lock_key(run_id)).await? else {
            return Err(not_resumable(run_id, NotResumableState::Busy));
        };
        let appended = async {
            let conn = self.conn().await?;
            conn.execute(
                "WITH line AS (
                     INSERT INTO codemode_journal (run_id, n, line)
                     SELECT $1, COALESCE(MAX(n), -1) + 1, $2 FROM codemode_journal WHERE run_id = $1)
                 UPDATE codemode_runs SET updated_at = now() WHERE run_id = $1",
                &[&run_id, &line],
            )
            .await
            .map_err(|e| self.fail(format_args!("cannot append to run `{run_id}`"), &e))?;
            conn.done();
            Ok(())
        }
        .await;
        hold.release().await;
        appended
    }
}
