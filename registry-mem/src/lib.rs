//! # shardcron-registry-mem
//!
//! A deterministic in-memory implementation of the shardcron registry contract.
