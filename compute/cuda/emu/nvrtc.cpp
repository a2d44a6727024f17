// nvrtc.cpp: an NVRTC for the emulator: "compiling" a unit yields its name
// (the emulator's driver finds kernels by name in its registry).
#include <cstring>
#include <string>
#define API extern "C" __attribute__((visibility("default")))
struct Prog { std::string name; };
API const char* nvrtcGetErrorString(int) { return "NVRTC emulator error"; }
API int nvrtcVersion(int* ma, int* mi) { *ma = 99; *mi = 0; return 0; }
API int nvrtcCreateProgram(Prog** p, const char*, const char* name, int, const char* const*, const char* const*) {
  *p = new Prog{name ? name : "unit"};
  return 0;
}
API int nvrtcDestroyProgram(Prog** p) { delete *p; *p = nullptr; return 0; }
API int nvrtcCompileProgram(Prog*, int, const char* const*) { return 0; }
API int nvrtcGetProgramLogSize(Prog*, size_t* n) { *n = 1; return 0; }
API int nvrtcGetProgramLog(Prog*, char* s) { s[0] = 0; return 0; }
API int nvrtcGetCUBINSize(Prog* p, size_t* n) { *n = p->name.size() + 1; return 0; }
API int nvrtcGetCUBIN(Prog* p, char* b) { memcpy(b, p->name.c_str(), p->name.size() + 1); return 0; }
