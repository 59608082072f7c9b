//! A job runner's mailbox: an unbounded queue with one receiver, like tokio's unbounded `mpsc`
//! channel, but sized for 10,000 idle jobs (`docs/targets.md`: < 10 KiB per job).
//!
//! tokio's channel allocates a block of 32 message slots up front (about 2 KiB per job with our
//! event size); this one is a `VecDeque` behind a mutex, empty until a message comes, plus a
//! [`Notify`] to wake the receiver: about 150 bytes per idle job.
//!
//! Semantics kept from `mpsc::unbounded_channel`: messages arrive in the order they were sent;
//! `send` fails (returning the message) once the receiver is gone; `recv` returns `None` once
//! every sender is gone and the queue is drained; receiving takes part in tokio's cooperative
//! budget, so a busy runner yields as it did on the channel.
//!
//! Every message queued counts as work in hand in the scheduler's [`Activity`] until the runner
//! has handled it (or the mailbox is dropped with it): the transaction batcher waits for that
//! work before it commits. While the runner waits for the registry ([`Receiver::pause`]) neither
//! the message it is handling nor those queued behind it count: they cannot be handled before
//! the answer, which may be the batcher's.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::batch::Activity;

/// A queue with more capacity than this is freed once drained, so that a burst of events (a
/// registration, a reshard) does not pin its memory for the rest of the job's life; a job that
/// receives its events one at a time keeps its small buffer.
const KEEP_CAPACITY: usize = 4;

struct Shared<T> {
    queue: Mutex<Queue<T>>,
    ready: Notify,
    senders: AtomicUsize,
    activity: Arc<Activity>,
}

struct Queue<T> {
    messages: VecDeque<T>,
    /// The receiver is gone: messages are refused.
    closed: bool,
    /// The receiver waits for the registry: queued messages do not count as work in hand.
    paused: bool,
}

/// The sending half; cheap to clone.
pub(crate) struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// The receiving half.
pub(crate) struct Receiver<T> {
    shared: Arc<Shared<T>>,
    /// Messages (or work counted as one) taken and not yet handled: several, when a runner
    /// takes the changes queued behind the one it received. Atomic rather than a `Cell` so
    /// that the receiver stays `Sync`, as it was; one task uses it.
    in_hand: AtomicUsize,
}

/// A new mailbox whose queued messages count in `activity`.
pub(crate) fn mailbox<T>(activity: Arc<Activity>) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue { messages: VecDeque::new(), closed: false, paused: false }),
        ready: Notify::new(),
        senders: AtomicUsize::new(1),
        activity,
    });
    (Sender { shared: shared.clone() }, Receiver { shared, in_hand: AtomicUsize::new(0) })
}

impl<T> Sender<T> {
    /// Queues `message`; gives it back if the receiver is gone.
    pub fn send(&self, message: T) -> Result<(), T> {
        {
            let mut queue = self.shared.queue.lock();
            if queue.closed {
                return Err(message);
            }
            queue.messages.push_back(message);
            // Counted before the receiver can take it, so the count never goes below zero.
            if !queue.paused {
                self.shared.activity.begin(1);
            }
        }
        self.shared.ready.notify_one();
        Ok(())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        Sender { shared: self.shared.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last sender: wake the receiver so that it sees the end.
            self.shared.ready.notify_one();
        }
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("mailbox::Sender")
    }
}

impl<T> Receiver<T> {
    /// The next message, waiting for one; `None` once every sender is gone and none is left.
    /// The receiver tells [`Receiver::handled`] once it is done with it (and with any taken
    /// with it).
    pub async fn recv(&mut self) -> Option<T> {
        tokio::task::consume_budget().await;
        loop {
            // A `notify_one` without a waiter leaves a permit, so a message sent between this
            // look and the wait below is not missed.
            if let Some(message) = self.try_recv() {
                return Some(message);
            }
            if self.shared.senders.load(Ordering::Acquire) == 0 {
                // The last sender may have queued a message before it went.
                return self.try_recv();
            }
            self.shared.ready.notified().await;
        }
    }

    /// Work that is no message (a registration) counts as one in hand, until
    /// [`Receiver::handled`].
    pub fn begin_work(&self) {
        self.in_hand.fetch_add(1, Ordering::Relaxed);
        self.shared.activity.begin(1);
    }

    /// What is in hand has been handled: it no longer counts as work in hand.
    pub fn handled(&self) {
        self.shared.activity.end(self.in_hand.swap(0, Ordering::Relaxed));
    }

    /// The receiver starts waiting for the registry in the middle of handling what it holds:
    /// neither that nor the queued messages count until [`Self::resume`].
    pub fn pause(&self) {
        let held = {
            let mut queue = self.shared.queue.lock();
            queue.paused = true;
            queue.messages.len() + self.in_hand.load(Ordering::Relaxed)
        };
        self.shared.activity.end(held);
    }

    /// The registry answered: what is in hand and the queued messages count again.
    pub fn resume(&self) {
        let mut queue = self.shared.queue.lock();
        queue.paused = false;
        // Under the lock: a message sent meanwhile is counted once, here or by its send.
        let held = queue.messages.len() + self.in_hand.load(Ordering::Relaxed);
        self.shared.activity.begin(held);
    }

    /// The next message if one is queued and `wanted` accepts it, without waiting. In hand
    /// until [`Receiver::handled`], as a received one.
    pub fn next_if(&self, wanted: impl FnOnce(&T) -> bool) -> Option<T> {
        let mut queue = self.shared.queue.lock();
        if !queue.messages.front().is_some_and(wanted) {
            return None;
        }
        let message = queue.messages.pop_front();
        if queue.messages.is_empty() && queue.messages.capacity() > KEEP_CAPACITY {
            queue.messages = VecDeque::new();
        }
        self.in_hand.fetch_add(usize::from(message.is_some()), Ordering::Relaxed);
        message
    }

    /// The next message if one is queued, without waiting.
    pub fn try_recv(&self) -> Option<T> {
        self.next_if(|_| true)
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let dropped = {
            let mut queue = self.shared.queue.lock();
            queue.closed = true;
            let counted = !queue.paused;
            (std::mem::take(&mut queue.messages), counted)
        };
        let (dropped, counted) = dropped;
        if counted {
            // And what it held, if it went in the middle of handling it (its task stopped).
            self.shared.activity.end(dropped.len() + self.in_hand.swap(0, Ordering::Relaxed));
        }
        // Dropped outside the lock: a message may hold a reply channel whose drop wakes a task.
        drop(dropped);
    }
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("mailbox::Receiver")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn delivers_in_order_and_ends_with_the_last_sender() {
        let (tx, mut rx) = mailbox::<u32>(Arc::default());
        let tx2 = tx.clone();
        for i in 0..20 {
            assert!(tx.send(i).is_ok());
        }
        drop(tx);
        assert!(tx2.send(20).is_ok());
        for i in 0..=20 {
            assert_eq!(rx.recv().await, Some(i));
        }
        drop(tx2);
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn messages_taken_together_count_until_handled_and_not_while_paused() {
        let activity = Arc::new(Activity::default());
        let (tx, mut rx) = mailbox::<u32>(activity.clone());
        for i in [2, 4, 5, 6] {
            assert!(tx.send(i).is_ok());
        }
        assert_eq!(rx.recv().await, Some(2));
        let even = |n: &u32| n.is_multiple_of(2);
        assert_eq!(rx.next_if(even), Some(4));
        assert_eq!(rx.next_if(even), None, "5 is at the front: nothing behind it is taken");
        assert_eq!(activity.busy(), 4, "two in hand, two queued");
        rx.pause();
        assert_eq!(activity.busy(), 0, "waiting for the registry, with two in hand");
        rx.resume();
        assert_eq!(activity.busy(), 4);
        rx.handled();
        assert_eq!(activity.busy(), 2);
        assert_eq!(rx.recv().await, Some(5));
        assert_eq!(rx.next_if(even), Some(6));
        assert_eq!(rx.next_if(even), None, "empty");
        rx.handled();
        assert_eq!(activity.busy(), 0);
        rx.begin_work();
        assert_eq!(activity.busy(), 1, "a registration counts as one in hand");
        rx.pause();
        assert_eq!(activity.busy(), 0);
        rx.resume();
        rx.handled();
        assert_eq!(activity.busy(), 0);
    }

    #[tokio::test]
    async fn a_receiver_waiting_for_the_registry_and_its_queue_are_no_work_in_hand() {
        let activity = Arc::new(Activity::default());
        let (tx, mut rx) = mailbox::<u32>(activity.clone());
        assert!(tx.send(1).is_ok() && tx.send(2).is_ok());
        assert_eq!(activity.busy(), 2);
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(activity.busy(), 2, "the message in hand still counts");
        rx.pause();
        assert_eq!(activity.busy(), 0);
        assert!(tx.send(3).is_ok());
        assert_eq!(activity.busy(), 0, "queued behind a wait");
        rx.resume();
        assert_eq!(activity.busy(), 3, "the one in hand and the two queued");
        rx.handled();
        drop(rx);
        assert_eq!(activity.busy(), 0, "what the dropped mailbox held no longer counts");
    }

    #[tokio::test]
    async fn wakes_a_waiting_receiver_and_refuses_after_it_is_gone() {
        let (tx, mut rx) = mailbox::<u32>(Arc::default());
        let waiter = tokio::spawn(async move {
            let first = rx.recv().await;
            (first, rx)
        });
        tokio::task::yield_now().await;
        assert!(tx.send(7).is_ok());
        let (first, rx) = waiter.await.expect("the receiving task ran");
        assert_eq!(first, Some(7));
        drop(rx);
        assert_eq!(tx.send(8), Err(8));
    }
}
