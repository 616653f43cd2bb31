//! Peer: Tokio's multi-thread runtime, the Rust side of suite `procs` (bench/run.py builds it
//! with `cargo build --release --offline` against Debian's crate sources and runs it with
//! --workers W, pinned to W cores). The runtime has W worker threads and the timer driver
//! (no I/O driver: nothing here does I/O). The workloads, their sizes and units are those of
//! bench/procs/weft_procs.cpp (bench/procs/README.md describes them); keep the numbers in step.
//!
//! Every workload runs once untimed at its smoke size (warm-up), then timed; the timed span
//! runs inside one spawned root task (a running task on a worker) from before the first spawn
//! to after it learned that the last task finished.
//!
//! spawn_many_*: N tokio::spawn of an empty task; the root awaits every JoinHandle. ns per task.
//! yield_many: 200 tasks each await tokio::task::yield_now() 1000 times. ns per yield.
//! ping_pong: 1000 pairs of tasks, each pair two tokio::sync::mpsc channels of capacity 1, 100
//!   round trips of an i64 (checked). ns per round trip = wall time / (pairs * round trips).
//! chained_spawn: each task spawns the next, 1000 deep; the last sends on an unbounded mpsc
//!   channel the root waits on; 100 chains one after the other. ns per spawn.
//! fan_out_in: 10k tasks each compute a value (xorshift of its index) and send it on an
//!   unbounded mpsc channel; the root sums N values and checks the sum. ns per child.
//! skewed_cpu: the root spawns 10k tasks that each spin ~10 us (xorshift rounds calibrated at
//!   start) and awaits them; ms until all are done.
//! wake_latency_p50/p99: the main thread (outside the runtime) ticks a relay task every 30 us
//!   (and not before the last sample was taken); the relay sends a monotonic timestamp to an
//!   idle task on an unbounded mpsc channel; the task records now - sent: the wake-up of an idle
//!   task by a send inside the runtime. 10k samples; ns.
//! wake_latency_external_p50/p99: the same, but the main thread sends the timestamp itself (a
//!   send from outside the runtime).
//! idle_cpu: one task awaiting a oneshot; CPU time (getrusage) of the process over 1 s.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio::sync::{mpsc, oneshot};

struct Sizes {
    spawn_many_10k: usize,
    spawn_many_10k_reps: usize,
    spawn_many_100k: usize,
    spawn_many_100k_reps: usize,
    yield_tasks: usize,
    yields_per_task: usize,
    yield_reps: usize,
    ping_pairs: usize,
    ping_round_trips: usize,
    chain_depth: usize,
    chains: usize,
    fan_children: usize,
    fan_reps: usize,
    skewed_tasks: usize,
    wake_samples: usize,
    idle_ms: u64,
}

fn sizes_for(smoke: bool) -> Sizes {
    if smoke {
        Sizes {
            spawn_many_10k: 1000,
            spawn_many_10k_reps: 1,
            spawn_many_100k: 2000,
            spawn_many_100k_reps: 1,
            yield_tasks: 20,
            yields_per_task: 100,
            yield_reps: 1,
            ping_pairs: 20,
            ping_round_trips: 20,
            chain_depth: 100,
            chains: 5,
            fan_children: 1000,
            fan_reps: 1,
            skewed_tasks: 200,
            wake_samples: 200,
            idle_ms: 100,
        }
    } else {
        Sizes {
            spawn_many_10k: 10_000,
            spawn_many_10k_reps: 20,
            spawn_many_100k: 100_000,
            spawn_many_100k_reps: 3,
            yield_tasks: 200,
            yields_per_task: 1000,
            yield_reps: 5,
            ping_pairs: 1000,
            ping_round_trips: 100,
            chain_depth: 1000,
            chains: 100,
            fan_children: 10_000,
            fan_reps: 20,
            skewed_tasks: 10_000,
            wake_samples: 10_000,
            idle_ms: 1000,
        }
    }
}

const SPIN_TARGET: Duration = Duration::from_micros(10);
const WAKE_GAP: Duration = Duration::from_micros(30);

fn report(name: &str, unit: &str, value: f64) {
    println!("RESULT {} {} {:.3}", name, unit, value);
}

fn fail(message: &str) -> ! {
    eprintln!("bench_procs_tokio: {}", message);
    std::process::exit(1);
}

fn per_unit(elapsed: Duration, units: usize) -> f64 {
    elapsed.as_nanos() as f64 / units as f64
}

// Runs `root` as a task on the runtime's workers and returns its output.
fn in_task<F, T>(runtime: &Runtime, root: F) -> T
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    match runtime.block_on(runtime.spawn(root)) {
        Ok(value) => value,
        Err(error) => fail(&format!("the root task failed: {}", error)),
    }
}

fn spawn_many(runtime: &Runtime, tasks: usize) -> Duration {
    in_task(runtime, async move {
        let start = Instant::now();
        let mut handles = Vec::with_capacity(tasks);
        for _ in 0..tasks {
            handles.push(tokio::spawn(async {}));
        }
        for handle in handles {
            handle.await.unwrap();
        }
        start.elapsed()
    })
}

fn yield_many(runtime: &Runtime, tasks: usize, yields: usize) -> Duration {
    in_task(runtime, async move {
        let start = Instant::now();
        let mut handles = Vec::with_capacity(tasks);
        for _ in 0..tasks {
            handles.push(tokio::spawn(async move {
                for _ in 0..yields {
                    tokio::task::yield_now().await;
                }
            }));
        }
        for handle in handles {
            handle.await.unwrap();
        }
        start.elapsed()
    })
}

fn ping_pong(runtime: &Runtime, pairs: usize, round_trips: usize) -> Duration {
    in_task(runtime, async move {
        let start = Instant::now();
        let mut handles = Vec::with_capacity(2 * pairs);
        for _ in 0..pairs {
            let (ping_sender, mut ping_receiver) = mpsc::channel::<i64>(1);
            let (pong_sender, mut pong_receiver) = mpsc::channel::<i64>(1);
            handles.push(tokio::spawn(async move {
                for _ in 0..round_trips {
                    let value = ping_receiver.recv().await.unwrap();
                    pong_sender.send(value + 1).await.unwrap();
                }
            }));
            handles.push(tokio::spawn(async move {
                for round in 0..round_trips as i64 {
                    ping_sender.send(round).await.unwrap();
                    let reply = pong_receiver.recv().await.unwrap();
                    if reply != round + 1 {
                        fail(&format!("ping_pong: sent {}, got {} back", round, reply));
                    }
                }
            }));
        }
        for handle in handles {
            handle.await.unwrap();
        }
        start.elapsed()
    })
}

fn chain_link(left: usize, done: mpsc::UnboundedSender<()>) {
    tokio::spawn(async move {
        if left == 0 {
            done.send(()).unwrap();
        } else {
            chain_link(left - 1, done);
        }
    });
}

fn chained_spawn(runtime: &Runtime, depth: usize, chains: usize) -> Duration {
    in_task(runtime, async move {
        let (done_sender, mut done_receiver) = mpsc::unbounded_channel::<()>();
        let start = Instant::now();
        for _ in 0..chains {
            chain_link(depth - 1, done_sender.clone());
            done_receiver.recv().await.unwrap();
        }
        start.elapsed()
    })
}

fn xorshift(mut state: u64, rounds: u64) -> u64 {
    for _ in 0..rounds {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
    }
    state
}

fn child_value(index: usize) -> u64 {
    xorshift(index as u64 + 1, 4)
}

fn fan_out_in(runtime: &Runtime, children: usize) -> Duration {
    let (elapsed, sum) = in_task(runtime, async move {
        let (value_sender, mut value_receiver) = mpsc::unbounded_channel::<u64>();
        let start = Instant::now();
        for index in 0..children {
            let value_sender = value_sender.clone();
            tokio::spawn(async move {
                value_sender.send(child_value(index)).unwrap();
            });
        }
        let mut sum = 0u64;
        for _ in 0..children {
            sum = sum.wrapping_add(value_receiver.recv().await.unwrap());
        }
        (start.elapsed(), sum)
    });
    let expected = (0..children).fold(0u64, |total, index| total.wrapping_add(child_value(index)));
    if sum != expected {
        fail(&format!("fan_out_in: sum {}, expected {}", sum, expected));
    }
    elapsed
}

// The xorshift rounds that take SPIN_TARGET on this machine: the fastest of several timings.
fn calibrate_spin() -> u64 {
    const PROBE: u64 = 1 << 20;
    let mut best = Duration::MAX;
    let mut sink = 0u64;
    for attempt in 0..5u64 {
        let start = Instant::now();
        sink = sink.wrapping_add(xorshift(attempt + 1, PROBE));
        best = best.min(start.elapsed());
    }
    let rounds = (PROBE as f64 * SPIN_TARGET.as_nanos() as f64 / best.as_nanos() as f64) as u64;
    eprintln!(
        "# skewed_cpu: {:?} = {} xorshift rounds (sink {})",
        SPIN_TARGET,
        rounds,
        sink & 1
    );
    rounds
}

fn skewed_cpu(runtime: &Runtime, tasks: usize, rounds: u64) -> Duration {
    let checksum = Arc::new(AtomicU64::new(0));
    let shared = checksum.clone();
    let elapsed = in_task(runtime, async move {
        let start = Instant::now();
        let mut handles = Vec::with_capacity(tasks);
        for index in 0..tasks {
            let checksum = shared.clone();
            handles.push(tokio::spawn(async move {
                checksum.fetch_add(xorshift(index as u64 + 1, rounds), Ordering::Relaxed);
            }));
        }
        for handle in handles {
            handle.await.unwrap();
        }
        start.elapsed()
    });
    eprintln!(
        "# skewed_cpu: checksum {}",
        checksum.load(Ordering::Relaxed)
    );
    elapsed
}

// Latencies in ns, sorted. inside: the main thread ticks a relay task, which sends the
// timestamp (a send inside the runtime); otherwise the main thread sends it.
fn wake_latency(runtime: &Runtime, samples: usize, inside: bool) -> Vec<u64> {
    let base = Instant::now();
    let received = Arc::new(AtomicUsize::new(0));
    let (stamp_sender, mut stamp_receiver) = mpsc::unbounded_channel::<u64>();
    let (tick_sender, mut tick_receiver) = mpsc::unbounded_channel::<()>();
    let relay = if inside {
        let relayed = stamp_sender.clone();
        Some(runtime.spawn(async move {
            for _ in 0..samples {
                tick_receiver.recv().await.unwrap();
                relayed.send(base.elapsed().as_nanos() as u64).unwrap();
            }
        }))
    } else {
        None
    };
    let counted = received.clone();
    let receiver = runtime.spawn(async move {
        let mut latencies = Vec::with_capacity(samples);
        for _ in 0..samples {
            let stamp = stamp_receiver.recv().await.unwrap();
            latencies.push(base.elapsed().as_nanos() as u64 - stamp);
            counted.fetch_add(1, Ordering::Release);
        }
        latencies
    });
    for index in 0..samples {
        // The receiver must be idle again (and the workers parked) before the next send.
        std::thread::sleep(WAKE_GAP);
        while received.load(Ordering::Acquire) < index {
            std::thread::sleep(WAKE_GAP);
        }
        if inside {
            tick_sender.send(()).unwrap();
        } else {
            stamp_sender.send(base.elapsed().as_nanos() as u64).unwrap();
        }
    }
    let mut latencies = match runtime.block_on(receiver) {
        Ok(latencies) => latencies,
        Err(error) => fail(&format!("wake_latency: the receiver failed: {}", error)),
    };
    if let Some(relay) = relay {
        if let Err(error) = runtime.block_on(relay) {
            fail(&format!("wake_latency: the relay failed: {}", error));
        }
    }
    latencies.sort_unstable();
    latencies
}

fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            fail("getrusage failed");
        }
        usage
    };
    let micros = |time: libc::timeval| time.tv_sec as u64 * 1_000_000 + time.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

fn idle_cpu(runtime: &Runtime, settle: Duration, span: Duration) -> Duration {
    let (release_sender, release_receiver) = oneshot::channel::<()>();
    let idler = runtime.spawn(async move {
        let _ = release_receiver.await;
    });
    std::thread::sleep(settle);
    let before = cpu_time();
    std::thread::sleep(span);
    let used = cpu_time() - before;
    release_sender.send(()).unwrap();
    runtime.block_on(idler).unwrap();
    used
}

fn main() {
    let mut smoke = false;
    let mut workers = 1usize;
    let mut only: Vec<String> = Vec::new();
    let arguments: Vec<String> = std::env::args().collect();
    let mut index = 1;
    while index < arguments.len() {
        match arguments[index].as_str() {
            "--smoke" => smoke = true,
            "--only" if index + 1 < arguments.len() => {
                index += 1;
                only = arguments[index].split(',').map(str::to_owned).collect();
            }
            "--workers" if index + 1 < arguments.len() => {
                index += 1;
                workers = match arguments[index].parse::<usize>() {
                    Ok(count) if count >= 1 => count,
                    _ => fail(&format!(
                        "--workers wants a positive count, not {:?}",
                        arguments[index]
                    )),
                };
            }
            _ => {
                eprintln!(
                    "usage: {} [--workers W] [--smoke] [--only benchmark[,benchmark...]]",
                    arguments[0]
                );
                std::process::exit(2);
            }
        }
        index += 1;
    }
    let wants = |name: &str| only.is_empty() || only.iter().any(|wanted| wanted == name);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .unwrap_or_else(|error| fail(&format!("cannot build the runtime: {}", error)));
    let s = sizes_for(smoke);
    let w = sizes_for(true); // warm-up sizes

    if wants("spawn_many_10k") {
        spawn_many(&runtime, w.spawn_many_10k);
        let total: Duration = (0..s.spawn_many_10k_reps)
            .map(|_| spawn_many(&runtime, s.spawn_many_10k))
            .sum();
        report(
            "spawn_many_10k",
            "ns/task",
            per_unit(total, s.spawn_many_10k * s.spawn_many_10k_reps),
        );
    }
    if wants("spawn_many_100k") {
        spawn_many(&runtime, w.spawn_many_100k);
        let total: Duration = (0..s.spawn_many_100k_reps)
            .map(|_| spawn_many(&runtime, s.spawn_many_100k))
            .sum();
        report(
            "spawn_many_100k",
            "ns/task",
            per_unit(total, s.spawn_many_100k * s.spawn_many_100k_reps),
        );
    }
    if wants("yield_many") {
        yield_many(&runtime, w.yield_tasks, w.yields_per_task);
        let total: Duration = (0..s.yield_reps)
            .map(|_| yield_many(&runtime, s.yield_tasks, s.yields_per_task))
            .sum();
        report(
            "yield_many",
            "ns/yield",
            per_unit(total, s.yield_tasks * s.yields_per_task * s.yield_reps),
        );
    }
    if wants("ping_pong") {
        ping_pong(&runtime, w.ping_pairs, w.ping_round_trips);
        let elapsed = ping_pong(&runtime, s.ping_pairs, s.ping_round_trips);
        report(
            "ping_pong",
            "ns/roundtrip",
            per_unit(elapsed, s.ping_pairs * s.ping_round_trips),
        );
    }
    if wants("chained_spawn") {
        chained_spawn(&runtime, w.chain_depth, w.chains);
        let elapsed = chained_spawn(&runtime, s.chain_depth, s.chains);
        report(
            "chained_spawn",
            "ns/spawn",
            per_unit(elapsed, s.chain_depth * s.chains),
        );
    }
    if wants("fan_out_in") {
        fan_out_in(&runtime, w.fan_children);
        let total: Duration = (0..s.fan_reps)
            .map(|_| fan_out_in(&runtime, s.fan_children))
            .sum();
        report(
            "fan_out_in",
            "ns/child",
            per_unit(total, s.fan_children * s.fan_reps),
        );
    }
    if wants("skewed_cpu") {
        let rounds = calibrate_spin();
        skewed_cpu(&runtime, w.skewed_tasks, rounds);
        let elapsed = skewed_cpu(&runtime, s.skewed_tasks, rounds);
        report("skewed_cpu", "ms", elapsed.as_nanos() as f64 / 1e6);
    }
    for (inside, prefix) in [(true, "wake_latency"), (false, "wake_latency_external")] {
        let p50 = format!("{}_p50", prefix);
        let p99 = format!("{}_p99", prefix);
        if !wants(&p50) && !wants(&p99) {
            continue;
        }
        wake_latency(&runtime, w.wake_samples / 2, inside);
        let latencies = wake_latency(&runtime, s.wake_samples, inside);
        if wants(&p50) {
            report(&p50, "ns", latencies[latencies.len() / 2] as f64);
        }
        if wants(&p99) {
            report(&p99, "ns", latencies[latencies.len() * 99 / 100] as f64);
        }
    }
    if wants("idle_cpu") {
        let used = idle_cpu(
            &runtime,
            Duration::from_millis(s.idle_ms / 10),
            Duration::from_millis(s.idle_ms),
        );
        report("idle_cpu", "ms", used.as_nanos() as f64 / 1e6);
    }
}
