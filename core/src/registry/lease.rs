//! The local lease deadline of a session (see the contract, "Sessions" and "Lease", in
//! [`crate::registry`]): how long a client may go on trusting a session it has not heard from.
//!
//! The numbers, and why:
//!
//! - A server counts a session's timeout from when it *received* the client's last renewal; the
//!   client counts from when it *sent* it, which is earlier. So, with both clocks running at
//!   the same rate, the local deadline (timeout after the send) comes no later than the
//!   server's expiry (timeout after the receipt).
//! - Clocks do not run at the same rate. [`MAX_CLOCK_DRIFT_PPM`] bounds how much faster the
//!   server's clock may run than the client's: over a timeout `T` the client's timer may then
//!   fire up to `T × drift` late, as seen by the server.
//! - Between the deadline and the server's expiry the holder needs time to stop its work.
//!
//! The margin subtracted from the timeout covers both. Its default, [`default_margin`], is a
//! tenth of the session timeout: 1 % for the drift bound (ten times what an unsynchronised
//! quartz clock drifts, far more than an NTP-disciplined one may slew) and 9 % for stopping
//! (360 ms of a 4 s session, 5.4 s of ElasticJob's 60 s default). [`check_margin`] accepts
//! anything from the drift bound up to half the timeout.
//!
//! [`LeaseClock`] is the bookkeeping the real backends share; the in-memory backend keeps the
//! same rule on its injected clock.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// The largest difference in clock rate between a client and its registry server that the
/// lease deadline tolerates with the smallest margin [`check_margin`] accepts, in parts per
/// million (10 000 ppm = 1 %).
pub const MAX_CLOCK_DRIFT_PPM: u32 = 10_000;

/// The default drift margin for a session timeout: a tenth of it (see the module docs).
pub fn default_margin(session_timeout: Duration) -> Duration {
    session_timeout / 10
}

/// The smallest margin that still covers [`MAX_CLOCK_DRIFT_PPM`] over `session_timeout`.
pub fn drift_allowance(session_timeout: Duration) -> Duration {
    session_timeout.mul_f64(f64::from(MAX_CLOCK_DRIFT_PPM) / 1e6)
}

/// Checks a configured margin against the session timeout it is for; the error says why and
/// what range would do.
pub fn check_margin(session_timeout: Duration, margin: Duration) -> Result<(), String> {
    let low = drift_allowance(session_timeout);
    let high = session_timeout / 2;
    if margin < low || margin > high {
        return Err(format!(
            "a lease margin of {margin:?} does not fit a session timeout of {session_timeout:?}: \
             it must be at least {low:?} (the {} % clock drift bound) and at most {high:?} (half \
             the timeout, else the lease is lost between two renewals)",
            MAX_CLOCK_DRIFT_PPM / 10_000
        ));
    }
    Ok(())
}

/// The margin used with a session timeout the server granted: the configured one (or the
/// default), but never more than half of what was granted, which may be less than asked for.
pub fn effective_margin(granted: Duration, configured: Option<Duration>) -> Duration {
    configured.unwrap_or_else(|| default_margin(granted)).min(granted / 2)
}

/// One client's lease bookkeeping: for the session in use, the send time of the last renewal
/// the server answered, and from it the local deadline. Pure: callers pass the instants in.
#[derive(Debug)]
pub struct LeaseClock {
    configured_margin: Option<Duration>,
    state: Mutex<Option<Lease>>,
}

#[derive(Debug, Clone, Copy)]
struct Lease {
    session: u64,
    timeout: Duration,
    margin: Duration,
    last_sent: Instant,
}

impl LeaseClock {
    /// A clock with the configured margin (`None`: [`default_margin`] of each granted timeout).
    pub fn new(configured_margin: Option<Duration>) -> Self {
        LeaseClock { configured_margin, state: Mutex::new(None) }
    }

    /// A new session, granted `timeout`, whose opening request was sent at `sent`.
    pub fn start(&self, session: u64, timeout: Duration, sent: Instant) {
        let margin = effective_margin(timeout, self.configured_margin);
        *self.state.lock() = Some(Lease { session, timeout, margin, last_sent: sent });
    }

    /// No session any more (expired, closed, lost and being replaced).
    pub fn stop(&self) {
        *self.state.lock() = None;
    }

    /// The server answered a renewal of `session` that was sent at `sent`. Answers of another
    /// session, and answers older than the last one counted, change nothing.
    pub fn contact(&self, session: u64, sent: Instant) {
        if let Some(lease) = self.state.lock().as_mut() {
            if lease.session == session && sent > lease.last_sent {
                lease.last_sent = sent;
            }
        }
    }

    /// The local deadline of the session in use, if there is one.
    pub fn deadline(&self) -> Option<Instant> {
        self.state.lock().map(|l| l.last_sent + l.timeout.saturating_sub(l.margin))
    }

    /// The session the clock counts for, if any.
    pub fn session(&self) -> Option<u64> {
        self.state.lock().map(|l| l.session)
    }

    /// The margin in use for the current session.
    pub fn margin(&self) -> Option<Duration> {
        self.state.lock().map(|l| l.margin)
    }

    /// Whether the deadline of the session in use has passed at `now`.
    pub fn passed(&self, now: Instant) -> bool {
        self.deadline().is_some_and(|d| now >= d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_margin_fits_its_own_check() {
        for secs in [2, 4, 60, 600] {
            let t = Duration::from_secs(secs);
            assert_eq!(check_margin(t, default_margin(t)), Ok(()));
        }
        let t = Duration::from_secs(4);
        assert!(check_margin(t, Duration::from_millis(10)).is_err(), "below the drift bound");
        assert!(check_margin(t, Duration::from_secs(3)).is_err(), "more than half");
        assert_eq!(
            effective_margin(Duration::from_secs(4), Some(Duration::from_secs(9))).as_secs(),
            2
        );
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_follows_the_latest_answered_send_of_the_session() {
        let clock = LeaseClock::new(None);
        let t0 = Instant::now();
        assert_eq!(clock.deadline(), None);
        clock.start(7, Duration::from_secs(4), t0);
        assert_eq!(clock.deadline(), Some(t0 + Duration::from_millis(3600)));
        clock.contact(7, t0 + Duration::from_secs(1));
        clock.contact(7, t0 + Duration::from_millis(500)); // a late answer of an older send
        clock.contact(8, t0 + Duration::from_secs(3)); // another session's
        assert_eq!(clock.deadline(), Some(t0 + Duration::from_millis(4600)));
        assert!(!clock.passed(t0 + Duration::from_millis(4599)));
        assert!(clock.passed(t0 + Duration::from_millis(4600)));
        clock.stop();
        assert!(!clock.passed(t0 + Duration::from_secs(60)));
    }
}
