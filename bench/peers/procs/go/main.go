// Peer: goroutines, channels and sync.WaitGroup, the Go side of suite `procs` (bench/run.py
// builds it with `go build` and runs it with --workers W pinned to W cores; it sets
// GOMAXPROCS = W itself). The workloads, their sizes and units are those of
// bench/procs/weft_procs.cpp (bench/procs/README.md describes them); keep the numbers in step.
//
// Every workload runs once untimed at its smoke size (warm-up), then timed; the timed span runs
// inside the main goroutine (a running task) from before the first spawn to after it learned
// that the last task finished.
//
// spawn_many_*: N goroutines that each call WaitGroup.Done; main waits. ns per task.
// yield_many: 200 goroutines each call runtime.Gosched() 1000 times. ns per yield.
// ping_pong: 1000 pairs of goroutines, each pair two unbuffered channels, 100 round trips of
//   an int64 (checked). ns per round trip = wall time / (pairs * round trips).
// chained_spawn: each goroutine starts the next, 1000 deep; the last sends on a channel main
//   waits on; 100 chains one after the other. ns per spawn.
// fan_out_in: 10k goroutines each compute a value (xorshift of its index) and send it on a
//   channel of capacity N; main sums N values and checks the sum. ns per child.
// skewed_cpu: main starts 10k goroutines that each spin ~10 us (xorshift rounds calibrated at
//   start); ms until all are done.
// wake_latency_p50/p99: main (the outside sender) sends a monotonic timestamp to an idle
//   goroutine on a buffered channel, then sleeps; the goroutine records now - sent. Go has no
//   thread outside its scheduler: main is a goroutine, and time.Sleep below 1 ms sleeps about
//   1.1 ms in Go 1.19 (the runtime's timers wait in epoll with millisecond resolution), so the
//   gap is longer than the other programs' (the receiver is idle all the same).
// idle_cpu: one goroutine blocked on a channel; CPU time (getrusage) of the process over 1 s.

package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type sizes struct {
	spawnMany10k, spawnMany10kReps   int
	spawnMany100k, spawnMany100kReps int
	yieldTasks, yieldsPerTask        int
	yieldReps                        int
	pingPairs, pingRoundTrips        int
	chainDepth, chains               int
	fanChildren, fanReps             int
	skewedTasks                      int
	wakeSamples                      int
	idleMs                           int
}

func sizesFor(smoke bool) sizes {
	if smoke {
		return sizes{1000, 1, 2000, 1, 20, 100, 1, 20, 20, 100, 5, 1000, 1, 200, 200, 100}
	}
	return sizes{10_000, 20, 100_000, 3, 200, 1000, 5, 1000, 100, 1000, 100, 10_000, 20, 10_000,
		10_000, 1000}
}

const spinTarget = 10 * time.Microsecond
const wakeGap = 30 * time.Microsecond

func report(name, unit string, value float64) {
	fmt.Printf("RESULT %s %s %.3f\n", name, unit, value)
}

func fail(format string, values ...any) {
	fmt.Fprintf(os.Stderr, "bench_procs_go: "+format+"\n", values...)
	os.Exit(1)
}

func perUnit(elapsed time.Duration, units int) float64 {
	return float64(elapsed.Nanoseconds()) / float64(units)
}

func spawnMany(tasks int) time.Duration {
	var finished sync.WaitGroup
	start := time.Now()
	finished.Add(tasks)
	for index := 0; index < tasks; index++ {
		go finished.Done()
	}
	finished.Wait()
	return time.Since(start)
}

func yieldMany(tasks, yields int) time.Duration {
	var finished sync.WaitGroup
	start := time.Now()
	finished.Add(tasks)
	for index := 0; index < tasks; index++ {
		go func() {
			for round := 0; round < yields; round++ {
				runtime.Gosched()
			}
			finished.Done()
		}()
	}
	finished.Wait()
	return time.Since(start)
}

func pingPong(pairs, roundTrips int) time.Duration {
	var finished sync.WaitGroup
	start := time.Now()
	finished.Add(pairs)
	for pair := 0; pair < pairs; pair++ {
		ping := make(chan int64)
		pong := make(chan int64)
		go func() {
			for round := 0; round < roundTrips; round++ {
				pong <- <-ping + 1
			}
		}()
		go func() {
			for round := int64(0); round < int64(roundTrips); round++ {
				ping <- round
				if reply := <-pong; reply != round+1 {
					fail("ping_pong: sent %d, got %d back", round, reply)
				}
			}
			finished.Done()
		}()
	}
	finished.Wait()
	return time.Since(start)
}

func chainLink(left int, done chan struct{}) {
	if left == 0 {
		done <- struct{}{}
		return
	}
	go chainLink(left-1, done)
}

func chainedSpawn(depth, chains int) time.Duration {
	done := make(chan struct{})
	start := time.Now()
	for chain := 0; chain < chains; chain++ {
		go chainLink(depth-1, done)
		<-done
	}
	return time.Since(start)
}

func xorshift(state uint64, rounds int64) uint64 {
	for round := int64(0); round < rounds; round++ {
		state ^= state << 13
		state ^= state >> 7
		state ^= state << 17
	}
	return state
}

func childValue(index int) uint64 {
	return xorshift(uint64(index)+1, 4)
}

func fanOutIn(children int) time.Duration {
	values := make(chan uint64, children)
	start := time.Now()
	for index := 0; index < children; index++ {
		go func(index int) { values <- childValue(index) }(index)
	}
	sum := uint64(0)
	for received := 0; received < children; received++ {
		sum += <-values
	}
	elapsed := time.Since(start)
	expected := uint64(0)
	for index := 0; index < children; index++ {
		expected += childValue(index)
	}
	if sum != expected {
		fail("fan_out_in: sum %d, expected %d", sum, expected)
	}
	return elapsed
}

// The xorshift rounds that take spinTarget on this machine: the fastest of several timings.
func calibrateSpin() int64 {
	const probe = 1 << 20
	best := time.Duration(1<<63 - 1)
	sink := uint64(0)
	for attempt := 0; attempt < 5; attempt++ {
		start := time.Now()
		sink += xorshift(uint64(attempt)+1, probe)
		if elapsed := time.Since(start); elapsed < best {
			best = elapsed
		}
	}
	rounds := int64(float64(probe) * float64(spinTarget) / float64(best))
	fmt.Fprintf(os.Stderr, "# skewed_cpu: %v = %d xorshift rounds (sink %d)\n", spinTarget, rounds,
		sink&1)
	return rounds
}

func skewedCPU(tasks int, rounds int64) time.Duration {
	var finished sync.WaitGroup
	var checksum atomic.Uint64
	start := time.Now()
	finished.Add(tasks)
	for index := 0; index < tasks; index++ {
		go func(index int) {
			checksum.Add(xorshift(uint64(index)+1, rounds))
			finished.Done()
		}(index)
	}
	finished.Wait()
	elapsed := time.Since(start)
	fmt.Fprintf(os.Stderr, "# skewed_cpu: checksum %d\n", checksum.Load())
	return elapsed
}

// Latencies in ns, sorted.
func wakeLatency(samples int) []int64 {
	base := time.Now()
	sent := make(chan int64, samples)
	var received atomic.Int64
	latencies := make([]int64, 0, samples)
	done := make(chan struct{})
	go func() {
		for index := 0; index < samples; index++ {
			stamp := <-sent
			latencies = append(latencies, time.Since(base).Nanoseconds()-stamp)
			received.Add(1)
		}
		close(done)
	}()
	for index := 0; index < samples; index++ {
		// The receiver must be idle again (and the workers parked) before the next send.
		time.Sleep(wakeGap)
		for received.Load() < int64(index) {
			time.Sleep(wakeGap)
		}
		sent <- time.Since(base).Nanoseconds()
	}
	<-done
	sort.Slice(latencies, func(a, b int) bool { return latencies[a] < latencies[b] })
	return latencies
}

func cpuTime() time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		fail("getrusage: %v", err)
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

func idleCPU(settle, span time.Duration) time.Duration {
	release := make(chan struct{})
	idled := make(chan struct{})
	go func() {
		<-release
		close(idled)
	}()
	time.Sleep(settle)
	before := cpuTime()
	time.Sleep(span)
	used := cpuTime() - before
	close(release)
	<-idled
	return used
}

func main() {
	smoke := false
	workers := 1
	var only []string
	arguments := os.Args[1:]
	for index := 0; index < len(arguments); index++ {
		switch {
		case arguments[index] == "--smoke":
			smoke = true
		case arguments[index] == "--only" && index+1 < len(arguments):
			index++
			only = strings.Split(arguments[index], ",")
		case arguments[index] == "--workers" && index+1 < len(arguments):
			index++
			parsed, err := strconv.Atoi(arguments[index])
			if err != nil || parsed < 1 {
				fail("--workers wants a positive count, not %q", arguments[index])
			}
			workers = parsed
		default:
			fmt.Fprintf(os.Stderr,
				"usage: %s [--workers W] [--smoke] [--only benchmark[,benchmark...]]\n", os.Args[0])
			os.Exit(2)
		}
	}
	wants := func(name string) bool {
		if len(only) == 0 {
			return true
		}
		for _, wanted := range only {
			if wanted == name {
				return true
			}
		}
		return false
	}
	runtime.GOMAXPROCS(workers)
	s := sizesFor(smoke)
	w := sizesFor(true) // warm-up sizes

	if wants("spawn_many_10k") {
		spawnMany(w.spawnMany10k)
		total := time.Duration(0)
		for rep := 0; rep < s.spawnMany10kReps; rep++ {
			total += spawnMany(s.spawnMany10k)
		}
		report("spawn_many_10k", "ns/task", perUnit(total, s.spawnMany10k*s.spawnMany10kReps))
	}
	if wants("spawn_many_100k") {
		spawnMany(w.spawnMany100k)
		total := time.Duration(0)
		for rep := 0; rep < s.spawnMany100kReps; rep++ {
			total += spawnMany(s.spawnMany100k)
		}
		report("spawn_many_100k", "ns/task", perUnit(total, s.spawnMany100k*s.spawnMany100kReps))
	}
	if wants("yield_many") {
		yieldMany(w.yieldTasks, w.yieldsPerTask)
		total := time.Duration(0)
		for rep := 0; rep < s.yieldReps; rep++ {
			total += yieldMany(s.yieldTasks, s.yieldsPerTask)
		}
		report("yield_many", "ns/yield", perUnit(total, s.yieldTasks*s.yieldsPerTask*s.yieldReps))
	}
	if wants("ping_pong") {
		pingPong(w.pingPairs, w.pingRoundTrips)
		elapsed := pingPong(s.pingPairs, s.pingRoundTrips)
		report("ping_pong", "ns/roundtrip", perUnit(elapsed, s.pingPairs*s.pingRoundTrips))
	}
	if wants("chained_spawn") {
		chainedSpawn(w.chainDepth, w.chains)
		elapsed := chainedSpawn(s.chainDepth, s.chains)
		report("chained_spawn", "ns/spawn", perUnit(elapsed, s.chainDepth*s.chains))
	}
	if wants("fan_out_in") {
		fanOutIn(w.fanChildren)
		total := time.Duration(0)
		for rep := 0; rep < s.fanReps; rep++ {
			total += fanOutIn(s.fanChildren)
		}
		report("fan_out_in", "ns/child", perUnit(total, s.fanChildren*s.fanReps))
	}
	if wants("skewed_cpu") {
		rounds := calibrateSpin()
		skewedCPU(w.skewedTasks, rounds)
		elapsed := skewedCPU(s.skewedTasks, rounds)
		report("skewed_cpu", "ms", float64(elapsed.Nanoseconds())/1e6)
	}
	if wants("wake_latency_p50") || wants("wake_latency_p99") {
		wakeLatency(w.wakeSamples / 2)
		latencies := wakeLatency(s.wakeSamples)
		if wants("wake_latency_p50") {
			report("wake_latency_p50", "ns", float64(latencies[len(latencies)/2]))
		}
		if wants("wake_latency_p99") {
			report("wake_latency_p99", "ns", float64(latencies[len(latencies)*99/100]))
		}
	}
	if wants("idle_cpu") {
		used := idleCPU(time.Duration(s.idleMs/10)*time.Millisecond,
			time.Duration(s.idleMs)*time.Millisecond)
		report("idle_cpu", "ms", float64(used.Nanoseconds())/1e6)
	}
}
