//! The few messages nobody may miss (a failing item, a job that can never fire, a Ctrl-C stop)
//! reach standard error even when the application installed no `tracing` subscriber.
//!
//! shardcron logs through `tracing`, which drops every event while no subscriber is installed:
//! a new user whose job fails would see nothing at all. So these messages are emitted as
//! `tracing` events as usual, and additionally written to stderr when, at the point of the
//! event, no subscriber is there to receive them. Once an application installs a subscriber
//! (global or scoped), nothing is written to stderr directly any more: the subscriber decides.

use std::sync::Once;

use tracing::subscriber::NoSubscriber;

/// Whether a `tracing` event emitted here, now, would go nowhere: no global subscriber and no
/// scoped one on this thread.
pub(crate) fn no_subscriber() -> bool {
    tracing::dispatcher::get_default(|dispatch| dispatch.is::<NoSubscriber>())
}

/// Writes `level` and the line `text()` to stderr if no subscriber receives events here; the
/// first such line is followed by one hint saying how to route them.
pub(crate) fn eprint_if_unobserved(level: tracing::Level, text: impl FnOnce() -> String) {
    if !no_subscriber() {
        return;
    }
    eprintln!("{level:>5} shardcron: {}", text());
    static HINT: Once = Once::new();
    HINT.call_once(|| {
        eprintln!(
            "      (shardcron writes this to stderr because no `tracing` subscriber is \
             installed; install one, e.g. `tracing_subscriber::fmt::init()`, to route, filter or \
             silence its messages)"
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scoped_subscriber_counts_as_observed() {
        // No global subscriber in this test binary's thread by default (the log capture tests
        // install one globally, so only the scoped case is certain here).
        let subscriber = tracing::subscriber::NoSubscriber::new();
        tracing::subscriber::with_default(subscriber, || assert!(no_subscriber()));
        let dispatch = tracing::Dispatch::new(Collector);
        tracing::dispatcher::with_default(&dispatch, || assert!(!no_subscriber()));
    }

    struct Collector;

    impl tracing::Subscriber for Collector {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, _: &tracing::Event<'_>) {}
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }
}
