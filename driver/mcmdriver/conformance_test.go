package mcmdriver_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	mcmv1 "github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	mcm "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/drivertest"
	"github.com/mcmkit/mcm/driver/mcmdriver"
)

// fakeFleet gives every machine its own MCM fake driver
// (driver.NewFakeDriver): the fake stands for one VM, with the provider ID
// and node name it was built with, so a fleet of them is how MCM's fake
// serves several machines. The fake lists the VMs it was built with rather
// than those it creates, so the fleet does not offer ListMachines.
type fakeFleet struct {
	mu    sync.Mutex
	fakes map[string]*mcm.FakeDriver
}

func (f *fakeFleet) fake(m *mcmv1.Machine) *mcm.FakeDriver {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := m.Namespace + "/" + m.Name
	if f.fakes[key] == nil {
		addresses := []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: m.Name}}
		f.fakes[key] = mcm.NewFakeDriver(false, "fake:///"+key, m.Name, "fake-state", addresses, nil, nil).(*mcm.FakeDriver)
	}
	return f.fakes[key]
}

func (f *fakeFleet) CreateMachine(ctx context.Context, req *mcm.CreateMachineRequest) (*mcm.CreateMachineResponse, error) {
	return f.fake(req.Machine).CreateMachine(ctx, req)
}

func (f *fakeFleet) InitializeMachine(ctx context.Context, req *mcm.InitializeMachineRequest) (*mcm.InitializeMachineResponse, error) {
	fd := f.fake(req.Machine)
	if !fd.VMExists {
		// The fake would bring a VM into existence here.
		return nil, status.Error(codes.NotFound, "no VM to initialize for "+req.Machine.Name)
	}
	return fd.InitializeMachine(ctx, req)
}

func (f *fakeFleet) DeleteMachine(ctx context.Context, req *mcm.DeleteMachineRequest) (*mcm.DeleteMachineResponse, error) {
	return f.fake(req.Machine).DeleteMachine(ctx, req)
}

func (f *fakeFleet) GetMachineStatus(ctx context.Context, req *mcm.GetMachineStatusRequest) (*mcm.GetMachineStatusResponse, error) {
	return f.fake(req.Machine).GetMachineStatus(ctx, req)
}

func (f *fakeFleet) ListMachines(context.Context, *mcm.ListMachinesRequest) (*mcm.ListMachinesResponse, error) {
	return nil, status.Error(codes.Unimplemented, "a fleet of fakes does not list")
}

func (f *fakeFleet) GetVolumeIDs(ctx context.Context, req *mcm.GetVolumeIDsRequest) (*mcm.GetVolumeIDsResponse, error) {
	return mcm.NewFakeDriver(false, "", "", "", nil, nil, nil).GetVolumeIDs(ctx, req)
}

// testClass is a class valid for memCloud (and taken as it is by the fake).
func testClass(name string, capacity int) *v1alpha1.MachineClass {
	return &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: name, Namespace: "test"},
		Provider:     "memcloud",
		ProviderSpec: runtime.RawExtension{Raw: fmt.Appendf(nil, `{"zone":"zone-a","capacity":%d}`, capacity)},
		SecretRef:    &corev1.SecretReference{Name: "cloud", Namespace: "test"},
	}
}

func testSecret() *corev1.Secret {
	return &corev1.Secret{Data: map[string][]byte{"userData": []byte("#cloud-config"), "token": []byte("t0ken")}}
}

// TestConformanceOverMCMFake runs our conformance kit over MCM's own fake
// driver behind the adapter.
func TestConformanceOverMCMFake(t *testing.T) {
	drivertest.Run(t, func(drivertest.TB) (driver.Driver, drivertest.Fixture) {
		return mcmdriver.New(&fakeFleet{fakes: map[string]*mcm.FakeDriver{}}), drivertest.Fixture{
			MachineClass: testClass("fake", 0), Secret: testSecret(),
		}
	}, drivertest.Options{SupportsInitializeMachine: true, SupportsGetVolumeIDs: true})
}

// memFixture is the kit's fixture for memCloud.
func memFixture() drivertest.Fixture {
	return drivertest.Fixture{
		MachineClass:        testClass("mem", 0),
		Secret:              testSecret(),
		InvalidProviderSpec: &runtime.RawExtension{Raw: []byte(`{"zone":"zone-a","capacityy":3}`)},
		Volume: &corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: memCSIDriver, VolumeHandle: "vol-1"},
		}},
		VolumeID: "vol-1",
	}
}

var memOptions = drivertest.Options{SupportsInitializeMachine: true, SupportsListMachines: true, SupportsGetVolumeIDs: true}

// TestConformanceOverStatefulMCMDriver runs the kit over memCloud, a
// driver written for MCM's interface that keeps real state.
func TestConformanceOverStatefulMCMDriver(t *testing.T) {
	drivertest.Run(t, func(drivertest.TB) (driver.Driver, drivertest.Fixture) {
		return mcmdriver.New(newMemCloud()), memFixture()
	}, memOptions)
}

// brokenDrivers are MCM drivers that break our contract in ways MCM
// providers have, with the checks of the kit that must catch each.
var brokenDrivers = map[string]struct {
	wrap      func(*memCloud) mcm.Driver
	wantFails []string
}{
	// Creates a second VM on every retry of a create.
	"notIdempotent": {
		wrap:      func(c *memCloud) mcm.Driver { return &recreating{c} },
		wantFails: []string{"CreateIsIdempotent"},
	},
	// Answers a deletion of a VM that is gone with NotFound.
	"deleteNotFound": {
		wrap:      func(c *memCloud) mcm.Driver { return &strictDelete{c} },
		wantFails: []string{"DeleteIsIdempotent", "DeleteOfUnknownMachineSucceeds"},
	},
}

// recreating forgets the machine's existing VM on create.
type recreating struct{ *memCloud }

func (r *recreating) CreateMachine(_ context.Context, req *mcm.CreateMachineRequest) (*mcm.CreateMachineResponse, error) {
	if _, err := decodeSpec(req.MachineClass); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	vm := &memVM{providerID: fmt.Sprintf("memcloud:///zone-a/vm-%d", r.nextID), machine: req.Machine.Name, class: classKey(req.MachineClass)}
	r.vms[vm.providerID] = vm
	return &mcm.CreateMachineResponse{ProviderID: vm.providerID, NodeName: vm.machine}, nil
}

// strictDelete returns NotFound for a machine without a VM.
type strictDelete struct{ *memCloud }

func (s *strictDelete) DeleteMachine(ctx context.Context, req *mcm.DeleteMachineRequest) (*mcm.DeleteMachineResponse, error) {
	if _, err := s.GetMachineStatus(ctx, &mcm.GetMachineStatusRequest{Machine: req.Machine, MachineClass: req.MachineClass, Secret: req.Secret}); mcmdriver.CodeFromMCM(mustStatus(err).Code()) == driver.NotFound {
		return nil, err
	}
	return s.memCloud.DeleteMachine(ctx, req)
}

// brokenEnv names the broken driver TestBrokenDriverConformance runs the
// kit over, in the child process TestKitCatchesBrokenMCMDrivers starts.
const brokenEnv = "MCMDRIVER_BROKEN_DRIVER"

// TestBrokenDriverConformance is the child half of
// TestKitCatchesBrokenMCMDrivers: it fails, by design, when run with
// brokenEnv set, and is skipped otherwise.
func TestBrokenDriverConformance(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("runs only as the child of TestKitCatchesBrokenMCMDrivers")
	}
	broken := brokenDrivers[name]
	// A broken driver never gets to what the kit waits for; memCloud
	// shows every change at once, so a short wait loses nothing.
	opts := memOptions
	opts.PollTimeout = 2 * time.Second
	drivertest.Run(t, func(drivertest.TB) (driver.Driver, drivertest.Fixture) {
		return mcmdriver.New(broken.wrap(newMemCloud())), memFixture()
	}, opts)
}

// TestKitCatchesBrokenMCMDrivers runs the kit over each broken driver in a
// child test process (the kit reports through *testing.T, whose failures
// would fail this test) and compares the checks that failed with those
// that must.
func TestKitCatchesBrokenMCMDrivers(t *testing.T) {
	failLine := regexp.MustCompile(`--- FAIL: TestBrokenDriverConformance/(\w+)`)
	for name, broken := range brokenDrivers {
		t.Run(name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenDriverConformance$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the kit passed the broken driver %s:\n%s", name, out)
			}
			var failed []string
			for _, m := range failLine.FindAllStringSubmatch(string(out), -1) {
				failed = append(failed, m[1])
			}
			slices.Sort(failed)
			if diff := cmp.Diff(broken.wantFails, failed); diff != "" {
				t.Errorf("failed checks (-want +got):\n%s\n%s", diff, out)
			}
		})
	}
}

// mustStatus is err's machine-code status; a nil error has code OK.
func mustStatus(err error) *status.Status {
	s, _ := status.FromError(err)
	return s
}
