//! Work spread over threads, results taken in order: the shape of every
//! parallel pass. Worker threads take the items in turn and do what needs
//! no shared state; the calling thread takes each result in item order,
//! so what it does with them (the findings, their order, the repairs) is
//! what one thread doing it all would do.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// Runs `work(state, i)` for every `i` in `0..n` on one thread per state
/// and calls `take(i, result)` on this thread for `i` = 0, 1, 2... in
/// order. Workers stay at most `ahead` items past the last one taken (so
/// at most that many results wait). Once `take` returns `false` the
/// remaining items are not worked on (`work` is not called; `take` is not
/// called again). Returns the states as the workers left them.
pub(crate) fn ordered<S, R>(
    n: usize,
    states: Vec<S>,
    ahead: usize,
    work: impl Fn(&mut S, usize) -> R + Sync,
    mut take: impl FnMut(usize, R) -> bool,
) -> Vec<S>
where
    S: Send,
    R: Send,
{
    let ahead = ahead.max(1);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let taken = (Mutex::new(0usize), Condvar::new());
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Option<R>)>();
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for mut state in states {
            let tx = tx.clone();
            let (next, stop, taken, work) = (&next, &stop, &taken, &work);
            handles.push(s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break state;
                }
                {
                    let (lock, cv) = taken;
                    let mut done = lock.lock().unwrap_or_else(|e| e.into_inner());
                    while i >= *done + ahead && !stop.load(Ordering::Relaxed) {
                        done = cv.wait(done).unwrap_or_else(|e| e.into_inner());
                    }
                }
                let r = (!stop.load(Ordering::Relaxed)).then(|| work(&mut state, i));
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
                match rx.recv() {
                    Ok((j, r)) => {
                        waiting.insert(j, r);
                    }
                    // Every worker gone: each index taken is sent, so only
                    // after a panic in `work` (which the scope passes on).
                    Err(_) => break None,
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
            let (lock, cv) = &taken;
            *lock.lock().unwrap_or_else(|e| e.into_inner()) = i + 1;
            cv.notify_all();
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
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
