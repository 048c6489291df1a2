// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/cucopy/cucopy/cudadrv"
)

// The event fd (cucopy_iface_event_fd, cucopy_iface_event_arm): an eventfd
// that a host function launched on each stream with work writes (plain C,
// no Go on driver threads). Arm drains it and answers BUSY when work is
// already ready, as UCX's protocol does: get the fd, arm, poll, progress.

// EventSendComp is CUCOPY_EVENT_SEND_COMP.
const EventSendComp = 1

// eventFD creates the eventfd on first use; under mu.
func (i *Iface) eventFD() (int, error) {
	if i.fd >= 0 {
		return i.fd, nil
	}
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return -1, &Error{Status: ErrNoResource, Op: "iface_event_fd", Msg: "eventfd", Err: err}
	}
	i.fd = fd
	return fd, nil
}

// EventFD returns the iface's eventfd.
func (i *Iface) EventFD() (int, error) {
	i.mu.lock()
	defer i.mu.unlock()
	if i.closed.Load() {
		return -1, errorf(ErrHandle, "iface_event_fd", "iface is closed")
	}
	return i.eventFD()
}

// Arm arms the event fd: ErrBusy when completions are waiting, else every
// queue with pieces in flight gets a host function that writes the fd when
// the stream reaches it.
func (i *Iface) Arm(events uint32) (Status, error) {
	const api = "iface_event_arm"
	if events&^EventSendComp != 0 {
		return ErrInvalid, errorf(ErrInvalid, api, "unknown event bits 0x%x", events&^EventSendComp)
	}
	i.mu.lock()
	defer i.mu.unlock()
	if i.closed.Load() {
		return ErrHandle, errorf(ErrHandle, api, "iface is closed")
	}
	fd, err := i.eventFD()
	if err != nil {
		return StatusOf(err), err
	}
	var buf [8]byte
	for {
		if _, err := unix.Read(fd, buf[:]); err != nil {
			break // EAGAIN: drained
		}
	}
	if i.nready.Load() > 0 {
		return ErrBusy, nil
	}
	if events == 0 {
		return OK, nil
	}
	for s := range int(i.nslots.Load()) {
		if i.res[s].dead {
			continue
		}
		if st, err := i.armSlot(api, s, fd); st != OK {
			return st, err
		}
	}
	return OK, nil
}

// armSlot arms every queue of slot s with pieces in flight; ErrBusy when
// one already finished, failed or ended (progress has work), OK when all
// are armed; under mu.
func (i *Iface) armSlot(api string, s, fd int) (Status, error) {
	r := &i.res[s]
	for k := range r.queues {
		i.lockSlot(s)
		i.drainInbox(s)
		head := r.queues[k].headEvent()
		i.unlockSlot(s)
		if head == 0 {
			continue
		}
		// A piece queued after this look is not covered: the caller
		// arms after issuing.
		busy, err := i.drv.Arm(i.incarnation(s), i.slots[s].Stream[k], head, fd)
		switch {
		case err == cudadrv.ErrContextGone:
			i.dropSlot(s, ErrCanceled)
			return ErrBusy, nil // its canceled operations are ready
		case queryFailed(err):
			// A sticky error in this context: progress fails its pieces.
			return ErrBusy, nil
		case err != nil:
			return ErrCUDA, driverError(api, fmt.Sprintf("device %d", r.device), err)
		case busy:
			return ErrBusy, nil
		}
	}
	return OK, nil
}
