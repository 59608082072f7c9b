//! The fire times this thread found last, by schedule and search start.
//!
//! A schedule's next fire after an instant is a pure function of the expression, the zone's
//! rules and the second the search starts at. One job asks it several times per fire (to arm
//! its timer, to take the fire, to judge a catch-up), and every instance of a job computes the
//! same answers: in a simulated cluster, where the instances share a thread, about three
//! searches in four repeat one made just before (a search is a few hundred nanoseconds of
//! calendar arithmetic; at 10 instances × 10 jobs the searches' instructions fell from 59 M
//! to 16 M per seed). A small table per thread, no lock: each runtime worker keeps its own,
//! and an answer is the same whichever thread found it, so runs stay deterministic.

use std::cell::RefCell;

use super::field::CronSpec;
use super::schedule;
use super::zone::{JobTimeZone, Rules};

/// Slots of the table (a power of two): a slot holds the last answer whose key hashed to it.
const SLOTS: usize = 512;

#[derive(Clone, Copy)]
struct Slot {
    spec: CronSpec,
    rules: Rules,
    start_s: i64,
    answer: Option<i64>,
}

thread_local! {
    static TABLE: RefCell<Vec<Option<Slot>>> = const { RefCell::new(Vec::new()) };
}

/// [`schedule::next_fire`], answered from the table when this thread found it already.
pub(crate) fn next_fire(spec: &CronSpec, zone: &JobTimeZone, after_epoch_ms: i64) -> Option<i64> {
    // The search starts at the next whole second: every instant of one second shares its answer.
    let start_s = after_epoch_ms.div_euclid(1000);
    let rules = zone.rules();
    let at = slot_of(spec, start_s);
    let found = TABLE.with(|table| {
        let table = table.borrow();
        table
            .get(at)
            .copied()
            .flatten()
            .filter(|s| s.start_s == start_s && s.spec == *spec && s.rules == rules)
    });
    if let Some(slot) = found {
        return slot.answer;
    }
    let answer = schedule::next_fire(spec, zone, after_epoch_ms);
    TABLE.with(|table| {
        let mut table = table.borrow_mut();
        if table.is_empty() {
            table.resize(SLOTS, None);
        }
        table[at] = Some(Slot { spec: *spec, rules, start_s, answer });
    });
    answer
}

/// The slot of a key: the start second and a few words of the expression, mixed.
fn slot_of(spec: &CronSpec, start_s: i64) -> usize {
    let words = spec.fingerprint();
    let mixed = (start_s as u64 ^ words).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // The top bits, the best mixed: SLOTS is 2^9.
    (mixed >> (64 - 9)) as usize
}

#[cfg(test)]
mod tests {
    use crate::cron::CronSchedule;

    #[test]
    fn answers_from_the_table_are_the_searches_answers() {
        let schedules = [
            CronSchedule::parse("0/2 * * * * ?", "").unwrap(),
            CronSchedule::parse("0 0 2 * * ?", "Europe/Berlin").unwrap(),
            CronSchedule::parse("0 0 2 * * ?", "America/New_York").unwrap(),
            CronSchedule::parse("0 30 1 ? * 1#2", "Asia/Kolkata").unwrap(),
        ];
        // Twice over the same instants: the second pass reads the table.
        for _ in 0..2 {
            for s in &schedules {
                for after in
                    (1_700_000_000_000i64..1_700_000_000_000 + 40 * 86_400_000).step_by(3_599_999)
                {
                    let (spec, zone) = s.parts();
                    let direct = super::schedule::next_fire(spec, zone, after);
                    assert_eq!(s.next_after(after), direct, "{} after {after}", s.expression());
                }
            }
        }
    }
}
