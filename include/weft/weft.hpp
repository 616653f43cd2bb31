// weft: the whole public API.
#pragma once

#include "weft/error.hpp"
#include "weft/io/stream.hpp"
#include "weft/io/tcp.hpp"
#include "weft/io/dns.hpp"
#include "weft/io/file.hpp"
#include "weft/io/fs.hpp"
#include "weft/io/process.hpp"
#include "weft/reactor/fd.hpp"
#include "weft/reactor/signals.hpp"
#include "weft/reactor/thread.hpp"
#include "weft/reactor/thread_pool.hpp"
#include "weft/reactor/trigger.hpp"
#include "weft/sched/scheduler.hpp"
#include "weft/sched/task.hpp"
#include "weft/sched/this_coroutine.hpp"
#include "weft/sched/timeout.hpp"
