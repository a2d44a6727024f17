package cuda

import (
	"fmt"
	"unsafe"
)

// driver holds the entry points of libcuda.so.1 the package calls.
type driver struct {
	path string

	cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString              uintptr
	cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute      uintptr
	cuDeviceTotalMem, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease     uintptr
	cuCtxSetCurrent, cuCtxSynchronize, cuMemGetInfo                           uintptr
	cuMemAlloc, cuMemFree, cuMemAllocHost, cuMemFreeHost                      uintptr
	cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync                   uintptr
	cuMemsetD8Async, cuMemsetD32Async                                         uintptr
	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize, cuStreamWaitEvent   uintptr
	cuEventCreate, cuEventDestroy, cuEventRecord, cuEventSynchronize          uintptr
	cuEventElapsedTime                                                        uintptr
	cuStreamBeginCapture, cuStreamEndCapture, cuGraphInstantiateWithFlags     uintptr
	cuGraphLaunch, cuGraphDestroy, cuGraphExecDestroy                         uintptr
	cuModuleLoadData, cuModuleUnload, cuModuleGetFunction, cuFuncSetAttribute uintptr
	// cuFuncGetAttribute is optional (0 when the driver lacks it).
	cuFuncGetAttribute uintptr
	// cuOccupancyMaxActiveBlocksPerMultiprocessor is optional too.
	cuOccupancy    uintptr
	cuLaunchKernel uintptr
	// cuLaunchKernelEx is optional (0 where the driver lacks it): launches
	// with programmatic stream serialization (Thread.pdl).
	cuLaunchKernelEx uintptr
}

// loadDriver loads libcuda.so.1 from the first candidate that loads and
// resolves its entry points. Its error wraps ErrNoDriver.
func loadDriver(override string, env searchEnv) (*driver, error) {
	if !dynamicLoading {
		_, err := dlopen("libcuda.so.1")
		return nil, fmt.Errorf("%w (libcuda.so.1): %v", ErrNoDriver, err)
	}
	var errs []error
	for _, path := range driverCandidates(override, env) {
		h, err := dlopen(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d := &driver{path: path}
		if err := d.resolve(h); err != nil {
			return nil, fmt.Errorf("%w (libcuda.so.1 at %s): %v", ErrNoDriver, path, err)
		}
		return d, nil
	}
	return nil, fmt.Errorf("%w (libcuda.so.1): %v", ErrNoDriver, errs[0])
}

func (d *driver) resolve(h uintptr) error {
	var missing []string
	sym := func(p *uintptr, name string) {
		f, err := dlsym(h, name)
		if err != nil || f == 0 {
			missing = append(missing, name)
		}
		*p = f
	}
	sym(&d.cuInit, "cuInit")
	sym(&d.cuDriverGetVersion, "cuDriverGetVersion")
	sym(&d.cuGetErrorName, "cuGetErrorName")
	sym(&d.cuGetErrorString, "cuGetErrorString")
	sym(&d.cuDeviceGetCount, "cuDeviceGetCount")
	sym(&d.cuDeviceGet, "cuDeviceGet")
	sym(&d.cuDeviceGetName, "cuDeviceGetName")
	sym(&d.cuDeviceGetAttribute, "cuDeviceGetAttribute")
	sym(&d.cuDeviceTotalMem, "cuDeviceTotalMem_v2")
	sym(&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
	sym(&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")
	sym(&d.cuCtxSetCurrent, "cuCtxSetCurrent")
	sym(&d.cuCtxSynchronize, "cuCtxSynchronize")
	sym(&d.cuMemGetInfo, "cuMemGetInfo_v2")
	sym(&d.cuMemAlloc, "cuMemAlloc_v2")
	sym(&d.cuMemFree, "cuMemFree_v2")
	sym(&d.cuMemAllocHost, "cuMemAllocHost_v2")
	sym(&d.cuMemFreeHost, "cuMemFreeHost")
	sym(&d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
	sym(&d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
	sym(&d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")
	sym(&d.cuMemsetD8Async, "cuMemsetD8Async")
	sym(&d.cuMemsetD32Async, "cuMemsetD32Async")
	sym(&d.cuStreamCreate, "cuStreamCreate")
	sym(&d.cuStreamDestroy, "cuStreamDestroy_v2")
	sym(&d.cuStreamSynchronize, "cuStreamSynchronize")
	sym(&d.cuStreamWaitEvent, "cuStreamWaitEvent")
	sym(&d.cuEventCreate, "cuEventCreate")
	sym(&d.cuEventDestroy, "cuEventDestroy_v2")
	sym(&d.cuEventRecord, "cuEventRecord")
	sym(&d.cuEventSynchronize, "cuEventSynchronize")
	sym(&d.cuEventElapsedTime, "cuEventElapsedTime")
	sym(&d.cuStreamBeginCapture, "cuStreamBeginCapture_v2")
	sym(&d.cuStreamEndCapture, "cuStreamEndCapture")
	sym(&d.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags")
	sym(&d.cuGraphLaunch, "cuGraphLaunch")
	sym(&d.cuGraphDestroy, "cuGraphDestroy")
	sym(&d.cuGraphExecDestroy, "cuGraphExecDestroy")
	sym(&d.cuModuleLoadData, "cuModuleLoadData")
	sym(&d.cuModuleUnload, "cuModuleUnload")
	sym(&d.cuModuleGetFunction, "cuModuleGetFunction")
	sym(&d.cuFuncSetAttribute, "cuFuncSetAttribute")
	sym(&d.cuLaunchKernel, "cuLaunchKernel")
	if f, err := dlsym(h, "cuLaunchKernelEx"); err == nil {
		d.cuLaunchKernelEx = f
	}
	if f, err := dlsym(h, "cuFuncGetAttribute"); err == nil {
		d.cuFuncGetAttribute = f
	}
	if f, err := dlsym(h, "cuOccupancyMaxActiveBlocksPerMultiprocessor"); err == nil {
		d.cuOccupancy = f
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing entry points %v", missing)
	}
	return nil
}

// check turns the CUresult r of call into nil or an *Error with the
// driver's name and description of the code.
func (d *driver) check(r uintptr, call string) error {
	code := int(int32(uint32(r)))
	if code == cudaSuccess {
		return nil
	}
	var name, msg uintptr
	e := &Error{Call: call, Code: code, Name: "CUDA_ERROR_UNKNOWN_CODE", Msg: "unrecognized error code"}
	if ccall(d.cuGetErrorName, uintptr(uint32(code)), uintptr(unsafe.Pointer(&name))) == 0 {
		e.Name = cString(name)
	}
	if ccall(d.cuGetErrorString, uintptr(uint32(code)), uintptr(unsafe.Pointer(&msg))) == 0 {
		e.Msg = cString(msg)
	}
	return e
}
