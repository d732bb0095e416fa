//! A conversation's line: its turns are answered one at a time, in the order they arrived,
//! whichever replica each came to. A place is a ticket in the database, renewed while its
//! holder lives and left when it is dropped.

use std::time::Duration;

use tokio_util::task::AbortOnDropHandle;

use crate::db::Db;
use crate::error::Result;

/// How long a place holds unrenewed (renewed a quarter of the way).
const LEASE: Duration = Duration::from_secs(20);
/// How often a waiting turn looks whether it is its turn.
const POLL: Duration = Duration::from_millis(50);

/// A turn's place in its conversation's line.
pub struct Place {
    db: Db,
    conversation: String,
    ticket: i64,
    /// Turns ahead when the ticket was taken: none, and it is this one's turn already.
    first_ahead: i64,
    /// Left already, with what the turn recorded.
    left: bool,
    _renewing: AbortOnDropHandle<()>,
}

impl Place {
    /// Joins the line of `conversation` for `holder` (a replica); `None` when `alone` was
    /// asked and another turn runs or waits.
    pub async fn take(
        db: &Db,
        conversation: &str,
        holder: &str,
        alone: bool,
    ) -> Result<Option<Self>> {
        let lease_ms = LEASE.as_millis() as i64;
        let (id, holder) = (conversation.to_owned(), holder.to_owned());
        let Some(super::Queued { ticket, ahead }) = db
            .call(move |conn| super::queue(conn, &id, &holder, lease_ms, alone))
            .await?
        else {
            return Ok(None);
        };
        let (renewer, id) = (db.clone(), conversation.to_owned());
        let renewing = tokio::spawn(async move {
            loop {
                tokio::time::sleep(LEASE / 4).await;
                let id = id.clone();
                let renewed = renewer
                    .call(move |conn| super::renew(conn, &id, ticket, lease_ms))
                    .await;
                if let Err(e) = renewed {
                    tracing::warn!("cannot renew a conversation turn's place: {e}");
                }
            }
        });
        Ok(Some(Self {
            db: db.clone(),
            conversation: conversation.to_owned(),
            ticket,
            first_ahead: ahead,
            left: false,
            _renewing: AbortOnDropHandle::new(renewing),
        }))
    }

    /// Returns once no turn is ahead of this one.
    pub async fn ready(&self) -> Result<()> {
        if self.first_ahead == 0 {
            return Ok(());
        }
        loop {
            let (id, ticket) = (self.conversation.clone(), self.ticket);
            let ahead = self
                .db
                .call(move |conn| super::ahead(conn, &id, ticket))
                .await?;
            if ahead == 0 {
                return Ok(());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Its ticket in the line.
    pub fn ticket(&self) -> i64 {
        self.ticket
    }

    /// Its turn left the line in the transaction that recorded its exchange
    /// (`Exchange::leaving`): nothing more to write.
    pub fn left(mut self) {
        self.left = true;
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if self.left {
            return;
        }
        let (db, id, ticket) = (self.db.clone(), self.conversation.clone(), self.ticket);
        tokio::spawn(async move {
            if let Err(e) = db.call(move |conn| super::leave(conn, &id, ticket)).await {
                tracing::warn!("cannot leave a conversation's line (its place expires): {e}");
            }
        });
    }
}
