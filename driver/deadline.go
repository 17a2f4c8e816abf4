package driver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// WithDeadlines returns a Driver that calls d with a deadline on every
// call, by operation (see Timeouts), and returns at the deadline even when
// d does not:
//
//   - The call's context ends at its deadline (or earlier, with the
//     caller's). A driver that honours it returns, and the error it returns
//     is reported as DeadlineExceeded.
//   - A driver that ignores it is abandoned: the wrapper returns
//     DeadlineExceeded at once, so the caller's worker is free, and the call
//     goes on in the background until d returns; its result is then
//     dropped. Until then it is a stuck call (see Stuck).
//   - While a stuck call for a machine runs, no other call for that machine
//     is started, of any operation: each returns DeadlineExceeded at once,
//     naming the stuck call. The Driver contract (never two calls for one
//     machine at once) holds, and a CreateMachine that outlives its
//     deadline is never followed by a second one that would make a second
//     VM. A stuck ListMachines blocks further ListMachines of its class, a
//     stuck GetVolumeIDs further GetVolumeIDs, so that a driver that never
//     returns costs one goroutine per machine at most.
//
// Responses, and errors within the deadline, pass through untouched, as
// does the provider name d gives (ProviderNamer). Wrap the driver once and
// share the result between the controllers that call it, so that all of
// them see the same stuck calls. The returned driver starts no goroutine
// but one per call, which ends when d's call returns.
func WithDeadlines(d Driver, t Timeouts) (*Deadlines, error) {
	if d == nil {
		return nil, errors.New("driver: WithDeadlines needs a Driver, got nil")
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("driver: %w", err)
	}
	for _, op := range Operations() {
		*t.field(op) = t.Of(op)
	}
	return &Deadlines{next: d, timeouts: t, stuck: map[subject][]*call{}}, nil
}

// Deadlines is the Driver WithDeadlines returns.
type Deadlines struct {
	next     Driver
	timeouts Timeouts // every field set

	mu sync.Mutex
	// stuck are the calls past their deadline that have not returned,
	// by what they are for.
	stuck map[subject][]*call
}

var _ Driver = (*Deadlines)(nil)

// subject is what a call is for: a machine ("namespace/name"), the class
// of a ListMachines, or nothing (GetVolumeIDs). Calls for the same machine
// share a subject whatever their operation; the other subjects belong to
// their operation.
type subject struct {
	kind string // "machine", "class" or "volumes"
	name string
}

func machineSubject(m *v1alpha1.Machine) subject {
	if m == nil {
		return subject{kind: "machine"}
	}
	return subject{kind: "machine", name: objectKey(m.Namespace, m.Name)}
}

func classSubject(c *v1alpha1.MachineClass) subject {
	if c == nil {
		return subject{kind: "class"}
	}
	return subject{kind: "class", name: objectKey(c.Namespace, c.Name)}
}

func objectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func (s subject) String() string {
	if s.name == "" {
		return "no " + s.kind
	}
	return s.kind + " " + s.name
}

// call is one call in flight; its fields after the first five are guarded
// by Deadlines.mu.
type call struct {
	op        Operation
	subject   subject
	started   time.Time
	timeout   time.Duration
	finished  bool // the driver returned
	abandoned bool // the caller was answered without the driver's result
}

// StuckCall is a driver call that outlived its deadline and has not
// returned.
type StuckCall struct {
	Operation Operation
	// Machine is the machine the call is for, "namespace/name"; empty for
	// ListMachines and GetVolumeIDs.
	Machine string
	// Class is the MachineClass of a ListMachines call, "namespace/name".
	Class string
	// Started is when the call started; Timeout its deadline.
	Started time.Time
	Timeout time.Duration
}

// String names the call, the object it is for and since when it runs:
// "CreateMachine of machine ns/m1 running since 2025-06-01T10:00:00Z
// (deadline 10m0s)".
func (s StuckCall) String() string {
	of := ""
	switch {
	case s.Machine != "":
		of = " of machine " + s.Machine
	case s.Class != "":
		of = " of class " + s.Class
	}
	return fmt.Sprintf("%s%s running since %s (deadline %v)", s.Operation, of, s.Started.UTC().Format(time.RFC3339), s.Timeout)
}

// Stuck returns the calls that outlived their deadline and have not
// returned, oldest first.
func (d *Deadlines) Stuck() []StuckCall {
	d.mu.Lock()
	var out []StuckCall
	for s, calls := range d.stuck {
		for _, c := range calls {
			sc := StuckCall{Operation: c.op, Started: c.started, Timeout: c.timeout}
			switch s.kind {
			case "machine":
				sc.Machine = s.name
			case "class":
				sc.Class = s.name
			}
			out = append(out, sc)
		}
	}
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b StuckCall) int {
		return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(a.Machine, b.Machine), cmp.Compare(a.Class, b.Class),
			cmp.Compare(a.Operation, b.Operation))
	})
	return out
}

// Timeouts returns the deadlines in effect, defaults filled in.
func (d *Deadlines) Timeouts() Timeouts { return d.timeouts }

// ProviderName is the name the wrapped driver gives, or "".
func (d *Deadlines) ProviderName() string {
	if n, ok := d.next.(ProviderNamer); ok {
		return n.ProviderName()
	}
	return ""
}

// result is what a call returned.
type result[R any] struct {
	resp *R
	err  error
}

// do runs fn under op's deadline for s (see WithDeadlines).
func do[R any](ctx context.Context, d *Deadlines, op Operation, s subject, fn func(context.Context) (*R, error)) (*R, error) {
	c := &call{op: op, subject: s, started: time.Now(), timeout: d.timeouts.Of(op)}
	if err := d.admit(c); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	done := make(chan result[R], 1)
	go func() {
		resp, err := fn(cctx)
		d.finish(ctx, c, err)
		done <- result[R]{resp, err}
		// Only now: cctx.Done must mean the deadline (or the caller's
		// end) to the select below until the result is there.
		cancel()
	}()
	select {
	case r := <-done:
		return r.resp, explain(ctx, cctx, c, r.err)
	case <-cctx.Done():
	}
	if !d.abandon(c) {
		r := <-done // it returned just now
		return r.resp, explain(ctx, cctx, c, r.err)
	}
	if err := ContextError(ctx); err != nil {
		// The caller gave up first (the controller stops, say).
		return nil, &Error{Code: CodeOf(err), Message: fmt.Sprintf("%s for %s abandoned: the caller's context ended", op, s), Cause: ctx.Err()}
	}
	logr.FromContextOrDiscard(ctx).Info("Driver call outlived its deadline; abandoned it until it returns",
		"operation", op, "for", s.String(), "deadline", c.timeout)
	return nil, &Error{Code: DeadlineExceeded, Cause: context.DeadlineExceeded, Message: fmt.Sprintf(
		"%s did not return within its deadline of %v and is abandoned; no other call for %s starts until it returns", op, c.timeout, s)}
}

// explain names the deadline in the error of a call that honoured its
// context when its deadline (cctx's, not the caller's ctx's) ended it, and
// passes every other error through.
func explain(ctx, cctx context.Context, c *call, err error) error {
	if CodeOf(err) != DeadlineExceeded || ctx.Err() != nil || !errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return &Error{Code: DeadlineExceeded, Message: fmt.Sprintf("%s did not return within its deadline of %v", c.op, c.timeout), Cause: err}
}

// admit refuses c while a stuck call for its subject runs.
func (d *Deadlines) admit(c *call) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, prev := range d.stuck[c.subject] {
		if c.subject.kind != "machine" && prev.op != c.op {
			continue
		}
		// The same text on every refusal, so that a machine's status
		// does not change while it waits.
		return &Error{Code: DeadlineExceeded, Message: fmt.Sprintf(
			"%s not called: a %s call for %s, started at %s, outlived its deadline of %v and has not returned; no other call for it starts until it does",
			c.op, prev.op, c.subject, prev.started.UTC().Format(time.RFC3339), prev.timeout)}
	}
	return nil
}

// abandon marks c stuck, unless it has returned already (then false).
func (d *Deadlines) abandon(c *call) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.finished {
		return false
	}
	c.abandoned = true
	d.stuck[c.subject] = append(d.stuck[c.subject], c)
	return true
}

// finish records that the driver returned c.
func (d *Deadlines) finish(ctx context.Context, c *call, err error) {
	d.mu.Lock()
	c.finished = true
	abandoned := c.abandoned
	if abandoned {
		rest := slices.DeleteFunc(d.stuck[c.subject], func(o *call) bool { return o == c })
		if len(rest) == 0 {
			delete(d.stuck, c.subject)
		} else {
			d.stuck[c.subject] = rest
		}
	}
	d.mu.Unlock()
	if abandoned {
		logr.FromContextOrDiscard(ctx).Info("Abandoned driver call returned; its result is dropped",
			"operation", c.op, "for", c.subject.String(), "after", time.Since(c.started).Round(time.Millisecond), "code", CodeOf(err).String())
	}
}

// CreateMachine calls the wrapped driver under the CreateMachine deadline.
func (d *Deadlines) CreateMachine(ctx context.Context, req *CreateMachineRequest) (*CreateMachineResponse, error) {
	return do(ctx, d, OperationCreateMachine, machineSubject(req.Machine), func(ctx context.Context) (*CreateMachineResponse, error) {
		return d.next.CreateMachine(ctx, req)
	})
}

// InitializeMachine calls the wrapped driver under the InitializeMachine
// deadline.
func (d *Deadlines) InitializeMachine(ctx context.Context, req *InitializeMachineRequest) (*InitializeMachineResponse, error) {
	return do(ctx, d, OperationInitializeMachine, machineSubject(req.Machine), func(ctx context.Context) (*InitializeMachineResponse, error) {
		return d.next.InitializeMachine(ctx, req)
	})
}

// DeleteMachine calls the wrapped driver under the DeleteMachine deadline.
func (d *Deadlines) DeleteMachine(ctx context.Context, req *DeleteMachineRequest) (*DeleteMachineResponse, error) {
	return do(ctx, d, OperationDeleteMachine, machineSubject(req.Machine), func(ctx context.Context) (*DeleteMachineResponse, error) {
		return d.next.DeleteMachine(ctx, req)
	})
}

// GetMachineStatus calls the wrapped driver under the GetMachineStatus
// deadline. A response that comes with an error (Uninitialized) passes
// through.
func (d *Deadlines) GetMachineStatus(ctx context.Context, req *GetMachineStatusRequest) (*GetMachineStatusResponse, error) {
	return do(ctx, d, OperationGetMachineStatus, machineSubject(req.Machine), func(ctx context.Context) (*GetMachineStatusResponse, error) {
		return d.next.GetMachineStatus(ctx, req)
	})
}

// ListMachines calls the wrapped driver under the ListMachines deadline.
func (d *Deadlines) ListMachines(ctx context.Context, req *ListMachinesRequest) (*ListMachinesResponse, error) {
	return do(ctx, d, OperationListMachines, classSubject(req.MachineClass), func(ctx context.Context) (*ListMachinesResponse, error) {
		return d.next.ListMachines(ctx, req)
	})
}

// GetVolumeIDs calls the wrapped driver under the GetVolumeIDs deadline.
func (d *Deadlines) GetVolumeIDs(ctx context.Context, req *GetVolumeIDsRequest) (*GetVolumeIDsResponse, error) {
	return do(ctx, d, OperationGetVolumeIDs, subject{kind: "volumes"}, func(ctx context.Context) (*GetVolumeIDsResponse, error) {
		return d.next.GetVolumeIDs(ctx, req)
	})
}
