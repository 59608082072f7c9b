//! Leader latch: the member at the head of the queue leads.

use std::sync::Arc;

use async_trait::async_trait;

use super::queue::{sequence, Queue};
use crate::registry::{path, CoordinatorRegistry, LeaderLatch, Leadership, Result};

/// A [`LeaderLatch`] over ephemeral-sequential nodes `{dir}/{participant}-latch-{seq}`.
///
/// Leadership is reported lost as soon as the session is suspended (it may expire at any moment
/// and another member would then lead), and regained on reconnection if the node survived. After
/// an expiry the member stands in the queue again with a new node.
#[derive(Debug)]
pub struct SequentialLatch {
    queue: Queue,
    /// Leadership as last reported by `changed`.
    reported: bool,
}

impl SequentialLatch {
    /// Joins the election at `dir` as `participant`.
    pub async fn join(
        registry: Arc<dyn CoordinatorRegistry>,
        dir: &str,
        participant: &str,
    ) -> Result<Self> {
        let queue = Queue::join(registry, dir, participant, "latch").await?;
        Ok(SequentialLatch { queue, reported: false })
    }
}

#[async_trait]
impl LeaderLatch for SequentialLatch {
    fn is_leader(&self) -> bool {
        self.reported && self.queue.at_head()
    }

    async fn changed(&mut self) -> Result<Leadership> {
        loop {
            let leading = self.queue.at_head();
            if leading != self.reported {
                self.reported = leading;
                return Ok(if leading { Leadership::Acquired } else { Leadership::Lost });
            }
            self.queue.step().await?;
        }
    }

    async fn leader(&mut self) -> Result<Option<String>> {
        current_leader(self.queue.registry.clone(), self.queue.dir.clone()).await
    }

    async fn leave(mut self: Box<Self>) -> Result<()> {
        self.queue.leave().await
    }
}

/// The participant id at the head of the queue under `dir`, read from the registry.
async fn current_leader(
    registry: Arc<dyn CoordinatorRegistry>,
    dir: String,
) -> Result<Option<String>> {
    let names = match registry.children(&dir).await {
        Ok(names) => names,
        Err(e) if e.is_no_node() => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut members: Vec<(u64, &String)> =
        names.iter().filter_map(|n| sequence(n).map(|s| (s, n))).collect();
    members.sort();
    // The head may vanish between the two reads; the next one in line then leads.
    for (_, name) in members {
        if let Some(node) = registry.get(&path::join(&dir, name)).await? {
            return Ok(Some(node.text().into_owned()));
        }
    }
    Ok(None)
}
