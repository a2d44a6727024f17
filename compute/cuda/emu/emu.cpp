// emu.cpp: a CUDA driver for tests on machines without a GPU. It
// implements the driver entry points package cuda resolves, runs every
// launch at once on the calling thread, and runs each CUDA thread of a
// block as a fiber: __syncthreads and the warp collectives switch fibers,
// so the kernels' own sources (compiled as host C++) run unchanged. Streams
// are in order by construction; a captured graph is the list of its
// launches. Kernels are found by name in a registry the build generates.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include <sys/mman.h>

#include "emu_shim.h"
#include "emu_reg.h"

extern "C" __attribute__((visibility("hidden"))) void emu_swap(void** save, void* to);
asm(R"(
.text
.globl emu_swap
.hidden emu_swap
.type emu_swap,@function
emu_swap:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
)");

namespace {

enum State { RUN, SYNC, WARP, DONE };

struct Fiber {
  void* sp;
  State state;
  dim3 tid;
  int op, arg;
  unsigned long long val, res;
  char* stack;
};

const size_t kStack = 128 << 10;

struct Emu {
  std::vector<Fiber> fibers;
  Fiber* cur = nullptr;
  void* sched = nullptr;
  const std::function<void()>* body = nullptr;
  std::vector<char> dyn;
  std::map<std::string, emu::Entry>* reg = nullptr;
};
Emu E;

void fiber_entry() {
  Fiber* f = E.cur;
  (*E.body)();
  f->state = DONE;
  emu_swap(&f->sp, E.sched);
  abort();
}

void start(Fiber& f) {
  if (!f.stack) {
    f.stack = (char*)mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (f.stack == MAP_FAILED) abort();
  }
  uintptr_t* sp = (uintptr_t*)(f.stack + kStack);
  *--sp = 0;
  *--sp = (uintptr_t)&fiber_entry;
  for (int i = 0; i < 6; ++i) *--sp = 0;
  f.sp = sp;
  f.state = RUN;
}

void resume(Fiber& f) {
  E.cur = &f;
  emu_swap(&E.sched, f.sp);
  E.cur = nullptr;
}

// warp_collective completes the warp op the live lanes of [w0, w1) posted.
void warp_collective(int w0, int w1) {
  int op = -1;
  for (int i = w0; i < w1; ++i)
    if (E.fibers[i].state == WARP) {
      if (op >= 0 && E.fibers[i].op != op) {
        fprintf(stderr, "emu: divergent warp collectives (%d, %d)\n", op, E.fibers[i].op);
        abort();
      }
      op = E.fibers[i].op;
    }
  unsigned long long ballot = 0;
  for (int i = w0; i < w1; ++i)
    if (E.fibers[i].state == WARP && E.fibers[i].val) ballot |= 1ull << (i - w0);
  for (int i = w0; i < w1; ++i) {
    Fiber& f = E.fibers[i];
    if (f.state != WARP) continue;
    const int lane = i - w0, n = w1 - w0;
    int src = lane;
    switch (op) {
      case EMU_SHFL_XOR: src = lane ^ f.arg; break;
      case EMU_SHFL_UP: src = lane >= f.arg ? lane - f.arg : lane; break;
      case EMU_SHFL_DOWN: src = lane + f.arg < n ? lane + f.arg : lane; break;
      case EMU_SHFL_IDX: src = f.arg & 31; break;
    }
    if (src >= n || E.fibers[w0 + src].state != WARP) src = lane;
    f.res = op == EMU_BALLOT ? ballot : E.fibers[w0 + src].val;
  }
  for (int i = w0; i < w1; ++i)
    if (E.fibers[i].state == WARP) E.fibers[i].state = RUN;
}

void run_block(int nthreads) {
  for (;;) {
    for (int w0 = 0; w0 < nthreads; w0 += 32) {
      const int w1 = w0 + 32 < nthreads ? w0 + 32 : nthreads;
      for (;;) {
        for (int i = w0; i < w1; ++i)
          if (E.fibers[i].state == RUN) resume(E.fibers[i]);
        bool warp = false, sync = false;
        for (int i = w0; i < w1; ++i) {
          warp |= E.fibers[i].state == WARP;
          sync |= E.fibers[i].state == SYNC;
        }
        if (!warp) break;
        if (sync) {
          fprintf(stderr, "emu: lanes of one warp at __syncthreads and at a warp collective\n");
          abort();
        }
        warp_collective(w0, w1);
      }
    }
    bool any = false;
    for (int i = 0; i < nthreads; ++i)
      if (E.fibers[i].state == SYNC) E.fibers[i].state = RUN, any = true;
    if (!any) return;
  }
}

struct Launch {
  const emu::Entry* e;
  dim3 grid, block;
  unsigned shared;
  std::function<void()> body;
};

int run_launch(const Launch& l) {
  const int n = l.block.x * l.block.y * l.block.z;
  if (n <= 0 || n > 1024) return 1;  // CUDA_ERROR_INVALID_VALUE
  if ((int)E.fibers.size() < n) E.fibers.resize(n, Fiber{});
  E.dyn.assign(l.shared + 16, (char)0xFF);
  E.body = &l.body;
  for (unsigned z = 0; z < l.grid.z; ++z)
    for (unsigned y = 0; y < l.grid.y; ++y)
      for (unsigned x = 0; x < l.grid.x; ++x) {
        emu_block_idx = dim3{x, y, z};
        emu_block_dim = l.block;
        emu_grid_dim = l.grid;
        for (int i = 0; i < n; ++i) {
          Fiber& f = E.fibers[i];
          f.tid = dim3{(unsigned)(i % l.block.x), (unsigned)((i / l.block.x) % l.block.y),
                       (unsigned)(i / (l.block.x * l.block.y))};
          start(f);
        }
        run_block(n);
      }
  return 0;
}

struct Graph { std::vector<Launch> launches; };
bool capturing = false;
Graph* capture_graph = nullptr;

// Streams. The first stream created (the device thread's) runs its work at
// once; every later one (compute.Branches' lanes) keeps its launches queued
// until something waits for them: another stream waiting on an event
// recorded on it after them, a copy or memset or synchronize on it, or a
// context synchronize. That runs a side stream's work as late as CUDA
// allows, so that a missing wait (a join) shows as wrong values instead of
// going unnoticed, and a capture that ends with a side stream's work not
// waited for fails as CUDA's does.
struct Queue {
  std::vector<Launch> pending;
  size_t done = 0;  // launches taken from pending so far
};
std::map<void*, Queue> queues;
void* first_stream = nullptr;
struct Ev {
  void* stream;
  size_t pos;  // the stream's launches queued when it was recorded
};
std::map<void*, Ev> events;

void* capture_stream = nullptr;  // the stream a capture began on runs at once
bool lazy(void* s) { return s != nullptr && s != first_stream && s != capture_stream; }

int exec(Launch& l) {
  if (capturing) {
    capture_graph->launches.push_back(std::move(l));
    return 0;
  }
  return run_launch(l);
}

// drain runs (or captures) stream s's queued launches up to the upto-th.
int drain(void* s, size_t upto) {
  auto it = queues.find(s);
  if (it == queues.end()) return 0;
  Queue& q = it->second;
  size_t k = 0;
  int r = 0;
  for (; k < q.pending.size() && q.done + k < upto; ++k)
    if ((r = exec(q.pending[k])) != 0) break;
  q.pending.erase(q.pending.begin(), q.pending.begin() + k + (r != 0 ? 1 : 0));
  q.done += k + (r != 0 ? 1 : 0);
  return r;
}
int drain_all() {
  for (auto& e : queues)
    if (int r = drain(e.first, (size_t)-1)) return r;
  return 0;
}

}  // namespace

extern "C" {
dim3 emu_block_idx, emu_block_dim, emu_grid_dim;
dim3* emu_thread_idx() { return &E.cur->tid; }
void* emu_dyn_shared() { return (void*)(((uintptr_t)E.dyn.data() + 15) & ~(uintptr_t)15); }
void emu_syncthreads() {
  Fiber* f = E.cur;
  f->state = SYNC;
  emu_swap(&f->sp, E.sched);
}
unsigned long long emu_warp_op(int op, unsigned long long v, int arg) {
  Fiber* f = E.cur;
  f->op = op, f->val = v, f->arg = arg, f->state = WARP;
  emu_swap(&f->sp, E.sched);
  return f->res;
}
}

namespace emu {
std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r;
  return r;
}
Reg::Reg(const char* name, Entry e) { registry()[name] = e; }
}  // namespace emu

// ---- the driver API ----

typedef int CUresult;
#define API extern "C" __attribute__((visibility("default")))

API CUresult cuInit(unsigned) { return 0; }
API CUresult cuDriverGetVersion(int* v) { *v = 13000; return 0; }
API CUresult cuGetErrorName(CUresult, const char** s) { *s = "CUDA_ERROR_EMULATED"; return 0; }
API CUresult cuGetErrorString(CUresult c, const char** s) {
  *s = c == 801 ? "not supported by the emulator" : "emulator error";
  return 0;
}
API CUresult cuDeviceGetCount(int* n) { *n = 1; return 0; }
API CUresult cuDeviceGet(int* d, int o) { *d = o; return o == 0 ? 0 : 101; }
API CUresult cuDeviceGetName(char* s, int n, int) { snprintf(s, n, "strata CUDA emulator"); return 0; }
API CUresult cuDeviceGetAttribute(int* v, int a, int) {
  switch (a) {
    case 75: *v = 9; break;    // CC major
    case 76: *v = 0; break;    // minor
    case 16: *v = 4; break;    // SMs
    case 38: *v = 50 << 20; break;
    case 97: *v = 232448; break;
    case 81: *v = 233472; break;
    case 36: *v = 2619000; break;
    case 37: *v = 6144; break;
    default: *v = 0;
  }
  return 0;
}
API CUresult cuDeviceTotalMem_v2(size_t* b, int) { *b = (size_t)16 << 30; return 0; }
API CUresult cuDevicePrimaryCtxRetain(void** c, int) { *c = (void*)1; return 0; }
API CUresult cuDevicePrimaryCtxRelease_v2(int) { return 0; }
API CUresult cuCtxSetCurrent(void*) { return 0; }
API CUresult cuCtxSynchronize() { return drain_all(); }
API CUresult cuMemGetInfo_v2(size_t* f, size_t* t) { *f = (size_t)8 << 30; *t = (size_t)16 << 30; return 0; }
API CUresult cuMemAlloc_v2(uint64_t* p, size_t n) {
  void* m = aligned_alloc(256, (n + 255) / 256 * 256);
  if (!m) return 2;
  memset(m, 0xFF, n);  // NaNs and -1s: reads of memory nothing wrote show
  *p = (uint64_t)m;
  return 0;
}
API CUresult cuMemFree_v2(uint64_t p) { free((void*)p); return 0; }
API CUresult cuMemAllocHost_v2(void** p, size_t n) { *p = aligned_alloc(256, (n + 255) / 256 * 256); return *p ? 0 : 2; }
API CUresult cuMemFreeHost(void* p) { free(p); return 0; }
API CUresult cuMemcpyHtoDAsync_v2(uint64_t d, const void* s, size_t n, void* st) {
  if (int r = drain(st, (size_t)-1)) return r;
  memcpy((void*)d, s, n);
  return 0;
}
API CUresult cuMemcpyDtoHAsync_v2(void* d, uint64_t s, size_t n, void* st) {
  if (int r = drain(st, (size_t)-1)) return r;
  memcpy(d, (void*)s, n);
  return 0;
}
API CUresult cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void* st) {
  if (int r = drain(st, (size_t)-1)) return r;
  memmove((void*)d, (void*)s, n);
  return 0;
}
API CUresult cuMemsetD8Async(uint64_t d, unsigned char v, size_t n, void* st) {
  if (int r = drain(st, (size_t)-1)) return r;
  memset((void*)d, v, n);
  return 0;
}
API CUresult cuMemsetD32Async(uint64_t d, unsigned v, size_t n, void* st) {
  if (int r = drain(st, (size_t)-1)) return r;
  for (size_t i = 0; i < n; ++i) ((unsigned*)d)[i] = v;
  return 0;
}
API CUresult cuStreamCreate(void** s, unsigned) {
  static int k;
  *s = (void*)(uintptr_t)(++k + 16);
  if (!first_stream) first_stream = *s;
  return 0;
}
API CUresult cuStreamDestroy_v2(void* s) {
  int r = drain(s, (size_t)-1);
  queues.erase(s);
  return r;
}
API CUresult cuStreamSynchronize(void* s) { return drain(s, (size_t)-1); }
API CUresult cuStreamWaitEvent(void*, void* e, unsigned) {
  auto it = events.find(e);
  return it == events.end() ? 0 : drain(it->second.stream, it->second.pos);
}
API CUresult cuEventCreate(void** e, unsigned) { static int k; *e = (void*)(uintptr_t)(++k + 16); return 0; }
API CUresult cuEventDestroy_v2(void* e) {
  events.erase(e);
  return 0;
}
API CUresult cuEventRecord(void* e, void* s) {
  auto it = queues.find(s);
  events[e] = Ev{s, it == queues.end() ? 0 : it->second.done + it->second.pending.size()};
  return 0;
}
API CUresult cuEventSynchronize(void* e) {
  auto it = events.find(e);
  return it == events.end() ? 0 : drain(it->second.stream, it->second.pos);
}
API CUresult cuEventElapsedTime(float* ms, void*, void*) { *ms = 0; return 0; }
API CUresult cuStreamBeginCapture_v2(void* s, int) {
  if (capturing) return 900;
  if (int r = drain(s, (size_t)-1)) return r;
  capture_stream = s;
  capturing = true;
  capture_graph = new Graph;
  return 0;
}
API CUresult cuStreamEndCapture(void*, void** g) {
  if (!capturing) return 901;
  capture_stream = nullptr;
  for (auto& e : queues)
    if (!e.second.pending.empty()) {
      // CUDA_ERROR_STREAM_CAPTURE_UNJOINED: a side stream's work is not
      // waited for.
      e.second.done += e.second.pending.size();
      e.second.pending.clear();
      capturing = false;
      delete capture_graph;
      capture_graph = nullptr;
      *g = nullptr;
      return 904;
    }
  capturing = false;
  *g = capture_graph;
  capture_graph = nullptr;
  return 0;
}
API CUresult cuGraphInstantiateWithFlags(void** x, void* g, unsigned long long) { *x = new Graph(*(Graph*)g); return 0; }
API CUresult cuGraphLaunch(void* x, void*) {
  for (const Launch& l : ((Graph*)x)->launches)
    if (int r = run_launch(l)) return r;
  return 0;
}
API CUresult cuGraphDestroy(void* g) { delete (Graph*)g; return 0; }
API CUresult cuGraphExecDestroy(void* x) { delete (Graph*)x; return 0; }
API CUresult cuModuleLoadData(void** m, const void*) { *m = (void*)1; return 0; }
API CUresult cuModuleUnload(void*) { return 0; }
API CUresult cuModuleGetFunction(const void** f, void*, const char* name) {
  auto& r = emu::registry();
  auto it = r.find(name);
  if (it == r.end()) {
    static emu::Entry missing{nullptr};
    *f = &missing;  // a kernel the emulator cannot run (inline PTX): its launches fail
    return 0;
  }
  *f = &it->second;
  return 0;
}
API CUresult cuFuncSetAttribute(const void*, int, int) { return 0; }
API CUresult cuFuncGetAttribute(int* v, int, const void*) {
  *v = 0;
  return 0;
}
// The emulator runs a launch's blocks one at a time: no block waits on
// another's residency. 16 an SM keeps the host's choices for the tests'
// batches as on a GPU.
API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const void*, int, size_t) {
  *n = 16;
  return 0;
}
API CUresult cuLaunchKernel(const emu::Entry* e, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                            unsigned bz, unsigned shared, void* stream, void** params, void**) {
  if (!e->bind) return 801;
  Launch l{e, dim3{gx, gy, gz}, dim3{bx, by, bz}, shared, e->bind(params)};
  if (lazy(stream)) {
    queues[stream].pending.push_back(std::move(l));
    return 0;
  }
  return exec(l);
}
// cuLaunchKernelEx: CUlaunchConfig's grid, block, shared bytes and stream
// (the attributes, programmatic serialization among them, change nothing
// here: launches run one after another).
struct EmuLaunchConfig {
  unsigned gx, gy, gz, bx, by, bz, shared;
  void* stream;
  void* attrs;
  unsigned nattrs;
};
API CUresult cuLaunchKernelEx(const EmuLaunchConfig* c, const emu::Entry* e, void** params, void** extra) {
  return cuLaunchKernel(e, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->shared, c->stream, params, extra);
}
