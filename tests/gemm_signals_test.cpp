// Signals during matrix products. oneDNN's generated GEMM kernels run with the stack pointer on
// a heap workspace, so the frame of a signal handler delivered meanwhile was written into the
// heap: `attn train` crashed on one Ctrl-C in 10 to 30 (src/linalg/async_signals_held.hpp).
// Without the fix this test aborts ("corrupted size vs. prev_size", 3 runs of 3 on a Zen 3).
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "attn/threads.hpp"
#include "attn/train.hpp"

namespace attn {
namespace {

std::atomic<int64_t> g_handled{0};
extern "C" void count_signal(int) { g_handled.fetch_add(1, std::memory_order_relaxed); }

// A signal storm aimed at the thread that trains: the products inside the training steps of the
// CLI's default model (the shapes that crashed `attn train`) must give the quiet run's losses,
// and the signals still reach their handler, late but all the same.
TEST(GemmSignals, TrainingUnderASignalStormIsTheQuietRun) {
  std::vector<int64_t> tokens(40000);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int64_t>((i * 7919 + i / 13) % 65);
  TrainOptions o;
  o.max_iters = 16;
  set_num_threads(1);
  const auto losses = [&](bool storm) {
    Trainer trainer(GptConfig{}, o, tokens);
    struct sigaction action = {};
    action.sa_handler = count_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    struct sigaction previous = {};
    sigaction(SIGUSR1, &action, &previous);
    const pthread_t training = pthread_self();
    std::atomic<bool> stop{false};
    std::thread sender([&] {
      while (storm && !stop.load()) {
        pthread_kill(training, SIGUSR1);
        std::this_thread::sleep_for(std::chrono::microseconds(10));
      }
    });
    std::vector<float> out;
    while (!trainer.done()) out.push_back(trainer.step().loss);
    stop = true;
    sender.join();
    sigaction(SIGUSR1, &previous, nullptr);
    return out;
  };
  const std::vector<float> quiet = losses(false);
  const int64_t handled_before = g_handled.load();
  EXPECT_EQ(losses(true), quiet);
  EXPECT_GT(g_handled.load() - handled_before, 100);
  set_num_threads(0);
}

}  // namespace
}  // namespace attn
