//! Where the ZooKeeper client spawns its tasks: on the current tokio runtime.
//!
//! `zookeeper-client` spawns its session task (and background deletes) through the `spawns`
//! crate, which finds the runtime in a `linkme` list that `spawns-compat` fills with a tokio
//! entry. The linker keeps that entry only when something else pulls `spawns-compat`'s object
//! file into the binary, which depends on how the rest of the program happens to be linked: in
//! a binary where nothing did, every connect panicked with "no spawner". The same entry is
//! registered here, in an object [`ensure_registered`] makes the linker keep.

use linkme::distributed_slice;
use spawns_core::{Compat, Task, COMPATS};

#[distributed_slice(COMPATS)]
static TOKIO: Compat = Compat::Local(tokio_runtime);

/// The spawn function while a tokio runtime is current, else `None`.
fn tokio_runtime() -> Option<fn(Task)> {
    tokio::runtime::Handle::try_current().ok().map(|_| spawn_on_tokio as fn(Task))
}

fn spawn_on_tokio(task: Task) {
    let Task { future, .. } = task;
    // `tokio_runtime` chose this function only while a runtime was current on this thread.
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(Box::into_pin(future));
    }
}

/// Keeps [`TOKIO`] in the binary: called before every connect.
pub(crate) fn ensure_registered() {
    std::hint::black_box(&TOKIO);
}
