#include "runtime/kernels/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace etc::rt::kernels {
namespace {

thread_local bool t_in_parallel = false;

int default_threads() {
  if (const char* env = std::getenv("ETC_NUM_THREADS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 1) return static_cast<int>(std::min<long>(v, 64));
  }
  unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp<unsigned>(hw, 1, 64));
}

std::atomic<int> g_threads{0};  // 0: not decided yet

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// One parallel region: chunk indices handed out through an atomic counter. Shared with the
// workers, so a worker that wakes late only ever sees a finished job (never a newer one).
struct Job {
  const std::function<void(int)>* task = nullptr;
  int chunks = 0;
  std::atomic<int> next{0};
  std::atomic<int> done{0};

  void work() {
    t_in_parallel = true;
    for (;;) {
      const int c = next.fetch_add(1);
      if (c >= chunks) break;
      (*task)(c);
      done.fetch_add(1, std::memory_order_release);
    }
    t_in_parallel = false;
  }
};

// Workers spin briefly after each region (kernels come back to back, and waking a sleeping
// thread costs tens of microseconds on a VM), then sleep on a condition variable.
class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i)
      threads_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_.store(true);
    }
    wake_.notify_all();
    for (std::thread& t : threads_)
      t.join();
  }
  int workers() const { return static_cast<int>(threads_.size()); }

  void run(int chunks, const std::function<void(int)>& task) {
    std::lock_guard<std::mutex> region(region_mu_);
    auto job = std::make_shared<Job>();
    job->task = &task;
    job->chunks = chunks;
    {
      std::lock_guard<std::mutex> g(mu_);
      job_ = job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    job->work();
    while (job->done.load(std::memory_order_acquire) < chunks)
      cpu_relax();
    std::lock_guard<std::mutex> g(mu_);
    job_.reset();
  }

 private:
  static constexpr int kSpinIterations = 20000;  // roughly 50-100 microseconds

  void loop() {
    uint64_t seen = 0;
    for (;;) {
      int spins = 0;
      while (generation_.load(std::memory_order_acquire) == seen && !stop_.load()) {
        if (++spins < kSpinIterations) {
          cpu_relax();
          continue;
        }
        std::unique_lock<std::mutex> g(mu_);
        wake_.wait(g, [&] { return stop_.load() || generation_.load() != seen; });
      }
      if (stop_.load()) return;
      std::shared_ptr<Job> job;
      {
        std::lock_guard<std::mutex> g(mu_);
        seen = generation_.load();
        job = job_;
      }
      if (job) job->work();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex region_mu_;  // one parallel region at a time
  std::mutex mu_;         // guards job_; wake_ waits on it
  std::condition_variable wake_;
  std::shared_ptr<Job> job_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
};

std::mutex g_pool_mu;
std::unique_ptr<Pool> g_pool;

Pool* pool_for(int threads) {
  std::lock_guard<std::mutex> g(g_pool_mu);
  if (!g_pool || g_pool->workers() != threads - 1) {
    g_pool.reset();
    g_pool = std::make_unique<Pool>(threads - 1);
  }
  return g_pool.get();
}

}  // namespace

int num_threads() {
  int t = g_threads.load();
  if (t == 0) {
    t = default_threads();
    g_threads.store(t);
  }
  return t;
}

void set_num_threads(int n) {
  g_threads.store(n <= 0 ? default_threads() : std::min(n, 64));
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int threads = t_in_parallel ? 1 : num_threads();
  const int64_t chunks =
      std::min<int64_t>(threads, std::max<int64_t>(1, n / std::max<int64_t>(grain, 1)));
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  const std::function<void(int)> task = [&](int c) {
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    if (begin < end) fn(begin, end);
  };
  pool_for(threads)->run(static_cast<int>(chunks), task);
}

}  // namespace etc::rt::kernels
