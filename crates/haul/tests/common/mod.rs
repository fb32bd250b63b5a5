pub mod globus;
