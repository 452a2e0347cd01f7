#include "support/stack.h"

#include <pthread.h>

#include <cstdint>
#include <exception>
#include <stdexcept>

namespace gradc {
namespace {

constexpr size_t kSegment = size_t(256) << 20;
thread_local uintptr_t stack_low = 0;  // the lowest usable address of this thread's stack

uintptr_t find_stack_low() {
  pthread_attr_t attr;
  void* addr = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
  }
  return uintptr_t(addr);
}

struct Job {
  const std::function<void()>* f;
  std::exception_ptr error;
};

void* run_job(void* p) {
  Job* job = static_cast<Job*>(p);
  stack_low = find_stack_low();
  try {
    (*job->f)();
  } catch (...) {
    job->error = std::current_exception();
  }
  return nullptr;
}

}  // namespace

size_t stack_left() {
  if (!stack_low) stack_low = find_stack_low();
  uintptr_t here = uintptr_t(__builtin_frame_address(0));
  return here > stack_low ? size_t(here - stack_low) : 0;
}

void on_new_stack(const std::function<void()>& f) {
  Job job{&f, nullptr};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kSegment);
  pthread_t t;
  int rc = pthread_create(&t, &attr, run_job, &job);
  pthread_attr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("out of memory for a stack segment (the program nests too deeply)");
  pthread_join(t, nullptr);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace gradc
