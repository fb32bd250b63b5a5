//! Schema migrations, applied in order and tracked with `PRAGMA user_version`.

/// Migration `i` brings the schema from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[V1];

/// Version 1: transfers and their throughput samples.
const V1: &str = r#"
CREATE TABLE transfers (
    id               INTEGER PRIMARY KEY,
    kind             TEXT    NOT NULL,
    started_at       REAL    NOT NULL,
    duration_s       REAL    NOT NULL,
    source           TEXT    NOT NULL,
    destination      TEXT    NOT NULL,
    source_host      TEXT    NOT NULL,
    destination_host TEXT    NOT NULL,
    parallelism      INTEGER,
    concurrency      INTEGER,
    pipelining       INTEGER,
    tcp_buffer       INTEGER,
    block_size       INTEGER,
    checksum         TEXT,
    transport        TEXT,
    params           TEXT    NOT NULL,
    files            INTEGER NOT NULL,
    bytes            INTEGER NOT NULL,
    outcome          TEXT    NOT NULL CHECK (outcome IN ('ok', 'failed', 'interrupted')),
    error            TEXT
);
CREATE INDEX transfers_started_at ON transfers (started_at);
CREATE INDEX transfers_host_pair ON transfers (source_host, destination_host, kind);
CREATE TABLE samples (
    transfer_id INTEGER NOT NULL REFERENCES transfers (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    t_s         REAL    NOT NULL,
    bytes       INTEGER NOT NULL,
    bps         REAL    NOT NULL,
    PRIMARY KEY (transfer_id, seq)
) WITHOUT ROWID;
"#;
