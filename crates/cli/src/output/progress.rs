//! A spinner on stderr for work that takes more than a second. It stays
//! silent for the first second so quick runs print nothing extra, and it is
//! never drawn when stderr is not a terminal (logs and CI stay clean).

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const DELAY: Duration = Duration::from_secs(1);
const TICK: Duration = Duration::from_millis(100);
const FRAMES: [char; 4] = ['|', '/', '-', '\\'];

/// A running progress indicator; dropping it clears the line.
#[derive(Debug)]
pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Start showing `message` (if `enabled` and stderr is a terminal).
    pub fn start(message: &str, enabled: bool) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        if !enabled || !std::io::stderr().is_terminal() {
            return Self { stop, thread: None };
        }
        let flag = Arc::clone(&stop);
        let message = message.to_owned();
        let thread = std::thread::Builder::new()
            .name("progress".to_owned())
            .spawn(move || spin(&message, &flag))
            .ok();
        Self { stop, thread }
    }
}

fn spin(message: &str, stop: &AtomicBool) {
    let started = Instant::now();
    let mut drawn = false;
    let mut frame = 0;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(TICK);
        let elapsed = started.elapsed();
        if elapsed < DELAY {
            continue;
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{} {message} ({:.0} s)",
            FRAMES[frame % FRAMES.len()],
            elapsed.as_secs_f64()
        );
        let _ = err.flush();
        drawn = true;
        frame += 1;
    }
    if drawn {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_progress_spawns_nothing() {
        let p = Progress::start("work", false);
        assert!(p.thread.is_none());
    }
}
