//! The [`Store`]: opening, migrating, inserting and querying the history database.

use crate::record::{Outcome, Params, Sample, TransferRecord};
use crate::schema::MIGRATIONS;
use crate::{Result, StoreError};
use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a writer waits for another process holding the database lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Columns of `transfers` read back into a record, in order.
const COLUMNS: &str = "id, kind, started_at, duration_s, source, destination, source_host, \
     destination_host, params, files, bytes, outcome, error";

/// Which transfers [`Store::list`] returns. The default matches everything, newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Substring of either endpoint's host.
    pub host: Option<String>,
    /// Exact record kind (`cp`, `profile`, ...).
    pub kind: Option<String>,
    /// Exact outcome.
    pub outcome: Option<Outcome>,
    /// Only transfers started at or after this Unix time.
    pub since: Option<f64>,
    /// At most this many records.
    pub limit: Option<usize>,
    /// Load each record's throughput samples too.
    pub with_samples: bool,
}

/// An open history database.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// The default database: `$XDG_DATA_HOME/haul/history.sqlite`, else `~/.local/share/haul/…`.
    pub fn default_path() -> PathBuf {
        let data = std::env::var_os("XDG_DATA_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| dirs::home_dir().map(|h| h.join(".local").join("share")))
            .unwrap_or_else(|| PathBuf::from("."));
        data.join("haul").join("history.sqlite")
    }

    /// Opens (creating if needed) the database at `path` and migrates it to the current schema.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: path.to_path_buf(),
                dir: dir.to_path_buf(),
                source,
            })?;
        }
        let conn = Connection::open(path).map_err(|source| StoreError::Sqlite {
            path: path.to_path_buf(),
            what: "open",
            source,
        })?;
        Store::init(conn, path.to_path_buf(), true)
    }

    /// Opens a private in-memory database (for tests and dry runs).
    pub fn open_in_memory() -> Result<Store> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Sqlite {
            path: path.clone(),
            what: "open",
            source,
        })?;
        Store::init(conn, path, false)
    }

    /// Path of the database file (`:memory:` for in-memory stores).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn init(conn: Connection, path: PathBuf, wal: bool) -> Result<Store> {
        let mut store = Store { conn, path };
        store
            .conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(store.err("set busy timeout"))?;
        if wal {
            let mode: String = store
                .conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                .map_err(store.err("enable WAL"))?;
            if mode != "wal" {
                tracing::warn!(path = %store.path.display(), mode, "WAL mode not available");
            }
            store.no_sync_at_exit()?;
        }
        store
            .conn
            .pragma_update(None, "foreign_keys", true)
            .map_err(store.err("enable foreign keys"))?;
        store.migrate()?;
        Ok(store)
    }

    /// A commit does not wait for the disk, and neither does closing the database. In WAL mode
    /// with `synchronous = NORMAL`, a commit only appends to the write-ahead log; the log is
    /// synced when it is checkpointed (every 1,000 pages), so a power cut can lose the last
    /// records but never corrupts the database. By default the last connection to close also
    /// checkpoints, and syncs: on ext4 (`data=ordered`) that `fsync` waits for whatever other
    /// data the journal has to write first, and after a transfer that is the gigabytes just
    /// written. `haul cp` took 1.2–1.7 s longer to exit after a 1 GiB upload for that reason.
    /// The log stays beside the database instead (`-wal`, `-shm`) and the next open reads it.
    fn no_sync_at_exit(&self) -> Result<()> {
        self.conn
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(self.err("set synchronous = NORMAL"))?;
        self.conn
            .set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            )
            .map_err(self.err("leave the checkpoint to the next open"))?;
        Ok(())
    }

    fn migrate(&mut self) -> Result<()> {
        let supported = MIGRATIONS.len() as i64;
        let found: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(self.err("read schema version"))?;
        if found > supported {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found,
                supported,
            });
        }
        let path = self.path.clone();
        for (version, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            let err = sql_err(&path, "migrate schema");
            let tx = self.conn.transaction().map_err(&err)?;
            tx.execute_batch(sql).map_err(&err)?;
            tx.pragma_update(None, "user_version", version as i64 + 1)
                .map_err(&err)?;
            tx.commit().map_err(&err)?;
        }
        Ok(())
    }

    /// Builds a mapper from a SQLite error to a [`StoreError`] naming this database.
    fn err(&self, what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        sql_err(&self.path, what)
    }

    fn invalid(&self, reason: String) -> StoreError {
        StoreError::Invalid {
            path: self.path.clone(),
            reason,
        }
    }

    fn to_i64(&self, field: &str, v: u64) -> Result<i64> {
        i64::try_from(v).map_err(|_| self.invalid(format!("{field} = {v} exceeds {}", i64::MAX)))
    }

    fn check_finite(&self, field: &str, v: f64) -> Result<()> {
        if v.is_finite() {
            Ok(())
        } else {
            Err(self.invalid(format!("{field} = {v} is not a finite number")))
        }
    }

    fn validate(&self, r: &TransferRecord) -> Result<()> {
        self.check_finite("started_at", r.started_at)?;
        self.check_finite("duration_s", r.duration_s)?;
        if r.duration_s < 0.0 {
            return Err(self.invalid(format!("duration_s = {} is negative", r.duration_s)));
        }
        for (i, s) in r.samples.iter().enumerate() {
            self.check_finite(&format!("samples[{i}].t_s"), s.t_s)?;
            self.check_finite(&format!("samples[{i}].bps"), s.bps)?;
        }
        Ok(())
    }

    /// Inserts a record and its samples in one transaction; returns the new id (`record.id` is ignored).
    pub fn insert(&mut self, record: &TransferRecord) -> Result<i64> {
        self.validate(record)?;
        let p = &record.params;
        let params_json = serde_json::to_string(p)
            .map_err(|e| self.invalid(format!("params do not encode as JSON: {e}")))?;
        let files = self.to_i64("files", record.files)?;
        let bytes = self.to_i64("bytes", record.bytes)?;
        let tcp_buffer = p
            .tcp_buffer
            .map(|v| self.to_i64("tcp_buffer", v))
            .transpose()?;
        let block_size = p
            .block_size
            .map(|v| self.to_i64("block_size", v))
            .transpose()?;
        let sample_bytes = record
            .samples
            .iter()
            .enumerate()
            .map(|(i, s)| self.to_i64(&format!("samples[{i}].bytes"), s.bytes))
            .collect::<Result<Vec<_>>>()?;
        let path = self.path.clone();
        let err = |what| sql_err(&path, what);
        let tx = self.conn.transaction().map_err(err("begin insert"))?;
        tx.execute(
            "INSERT INTO transfers (kind, started_at, duration_s, source, destination, source_host, \
             destination_host, parallelism, concurrency, pipelining, tcp_buffer, block_size, \
             checksum, transport, params, files, bytes, outcome, error) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
            params![
                record.kind,
                record.started_at,
                record.duration_s,
                record.source,
                record.destination,
                record.source_host,
                record.destination_host,
                p.parallelism,
                p.concurrency,
                p.pipelining,
                tcp_buffer,
                block_size,
                p.checksum,
                p.transport,
                params_json,
                files,
                bytes,
                record.outcome.as_str(),
                record.error,
            ],
        )
        .map_err(err("insert transfer"))?;
        let id = tx.last_insert_rowid();
        {
            let mut stmt = tx
                .prepare("INSERT INTO samples (transfer_id, seq, t_s, bytes, bps) VALUES (?1, ?2, ?3, ?4, ?5)")
                .map_err(err("insert samples"))?;
            for (seq, (s, b)) in record.samples.iter().zip(sample_bytes).enumerate() {
                stmt.execute(params![id, seq as i64, s.t_s, b, s.bps])
                    .map_err(err("insert samples"))?;
            }
        }
        tx.commit().map_err(err("commit insert"))?;
        Ok(id)
    }

    /// The transfer with this id, with its samples, or `None`.
    pub fn get(&self, id: i64) -> Result<Option<TransferRecord>> {
        let sql = format!("SELECT {COLUMNS} FROM transfers WHERE id = ?1");
        let raw = self
            .conn
            .query_row(&sql, [id], RawRow::read)
            .optional()
            .map_err(self.err("read transfer"))?;
        raw.map(|r| self.finish(r, true)).transpose()
    }

    /// Transfers matching `filter`, newest first.
    pub fn list(&self, filter: &Filter) -> Result<Vec<TransferRecord>> {
        let mut sql = format!("SELECT {COLUMNS} FROM transfers WHERE 1 = 1");
        let mut args: Vec<Value> = Vec::new();
        if let Some(host) = &filter.host {
            args.push(Value::Text(host.clone()));
            let n = args.len();
            sql.push_str(&format!(
                " AND (instr(source_host, ?{n}) > 0 OR instr(destination_host, ?{n}) > 0)"
            ));
        }
        if let Some(kind) = &filter.kind {
            args.push(Value::Text(kind.clone()));
            sql.push_str(&format!(" AND kind = ?{}", args.len()));
        }
        if let Some(outcome) = filter.outcome {
            args.push(Value::Text(outcome.as_str().to_owned()));
            sql.push_str(&format!(" AND outcome = ?{}", args.len()));
        }
        if let Some(since) = filter.since {
            args.push(Value::Real(since));
            sql.push_str(&format!(" AND started_at >= ?{}", args.len()));
        }
        sql.push_str(" ORDER BY started_at DESC, id DESC");
        if let Some(limit) = filter.limit {
            args.push(Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
            sql.push_str(&format!(" LIMIT ?{}", args.len()));
        }
        self.query_records(&sql, &args, filter.with_samples)
    }

    /// The fastest (bytes / duration) successful transfer of `kind` from `src_host` to `dst_host`.
    pub fn best_for_host_pair(
        &self,
        src_host: &str,
        dst_host: &str,
        kind: &str,
    ) -> Result<Option<TransferRecord>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM transfers WHERE outcome = 'ok' AND source_host = ?1 \
             AND destination_host = ?2 AND kind = ?3 AND duration_s > 0 \
             ORDER BY CAST(bytes AS REAL) / duration_s DESC, id DESC LIMIT 1"
        );
        let args = [
            Value::Text(src_host.to_owned()),
            Value::Text(dst_host.to_owned()),
            Value::Text(kind.to_owned()),
        ];
        Ok(self.query_records(&sql, &args, true)?.into_iter().next())
    }

    fn query_records(
        &self,
        sql: &str,
        args: &[Value],
        with_samples: bool,
    ) -> Result<Vec<TransferRecord>> {
        let mut stmt = self
            .conn
            .prepare(sql)
            .map_err(self.err("query transfers"))?;
        let raws = stmt
            .query_map(rusqlite::params_from_iter(args), RawRow::read)
            .map_err(self.err("query transfers"))?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(self.err("read transfers"))?;
        raws.into_iter()
            .map(|r| self.finish(r, with_samples))
            .collect()
    }

    fn samples(&self, id: i64) -> Result<Vec<Sample>> {
        let mut stmt = self
            .conn
            .prepare("SELECT t_s, bytes, bps FROM samples WHERE transfer_id = ?1 ORDER BY seq")
            .map_err(self.err("read samples"))?;
        let rows = stmt
            .query_map([id], |r| {
                Ok((
                    r.get::<_, f64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, f64>(2)?,
                ))
            })
            .map_err(self.err("read samples"))?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(self.err("read samples"))?;
        rows.into_iter()
            .map(|(t_s, bytes, bps)| {
                let bytes = self.to_u64(id, "sample bytes", bytes)?;
                Ok(Sample { t_s, bytes, bps })
            })
            .collect()
    }

    fn to_u64(&self, id: i64, field: &str, v: i64) -> Result<u64> {
        u64::try_from(v).map_err(|_| self.corrupt(id, format!("{field} = {v} is negative")))
    }

    fn corrupt(&self, id: i64, reason: String) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            id,
            reason,
        }
    }

    /// Decodes the parts SQLite cannot type-check and attaches samples.
    fn finish(&self, raw: RawRow, with_samples: bool) -> Result<TransferRecord> {
        let id = raw.id;
        let params: Params = serde_json::from_str(&raw.params)
            .map_err(|e| self.corrupt(id, format!("params JSON: {e}")))?;
        let outcome = raw
            .outcome
            .parse::<Outcome>()
            .map_err(|e| self.corrupt(id, e))?;
        let samples = if with_samples {
            self.samples(id)?
        } else {
            Vec::new()
        };
        Ok(TransferRecord {
            id: Some(id),
            kind: raw.kind,
            started_at: raw.started_at,
            duration_s: raw.duration_s,
            source: raw.source,
            destination: raw.destination,
            source_host: raw.source_host,
            destination_host: raw.destination_host,
            params,
            files: self.to_u64(id, "files", raw.files)?,
            bytes: self.to_u64(id, "bytes", raw.bytes)?,
            outcome,
            error: raw.error,
            samples,
        })
    }
}

/// Maps a SQLite error during `what` to a [`StoreError`] naming the database at `path`.
fn sql_err<'a>(path: &'a Path, what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError + 'a {
    move |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// One `transfers` row as SQLite returns it, before JSON and enum decoding.
struct RawRow {
    id: i64,
    kind: String,
    started_at: f64,
    duration_s: f64,
    source: String,
    destination: String,
    source_host: String,
    destination_host: String,
    params: String,
    files: i64,
    bytes: i64,
    outcome: String,
    error: Option<String>,
}

impl RawRow {
    fn read(r: &Row<'_>) -> rusqlite::Result<RawRow> {
        Ok(RawRow {
            id: r.get(0)?,
            kind: r.get(1)?,
            started_at: r.get(2)?,
            duration_s: r.get(3)?,
            source: r.get(4)?,
            destination: r.get(5)?,
            source_host: r.get(6)?,
            destination_host: r.get(7)?,
            params: r.get(8)?,
            files: r.get(9)?,
            bytes: r.get(10)?,
            outcome: r.get(11)?,
            error: r.get(12)?,
        })
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
