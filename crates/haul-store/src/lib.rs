//! SQLite history of every haul transfer.
