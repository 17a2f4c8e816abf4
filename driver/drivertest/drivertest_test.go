package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// flaw is a deliberate contract violation of memDriver.
type flaw string

const (
	noFlaw                flaw = ""
	createNotIdempotent   flaw = "create makes a new VM every time"
	untypedErrors         flaw = "errors are not *driver.Error"
	deleteUnknownNotFound flaw = "delete of an unknown machine is NotFound"
	ignoresContext        flaw = "the context is ignored"
	listKeepsDeleted      flaw = "list still shows deleted machines"
	listIgnoresClass      flaw = "list shows the VMs of every class"
	mutatesRequest        flaw = "create writes the provider ID into the request's machine"
)

// memDriver is a minimal driver with no optional operations but
// ListMachines, correct unless given a flaw. It accepts only the
// providerSpec {"size":"small"} and needs the secret key "token". It tags
// each VM with its class's namespace/name, and every operation but
// CreateMachine finds VMs by machine name and that tag, as a driver that
// scopes its calls to a cluster does.
type memDriver struct {
	driver.UnimplementedOptional
	flaw flaw

	mu      sync.Mutex
	next    int
	vms     map[string][]string // machine name -> provider IDs
	classOf map[string]string   // provider ID -> class tag
	deleted map[string]string   // provider ID -> machine name, for listKeepsDeleted
}

func newMemDriver(f flaw) *memDriver {
	return &memDriver{flaw: f, vms: map[string][]string{}, classOf: map[string]string{}, deleted: map[string]string{}}
}

func classTag(class *v1alpha1.MachineClass) string { return class.Namespace + "/" + class.Name }

var validSpec = []byte(`{"size":"small"}`)

func (d *memDriver) fail(code driver.Code, format string, args ...any) error {
	if d.flaw == untypedErrors {
		return fmt.Errorf(format, args...)
	}
	return driver.Errorf(code, format, args...)
}

func (d *memDriver) begin(ctx context.Context, secret *corev1.Secret) error {
	if d.flaw != ignoresContext && ctx.Err() != nil {
		if d.flaw == untypedErrors {
			return fmt.Errorf("call abandoned: %w", ctx.Err())
		}
		return driver.ContextError(ctx)
	}
	if secret == nil || len(secret.Data["token"]) == 0 {
		return d.fail(driver.InvalidArgument, "secret has no token")
	}
	return nil
}

func (d *memDriver) checkSpec(raw runtime.RawExtension) error {
	if !bytes.Equal(raw.Raw, validSpec) {
		return d.fail(driver.InvalidArgument, "providerSpec %s is not %s", raw.Raw, validSpec)
	}
	return nil
}

func (d *memDriver) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	if err := d.begin(ctx, req.Secret); err != nil {
		return nil, err
	}
	if err := d.checkSpec(req.MachineClass.ProviderSpec); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	name := req.Machine.Name
	if ids := d.vms[name]; len(ids) > 0 && d.flaw != createNotIdempotent {
		return &driver.CreateMachineResponse{ProviderID: ids[0], NodeName: name}, nil
	}
	d.next++
	id := fmt.Sprintf("mem:///%s/%d", name, d.next)
	d.vms[name] = append(d.vms[name], id)
	d.classOf[id] = classTag(req.MachineClass)
	if d.flaw == mutatesRequest {
		req.Machine.Spec.ProviderID = id
	}
	return &driver.CreateMachineResponse{ProviderID: id, NodeName: name}, nil
}

// only returns the single VM of a machine in the class, or the error for
// none or several.
func (d *memDriver) only(name string, class *v1alpha1.MachineClass) (id string, found bool, err error) {
	ids := slices.DeleteFunc(slices.Clone(d.vms[name]), func(id string) bool { return d.classOf[id] != classTag(class) })
	switch len(ids) {
	case 0:
		return "", false, d.fail(driver.NotFound, "no VM for %s", name)
	case 1:
		return ids[0], true, nil
	default:
		return "", true, d.fail(driver.OutOfRange, "VMs %v for %s", ids, name)
	}
}

func (d *memDriver) DeleteMachine(ctx context.Context, req *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	if err := d.begin(ctx, req.Secret); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	name := req.Machine.Name
	id, found, err := d.only(name, req.MachineClass)
	switch {
	case !found && d.flaw != deleteUnknownNotFound:
		return &driver.DeleteMachineResponse{}, nil
	case err != nil:
		return nil, err
	}
	d.vms[name] = slices.DeleteFunc(d.vms[name], func(other string) bool { return other == id })
	if len(d.vms[name]) == 0 {
		delete(d.vms, name)
	}
	d.deleted[id] = name
	return &driver.DeleteMachineResponse{}, nil
}

func (d *memDriver) GetMachineStatus(ctx context.Context, req *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	if err := d.begin(ctx, req.Secret); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	id, _, err := d.only(req.Machine.Name, req.MachineClass)
	if err != nil {
		return nil, err
	}
	return &driver.GetMachineStatusResponse{ProviderID: id, NodeName: req.Machine.Name}, nil
}

func (d *memDriver) ListMachines(ctx context.Context, req *driver.ListMachinesRequest) (*driver.ListMachinesResponse, error) {
	if err := d.begin(ctx, req.Secret); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]string{}
	for name, ids := range d.vms {
		for _, id := range ids {
			if d.flaw == listIgnoresClass || d.classOf[id] == classTag(req.MachineClass) {
				out[id] = name
			}
		}
	}
	if d.flaw == listKeepsDeleted {
		for id, name := range d.deleted {
			out[id] = name
		}
	}
	return &driver.ListMachinesResponse{Machines: out}, nil
}

// memFixture returns a NewDriverFunc for memDriver with the flaw. Its
// Eventually tries three times without waiting: memDriver is consistent
// at once, so a condition that does not hold right away never will.
func memFixture(f flaw) NewDriverFunc {
	return func(TB) (driver.Driver, Fixture) {
		return newMemDriver(f), Fixture{
			MachineClass:        memClass(),
			Secret:              &corev1.Secret{Data: map[string][]byte{"token": []byte("t"), "userData": []byte("#!")}},
			InvalidProviderSpec: &runtime.RawExtension{Raw: []byte(`{"size":"small","colour":"red"}`)},
			Eventually:          tries(3),
		}
	}
}

func tries(n int) func(context.Context, func(context.Context) bool) error {
	return func(ctx context.Context, condition func(context.Context) bool) error {
		for range n {
			if condition(ctx) {
				return nil
			}
		}
		return errors.New("condition still false after " + fmt.Sprint(n) + " attempts")
	}
}

var memOptions = Options{SupportsListMachines: true, Concurrency: 4}

func TestKitPassesACorrectDriver(t *testing.T) {
	results := runIsolated(memFixture(noFlaw), memOptions)
	if failed := failedChecks(results); len(failed) > 0 {
		for _, name := range failed {
			t.Errorf("%s failed for a correct driver:\n%s", name, strings.Join(results[name].logs, "\n"))
		}
	}
	var skipped []string
	for _, name := range CheckNames() {
		if results[name].skipped {
			skipped = append(skipped, name)
		}
	}
	want := []string{"InitializeMachineAfterCreate", "GetVolumeIDsSkipsForeignVolumes"}
	if diff := cmp.Diff(want, skipped); diff != "" {
		t.Errorf("skipped checks (-want +got):\n%s", diff)
	}
}

// TestKitCatchesBrokenDrivers runs the kit against drivers that each break
// one rule and asserts exactly which checks fail.
func TestKitCatchesBrokenDrivers(t *testing.T) {
	tests := []struct {
		flaw flaw
		want []string
	}{
		{createNotIdempotent, []string{"CreateIsIdempotent"}},
		{deleteUnknownNotFound, []string{"DeleteOfUnknownMachineSucceeds", "DeleteIsIdempotent"}},
		{ignoresContext, []string{"ContextCancellationIsHonoured"}},
		{listKeepsDeleted, []string{"DeleteIsIdempotent", "ListShowsExactlyTheCreatedMachines"}},
		{listIgnoresClass, []string{"ListIsScopedToTheClass"}},
		{untypedErrors, []string{
			"StatusOfUnknownMachineIsNotFound",
			"DeleteIsIdempotent",
			"ContextCancellationIsHonoured",
			"ErrorsAreTyped",
			"InvalidProviderSpecIsInvalidArgument",
		}},
		{mutatesRequest, []string{
			"CreateIsIdempotent",
			"DeleteIsIdempotent",
			"ListShowsExactlyTheCreatedMachines",
			"ListIsScopedToTheClass",
			"ConcurrentCreatesDoNotInterfere",
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.flaw), func(t *testing.T) {
			results := runIsolated(memFixture(tt.flaw), memOptions)
			got := failedChecks(results)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("failed checks (-want +got):\n%s", diff)
				for _, name := range got {
					t.Logf("%s:\n  %s", name, strings.Join(results[name].logs, "\n  "))
				}
			}
		})
	}
}

// TestKitCleansUpWithTheClassOfEachMachine runs the kit against a driver
// that finds VMs only through the class they were created with, with the
// fixture's other class and with the derived one, and checks that no
// check fails and none leaves a VM behind.
func TestKitCleansUpWithTheClassOfEachMachine(t *testing.T) {
	otherNamespace := memClass()
	otherNamespace.Namespace = "elsewhere"
	for _, tt := range []struct {
		name  string
		other *v1alpha1.MachineClass
	}{
		{"derived other class", nil},
		{"fixture's other class", otherNamespace},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var drivers []*memDriver
			results := runIsolated(func(tb TB) (driver.Driver, Fixture) {
				d, fx := memFixture(noFlaw)(tb)
				drivers = append(drivers, d.(*memDriver))
				fx.OtherMachineClass = tt.other
				return d, fx
			}, memOptions)
			if diff := cmp.Diff([]string(nil), failedChecks(results)); diff != "" {
				t.Errorf("failed checks (-want +got):\n%s", diff)
			}
			left := map[string][]string{}
			for _, d := range drivers {
				for name, ids := range d.vms {
					left[name] = append(left[name], ids...)
				}
			}
			if diff := cmp.Diff(map[string][]string{}, left); diff != "" {
				t.Errorf("VMs left after the checks (-want +got):\n%s", diff)
			}
		})
	}
}

func memClass() *v1alpha1.MachineClass {
	return &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "small", Namespace: "drivertest"},
		ProviderSpec: runtime.RawExtension{Raw: validSpec},
	}
}

// TestRunPassesACorrectDriver exercises the public entry point.
func TestRunPassesACorrectDriver(t *testing.T) {
	Run(t, memFixture(noFlaw), memOptions)
}
