package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mcmkit/mcm/driver"
)

// Fault makes matching driver calls fail, stall, or both. Faults are checked
// in the order they were injected; the first one that hits a call decides
// its fate, and the others do not count that call.
type Fault struct {
	// Operation the fault applies to; empty for every operation of the
	// driver. OperationInPlaceUpdate, the node agent's update of a VM, is
	// not a driver operation: only faults that name it hit it.
	Operation driver.Operation
	// MachineName restricts the fault to calls for that machine; empty for
	// every call. Calls without a machine (ListMachines, GetVolumeIDs) only
	// match faults without a MachineName.
	MachineName string
	// Code of the error to return. OK injects no error, only Latency.
	Code driver.Code
	// Message of the error; a default names the fault.
	Message string
	// Probability in (0, 1] that a matching call is hit, drawn from the
	// Cloud's seeded random source. Zero hits every matching call.
	Probability float64
	// Times is how many calls the fault hits before it is removed: "fail the
	// next Times calls". Zero keeps it until RemoveFault or ClearFaults.
	Times int
	// Latency delays a hit call by this much on the Cloud's clock before it
	// proceeds (a latency spike). The call returns Canceled or
	// DeadlineExceeded instead if its context ends first.
	Latency time.Duration
	// AfterEffect performs the operation and then reports Code anyway, as
	// when the cloud acts but the response is lost: a create leaves its VM,
	// a delete removes it. Without it a failing call changes nothing.
	AfterEffect bool
	// Hang blocks a hit call, whatever its context says, until the fault
	// is removed (RemoveFault, ClearFaults): a cloud that never answers,
	// called by a driver that ignores its context. Released, the call goes
	// on as any hit call (Code, AfterEffect), still ignoring its context:
	// with Code OK it does its work, and a create makes its VM. Hang
	// excludes Latency and Times.
	Hang bool
}

// OperationInPlaceUpdate is the node agent's in-place update of a VM
// (Agent), for faults: a hit fails the update, and the agent labels the
// node update-result=failed with the fault's Message as its reason (with
// AfterEffect, after updating the VM nevertheless). Latency delays the
// update; Hang is refused. Cloud.Calls counts the agent's attempts.
const OperationInPlaceUpdate driver.Operation = "InPlaceUpdate"

// FaultID identifies an injected fault.
type FaultID uint64

// ActiveFault is an injected fault that is still in effect.
type ActiveFault struct {
	ID FaultID
	// Fault as injected, except that Times counts the hits left (zero:
	// unlimited).
	Fault Fault
	// Hits counts the calls the fault has hit so far.
	Hits int
}

func (f Fault) validate() error {
	switch {
	case f.Probability < 0 || f.Probability > 1:
		return fmt.Errorf("sim: fault probability %v is outside [0, 1]", f.Probability)
	case f.Times < 0:
		return fmt.Errorf("sim: fault times %d is negative", f.Times)
	case f.Latency < 0:
		return fmt.Errorf("sim: fault latency %v is negative", f.Latency)
	case f.Hang && (f.Latency != 0 || f.Times != 0):
		return fmt.Errorf("sim: a fault that hangs calls until it is removed takes no latency and no times")
	case f.Code == driver.OK && f.Latency == 0 && !f.Hang:
		return fmt.Errorf("sim: fault with code OK and no latency does nothing")
	case f.Code == driver.OK && f.AfterEffect:
		return fmt.Errorf("sim: fault with AfterEffect needs an error code")
	case f.Operation == OperationInPlaceUpdate && f.Hang:
		// The agent's update runs on a worker that must stop with Run.
		return fmt.Errorf("sim: an %s fault cannot hang", OperationInPlaceUpdate)
	case f.Operation != "" && f.Operation != OperationInPlaceUpdate && !slices.Contains(driver.Operations(), f.Operation):
		return fmt.Errorf("sim: fault for unknown operation %q", f.Operation)
	}
	return nil
}

// InjectFault adds a fault and returns its ID for RemoveFault.
func (c *Cloud) InjectFault(f Fault) (FaultID, error) {
	if err := f.validate(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextFaultID++
	c.faults = append(c.faults, &ActiveFault{ID: c.nextFaultID, Fault: f})
	if f.Hang {
		if c.hangs == nil {
			c.hangs = map[FaultID]chan struct{}{}
		}
		c.hangs[c.nextFaultID] = make(chan struct{})
	}
	return c.nextFaultID, nil
}

// releaseLocked lets the calls that the fault id hangs go on.
func (c *Cloud) releaseLocked(id FaultID) {
	if ch, ok := c.hangs[id]; ok {
		close(ch)
		delete(c.hangs, id)
	}
}

// RemoveFault removes a fault; it reports whether the fault was still active.
func (c *Cloud) RemoveFault(id FaultID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.faults, func(f *ActiveFault) bool { return f.ID == id })
	if i < 0 {
		return false
	}
	c.faults = slices.Delete(c.faults, i, i+1)
	c.releaseLocked(id)
	return true
}

// ClearFaults removes all faults.
func (c *Cloud) ClearFaults() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.faults {
		c.releaseLocked(f.ID)
	}
	c.faults = nil
}

// Faults returns the faults in effect, in the order they are checked.
func (c *Cloud) Faults() []ActiveFault {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ActiveFault, len(c.faults))
	for i, f := range c.faults {
		out[i] = *f
	}
	return out
}

// call is the fate of one driver call, decided by begin.
type call struct {
	err         error // the injected error, if any
	afterEffect bool  // perform the operation, then return err
}

// begin counts a call, picks the fault that hits it, waits out the fault's
// latency and checks the context. A non-nil error ends the call right away.
func (c *Cloud) begin(ctx context.Context, op driver.Operation, machineName string) (call, error) {
	c.mu.Lock()
	c.calls[op]++
	if err := driver.ContextError(ctx); err != nil {
		c.mu.Unlock()
		return call{}, err
	}
	hit, id, ok := c.pickFaultLocked(op, machineName)
	hang := c.hangs[id]
	c.mu.Unlock()
	if !ok {
		return call{}, nil
	}
	if hit.Hang {
		<-hang
		return hitCall(op, hit)
	}
	if hit.Latency > 0 {
		timer := c.clock.NewTimer(hit.Latency)
		select {
		case <-timer.C():
		case <-ctx.Done():
			timer.Stop()
			return call{}, driver.ContextError(ctx)
		}
	}
	if err := driver.ContextError(ctx); err != nil {
		return call{}, err
	}
	return hitCall(op, hit)
}

// hitCall is the fate of a call of op that hit, once its latency or hang
// is over.
func hitCall(op driver.Operation, hit Fault) (call, error) {
	if hit.Code == driver.OK {
		return call{}, nil
	}
	msg := hit.Message
	if msg == "" {
		msg = fmt.Sprintf("sim: injected %s fault in %s", hit.Code, op)
	}
	err := &driver.Error{Code: hit.Code, Message: msg}
	if hit.AfterEffect {
		return call{err: err, afterEffect: true}, nil
	}
	return call{}, err
}

func (c *Cloud) pickFaultLocked(op driver.Operation, machineName string) (Fault, FaultID, bool) {
	for i, f := range c.faults {
		if f.Fault.Operation != op && (f.Fault.Operation != "" || op == OperationInPlaceUpdate) {
			continue // a fault for every operation is one for the driver's only
		}
		if f.Fault.MachineName != "" && f.Fault.MachineName != machineName {
			continue
		}
		if p := f.Fault.Probability; p > 0 && p < 1 && c.rand.Float64() >= p {
			continue
		}
		f.Hits++
		hit := f.Fault
		if f.Fault.Times > 0 {
			f.Fault.Times--
			if f.Fault.Times == 0 {
				c.faults = slices.Delete(c.faults, i, i+1)
			}
		}
		return hit, f.ID, true
	}
	return Fault{}, 0, false
}

// finish applies the call's fate to the outcome of the operation: with an
// after-effect fault, a successful operation still reports the fault.
func finish[R any](fate call, resp *R, err error) (*R, error) {
	if err == nil && fate.afterEffect {
		return nil, fate.err
	}
	return resp, err
}
