//! Transfer engine: datasets, concurrency, parallelism, pipelining, checksums, restart.
