// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
)

// Several goroutines issue zcopies on their own endpoints while others run
// the driver and progress; every operation completes exactly once with the
// right bytes. Run it under -race.
func TestMultiThread(t *testing.T) {
	const (
		workers = 6
		perW    = 200
		size    = 64
	)
	r := newRig(t, 3, func(p *core.IfaceParams) {
		p.ThreadMode = core.ThreadMulti
		p.MaxEvents = 8 // hit back-pressure
	})
	type buf struct{ host, dev uint64 }
	bufs := make([]buf, workers)
	for w := range bufs {
		bufs[w] = buf{r.drv.Pageable(size * perW), r.drv.AllocDevice(w%3, size*perW)}
		fill(r.drv, bufs[w].host, size*perW, byte(w))
	}
	eps := make([]*core.Ep, workers)
	for w := range eps {
		ep, err := r.ifc.NewEp()
		require.NoError(t, err)
		eps[w] = ep
	}

	var seen [workers * perW]atomic.Int32
	var failed atomic.Int32
	var completed atomic.Int64
	stop := make(chan struct{})
	var pollers sync.WaitGroup
	for p := 0; p < 2; p++ {
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r.drv.Step(3)
				if _, err := r.ifc.Progress(); err != nil {
					failed.Add(1)
					return
				}
				for {
					comp, st, ok := r.ifc.NextReady()
					if !ok {
						break
					}
					if st != core.OK || comp == 0 || comp > workers*perW {
						failed.Add(1)
						continue
					}
					seen[comp-1].Add(1)
					completed.Add(1)
				}
			}
		}()
	}
	var issuers sync.WaitGroup
	for w := 0; w < workers; w++ {
		issuers.Add(1)
		go func(w int) {
			defer issuers.Done()
			for k := 0; k < perW; k++ {
				off := uint64(k * size)
				iov := []core.IOV{{uintptr(bufs[w].host + off), size / 2}, {uintptr(bufs[w].host + off + size/2), size / 2}}
				for {
					st, err := eps[w].Zcopy(true, iov, bufs[w].dev+off, uintptr(w*perW+k+1))
					if st == core.ErrNoResource {
						_, _ = r.ifc.Progress() // make room; completions go to the pollers
						continue
					}
					if err != nil || st != core.InProgress {
						failed.Add(1)
					}
					break
				}
				if k%50 == 0 {
					if _, err := eps[w].Flush(0); err != nil {
						failed.Add(1)
					}
				}
			}
		}(w)
	}
	issuers.Wait()
	for completed.Load() < workers*perW && failed.Load() == 0 {
		r.drv.Run()
		_, _ = r.ifc.Progress()
		for {
			comp, st, ok := r.ifc.NextReady()
			if !ok {
				break
			}
			if st == core.OK && comp > 0 && comp <= workers*perW {
				seen[comp-1].Add(1)
				completed.Add(1)
			} else {
				failed.Add(1)
			}
		}
	}
	close(stop)
	pollers.Wait()
	require.Zero(t, failed.Load())
	for k := range seen {
		require.Equal(t, int32(1), seen[k].Load(), "operation %d", k+1)
	}
	for w := range bufs {
		eqBytes(t, r.drv.Bytes(bufs[w].host, size*perW), r.drv.Bytes(bufs[w].dev, size*perW), "worker %d", w)
	}
	st, err := r.ifc.Flush("iface_flush", 1)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
	assert.LessOrEqual(t, r.drv.LiveEvents(), 3*8, "event cap per context")
}
