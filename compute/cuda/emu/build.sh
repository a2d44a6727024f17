#!/bin/sh
# build.sh OUT: builds the CUDA emulator (OUT/libcuda.so.1, OUT/libnvrtc.so)
# from the kernel sources, for tests on machines without a GPU:
#   sh compute/cuda/emu/build.sh /tmp/emu && STRATA_CUDA_LIB_DIR=/tmp/emu go test ./compute/cuda
# Needs a C++17 compiler (clang++ or g++) and nm. The tensor-core GEMM's
# mma.sync and ldmatrix are emulated through shuffles (gemm.cu).
set -e
out=${1:?usage: build.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
k=$here/../kernels
CXX=${CXX:-clang++-16}
mkdir -p "$out/obj"
flags="-std=c++17 -O1 -g0 -fPIC -ffp-contract=off -fno-fast-math -DSTRATA_EMU -D_GNU_SOURCE -I$here -I$k -w"
pre="-include $here/emu_shim.h"
for h in $(cd "$k" && ls *.cuh | sort); do pre="$pre -include $k/$h"; done
objs=""
for f in $(cd "$k" && ls *.cu | sort); do
	u=${f%.cu}
	$CXX $flags $pre -x c++ -c "$k/$f" -o "$out/obj/$u.pass1.o"
	names=$(nm -g --defined-only "$out/obj/$u.pass1.o" | awk '$2=="T" && $3 !~ /^_Z/ {print $3}')
	{
		echo "#include \"emu_reg.h\""
		echo "#include \"$k/$f\""
		for n in $names; do echo "EMU_REG($n)"; done
	} > "$out/obj/$u.reg.cpp"
	$CXX $flags $pre -x c++ -c "$out/obj/$u.reg.cpp" -o "$out/obj/$u.o"
	objs="$objs $out/obj/$u.o"
done
$CXX $flags -c "$here/emu.cpp" -o "$out/obj/emu.o"
$CXX -shared -o "$out/libcuda.so.1" "$out/obj/emu.o" $objs
$CXX $flags -shared -o "$out/libnvrtc.so" "$here/nvrtc.cpp"
echo "emulator: $out/libcuda.so.1 $out/libnvrtc.so"
