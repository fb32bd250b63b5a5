//! `haul serve` records every transfer it serves in the history store (`kind = serve`), on a
//! thread of its own so that no session waits for SQLite: the passive BTC measurements that
//! throughput predictions start from (002 §2.3). A full queue or a failed write is a warning.

use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

use haul_server::journal::{Direction, ServedTransfer, TransferLog};
use haul_store::{Outcome, Params, Store, TransferRecord};

/// Records waiting for the writer thread, at most.
const QUEUE: usize = 4096;

/// The history writer of a server.
#[derive(Debug)]
pub struct HistoryJournal {
    tx: Mutex<SyncSender<ServedTransfer>>,
}

impl HistoryJournal {
    /// Opens the store at `path` and starts its writer thread.
    pub fn start(path: PathBuf) -> anyhow::Result<Arc<HistoryJournal>> {
        let mut store = Store::open(&path)?;
        let (tx, rx) = sync_channel::<ServedTransfer>(QUEUE);
        std::thread::Builder::new()
            .name("history".into())
            .spawn(move || {
                for t in rx {
                    if let Err(e) = store.insert(&to_record(&t)) {
                        tracing::warn!("served transfer not recorded: {e}");
                    }
                }
            })?;
        Ok(Arc::new(HistoryJournal { tx: Mutex::new(tx) }))
    }
}

impl TransferLog for HistoryJournal {
    fn record(&self, t: ServedTransfer) {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        match tx.try_send(t) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                tracing::warn!("history writer behind by {QUEUE} records: one dropped")
            }
            Err(TrySendError::Disconnected(_)) => tracing::warn!("history writer stopped"),
        }
    }
}

/// The history row of a served transfer: the server's end as `ip:port` of its control
/// address, the client's as its address; for a relayed transfer the next hop is in `extra`.
fn to_record(t: &ServedTransfer) -> TransferRecord {
    let server = t.local.to_string();
    let client = t.peer.to_string();
    let (source, destination, source_host, destination_host) = match t.direction {
        Direction::Sent => (t.path.clone(), client.clone(), server, client),
        Direction::Received => (client.clone(), t.path.clone(), client, server),
    };
    let started_at = t
        .started
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    TransferRecord {
        id: None,
        kind: "serve".into(),
        started_at,
        duration_s: t.elapsed_s,
        source,
        destination,
        source_host,
        destination_host,
        params: Params {
            parallelism: Some(t.streams as u32),
            transport: Some(t.transport.into()),
            extra: serde_json::json!({
                "user": t.user,
                "memory": t.memory,
                "next_hop": t.next_hop,
            }),
            ..Params::default()
        },
        files: 1,
        bytes: t.bytes,
        outcome: if t.outcome.is_ok() {
            Outcome::Ok
        } else {
            Outcome::Failed
        },
        error: t.outcome.as_ref().err().cloned(),
        samples: Vec::new(),
    }
}
