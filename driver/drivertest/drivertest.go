package drivertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// TB is the part of testing.TB the checks use; *testing.T implements it.
// The kit's own tests run the checks against a recorder instead, to see
// which checks a deliberately broken driver fails.
type TB interface {
	Helper()
	Name() string
	Context() context.Context
	Cleanup(func())
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// Fixture is what the kit needs to exercise one driver instance.
type Fixture struct {
	// MachineClass the kit creates its machines from. Required. Where
	// ListMachines is supported, it should list only the kit's machines, or
	// at least not other machines whose names start with
	// Options.MachineNamePrefix.
	MachineClass *v1alpha1.MachineClass
	// OtherMachineClass is a second class, valid for the driver, whose VMs
	// ListMachines of MachineClass must not return, nor the other way
	// round: for example a class of another cluster. Nil derives one from
	// MachineClass under another name (and UID, if it has one), which
	// suits drivers that tell classes apart by namespace and name; a
	// driver that goes by tags in the providerSpec must give one whose
	// tags differ.
	OtherMachineClass *v1alpha1.MachineClass
	// Secret is the merged secret for MachineClass (see
	// driver.MergeSecrets), user data included. Required.
	Secret *corev1.Secret
	// InvalidProviderSpec is a providerSpec the driver must reject with
	// InvalidArgument, such as one with a misspelled field. Nil skips that
	// check.
	InvalidProviderSpec *runtime.RawExtension
	// NewMachine returns the machine to create under a name the kit chose.
	// Nil builds a plain Machine in namespace "drivertest" that refers to
	// MachineClass.
	NewMachine func(name string) *v1alpha1.Machine
	// Eventually waits until condition reports true, for results that a
	// real cloud only shows after a while (a new VM in a list, a deleted one
	// gone). It returns an error if the condition does not hold in time.
	// Nil polls every Options.PollInterval for up to Options.PollTimeout on
	// the real clock. A driver on a fake clock can step its clock here
	// between attempts.
	Eventually func(ctx context.Context, condition func(ctx context.Context) bool) error
	// Volume is a persistent volume of the driver's cloud and VolumeID the
	// ID GetVolumeIDs must return for it. Optional; without them the
	// GetVolumeIDs check only checks that foreign volumes are skipped.
	Volume   *corev1.PersistentVolumeSpec
	VolumeID string
}

// Options says what the driver under test claims to support and tunes the
// kit. The zero value claims only the required operations.
type Options struct {
	// SupportsInitializeMachine, SupportsListMachines and
	// SupportsGetVolumeIDs claim the optional operations. The kit checks
	// claimed operations for their contract and unclaimed ones for
	// returning Unimplemented.
	SupportsInitializeMachine bool
	SupportsListMachines      bool
	SupportsGetVolumeIDs      bool
	// PollInterval and PollTimeout tune the default Eventually: defaults
	// 100ms and 1 minute. PollTimeout also bounds the clean-up of each check.
	PollInterval, PollTimeout time.Duration
	// Concurrency is the number of machines created at once by the
	// concurrency check; default 8.
	Concurrency int
	// MachineNamePrefix starts the name of every machine the kit creates;
	// default "drivertest". Make it unique per run when several runs share
	// one cloud account.
	MachineNamePrefix string
}

func (o Options) withDefaults() Options {
	if o.PollInterval <= 0 {
		o.PollInterval = 100 * time.Millisecond
	}
	if o.PollTimeout <= 0 {
		o.PollTimeout = time.Minute
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.MachineNamePrefix == "" {
		o.MachineNamePrefix = "drivertest"
	}
	return o
}

// NewDriverFunc returns a fresh driver under test and its fixture. The kit
// calls it once per check, so that checks cannot affect each other; release
// resources with t.Cleanup. Under Run, t is the check's *testing.T.
type NewDriverFunc func(t TB) (driver.Driver, Fixture)

// Run checks the driver against the contract of package driver, one
// subtest per check (see the package documentation for the list).
func Run(t *testing.T, newDriver NewDriverFunc, opts Options) {
	t.Helper()
	opts = opts.withDefaults()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			runCheck(t, c, newDriver, opts)
		})
	}
}

// runCheck sets up a kit for one check and runs it.
func runCheck(t TB, c check, newDriver NewDriverFunc, opts Options) {
	t.Helper()
	d, fx := newDriver(t)
	switch {
	case d == nil:
		t.Fatalf("newDriver returned no driver")
	case fx.MachineClass == nil || fx.Secret == nil:
		t.Fatalf("newDriver returned a fixture without MachineClass or Secret")
	}
	k := &kit{
		t:       t,
		d:       &checkedDriver{t: t, next: d},
		fx:      fx,
		opts:    opts,
		prefix:  fmt.Sprintf("%s-%s-", opts.MachineNamePrefix, c.slug),
		live:    map[string]*v1alpha1.Machine{},
		maybe:   map[string]*v1alpha1.Machine{},
		inOther: map[string]bool{},
	}
	if k.fx.NewMachine == nil {
		k.fx.NewMachine = k.defaultMachine
	}
	if k.fx.Eventually == nil {
		k.fx.Eventually = poll(opts.PollInterval, opts.PollTimeout)
	}
	t.Cleanup(k.cleanup)
	c.run(k)
}

// poll is the default Eventually: it checks right away, then every interval
// until timeout.
func poll(interval, timeout time.Duration) func(context.Context, func(context.Context) bool) error {
	return func(ctx context.Context, condition func(context.Context) bool) error {
		return wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
			return condition(ctx), nil
		})
	}
}

func (k *kit) defaultMachine(name string) *v1alpha1.Machine {
	return &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "drivertest"},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{
			APIGroup: v1alpha1.SchemeGroupVersion.Group, Kind: "MachineClass", Name: k.fx.MachineClass.Name,
		}},
	}
}
