// SPDX-License-Identifier: BSD-3-Clause

package core

// Calibration: a short measurement of one (source, destination) pair
// through cucopy's own copy path, on a private single-thread iface of the
// same context, so that the caller's iface keeps its streams, queues,
// completions and progress counts untouched. Buffers come from the driver
// (cucopy's memory domain; pageable host memory from mmap) and are freed
// before returning; nothing is left current (Context.MemAlloc and the copy
// path push and pop only).

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	calLatencyRounds   = 15 // 8-byte copies timed; the median is the latency
	calBandwidthRounds = 3  // large copies timed; the median gives the bandwidth
	calLatencyBytes    = 8
)

// measure times src -> dst: the median of calLatencyRounds 8-byte copies
// is the latency, and bytes over the median large copy less that latency
// the bandwidth. Each timed copy is issued as a zcopy and waited for with
// progress, as a caller would.
func (i *Iface) measure(src, dst Place, bytes uint64) (linear, error) {
	priv, err := i.ctx.OpenIface(IfaceParams{ThreadMode: ThreadSingle, MaxPoll: i.params.MaxPoll, MaxEvents: i.params.MaxEvents, Lanes: 1})
	if err != nil {
		return linear{}, err
	}
	defer func() {
		if err := priv.Close(); err != nil {
			logf(LogWarn, "iface_estimate: closing the calibration iface: %v", err)
		}
	}()
	s, err := i.ctx.calibrationBuffer(src, bytes)
	if err != nil {
		return linear{}, err
	}
	defer s.release()
	d, err := i.ctx.calibrationBuffer(dst, bytes)
	if err != nil {
		return linear{}, err
	}
	defer d.release()
	ep, err := priv.NewEp()
	if err != nil {
		return linear{}, err
	}
	// Untimed: the first copies create the private iface's streams and
	// events and enable peer access.
	for _, n := range []uint64{calLatencyBytes, min(bytes, 1<<20)} {
		if _, err := priv.timedCopy(ep, s.addr, d.addr, n); err != nil {
			return linear{}, err
		}
	}
	lat, err := priv.medianCopy(ep, s.addr, d.addr, calLatencyBytes, calLatencyRounds)
	if err != nil {
		return linear{}, err
	}
	big, err := priv.medianCopy(ep, s.addr, d.addr, bytes, calBandwidthRounds)
	if err != nil {
		return linear{}, err
	}
	if big <= lat {
		big = lat + 1e-9 // a copy too fast to tell from the latency
	}
	return linear{lat: lat, bw: float64(bytes) / (big - lat)}, nil
}

// medianCopy is the median time of rounds copies of n bytes, in seconds.
func (i *Iface) medianCopy(ep *Ep, src, dst, n uint64, rounds int) (float64, error) {
	t := make([]float64, rounds)
	for r := range t {
		var err error
		if t[r], err = i.timedCopy(ep, src, dst, n); err != nil {
			return 0, err
		}
	}
	slices.Sort(t)
	return t[rounds/2], nil
}

// timedCopy issues one zcopy of n bytes and progresses until it completed.
func (i *Iface) timedCopy(ep *Ep, src, dst, n uint64) (float64, error) {
	start := time.Now()
	st, err := ep.Zcopy(true, []IOV{{Buffer: uintptr(src), Length: n}}, dst, 1)
	if err != nil {
		return 0, err
	}
	for st == InProgress {
		if _, err := i.Progress(); err != nil {
			return 0, err
		}
		i.RunCallbacks(func(_ uintptr, s Status) { st = s })
	}
	if st != OK {
		return 0, errorf(st, "iface_estimate", "calibration copy of %d bytes failed: %v", n, st)
	}
	return time.Since(start).Seconds(), nil
}

// calBuffer is one calibration buffer and how to free it.
type calBuffer struct {
	addr uint64
	free func() error
}

func (b calBuffer) release() {
	if err := b.free(); err != nil {
		logf(LogWarn, "iface_estimate: freeing a calibration buffer: %v", err)
	}
}

// calibrationBuffer allocates n bytes of p's kind: device and managed
// memory on p's device and pinned host memory through the driver (in the
// current context if it fits, else an active primary context: none is
// activated), pageable host memory with mmap (touched, so no page fault
// is timed).
func (c *Context) calibrationBuffer(p Place, n uint64) (calBuffer, error) {
	if p.Type == MemHost && !p.Pinned {
		b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return calBuffer{}, &Error{Status: ErrNoMemory, Op: "iface_estimate", Msg: fmt.Sprintf("%d bytes of pageable memory", n), Err: err}
		}
		for k := range min(len(b), 4096) {
			b[k] = byte(k)
		}
		for done := 4096; done < len(b); done *= 2 {
			copy(b[done:], b[:done]) // every page touched
		}
		return calBuffer{addr: uint64(uintptr(unsafe.Pointer(&b[0]))), free: func() error { return unix.Munmap(b) }}, nil
	}
	dev := p.Device
	if p.Type == MemHost {
		dev = -1
	}
	addr, err := c.MemAlloc(p.Type, dev, false, n)
	if err != nil {
		return calBuffer{}, err
	}
	return calBuffer{addr: addr, free: func() error { return c.MemFree(addr) }}, nil
}
