//! The ACL every node this backend creates gets.
//!
//! - **With digest credentials**: `auth::cdrwa` (ZooKeeper's `CREATOR_ALL_ACL`), which the server
//!   turns into `digest:{user}:{hash}:cdrwa`: only clients authenticated with the same
//!   credentials may read, write, create children, delete or change the ACL. There is no world
//!   read: job parameters and props may carry secrets, and an operator's console configures the
//!   same digest anyway. This is exactly what ElasticJob-Lite sets with a digest, so both can
//!   share a namespace.
//! - **Without credentials**: `world:anyone:cdrwa` (`OPEN_ACL_UNSAFE`), ZooKeeper's default:
//!   access control is then the network's job.
//!
//! The namespace node and any parents it needs get the same ACL, so with credentials a
//! multi-segment namespace (`/prod/jobs`) claims its parents (`/prod`) too: give each deployment
//! its own top-level node, or create shared parents beforehand with the ACL you want.
//!
//! ACLs are not inherited in ZooKeeper: each node carries its own. Nodes created by other tools
//! keep whatever ACL those tools gave them.

use zookeeper_client::Acls;

/// The ACLs for nodes created by a client with (`true`) or without digest credentials.
pub(crate) fn for_nodes(with_digest: bool) -> Acls<'static> {
    if with_digest {
        Acls::creator_all()
    } else {
        Acls::anyone_all()
    }
}
