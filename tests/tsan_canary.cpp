// Proof that the ThreadSanitizer build detects races: two threads increment one plain int. Run
// only in the tsan build, where ctest expects it to fail (WILL_FAIL); if TSan stopped
// reporting — a flag lost, a runtime not linked — this test, not the suite, would say so.
#include <thread>

namespace {
int counter = 0;  // deliberately not atomic
}

int main() {
  std::thread a([] {
    for (int i = 0; i < 100000; ++i) ++counter;
  });
  std::thread b([] {
    for (int i = 0; i < 100000; ++i) ++counter;
  });
  a.join();
  b.join();
  return 0;  // TSan's report makes the exit status non-zero (66)
}
