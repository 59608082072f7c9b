//! Tests of the strategies as a whole: documented examples, the ElasticJob oracle table, the
//! lookup, and properties over random inputs.

mod oracle;
mod props;
mod table;

use super::Assignment;

/// `["s1=0,1,6", ...]` in the given instance order, for compact expectations.
pub(super) fn render(assignment: &Assignment, order: &[&str]) -> Vec<String> {
    order
        .iter()
        .map(|id| {
            let items = assignment.items(id).unwrap_or_default();
            let items: Vec<String> = items.iter().map(u32::to_string).collect();
            format!("{id}={}", items.join(","))
        })
        .collect()
}
