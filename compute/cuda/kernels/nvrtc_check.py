#!/usr/bin/env python3
"""nvrtc_check.py: compile the kernels with a local NVRTC, no GPU needed,
and print each kernel's machine-code size (bytes of its .text section).

Run 27 used it to see attn_tc's size without a GPU machine. Any libnvrtc
works; Debian's non-free libnvrtc11.2 (CUDA 11.8, sm_90 but not sm_90a) is
enough for the sizes, since the sm_90a-only kernels are guarded:
  apt-get download libnvrtc11.2 libnvrtc-builtins11.8
  for f in libnvrtc*.deb; do dpkg -x $f /tmp/nvrtc; done
  LD_LIBRARY_PATH=/tmp/nvrtc/usr/lib/x86_64-linux-gnu \
    NVRTC_LIB=/tmp/nvrtc/usr/lib/x86_64-linux-gnu/libnvrtc.so.11.2 \
    python3 compute/cuda/kernels/nvrtc_check.py [unit.cu ...] [-k regex]
(LD_LIBRARY_PATH: NVRTC loads its builtins library by name.)
Each unit is compiled as module.go's kernelUnits builds it (every .cuh
included first) with nvrtcOptions' flags for sm_90 (ARCH overrides; DEFS adds
space-separated options before them, e.g. DEFS=-DNAME).
NVRTC 11.8 lacks what moe.cu, moem.cu and prefetch.cu use (dp4a's
declaration, the bulk-copy instructions): their errors there are that
version's.
"""
import ctypes
import os
import re
import struct
import subprocess
import sys

KDIR = os.path.dirname(os.path.abspath(__file__))


def text_sizes(cubin):
    """The .text.<kernel> section sizes of an ELF64 cubin."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    stroff = secs[shstrndx][4]
    out = {}
    for s in secs:
        end = cubin.index(b"\0", stroff + s[0])
        name = cubin[stroff + s[0]:end].decode()
        if name.startswith(".text."):
            out[name[6:]] = s[5]
    return out


def main():
    args, pat = sys.argv[1:], None
    if "-k" in args:
        i = args.index("-k")
        pat = re.compile(args[i + 1])
        del args[i:i + 2]
    names = sorted(os.listdir(KDIR))
    units = args or [n for n in names if n.endswith(".cu")]
    if len(units) > 1:
        # A process a unit: libnvrtc 11.8 crashed on a second program in
        # one process.
        k = ["-k", pat.pattern] if pat else []
        rcs = [subprocess.run([sys.executable, __file__, u] + k).returncode for u in units]
        sys.exit(1 if any(rcs) else 0)
    lib = ctypes.CDLL(os.environ.get("NVRTC_LIB", "libnvrtc.so"))
    arch = os.environ.get("ARCH", "sm_90")
    hdrs = [n for n in names if n.endswith(".cuh")]
    inc = "".join('#include "%s"\n' % h for h in hdrs)
    hs = (ctypes.c_char_p * len(hdrs))(*[open(os.path.join(KDIR, h), "rb").read() for h in hdrs])
    hn = (ctypes.c_char_p * len(hdrs))(*[h.encode() for h in hdrs])
    opts = os.environ.get("DEFS", "").split() + ["--gpu-architecture=" + arch, "--std=c++17", "-default-device", "--ftz=false", "--prec-div=true",
            "--prec-sqrt=true", "--fmad=true", "-lineinfo"]
    o = (ctypes.c_char_p * len(opts))(*[x.encode() for x in opts])
    failed = False
    for u in units:
        src = inc + '#line 1 "%s"\n' % u + open(os.path.join(KDIR, u), encoding="utf-8").read()
        prog = ctypes.c_void_p()
        lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode("utf-8"), u.encode(), len(hdrs), hs, hn)
        rc = lib.nvrtcCompileProgram(prog, len(opts), o)
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetProgramLog(prog, log)
        if rc != 0:
            print("%s: nvrtc error %d\n%s" % (u, rc, log.value.decode()))
            failed = True
            lib.nvrtcDestroyProgram(ctypes.byref(prog))
            continue
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
        cb = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetCUBIN(prog, cb)
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
        for k, v in sorted(text_sizes(cb.raw).items()):
            if pat is None or pat.search(k):
                print("%s %s %d" % (u, k, v))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
