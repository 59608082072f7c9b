//! What the facade's process-driving tests share.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc;

/// Collects a pipe's lines on a channel.
pub fn lines_of(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}
