// Built against an installed weft by scripts/test-install.
#include <weft/weft.hpp>

#include <cstdio>

int main() {
  int finished = weft::run([] {
    int count = 0;
    auto a = weft::spawn([&] { ++count; });
    auto b = weft::spawn([&] {
      weft::yield();
      ++count;
    });
    auto c = weft::spawn([] { return 1; });
    a.await();
    b.await();
    return count + c.await();
  });
  std::printf("consumer: %d coroutines finished\n", finished);
  return finished == 3 ? 0 : 1;
}
