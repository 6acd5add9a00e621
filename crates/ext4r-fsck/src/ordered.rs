//! Work spread over threads, results taken in order: the shape of every
//! parallel pass. Worker threads take the items in turn and do what needs
//! no shared state; the calling thread takes each result in item order,
//! so what it does with them (the findings, their order, the repairs) is
//! what one thread doing it all would do.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// Runs `work(state, i)` for every `i` in `0..n`, one state per thread,
/// and calls `take(i, result)` on this thread for `i` = 0, 1, 2... in
/// order. This thread is one of the workers: it keeps the last state and,
/// whenever the result it is to take next is not ready, works on the next
/// item itself rather than wait; the other states go to threads of their
/// own. (With a waiting merger beside its workers there was one thread
/// more than the processors it was given, and every result woke it: on
/// two processors a fifth of the CPU of a parallel fsck went to those
/// wake-ups and the switches they forced.) Workers stay at most `ahead`
/// items past the last one taken (so at most that many results wait).
/// Once `take` returns `false` the remaining items are not worked on
/// (`work` is not called; `take` is not called again). Returns the states
/// as the workers left them, this thread's last.
pub(crate) fn ordered<S, R>(
    n: usize,
    mut states: Vec<S>,
    ahead: usize,
    work: impl Fn(&mut S, usize) -> R + Sync,
    mut take: impl FnMut(usize, R) -> bool,
) -> Vec<S>
where
    S: Send,
    R: Send,
{
    let ahead = ahead.max(1);
    let Some(mut mine) = states.pop() else {
        return states;
    };
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let taken = Taken {
        done: Mutex::new(0),
        cv: Condvar::new(),
        sleepers: AtomicUsize::new(0),
    };
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Option<R>)>();
    std::thread::scope(|s| {
        // A panic here (in `work` or `take`) must not leave a worker
        // asleep in the window: the scope waits for every worker before
        // it passes the panic on.
        let _wake = WakeOnPanic {
            stop: &stop,
            taken: &taken,
        };
        let mut handles = Vec::new();
        for mut state in states {
            let tx = tx.clone();
            let (next, stop, taken, work) = (&next, &stop, &taken, &work);
            handles.push(s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break state;
                }
                taken.wait_below(i, ahead, stop);
                let r = if stop.load(Ordering::Relaxed) {
                    None
                } else {
                    // A panic in `work` still answers for item `i` (and
                    // stops the rest) before it ends this thread: the
                    // merging thread would wait for the item, and the
                    // other workers for the merging thread, for ever.
                    let run = std::panic::AssertUnwindSafe(|| work(&mut state, i));
                    match std::panic::catch_unwind(run) {
                        Ok(r) => Some(r),
                        Err(panic) => {
                            stop.store(true, Ordering::Relaxed);
                            let _ = tx.send((i, None));
                            std::panic::resume_unwind(panic);
                        }
                    }
                };
                if tx.send((i, r)).is_err() {
                    break state;
                }
            }));
        }
        drop(tx);
        let mut waiting = std::collections::BTreeMap::new();
        let mut go = true;
        for i in 0..n {
            let r = loop {
                if let Some(r) = waiting.remove(&i) {
                    break r;
                }
                let gone = match rx.try_recv() {
                    Ok((j, r)) => {
                        waiting.insert(j, r);
                        continue;
                    }
                    Err(std::sync::mpsc::TryRecvError::Empty) => false,
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => true,
                };
                // Nothing to take yet: the next item is worked on here,
                // if it is within the window (`i` items are taken).
                let k = next.load(Ordering::Relaxed);
                if k < n
                    && k < i + ahead
                    && next
                        .compare_exchange(k, k + 1, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    let r = (!stop.load(Ordering::Relaxed)).then(|| work(&mut mine, k));
                    waiting.insert(k, r);
                    continue;
                }
                if gone {
                    // Every worker gone and the item not worked on here:
                    // only after a panic in `work` (which the scope
                    // passes on).
                    break None;
                }
                if let Ok((j, r)) = rx.recv() {
                    waiting.insert(j, r);
                }
            };
            if go {
                match r {
                    Some(r) => go = take(i, r),
                    None => go = false,
                }
                if !go {
                    stop.store(true, Ordering::Relaxed);
                }
            }
            taken.advance(i + 1);
        }
        let mut states: Vec<S> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect();
        states.push(mine);
        states
    })
}

/// Stops the work and wakes the workers when this thread unwinds.
struct WakeOnPanic<'a> {
    stop: &'a AtomicBool,
    taken: &'a Taken,
}

impl Drop for WakeOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.stop.store(true, Ordering::Relaxed);
            let _done = self.taken.done.lock().unwrap_or_else(|e| e.into_inner());
            self.taken.cv.notify_all();
        }
    }
}

/// How many results the merging thread has taken, for the workers kept
/// within `ahead` of it.
struct Taken {
    done: Mutex<usize>,
    cv: Condvar,
    /// Workers asleep on `cv`: a wake-up is a system call, made only when
    /// one is.
    sleepers: AtomicUsize,
}

impl Taken {
    /// Waits until item `i` is within `ahead` of the taken ones (or the
    /// work stops).
    fn wait_below(&self, i: usize, ahead: usize, stop: &AtomicBool) {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while i >= *done + ahead && !stop.load(Ordering::Relaxed) {
            self.sleepers.fetch_add(1, Ordering::Relaxed);
            done = self.cv.wait(done).unwrap_or_else(|e| e.into_inner());
            self.sleepers.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// `count` results are taken: sleeping workers wake to look again.
    fn advance(&self, count: usize) {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        *done = count;
        // A worker counts itself asleep under the lock held here, so one
        // that saw the old count is counted by now.
        if self.sleepers.load(Ordering::Relaxed) > 0 {
            self.cv.notify_all();
        }
        drop(done);
    }
}

/// [`ordered`] on one thread per state when there are two or more states
/// and items; otherwise every item on this thread, each worked on and
/// taken in turn (no thread is spawned: `-m 1`). Returns the states.
pub(crate) fn ordered_or_here<S, R>(
    n: usize,
    mut states: Vec<S>,
    ahead: usize,
    work: impl Fn(&mut S, usize) -> R + Sync,
    mut take: impl FnMut(usize, R) -> bool,
) -> Vec<S>
where
    S: Send,
    R: Send,
{
    if states.len() > 1 && n > 1 {
        return ordered(n, states, ahead, work, take);
    }
    if let Some(state) = states.first_mut() {
        for i in 0..n {
            if !take(i, work(state, i)) {
                break;
            }
        }
    }
    states
}

#[cfg(test)]
mod tests {
    use super::ordered;

    #[test]
    fn results_come_in_order_whatever_the_threads() {
        for threads in 1..=4 {
            let mut seen = Vec::new();
            ordered(
                100,
                vec![(); threads],
                3,
                |_, i| {
                    // Uneven work, so that workers finish out of order.
                    std::thread::sleep(std::time::Duration::from_micros((i % 7) as u64 * 50));
                    i * 2
                },
                |i, r| {
                    seen.push((i, r));
                    true
                },
            );
            assert_eq!(seen, (0..100).map(|i| (i, i * 2)).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_panic_on_any_thread_is_passed_on_not_a_hang() {
        // Item 5 panics on whichever thread takes it (this one works
        // items too); a window of 1 keeps the other worker waiting on
        // this thread. Before the wake-up on unwinding, a panic here left
        // it asleep and the scope waiting for it.
        for threads in 1..=3 {
            for _ in 0..5 {
                let r = std::panic::catch_unwind(|| {
                    ordered(
                        50,
                        vec![(); threads],
                        1,
                        |_, i| {
                            assert!(i != 5, "item 5");
                            i
                        },
                        |_, _| true,
                    )
                });
                assert!(r.is_err());
            }
        }
    }

    #[test]
    fn a_stop_ends_the_work() {
        let worked = std::sync::atomic::AtomicUsize::new(0);
        let mut taken = 0;
        ordered(
            1000,
            vec![(); 2],
            4,
            |_, _| {
                worked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            },
            |i, ()| {
                taken += 1;
                i < 9
            },
        );
        assert_eq!(taken, 10);
        // At most `ahead` past the stop, give or take the race per worker.
        assert!(worked.into_inner() <= 10 + 4 + 2);
    }
}
