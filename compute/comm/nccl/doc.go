// Package nccl is a comm.Comm over NVIDIA's NCCL for the GPUs of one
// process, one rank per GPU, without cgo: libnccl.so.2 is loaded at run
// time through purego, as compute/cuda loads the CUDA libraries (the build
// tag nocuda leaves purego out).
//
// NOT YET RUN ON TWO GPUS. What is tested without GPUs: finding and
// loading the library (the errors when it is missing or is not NCCL), the
// NVLink-multicast guard, the GPU count's errors without a driver, and
// every collective's argument checks and NCCL call sequence against a
// scripted NCCL. What remains is the run itself (see docs/multigpu.md).
//
// # Threads and streams
//
// Every NCCL call of a rank is made on its GPU's locked CUDA thread, on
// the stream the rank's backend queues its work on, after the work queued
// before it: a backend offers that through Device (compute/cuda's backend
// does not implement Device yet; it is three small methods over what it
// has: its device ordinal, Device.Do after flushing its recorded launches
// with its thread's stream, and its tensors' device addresses). The
// communicators are made together by ncclCommInitAll on rank 0's thread
// (ncclCommInitRank takes its 128-byte id by value, which purego cannot
// pass), and every later call runs on the rank's own thread. The ranks'
// goroutines call their collectives concurrently, one thread per
// communicator, as NCCL allows.
//
// # NVLink multicast
//
// Load keeps NVLink SHARP (multicast objects) off: it sets
// NCCL_NVLS_ENABLE=0 in the process environment before NCCL reads it, and
// refuses to load when the variable is already set to anything else.
//
// All-to-all is grouped ncclSend/ncclRecv (NCCL 2.7 or later); rows move as
// bytes, so any dtype goes. All-reduce uses NCCL's own reduction, whose
// order is NCCL's: unlike comm.Local it is not guaranteed to be rank order,
// which is why the model's exact paths use no floating-point all-reduce.
package nccl
