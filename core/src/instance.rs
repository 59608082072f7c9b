//! Who this process is in the cluster: the instance id `{ip}@-@{pid}` that ElasticJob uses,
//! with an optional suffix where several instances share one process (tests, the simulator).

use std::fmt;
use std::sync::Arc;

use crate::protocol::records::InstanceRecord;
use crate::registry::{path, RegistryError};

/// The separator ElasticJob puts between the parts of an instance id.
pub const DELIMITER: &str = "@-@";

/// One scheduler's identity: the server IP it registers under and its instance id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceId {
    /// Shared: every job's protocol holds both (`JobProtocol::new`), and a process may run
    /// thousands of jobs.
    ip: Arc<str>,
    id: Arc<str>,
}

impl InstanceId {
    /// `{ip}@-@{pid}`, or `{ip}@-@{pid}@-@{suffix}` when a suffix is given.
    pub fn new(ip: &str, pid: u32, suffix: Option<&str>) -> Result<Self, RegistryError> {
        let id = match suffix {
            Some(s) => format!("{ip}{DELIMITER}{pid}{DELIMITER}{s}"),
            None => format!("{ip}{DELIMITER}{pid}"),
        };
        // Both end up as registry node names: reject what a path segment cannot hold.
        path::validate_segment(ip)?;
        path::validate_segment(&id)?;
        Ok(InstanceId { ip: ip.into(), id: id.into() })
    }

    /// The server IP part.
    pub fn ip(&self) -> &str {
        &self.ip
    }

    /// The full id, as stored under `instances/`.
    pub fn as_str(&self) -> &str {
        &self.id
    }

    /// The server IP part, shared.
    pub(crate) fn shared_ip(&self) -> Arc<str> {
        self.ip.clone()
    }

    /// The full id, shared.
    pub(crate) fn shared_id(&self) -> Arc<str> {
        self.id.clone()
    }

    /// The data of this instance's `instances/{id}` node, exactly as ElasticJob writes it.
    pub fn node_data(&self) -> String {
        InstanceRecord { job_instance_id: self.id.to_string(), server_ip: self.ip.to_string() }
            .encode()
    }
}

/// The server IP of an instance id (the part before the first delimiter).
pub fn ip_of(instance: &str) -> &str {
    instance.split(DELIMITER).next().unwrap_or(instance)
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_elasticjob() {
        let i = InstanceId::new("10.0.0.7", 4242, None).unwrap();
        assert_eq!(i.as_str(), "10.0.0.7@-@4242");
        assert_eq!(i.node_data(), "jobInstanceId: 10.0.0.7@-@4242\nserverIp: 10.0.0.7\n");
        let s = InstanceId::new("10.0.0.7", 1, Some("b")).unwrap();
        assert_eq!(s.as_str(), "10.0.0.7@-@1@-@b");
        assert_eq!(ip_of(s.as_str()), "10.0.0.7");
        assert!(InstanceId::new("10.0/0", 1, None).is_err());
        assert!(InstanceId::new("ip", 1, Some("a/b")).is_err());
    }
}
