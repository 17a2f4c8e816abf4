package mcmdriver_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcm "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/mcmdriver"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
	"github.com/mcmkit/mcm/reference/manager"
)

// failingMCM is an MCM provider whose CreateMachine always fails as a
// cloud's API does, with a new request ID each time, and Internal, the
// code Gardener's providers give most cloud errors.
type failingMCM struct {
	mcm.Driver
	creates atomic.Int32
}

func (f *failingMCM) CreateMachine(context.Context, *mcm.CreateMachineRequest) (*mcm.CreateMachineResponse, error) {
	n := f.creates.Add(1)
	return nil, status.Error(codes.Internal, fmt.Sprintf("InsufficientInstanceCapacity: We currently do not have sufficient capacity. status code: 500, request id: 7c1e%04d", n))
}

// TestManagerRetriesAFailingMCMCreateOnItsBackoff runs the reference
// manager with an MCM provider behind the adapter whose CreateMachine
// always fails: the machine turns CrashLoopBackOff, and CreateMachine is
// not called again before the backoff of an Internal error
// (machine.DefaultMediumRetry, minutes), whatever the controller wrote
// meanwhile.
func TestManagerRetriesAFailingMCMCreateOnItsBackoff(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	machines := versioned.NewForConfigOrDie(env.Config())

	var mu sync.Mutex
	var provider *failingMCM
	drivers := manager.BuiltinDrivers()
	drivers["mcm-sim"] = func(ctx context.Context, denv manager.DriverEnv) (driver.Driver, manager.Runnable, error) {
		simDriver, kubelet, err := manager.NewSimDriver(ctx, denv)
		if err != nil {
			return nil, nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		provider = &failingMCM{Driver: mcmdriver.ToMCM(simDriver)}
		return mcmdriver.New(provider), kubelet, nil
	}
	startManager(t, env.Kubeconfig(), ns, drivers)
	createSecretAndClasses(t, env, machines, ns)
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "fails", Namespace: ns},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "small"}}}
	if _, err := machines.MachineV1alpha1().Machines(ns).Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	creates := func() int32 {
		mu.Lock()
		defer mu.Unlock()
		if provider == nil {
			return 0
		}
		return provider.creates.Load()
	}
	testenv.Eventually(t, stage, func(ctx context.Context) (bool, string) {
		got, err := machines.MachineV1alpha1().Machines(ns).Get(ctx, m.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.CurrentStatus.Phase == v1alpha1.MachineCrashLoopBackOff && creates() > 0,
			fmt.Sprintf("phase %q, lastOperation %+v, %d CreateMachine calls", got.Status.CurrentStatus.Phase, got.Status.LastOperation, creates())
	})
	// The controller's writes (the write-ahead, the failure's status) and
	// their events come within this window; the backoff is minutes.
	time.Sleep(3 * time.Second)
	if n := creates(); n != 1 {
		t.Errorf("the MCM provider's CreateMachine was called %d times within 3s of failing, want 1: the next waits for the backoff of %v",
			n, machine.DefaultMediumRetry)
	}
}
