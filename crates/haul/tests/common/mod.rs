//! Support shared by the integration tests; each test binary uses a different part of it.
#![allow(dead_code)]

pub mod globus;
pub mod gsi;
pub mod haul;
pub mod hostile;
