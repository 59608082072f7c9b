//! # shardcron-registry-zk
//!
//! The ZooKeeper backend of the shardcron registry contract (work in progress): options and the
//! `zk://` URL parser, error mapping, ACLs and node conversions.

#![allow(dead_code)]

mod acl;
mod error;
mod node;
mod options;

pub use options::{Digest, InvalidOptions, RetryPolicy, UrlError, ZkOptions, DEFAULT_PORT, URL_FORM};
pub use zookeeper_client;
