package drivertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// kit is the state of one check: the driver under test, behind a
// checkedDriver, and the machines the check created, for clean-up.
type kit struct {
	t      TB
	d      driver.Driver
	fx     Fixture
	opts   Options
	prefix string // of every machine name of this check

	mu    sync.Mutex
	next  int
	live  map[string]*v1alpha1.Machine // created and not deleted since
	maybe map[string]*v1alpha1.Machine // create failed, but a VM may exist
	// inOther are the machines created with otherClass, which are deleted
	// with it too: a driver may find a VM only through its own class.
	inOther map[string]bool
}

// newMachine returns a machine with a fresh name of this check.
func (k *kit) newMachine() *v1alpha1.Machine {
	k.mu.Lock()
	name := fmt.Sprintf("%s%d", k.prefix, k.next)
	k.next++
	k.mu.Unlock()
	return k.fx.NewMachine(name)
}

// Requests get copies of the fixture's objects, so that a driver that
// modifies them (which checkedDriver reports) cannot spoil later calls.
func (k *kit) class() *v1alpha1.MachineClass { return k.fx.MachineClass.DeepCopy() }
func (k *kit) secret() *corev1.Secret        { return k.fx.Secret.DeepCopy() }

// otherClass returns the fixture's OtherMachineClass, or the one derived
// from MachineClass.
func (k *kit) otherClass() *v1alpha1.MachineClass {
	if k.fx.OtherMachineClass != nil {
		return k.fx.OtherMachineClass.DeepCopy()
	}
	other := k.class()
	other.Name += "-other"
	if other.UID != "" {
		other.UID += "-other"
	}
	return other
}

// classOf returns the class to delete the machine with.
func (k *kit) classOf(name string) *v1alpha1.MachineClass {
	k.mu.Lock()
	inOther := k.inOther[name]
	k.mu.Unlock()
	if inOther {
		return k.otherClass()
	}
	return k.class()
}

func (k *kit) create(ctx context.Context, m *v1alpha1.Machine) (*driver.CreateMachineResponse, error) {
	return k.createWithClass(ctx, m, k.class())
}

func (k *kit) createWithClass(ctx context.Context, m *v1alpha1.Machine, class *v1alpha1.MachineClass) (*driver.CreateMachineResponse, error) {
	resp, err := k.d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: m.DeepCopy(), MachineClass: class, Secret: k.secret()})
	k.mu.Lock()
	defer k.mu.Unlock()
	if err == nil {
		k.live[m.Name] = m
		delete(k.maybe, m.Name)
	} else if _, ok := k.live[m.Name]; !ok {
		k.maybe[m.Name] = m
	}
	return resp, err
}

// mustCreate creates m or ends the check.
func (k *kit) mustCreate(ctx context.Context, m *v1alpha1.Machine) *driver.CreateMachineResponse {
	k.t.Helper()
	return k.mustCreateWithClass(ctx, m, k.class())
}

// mustCreateInOther creates m with the other class or ends the check.
func (k *kit) mustCreateInOther(ctx context.Context, m *v1alpha1.Machine) *driver.CreateMachineResponse {
	k.t.Helper()
	k.mu.Lock()
	k.inOther[m.Name] = true // before the create: a failed one is cleaned up with this class too
	k.mu.Unlock()
	return k.mustCreateWithClass(ctx, m, k.otherClass())
}

func (k *kit) mustCreateWithClass(ctx context.Context, m *v1alpha1.Machine, class *v1alpha1.MachineClass) *driver.CreateMachineResponse {
	k.t.Helper()
	resp, err := k.createWithClass(ctx, m, class)
	if err != nil {
		k.t.Fatalf("CreateMachine(%s): %v", m.Name, err)
	}
	if resp.ProviderID == "" {
		k.t.Fatalf("CreateMachine(%s) returned no provider ID", m.Name)
	}
	return resp
}

func (k *kit) delete(ctx context.Context, m *v1alpha1.Machine) error {
	_, err := k.d.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: m.DeepCopy(), MachineClass: k.classOf(m.Name), Secret: k.secret()})
	if err == nil {
		k.mu.Lock()
		delete(k.live, m.Name)
		delete(k.maybe, m.Name)
		k.mu.Unlock()
	}
	return err
}

func (k *kit) status(ctx context.Context, m *v1alpha1.Machine) (*driver.GetMachineStatusResponse, error) {
	return k.d.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: m.DeepCopy(), MachineClass: k.class(), Secret: k.secret()})
}

func (k *kit) initialize(ctx context.Context, m *v1alpha1.Machine) (*driver.InitializeMachineResponse, error) {
	return k.d.InitializeMachine(ctx, &driver.InitializeMachineRequest{Machine: m.DeepCopy(), MachineClass: k.class(), Secret: k.secret()})
}

// listOwn lists the machines of this check: provider ID to machine name.
func (k *kit) listOwn(ctx context.Context) (map[string]string, error) {
	return k.listOwnOf(ctx, k.class())
}

// listOwnOf lists the machines of this check that ListMachines of class
// returns.
func (k *kit) listOwnOf(ctx context.Context, class *v1alpha1.MachineClass) (map[string]string, error) {
	resp, err := k.d.ListMachines(ctx, &driver.ListMachinesRequest{MachineClass: class, Secret: k.secret()})
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for id, name := range resp.Machines {
		if strings.HasPrefix(name, k.prefix) {
			own[id] = name
		}
	}
	return own, nil
}

// eventually waits through the fixture's hook until condition holds, and
// reports what was last observed if it does not.
func (k *kit) eventually(what string, condition func(ctx context.Context) (ok bool, observed string)) bool {
	k.t.Helper()
	var last string
	err := k.fx.Eventually(k.t.Context(), func(ctx context.Context) bool {
		ok, observed := condition(ctx)
		last = observed
		return ok
	})
	if err != nil {
		k.t.Errorf("%s did not happen: %v; last observed: %s", what, err, last)
		return false
	}
	return true
}

// eventuallyStatus waits until GetMachineStatus of m reports providerID
// (OK, or Uninitialized with a response).
func (k *kit) eventuallyStatus(m *v1alpha1.Machine, providerID string) bool {
	k.t.Helper()
	return k.eventually(fmt.Sprintf("GetMachineStatus(%s) reporting %s", m.Name, providerID), func(ctx context.Context) (bool, string) {
		resp, err := k.status(ctx, m)
		code := driver.CodeOf(err)
		if (code == driver.OK || code == driver.Uninitialized) && resp != nil {
			return resp.ProviderID == providerID, fmt.Sprintf("provider ID %q, code %s", resp.ProviderID, code)
		}
		return false, fmt.Sprintf("error %v", err)
	})
}

// eventuallyList waits until the check's machines in ListMachines are want.
func (k *kit) eventuallyList(want map[string]string) bool {
	k.t.Helper()
	return k.eventuallyListOf("", k.class(), want)
}

// eventuallyListOf waits until the check's machines in ListMachines of
// class are want; label names the class in the message.
func (k *kit) eventuallyListOf(label string, class *v1alpha1.MachineClass, want map[string]string) bool {
	k.t.Helper()
	what := "ListMachines"
	if label != "" {
		what += " of " + label
	}
	return k.eventually(fmt.Sprintf("%s showing exactly %v", what, want), func(ctx context.Context) (bool, string) {
		got, err := k.listOwnOf(ctx, class)
		if err != nil {
			return false, fmt.Sprintf("error %v", err)
		}
		return maps.Equal(got, want), fmt.Sprint(got)
	})
}

// cleanup deletes what the check left behind. Failing to delete a machine
// the driver reported as created fails the check: on a real cloud it would
// leak a VM. Machines whose create failed are deleted on a best-effort
// basis, since there may be nothing to delete.
func (k *kit) cleanup() {
	// The check's context is done by now; keep its values (a logger, say).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(k.t.Context()), k.opts.PollTimeout)
	defer cancel()
	k.mu.Lock()
	live, maybe := maps.Clone(k.live), maps.Clone(k.maybe)
	k.mu.Unlock()
	for _, m := range live {
		if err := k.delete(ctx, m); err != nil {
			k.t.Errorf("clean-up: DeleteMachine(%s): %v", m.Name, err)
		}
	}
	for _, m := range maybe {
		if err := k.delete(ctx, m); err != nil {
			k.t.Logf("clean-up: DeleteMachine(%s) after its failed create: %v", m.Name, err)
		}
	}
}

// checkedDriver checks what every check relies on, on every call: errors
// are *driver.Error, success comes with a response, and requests are left
// as they were.
type checkedDriver struct {
	t    TB
	next driver.Driver
}

func (c *checkedDriver) verify(op driver.Operation, success bool, err error, before, after any) {
	c.t.Helper()
	if err != nil {
		if _, ok := errors.AsType[*driver.Error](err); !ok {
			c.t.Errorf("%s returned an untyped error (%T): %v; return a *driver.Error", op, err, err)
		}
	} else if !success {
		c.t.Errorf("%s returned neither a response nor an error", op)
	}
	if !equality.Semantic.DeepEqual(before, after) {
		c.t.Errorf("%s modified its request; requests are read-only", op)
	}
}

func (c *checkedDriver) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	before := *req
	before.Machine, before.MachineClass, before.Secret = req.Machine.DeepCopy(), req.MachineClass.DeepCopy(), req.Secret.DeepCopy()
	resp, err := c.next.CreateMachine(ctx, req)
	c.verify(driver.OperationCreateMachine, resp != nil, err, before, *req)
	return resp, err
}

func (c *checkedDriver) InitializeMachine(ctx context.Context, req *driver.InitializeMachineRequest) (*driver.InitializeMachineResponse, error) {
	before := *req
	before.Machine, before.MachineClass, before.Secret = req.Machine.DeepCopy(), req.MachineClass.DeepCopy(), req.Secret.DeepCopy()
	resp, err := c.next.InitializeMachine(ctx, req)
	c.verify(driver.OperationInitializeMachine, resp != nil, err, before, *req)
	return resp, err
}

func (c *checkedDriver) DeleteMachine(ctx context.Context, req *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	before := *req
	before.Machine, before.MachineClass, before.Secret = req.Machine.DeepCopy(), req.MachineClass.DeepCopy(), req.Secret.DeepCopy()
	resp, err := c.next.DeleteMachine(ctx, req)
	c.verify(driver.OperationDeleteMachine, resp != nil, err, before, *req)
	return resp, err
}

func (c *checkedDriver) GetMachineStatus(ctx context.Context, req *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	before := *req
	before.Machine, before.MachineClass, before.Secret = req.Machine.DeepCopy(), req.MachineClass.DeepCopy(), req.Secret.DeepCopy()
	resp, err := c.next.GetMachineStatus(ctx, req)
	c.verify(driver.OperationGetMachineStatus, resp != nil, err, before, *req)
	if driver.CodeOf(err) == driver.Uninitialized && resp == nil {
		c.t.Errorf("GetMachineStatus returned Uninitialized without a response; the controller needs its provider ID")
	}
	return resp, err
}

func (c *checkedDriver) ListMachines(ctx context.Context, req *driver.ListMachinesRequest) (*driver.ListMachinesResponse, error) {
	before := *req
	before.MachineClass, before.Secret = req.MachineClass.DeepCopy(), req.Secret.DeepCopy()
	resp, err := c.next.ListMachines(ctx, req)
	c.verify(driver.OperationListMachines, resp != nil, err, before, *req)
	return resp, err
}

func (c *checkedDriver) GetVolumeIDs(ctx context.Context, req *driver.GetVolumeIDsRequest) (*driver.GetVolumeIDsResponse, error) {
	before := make([]*corev1.PersistentVolumeSpec, len(req.PVSpecs))
	for i, s := range req.PVSpecs {
		before[i] = s.DeepCopy()
	}
	resp, err := c.next.GetVolumeIDs(ctx, req)
	c.verify(driver.OperationGetVolumeIDs, resp != nil, err, before, req.PVSpecs)
	return resp, err
}
