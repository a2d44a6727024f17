#!/bin/sh
# check.sh: syntax-check the kernels with clang, without the CUDA toolkit
# or a GPU (Debian: apt-get install clang-16). NVRTC compiles the same
# sources at start-up (each .cu after every .cuh, in name order); this
# only catches errors earlier.
set -e
cd "$(dirname "$0")"
CLANG=${CLANG:-clang++-16}
inc=""
for h in *.cuh; do inc="$inc -include $h"; done
for f in *.cu; do
	$CLANG -x cuda --cuda-device-only --cuda-gpu-arch=sm_90 -nocudainc -nocudalib \
		-std=c++17 -fsyntax-only -Wall -Werror -Wno-unknown-cuda-version -include clang_shim.h $inc "$f"
done
echo "kernels: syntax ok"
