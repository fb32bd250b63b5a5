//! The transfer engine: what to move (datasets), how (concurrency, parallelism, pipelining),
//! and proof that it arrived (checksums, restart state).

pub mod checksum;
