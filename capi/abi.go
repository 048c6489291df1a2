// SPDX-License-Identifier: BSD-3-Clause

// Compile-time checks that the Go values and layouts which cross the C
// boundary equal include/cucopy.h's.

package main

/*
#include "capi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/cucopy/cucopy/core"
)

// Values shared with include/cucopy.h must agree: each line fails to
// compile (uint8 overflow) unless the two constants are equal.
const (
	_ = uint8(255 + (core.OK-C.CUCOPY_OK)*(core.OK-C.CUCOPY_OK))
	_ = uint8(255 + (core.InProgress-C.CUCOPY_INPROGRESS)*(core.InProgress-C.CUCOPY_INPROGRESS))
	_ = uint8(255 + (core.ErrInvalid-C.CUCOPY_ERR_INVALID_PARAM)*(core.ErrInvalid-C.CUCOPY_ERR_INVALID_PARAM))
	_ = uint8(255 + (core.ErrHandle-C.CUCOPY_ERR_INVALID_HANDLE)*(core.ErrHandle-C.CUCOPY_ERR_INVALID_HANDLE))
	_ = uint8(255 + (core.ErrNoMemory-C.CUCOPY_ERR_NO_MEMORY)*(core.ErrNoMemory-C.CUCOPY_ERR_NO_MEMORY))
	_ = uint8(255 + (core.ErrNoResource-C.CUCOPY_ERR_NO_RESOURCE)*(core.ErrNoResource-C.CUCOPY_ERR_NO_RESOURCE))
	_ = uint8(255 + (core.ErrBusy-C.CUCOPY_ERR_BUSY)*(core.ErrBusy-C.CUCOPY_ERR_BUSY))
	_ = uint8(255 + (core.ErrUnsupport-C.CUCOPY_ERR_UNSUPPORTED)*(core.ErrUnsupport-C.CUCOPY_ERR_UNSUPPORTED))
	_ = uint8(255 + (core.ErrNoDevice-C.CUCOPY_ERR_NO_DEVICE)*(core.ErrNoDevice-C.CUCOPY_ERR_NO_DEVICE))
	_ = uint8(255 + (core.ErrNoDriver-C.CUCOPY_ERR_NO_DRIVER)*(core.ErrNoDriver-C.CUCOPY_ERR_NO_DRIVER))
	_ = uint8(255 + (core.ErrCUDA-C.CUCOPY_ERR_CUDA)*(core.ErrCUDA-C.CUCOPY_ERR_CUDA))
	_ = uint8(255 + (core.ErrForked-C.CUCOPY_ERR_FORKED)*(core.ErrForked-C.CUCOPY_ERR_FORKED))
	_ = uint8(255 + (core.ErrInternal-C.CUCOPY_ERR_INTERNAL)*(core.ErrInternal-C.CUCOPY_ERR_INTERNAL))
	_ = uint8(255 + (core.ErrOutOfRange-C.CUCOPY_ERR_OUT_OF_RANGE)*(core.ErrOutOfRange-C.CUCOPY_ERR_OUT_OF_RANGE))
	_ = uint8(255 + (core.ErrAlreadyExists-C.CUCOPY_ERR_ALREADY_EXISTS)*(core.ErrAlreadyExists-C.CUCOPY_ERR_ALREADY_EXISTS))
	_ = uint8(255 + (core.ErrCanceled-C.CUCOPY_ERR_CANCELED)*(core.ErrCanceled-C.CUCOPY_ERR_CANCELED))
	_ = uint8(255 + (core.ThreadMulti-C.CUCOPY_THREAD_MODE_MULTI)*(core.ThreadMulti-C.CUCOPY_THREAD_MODE_MULTI))
	_ = uint8(255 + (core.LogTrace-C.CUCOPY_LOG_TRACE)*(core.LogTrace-C.CUCOPY_LOG_TRACE))
	_ = uint8(255 + (core.EventSendComp-C.CUCOPY_EVENT_SEND_COMP)*(core.EventSendComp-C.CUCOPY_EVENT_SEND_COMP))
	_ = uint8(255 + (core.MaxIOV - core.MaxIOV))
)

// core.IOV is read in place from the caller's cucopy_iov_t array.
var (
	_ [unsafe.Sizeof(core.IOV{}) - C.sizeof_cucopy_iov_t]struct{}
	_ [C.sizeof_cucopy_iov_t - unsafe.Sizeof(core.IOV{})]struct{}
	_ [unsafe.Offsetof(core.IOV{}.Length) - unsafe.Offsetof(C.cucopy_iov_t{}.length)]struct{}
	_ [unsafe.Offsetof(C.cucopy_iov_t{}.length) - unsafe.Offsetof(core.IOV{}.Length)]struct{}
)

// Bits shared with the header must agree (uint8 overflow otherwise).
const (
	_ = uint8(255 + (core.DevAttrPrimaryActive-C.CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE)*(core.DevAttrPrimaryActive-C.CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE))
	_ = uint8(255 + (core.DevAttrName-C.CUCOPY_DEVICE_ATTR_NAME)*(core.DevAttrName-C.CUCOPY_DEVICE_ATTR_NAME))
	_ = uint8(255 + (core.MemFlagHostLocated-C.CUCOPY_MEM_FLAG_HOST_LOCATED)*(core.MemFlagHostLocated-C.CUCOPY_MEM_FLAG_HOST_LOCATED))
	_ = uint8(255 + (core.MemFlagVMM-C.CUCOPY_MEM_FLAG_VMM)*(core.MemFlagVMM-C.CUCOPY_MEM_FLAG_VMM))
	_ = uint8(255 + (core.MemCUDAManaged-C.CUCOPY_MEMORY_TYPE_CUDA_MANAGED)*(core.MemCUDAManaged-C.CUCOPY_MEMORY_TYPE_CUDA_MANAGED))
	_ = uint8(255 + (core.LocationNone-C.CUCOPY_LOCATION_NONE)*(core.LocationNone-C.CUCOPY_LOCATION_NONE))
)
