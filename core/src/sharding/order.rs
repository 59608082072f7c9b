//! The order in which instances are handed to a strategy.
//!
//! ElasticJob reads the live instances as the children of `/{job}/instances`, which its ZooKeeper
//! registry returns sorted with `Comparator.reverseOrder()`: **descending** by `String.compareTo`.
//! Every strategy result depends on that order (AVG gives the leftover items to the first
//! instances; ODEVITY and ROUND_ROBIN permute it), so the runtime sorts the same way to give the
//! same assignment as an ElasticJob cluster with the same members.

use super::java::java_string_cmp;

/// Sorts instance ids into sharding order: descending by Java `String.compareTo`, as ElasticJob
/// does before calling its strategies.
///
/// ```
/// use shardcron_core::sharding::sort_for_sharding;
/// let mut ids = vec!["10.0.0.1@-@7", "10.0.0.3@-@7", "10.0.0.2@-@7"];
/// sort_for_sharding(&mut ids);
/// assert_eq!(ids, ["10.0.0.3@-@7", "10.0.0.2@-@7", "10.0.0.1@-@7"]);
/// ```
pub fn sort_for_sharding<S: AsRef<str>>(instances: &mut [S]) {
    instances.sort_by(|a, b| java_string_cmp(b.as_ref(), a.as_ref()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_descending_by_utf16_units() {
        let mut ids = vec![
            "192.168.1.2@-@100".to_string(),
            "192.168.1.10@-@100".to_string(),
            "\u{1F600}".to_string(),
            "\u{FF01}".to_string(),
            "192.168.1.2@-@99".to_string(),
        ];
        sort_for_sharding(&mut ids);
        // "2@-@99" > "2@-@100" and "2" > "10" as strings, as in Java; U+FF01 above U+1F600.
        assert_eq!(
            ids,
            [
                "\u{FF01}",
                "\u{1F600}",
                "192.168.1.2@-@99",
                "192.168.1.2@-@100",
                "192.168.1.10@-@100",
            ]
        );
    }
}
