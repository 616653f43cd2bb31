<?php
// Peer: PHP 8 Fibers (run by bench/run.py as `php -d memory_limit=-1 fiber.php`). PHP has no
// scheduler or timers of its own, so only the benchmarks that need neither are here.
//
// yield_switch: main resumes one fiber that suspends in a loop. Fibers are asymmetric: every
// resume and every suspend is a switch, so ns per switch = timed wall time / (2 x rounds).
//
// spawn_run_complete: `new Fiber(empty closure)` + start(), which runs it to the end at once;
// ns = wall time / count.
//
// suspended_memory: N fibers started and parked in Fiber::suspend(); RSS from /proc/self/statm
// before creating them and once all are suspended; bytes per fiber = RSS delta / N. Every fiber
// has its own mmap'ed C stack with a guard page (two mappings), so vm.max_map_count (65530 by
// default) caps PHP near 32k fibers: N is capped at 20000 here and the result is still per fiber.

const SUSPENDED_CAP = 20000;

function sizes_for(bool $smoke): array {
    // Keep in step with bench/common/bench_util.hpp.
    return $smoke
        ? ['switches' => 100000, 'warmup_switches' => 10000, 'spawn_batches' => 10,
           'spawn_batch' => 1000, 'suspended' => 10000]
        : ['switches' => 10000000, 'warmup_switches' => 100000, 'spawn_batches' => 1000,
           'spawn_batch' => 1000, 'suspended' => 1000000];
}

function report(string $name, string $unit, float $value): void {
    printf("RESULT %s %s %.3f\n", $name, $unit, $value);
}

// Resident pages (second field of /proc/self/statm) times the page size; plain PHP has no
// sysconf, so the page size is asked of getconf once, at startup.
function page_size(): int {
    static $size = null;
    if ($size === null) {
        $size = intval(shell_exec('getconf PAGESIZE 2>/dev/null') ?? '') ?: 4096;
    }
    return $size;
}

function resident_bytes(): int {
    $fields = explode(' ', trim(file_get_contents('/proc/self/statm')));
    return intval($fields[1]) * page_size();
}

function time_switches(int $switches): float {
    $rounds = intdiv($switches, 2);
    $fiber = new Fiber(function (): void {
        while (true) {
            Fiber::suspend();
        }
    });
    $start = hrtime(true);
    $fiber->start();  // the first resume: main -> fiber, and its first suspend
    for ($round = 1; $round < $rounds; ++$round) {
        $fiber->resume();
    }
    return hrtime(true) - $start;
}

$smoke = false;
$only = [];
for ($index = 1; $index < $argc; ++$index) {
    if ($argv[$index] === '--smoke') {
        $smoke = true;
    } elseif ($argv[$index] === '--only' && $index + 1 < $argc) {
        $only = explode(',', $argv[++$index]);
    } else {
        fwrite(STDERR, "usage: fiber.php [--smoke] [--only benchmark[,benchmark...]]\n");
        exit(2);
    }
}
$wants = fn(string $name): bool => count($only) === 0 || in_array($name, $only, true);
$sizes = sizes_for($smoke);
page_size();

// Memory first: later benchmarks leave the allocator's pools grown.
if ($wants('suspended_memory')) {
    $count = min($sizes['suspended'], SUSPENDED_CAP);
    $fibers = [];
    $before = resident_bytes();
    for ($index = 0; $index < $count; ++$index) {
        $fiber = new Fiber(function (): void {
            Fiber::suspend();
        });
        $fiber->start();
        $fibers[] = $fiber;
    }
    $after = resident_bytes();
    foreach ($fibers as $fiber) {
        $fiber->resume();
    }
    $fibers = [];
    report('suspended_memory', 'B', ($after - $before) / $count);
}

if ($wants('yield_switch')) {
    time_switches($sizes['warmup_switches']);
    $elapsed = time_switches($sizes['switches']);
    report('yield_switch', 'ns', $elapsed / $sizes['switches']);
}

if ($wants('spawn_run_complete')) {
    $count = $sizes['spawn_batches'] * $sizes['spawn_batch'];
    $empty = function (): void {};
    $start = hrtime(true);
    for ($index = 0; $index < $count; ++$index) {
        $fiber = new Fiber($empty);
        $fiber->start();
    }
    report('spawn_run_complete', 'ns', (hrtime(true) - $start) / $count);
}
