//! Transactions with more writes than one list of etcd's `--max-txn-ops` holds, as one `Txn`
//! whose writes sit in nested `Txn`s.
//!
//! etcd refuses a `Txn` whose compares, success list or failure list is longer than its
//! `--max-txn-ops` (default 128), and it checks a nested `Txn` (a `Txn` in the success list,
//! etcd 3.3 and later) the same way, against what its parent leaves: the limit minus the
//! longest of the parent's three lists. So `k` nested `Txn`s without compares under a parent of
//! `c` compares hold `k × (128 - max(c, k))` writes, all applied by the parent's one commit at
//! one revision, in order, or none of them: 4,096 writes at `c = k = 64`, where the flat form
//! holds 128. The compares cannot be spread that way: every compare on the way down to a write
//! counts against the same budget, so a transaction needs at most 128 of them whatever its
//! shape. (A reshard of a job writes about 4 keys per sharding item and compares about one:
//! a 40-item job needs 166 writes, which the flat form refused on a server of default
//! settings, and which this form commits.)
//!
//! The nesting changes nothing else: the writes are the same ops in the same order (etcd
//! applies a `Txn`'s ops and those of its nested `Txn`s in order, and its watchers see them as
//! one revision's events in that order), and etcd's check that no key is written twice covers
//! the nested `Txn`s too.

use etcd_client::{Compare, Txn, TxnOp as EtcdOp};

/// etcd's default `--max-txn-ops`, the budget assumed: a server with a larger one takes these
/// `Txn`s as well, and one with a smaller one refuses large transactions whatever their form.
pub(crate) const MAX_TXN_OPS: usize = 128;

/// Whether a `Txn` of `compares` compares, `writes` writes and `on_failure` failure ops fits
/// etcd's default limits in some shape.
pub(crate) fn fits(compares: usize, writes: usize, on_failure: usize) -> bool {
    compares.max(writes).max(on_failure) <= MAX_TXN_OPS
        || shape(compares.max(on_failure), writes).is_some()
}

/// One `Txn` committing `writes` if `compares` hold, with `on_failure` run when they do not:
/// flat when every list fits [`MAX_TXN_OPS`], else the writes in nested `Txn`s (see the module
/// documentation). Flat too when no shape [`fits`]: a server whose limit is larger takes it,
/// and one whose limit is not says so.
pub(crate) fn txn(compares: Vec<Compare>, writes: Vec<EtcdOp>, on_failure: Vec<EtcdOp>) -> Txn {
    let (c, w, f) = (compares.len(), writes.len(), on_failure.len());
    let nested = match shape(c.max(f), w) {
        Some((k, per)) if c.max(w).max(f) > MAX_TXN_OPS => {
            let mut nested = Vec::with_capacity(k);
            let mut rest = writes.into_iter().peekable();
            while rest.peek().is_some() {
                nested.push(EtcdOp::txn(
                    Txn::new().and_then(rest.by_ref().take(per).collect::<Vec<_>>()),
                ));
            }
            nested
        }
        _ => writes,
    };
    Txn::new().when(compares).and_then(nested).or_else(on_failure)
}

/// How many nested `Txn`s (`k`) of how many writes each hold `writes` under a parent whose
/// compare or failure list is `fixed` long: the fewest `k` for which `k` times what the parent
/// leaves each of them (the budget less `max(fixed, k)`) reaches `writes`. `None` when none
/// does.
fn shape(fixed: usize, writes: usize) -> Option<(usize, usize)> {
    (1..=MAX_TXN_OPS).find_map(|k| {
        let per = MAX_TXN_OPS.checked_sub(fixed.max(k))?;
        (per > 0 && k * per >= writes).then(|| (k, writes.div_ceil(k)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape chosen fits etcd's check: the parent's lists within the budget, each nested
    /// `Txn` within what the parent leaves, every write placed.
    #[test]
    fn every_shape_fits_the_servers_check() {
        for fixed in 0..=MAX_TXN_OPS {
            for writes in 1..=5_000 {
                let Some((k, per)) = shape(fixed, writes) else {
                    continue;
                };
                assert!(fixed.max(k) <= MAX_TXN_OPS, "{fixed} {writes}");
                assert!(per <= MAX_TXN_OPS - fixed.max(k), "{fixed} {writes}: {k} x {per}");
                assert!(k * per >= writes, "{fixed} {writes}: {k} x {per}");
            }
        }
    }

    #[test]
    fn room_shrinks_with_the_compares() {
        // A reshard of 40 items: about 45 compares, 166 writes.
        assert_eq!(shape(45, 166), Some((2, 83)));
        // The most writes any shape holds under 64 compares.
        assert!(shape(64, 64 * 64).is_some());
        assert!(shape(64, 64 * 64 + 1).is_none());
        // 127 compares leave one write per nested `Txn`, of which there may be 127; 128
        // compares leave none.
        assert_eq!(shape(127, 1), Some((1, 1)));
        assert_eq!(shape(127, 127), Some((127, 1)));
        assert_eq!(shape(127, 128), None);
        assert_eq!(shape(128, 1), None);
    }

    #[test]
    fn failure_branches_are_not_nested() {
        assert!(fits(0, 300, 64));
        assert!(!fits(0, 300, 128));
        assert!(!fits(0, 1, 129));
        assert!(fits(128, 128, 128), "the flat form");
        assert!(!fits(129, 1, 0));
    }
}
