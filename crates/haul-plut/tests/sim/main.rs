//! Deterministic simulation tests of PLUT: whole transfers between a `Sender` and a `Receiver`
//! over a simulated long fat network (see `net`), asserting exact delivery, rate convergence,
//! no stall under ACK loss or delay, and that bad datagrams are dropped and counted.

mod attack;
mod net;

mod bad_input;
mod convergence;
mod delivery;
mod long_fat;
mod stall;
