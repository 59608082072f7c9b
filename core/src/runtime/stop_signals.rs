//! Ctrl-C (SIGINT) and, on Unix, SIGTERM as one stream of stop requests, for
//! [`Scheduler::shutdown_on_ctrl_c`](super::Scheduler::shutdown_on_ctrl_c).

use crate::error::{Error, Result};

/// The installed handlers. While they exist, these signals no longer end the process.
pub(super) struct StopSignals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    pub(super) fn install() -> Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let failed = |source| Error::Signals { source };
            Ok(StopSignals {
                interrupt: signal(SignalKind::interrupt()).map_err(failed)?,
                terminate: signal(SignalKind::terminate()).map_err(failed)?,
            })
        }
        #[cfg(not(unix))]
        Ok(StopSignals {})
    }

    /// Waits for the next stop signal.
    pub(super) async fn next(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            biased;
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
        #[cfg(not(unix))]
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
