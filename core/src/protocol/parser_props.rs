//! Properties of every node parser over arbitrary bytes: a value or a typed [`Garbage`] naming
//! the node and a shortened value, never a panic; and what parses, re-encoded, parses the same.

use proptest::collection::vec;
use proptest::prelude::*;

use super::garbage::{owner_problem, read_nodes, unreadable};
use super::records::{
    parse_flag, parse_instance_id, parse_owner, parse_time, Assigned, FailoverEntry, Garbage,
    InstanceRecord, Ledger, ServerStatus,
};
use super::view::View;
use crate::config::{store, KnownTypes};
use crate::layout::{Detailed, ItemNode, JobPaths};

fn config() -> ProptestConfig {
    ProptestConfig { cases: 512, ..ProptestConfig::default() }
}

/// Arbitrary bytes, and bytes close to what the nodes hold (digits, spaces, newlines, ids,
/// keywords, YAML punctuation), which reach deeper into the parsers.
fn data() -> impl Strategy<Value = Vec<u8>> {
    let near = vec(
        prop_oneof![
            Just("0".to_owned()),
            Just("1700000000000".to_owned()),
            Just("-".to_owned()),
            Just(" ".to_owned()),
            Just("\n".to_owned()),
            Just("interrupted".to_owned()),
            Just("missed".to_owned()),
            Just("previous".to_owned()),
            Just("owed".to_owned()),
            Just("10.0.0.1@-@7".to_owned()),
            Just("@-@".to_owned()),
            Just("jobInstanceId: ".to_owned()),
            Just("serverIp: ".to_owned()),
            Just("ENABLED".to_owned()),
            Just("DISABLED".to_owned()),
            Just("jobName: j\nshardingTotalCount: ".to_owned()),
            Just("cron: '0/5 * * * * ?'\n".to_owned()),
            Just("[{".to_owned()),
            "\\PC{0,6}",
        ],
        0..12,
    )
    .prop_map(|parts| parts.concat().into_bytes());
    prop_oneof![vec(any::<u8>(), 0..64), near, vec(any::<u8>(), 0..4096)]
}

/// The garbage names the node and shows a shortened value.
fn well_formed(g: &Garbage, path: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(&g.path, path);
    prop_assert!(g.value.chars().count() <= 52, "{}", g.value);
    prop_assert!(!g.reason.is_empty());
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_parser_gives_a_value_or_typed_garbage(data in data()) {
        let p = "/j/node";
        let checks: Vec<Option<Garbage>> = vec![
            InstanceRecord::parse(p, &data).err(),
            parse_instance_id(p, &data, "an id").err(),
            parse_owner(p, &data).err(),
            ServerStatus::parse(p, &data).err(),
            parse_flag(p, &data).err(),
            parse_time(p, &data, "a time").err(),
            FailoverEntry::parse(p, &data).err(),
            Ledger::parse(p, &data).err(),
            Assigned::parse(p, &data).err(),
        ];
        for g in checks.iter().flatten() {
            well_formed(g, p)?;
        }
        // The config's parser says why in one line.
        if let Err(error) = store::parse_stored("j", &data, &KnownTypes::default()) {
            prop_assert!(!error.to_string().is_empty());
        }
    }

    #[test]
    fn the_assignment_records_raise_time_reads_as_the_whole_record(data in data()) {
        let p = "/j/node";
        prop_assert_eq!(
            Assigned::raised_ms(p, &data),
            Assigned::parse(p, &data).map(|record| record.raised_ms)
        );
    }

    #[test]
    fn what_parses_reencodes_to_the_same(data in data()) {
        let p = "/j/node";
        if let Ok(entry) = FailoverEntry::parse(p, &data) {
            prop_assert_eq!(FailoverEntry::parse(p, &entry.encode()), Ok(entry));
        }
        if let Ok(ledger) = Ledger::parse(p, &data) {
            prop_assert_eq!(Ledger::parse(p, &ledger.encode()), Ok(ledger));
        }
        if let Ok(record) = Assigned::parse(p, &data) {
            prop_assert_eq!(Assigned::parse(p, record.encode().as_bytes()), Ok(record));
        }
        if let Ok(id) = parse_instance_id(p, &data, "an id") {
            prop_assert_eq!(parse_instance_id(p, id.as_bytes(), "an id"), Ok(id));
        }
    }

    #[test]
    fn any_node_of_a_job_holding_anything_is_classified(data in data(), n in 0u32..4) {
        let paths = JobPaths::new("j");
        let mut view = View::default();
        let nodes = [
            paths.config(),
            paths.instance("10.0.0.1@-@1"),
            paths.server("10.0.0.1"),
            paths.item_node(n, ItemNode::Instance),
            paths.item_node(n, ItemNode::Running),
            paths.item_node(n, ItemNode::Misfire),
            paths.leader_instance(),
            paths.sharding_necessary(),
            paths.failover_item(n),
            paths.ledger("10.0.0.1@-@1"),
            paths.assigned(),
            paths.detail(Detailed::Misfire(n)),
            paths.detail(Detailed::Flag),
            paths.detail(Detailed::Entry(n)),
        ];
        for path in &nodes {
            view.wrote(path, &data, 0, false);
        }
        for node in read_nodes(&view, &paths) {
            if let Some(g) = unreadable(&view, &paths, &node) {
                prop_assert!(g.path.starts_with("/j/"));
                prop_assert!(g.value.chars().count() <= 52);
            }
        }
        // An owner node holding anything names a live instance, or says why not.
        let live = owner_problem(&view, &paths, n).is_none();
        let names_it = std::str::from_utf8(&data).is_ok_and(|t| t.trim() == "10.0.0.1@-@1");
        prop_assert_eq!(live, names_it);
    }
}
