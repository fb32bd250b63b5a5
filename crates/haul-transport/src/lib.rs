//! Data channels: one trait, with TCP (MODE E / stream) implementations.
