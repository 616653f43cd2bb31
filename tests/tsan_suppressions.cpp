// ThreadSanitizer suppressions for the tsan build (TSan calls __tsan_default_suppressions at
// start-up). Each entry says why it is not a race in weft.
//
// libuv closes descriptors with a raw close system call (uv__close_nocancel, to dodge pthread
// cancellation), which TSan's close() interceptor never sees. When two threads start event loops
// at once (net::tcp_server's workers), a descriptor libuv made with pipe2 in one thread and
// closed that way can be handed out again by eventfd in the other, and TSan reports the reuse of
// the number as a race on its descriptor bookkeeping (uv_pipe against uv_async_init); no memory
// is shared.
#if defined(WEFT_SANITIZE_THREAD)
extern "C" const char* __tsan_default_suppressions() { return "race:uv_pipe\n"; }
#endif
