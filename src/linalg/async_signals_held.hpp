// Asynchronous signals held back on this thread while oneDNN's code runs. Its generated f32
// GEMM kernels (before oneDNN 3.11; Debian 12 ships 2.6) point the stack pointer at a workspace
// on the heap while they run, so a signal delivered meanwhile to a thread that has a handler
// (`attn train`'s Ctrl-C flag, Python's own SIGINT handler, a sampling profiler) has its frame
// written by the kernel into that heap block and whatever lies next to it: the heap corruption
// that one Ctrl-C in 10 to 30 gave `attn train` (uxlfoundation/oneDNN#4845). Held back, such a
// signal waits for the product to end (a few ms at most) and is then delivered as usual.
// Synchronous signals (a fault inside the call) are not held: they cannot wait. Internal.
#pragma once

#include <pthread.h>
#include <signal.h>

namespace attn::detail {

class AsyncSignalsHeld {
 public:
  AsyncSignalsHeld() {
    sigset_t held;
    sigfillset(&held);  // glibc leaves out its own internal signals
    for (const int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) {
      sigdelset(&held, fault);
    }
    pthread_sigmask(SIG_BLOCK, &held, &previous_);
  }
  ~AsyncSignalsHeld() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  AsyncSignalsHeld(const AsyncSignalsHeld&) = delete;
  AsyncSignalsHeld& operator=(const AsyncSignalsHeld&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace attn::detail
