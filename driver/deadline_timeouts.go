package driver

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Defaults of Timeouts. MCM v0.62.1 calls its driver with
// context.Background(), that is without any deadline: a call that never
// returns holds its worker for good. These bound every call without
// cutting short one that a real provider completes. MCM's providers make
// CreateMachine, InitializeMachine and DeleteMachine wait for the cloud's
// long-running operation (Azure, GCP, OpenStack and vSphere wait for the
// VM to be provisioned or torn down, minutes at worst), so those get 10
// minutes: half of MCM's default --machine-creation-timeout (20m), so that
// a creation cut off at its deadline is tried again, and adopts the VM
// if the cloud made it after all, well before the creation timeout marks
// the machine Failed. The reads get less: GetMachineStatus is one lookup
// (with the SDK's retries on throttling), ListMachines may page through
// every VM of an account and runs every --machine-safety-orphan-vms-period
// (15m), and GetVolumeIDs is a mapping that most providers compute
// without calling their cloud.
const (
	DefaultCreateMachineTimeout     = 10 * time.Minute
	DefaultInitializeMachineTimeout = 10 * time.Minute
	DefaultDeleteMachineTimeout     = 10 * time.Minute
	DefaultGetMachineStatusTimeout  = 2 * time.Minute
	DefaultListMachinesTimeout      = 5 * time.Minute
	DefaultGetVolumeIDsTimeout      = time.Minute
)

// Timeouts are the deadlines of driver calls, by operation (see
// WithDeadlines). A zero field means its Default*Timeout, so the zero value
// is the defaults; a negative one is an error.
//
// *Timeouts is a flag.Value: Set takes comma-separated Operation=duration
// pairs ("CreateMachine=15m,GetMachineStatus=30s") and changes only the
// operations it names, String lists all six as they are in effect.
type Timeouts struct {
	CreateMachine     time.Duration
	InitializeMachine time.Duration
	DeleteMachine     time.Duration
	GetMachineStatus  time.Duration
	ListMachines      time.Duration
	GetVolumeIDs      time.Duration
}

// field returns the field of op, nil for an unknown operation.
func (t *Timeouts) field(op Operation) *time.Duration {
	switch op {
	case OperationCreateMachine:
		return &t.CreateMachine
	case OperationInitializeMachine:
		return &t.InitializeMachine
	case OperationDeleteMachine:
		return &t.DeleteMachine
	case OperationGetMachineStatus:
		return &t.GetMachineStatus
	case OperationListMachines:
		return &t.ListMachines
	case OperationGetVolumeIDs:
		return &t.GetVolumeIDs
	}
	return nil
}

// defaultTimeout is the default of op's field.
func defaultTimeout(op Operation) time.Duration {
	switch op {
	case OperationCreateMachine:
		return DefaultCreateMachineTimeout
	case OperationInitializeMachine:
		return DefaultInitializeMachineTimeout
	case OperationDeleteMachine:
		return DefaultDeleteMachineTimeout
	case OperationGetMachineStatus:
		return DefaultGetMachineStatusTimeout
	case OperationListMachines:
		return DefaultListMachinesTimeout
	}
	return DefaultGetVolumeIDsTimeout
}

// Of returns the deadline of op's calls: its field, or its default when the
// field is zero (or op is not an Operation of Driver).
func (t Timeouts) Of(op Operation) time.Duration {
	if f := t.field(op); f != nil && *f != 0 {
		return *f
	}
	return defaultTimeout(op)
}

// Validate returns an error naming every negative field.
func (t Timeouts) Validate() error {
	var errs []error
	for _, op := range Operations() {
		if d := *t.field(op); d < 0 {
			errs = append(errs, fmt.Errorf("timeout of %s must not be negative, got %v", op, d))
		}
	}
	return errors.Join(errs...)
}

// String lists the deadline of every operation, defaults included, as Set
// takes them.
func (t *Timeouts) String() string {
	var tt Timeouts
	if t != nil {
		tt = *t
	}
	parts := make([]string, 0, len(Operations()))
	for _, op := range Operations() {
		parts = append(parts, string(op)+"="+tt.Of(op).String())
	}
	return strings.Join(parts, ",")
}

// Set parses comma-separated Operation=duration pairs into t, leaving the
// operations it does not name as they are. Operations are spelled as the
// Operation constants; durations must be positive. On an error t is
// unchanged.
func (t *Timeouts) Set(s string) error {
	next := *t
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("%q is not Operation=duration", item)
		}
		f := next.field(Operation(strings.TrimSpace(name)))
		if f == nil {
			return fmt.Errorf("unknown operation %q in %q: want one of %s", name, item, operationNames())
		}
		d, err := time.ParseDuration(strings.TrimSpace(value))
		if err != nil {
			return fmt.Errorf("%q: %w", item, err)
		}
		if d <= 0 {
			return fmt.Errorf("%q: the deadline must be positive", item)
		}
		*f = d
	}
	*t = next
	return nil
}

func operationNames() string {
	names := make([]string, 0, len(Operations()))
	for _, op := range Operations() {
		names = append(names, string(op))
	}
	return strings.Join(names, ", ")
}
