package machine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// machineIndexer is a machine cache with the indexes the claims use.
func machineIndexer(ms ...*v1alpha1.Machine) cache.Indexer {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		machinestate.ByNodeIndex: machinestate.IndexByNode, machinestate.ByProviderIDIndex: machinestate.IndexByProviderID})
	for _, m := range ms {
		_ = idx.Add(m)
	}
	return idx
}

// initDriver has no VM for any machine, creates one on CreateMachine and
// answers InitializeMachine as told.
type initDriver struct {
	driver.Driver // nil: other calls panic
	initResp      *driver.InitializeMachineResponse
	initErr       error
	calls         []driver.Operation
}

func (d *initDriver) GetMachineStatus(context.Context, *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	d.calls = append(d.calls, driver.OperationGetMachineStatus)
	return nil, driver.NewError(driver.NotFound, "no VM")
}

func (d *initDriver) CreateMachine(context.Context, *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	d.calls = append(d.calls, driver.OperationCreateMachine)
	return &driver.CreateMachineResponse{ProviderID: "p1", NodeName: "n1"}, nil
}

func (d *initDriver) InitializeMachine(context.Context, *driver.InitializeMachineRequest) (*driver.InitializeMachineResponse, error) {
	d.calls = append(d.calls, driver.OperationInitializeMachine)
	return d.initResp, d.initErr
}

// TestCreateInitializeMachineCodes: after CreateMachine, only Unimplemented
// from InitializeMachine skips the step, as in MCM's controller; NotFound
// (the VM vanished) is a failed initialization like any other code, which
// the machine reports as MCM does and retries from GetMachineStatus.
func TestCreateInitializeMachineCodes(t *testing.T) {
	type result struct {
		FailedOp             driver.Operation
		Code                 string
		ProviderID, NodeName string
		Phase                v1alpha1.MachinePhase
		Description          string
	}
	tests := []struct {
		name string
		resp *driver.InitializeMachineResponse
		err  error
		want result
	}{
		{"Unimplemented skips the step", nil, driver.NewError(driver.Unimplemented, "no init"),
			result{"", "OK", "p1", "n1", v1alpha1.MachinePending, "Creating machine on cloud provider"}},
		{"OK may correct the provider ID", &driver.InitializeMachineResponse{ProviderID: "p2"}, nil,
			result{"", "OK", "p2", "n1", v1alpha1.MachinePending, "Creating machine on cloud provider"}},
		{"NotFound is a failure", nil, driver.NewError(driver.NotFound, "VM gone"),
			result{driver.OperationInitializeMachine, "NotFound", "", "", v1alpha1.MachineCrashLoopBackOff, "Provider error: NotFound: VM gone. Initialize VM Instance"}},
		{"Uninitialized is a failure", nil, driver.NewError(driver.Uninitialized, "not yet"),
			result{driver.OperationInitializeMachine, "Uninitialized", "", "", v1alpha1.MachineCrashLoopBackOff, "Provider error: Uninitialized: not yet. Initialize VM Instance"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t)
			metrics, err := newMetrics(nil)
			if err != nil {
				t.Fatal(err)
			}
			d := &initDriver{initResp: tc.resp, initErr: tc.err}
			c := &Controller{opts: *o, driver: d, metrics: metrics, machineIdx: machineIndexer()}
			m := baseMachine()
			m.Annotations = map[string]string{CreationStartedAnnotation: formatTime(t0.Add(-time.Minute))}
			secret := &corev1.Secret{Data: map[string][]byte{v1alpha1.UserDataKey: []byte("x")}}
			out := c.create(context.Background(), m, readyClass(), secret)
			p := planCreateOutcome(obsFor(m), out, o)
			got := result{out.FailedOp, driver.CodeOf(out.Err).String(), out.ProviderID, out.NodeName,
				p.Machine.Status.CurrentStatus.Phase, p.Machine.Status.LastOperation.Description}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			wantCalls := []driver.Operation{driver.OperationGetMachineStatus, driver.OperationCreateMachine, driver.OperationInitializeMachine}
			if diff := cmp.Diff(wantCalls, d.calls); diff != "" {
				t.Errorf("driver calls (-want +got):\n%s", diff)
			}
		})
	}
}

// lyingDriver has no VM for any machine, creates one (p1 on n1) and
// answers CreateMachine and InitializeMachine with what it is told; it
// records each call with the provider ID its request carries.
type lyingDriver struct {
	driver.Driver // nil: other calls panic
	create, init  driver.CreateMachineResponse
	calls         []string
}

func (d *lyingDriver) record(op driver.Operation, m *v1alpha1.Machine) {
	d.calls = append(d.calls, string(op)+"("+m.Spec.ProviderID+")")
}

func (d *lyingDriver) GetMachineStatus(_ context.Context, req *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	d.record(driver.OperationGetMachineStatus, req.Machine)
	return nil, driver.NewError(driver.NotFound, "no VM")
}

func (d *lyingDriver) CreateMachine(_ context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	d.record(driver.OperationCreateMachine, req.Machine)
	return &d.create, nil
}

func (d *lyingDriver) InitializeMachine(_ context.Context, req *driver.InitializeMachineRequest) (*driver.InitializeMachineResponse, error) {
	d.record(driver.OperationInitializeMachine, req.Machine)
	return &driver.InitializeMachineResponse{ProviderID: d.init.ProviderID, NodeName: d.init.NodeName}, nil
}

func (d *lyingDriver) DeleteMachine(_ context.Context, req *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	d.record(driver.OperationDeleteMachine, req.Machine)
	return &driver.DeleteMachineResponse{}, nil
}

// TestCreateRefusesAnotherMachinesVM: an answer of CreateMachine or
// InitializeMachine that names the VM of another machine (one the driver
// vouched for) is refused before any call carries its provider ID, and
// no VM is deleted for it: the machine is Failed with the driver's fault,
// without the answer's provider ID or node.
func TestCreateRefusesAnotherMachinesVM(t *testing.T) {
	type result struct {
		Calls                []string
		Taken                bool
		ProviderID, NodeName string
		Phase                v1alpha1.MachinePhase
		Code, Reason         string
	}
	own := driver.CreateMachineResponse{ProviderID: "p1", NodeName: "n1"}
	victims := driver.CreateMachineResponse{ProviderID: "pv", NodeName: "nv"}
	for _, tc := range []struct {
		name         string
		create, init driver.CreateMachineResponse
		want         result
	}{
		{"CreateMachine names the victim's VM", victims, victims,
			result{[]string{"GetMachineStatus()", "CreateMachine()"}, true, "", "", v1alpha1.MachineFailed, "Internal", ReasonForeignVM}},
		{"InitializeMachine names the victim's VM", own, victims,
			result{[]string{"GetMachineStatus()", "CreateMachine()", "InitializeMachine(p1)"}, true, "", "", v1alpha1.MachineFailed, "Internal", ReasonForeignVM}},
		{"an answer of the machine's own", own, own,
			result{[]string{"GetMachineStatus()", "CreateMachine()", "InitializeMachine(p1)"}, false, "p1", "n1", v1alpha1.MachinePending, "", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t)
			metrics, err := newMetrics(nil)
			if err != nil {
				t.Fatal(err)
			}
			victim := withPhase(baseMachine(), v1alpha1.MachineRunning, "pv")
			victim.Name, victim.UID, victim.Labels[v1alpha1.NodeLabelKey] = "victim", "uid-victim", "nv"
			d := &lyingDriver{create: tc.create, init: tc.init}
			c := &Controller{opts: *o, driver: d, metrics: metrics, machineIdx: machineIndexer(victim)}
			c.vouches.set(victim, vouch{ProviderID: "pv"})
			// The liar claims the victim's VM already: the claim goes too.
			m := baseMachine()
			m.Name, m.Spec.ProviderID = "liar", "pv"
			m.Annotations = map[string]string{CreationStartedAnnotation: formatTime(t0.Add(-time.Minute))}
			out := c.create(context.Background(), m, readyClass(), &corev1.Secret{})
			obs := obsFor(m)
			obs.HasTarget = true
			p := planCreateOutcome(obs, out, o)
			got := result{d.calls, out.Taken != "", p.Machine.Spec.ProviderID, p.Machine.Labels[v1alpha1.NodeLabelKey],
				p.Machine.Status.CurrentStatus.Phase, p.Machine.Status.LastOperation.ErrorCode, ""}
			if p.Event != nil && p.Event.Type == corev1.EventTypeWarning {
				got.Reason = p.Event.Reason
			}
			if tc.want.Reason != "" && !strings.Contains(p.Machine.Status.LastOperation.Description, "VM pv is the VM of machine ns/victim") {
				t.Errorf("lastOperation %q does not say whose VM it is", p.Machine.Status.LastOperation.Description)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			if _, vouched := c.vouches.get(m); vouched != !got.Taken {
				t.Errorf("the driver's word kept for the machine: %v, want %v", vouched, !got.Taken)
			}
		})
	}
}

func TestVMTakenBy(t *testing.T) {
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", UID: "uid-m"}}
	node := func(pid, owner string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{v1alpha1.MachineNameLabelKey: "other"}}, Spec: corev1.NodeSpec{ProviderID: pid}}
		if owner != "" {
			n.Annotations = map[string]string{v1alpha1.MachineUIDAnnotation: owner}
		}
		return n
	}
	for _, tc := range []struct {
		name   string
		pid    string
		node   *corev1.Node
		owners []string
		want   string
	}{
		{"nobody's VM", "p1", nil, nil, ""},
		{"no provider ID", "", node("", "uid-x"), []string{"ns/x"}, ""},
		{"owned by another machine", "p1", nil, []string{"ns/x"}, "VM p1 is the VM of machine ns/x"},
		{"its node bound to another machine", "p1", node("p1", "uid-x"), nil, `VM p1 runs node n, which is bound to machine "other" (UID uid-x)`},
		{"its node bound to this machine", "p1", node("p1", "uid-m"), nil, ""},
		{"its node not bound", "p1", node("p1", ""), nil, ""},
		// Another VM's node of that name: a stale node (takenNode), not
		// another machine's VM.
		{"the node of another VM", "p1", node("p0", "uid-x"), nil, ""},
	} {
		if got := vmTakenBy(m, tc.pid, tc.node, tc.owners); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestBindRefusal(t *testing.T) {
	node := func(pid, owner string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{v1alpha1.MachineNameLabelKey: "other"}}, Spec: corev1.NodeSpec{ProviderID: pid}}
		if owner != "" {
			n.Annotations = map[string]string{v1alpha1.MachineUIDAnnotation: owner}
		}
		return n
	}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		pid  string
		want string
	}{
		{"unbound, the machine's VM", node("p1", ""), "p1", ""},
		{"bound to the machine", node("p1", "uid-m"), "p1", ""},
		{"bound to another machine", node("p1", "uid-x"), "p1", `node n is bound to machine "other" (UID uid-x)`},
		{"another VM's node", node("p2", ""), "p1", `node n runs on VM "p2", not on "p1"`},
		{"no provider ID yet", node("", ""), "p1", `node n runs on VM "", not on "p1"`},
		{"a machine without a provider ID", node("", ""), "", `node n runs on VM "", not on ""`},
	} {
		if got := bindRefusal(tc.node, "uid-m", tc.pid); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCheckCreated: a driver's answer is refused whole (Internal) when
// the controller could not store it: no provider ID, or one that is too
// long or not UTF-8; a lastKnownState over its bound; with a target
// cluster, a node name that cannot name a Node; without one (when the
// addresses are stored), too many addresses or a too long one.
func TestCheckCreated(t *testing.T) {
	ok := createOutcome{ProviderID: "sim:///zone-a/vm-1", NodeName: "node-1"}
	with := func(f func(*createOutcome)) createOutcome {
		out := ok
		f(&out)
		return out
	}
	addrs := func(n int, addr string) []corev1.NodeAddress {
		out := make([]corev1.NodeAddress, n)
		for i := range out {
			out[i] = corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: addr}
		}
		return out
	}
	tests := []struct {
		name      string
		out       createOutcome
		hasTarget bool
		want      string // the error; "" for none
	}{
		{name: "with a target", out: ok, hasTarget: true},
		{name: "without a target", out: with(func(o *createOutcome) { o.NodeName = ""; o.Addresses = addrs(2, "10.0.0.1") })},
		{name: "no provider ID", out: with(func(o *createOutcome) { o.ProviderID = "" }), hasTarget: true,
			want: "Internal: driver returned no provider ID"},
		{name: "a provider ID of the largest size", out: with(func(o *createOutcome) { o.ProviderID = strings.Repeat("p", maxProviderID) }), hasTarget: true},
		{name: "a provider ID too long", out: with(func(o *createOutcome) { o.ProviderID = strings.Repeat("p", maxProviderID+1) }), hasTarget: true,
			want: `Internal: driver returned a provider ID of 1025 bytes starting "` + strings.Repeat("p", 64) + `"; the controller stores one of at most 1024 bytes of valid UTF-8`},
		{name: "a provider ID not UTF-8", out: with(func(o *createOutcome) { o.ProviderID = "sim:///\xff" }),
			want: `Internal: driver returned a provider ID of 8 bytes starting "sim:///\xff"; the controller stores one of at most 1024 bytes of valid UTF-8`},
		{name: "a state of the largest size", out: with(func(o *createOutcome) { o.LastKnownState = strings.Repeat("s", maxLastKnownState) }), hasTarget: true},
		{name: "a state of 2 MB, with a target", out: with(func(o *createOutcome) { o.LastKnownState = strings.Repeat("s", 2<<20) }), hasTarget: true,
			want: "Internal: driver returned a lastKnownState of 2097152 bytes; the controller stores at most 65536"},
		{name: "a state too long, without a target", out: with(func(o *createOutcome) { o.LastKnownState = strings.Repeat("s", maxLastKnownState+1) }),
			want: "Internal: driver returned a lastKnownState of 65537 bytes; the controller stores at most 65536"},
		{name: "the most addresses", out: with(func(o *createOutcome) { o.Addresses = addrs(maxAddresses, strings.Repeat("a", maxAddress)) })},
		{name: "too many addresses", out: with(func(o *createOutcome) { o.Addresses = addrs(maxAddresses+1, "10.0.0.1") }),
			want: "Internal: driver returned 33 addresses; the controller stores at most 32"},
		{name: "an address too long", out: with(func(o *createOutcome) { o.Addresses = addrs(1, strings.Repeat("a", maxAddress+1)) }),
			want: `Internal: driver returned an address of 254 bytes and type of 10 bytes, starting "` + strings.Repeat("a", 64) + `"; the controller stores addresses and types of at most 253 bytes`},
		{name: "an address type too long", out: with(func(o *createOutcome) {
			o.Addresses = []corev1.NodeAddress{{Type: corev1.NodeAddressType(strings.Repeat("t", maxAddress+1)), Address: "10.0.0.1"}}
		}), want: `Internal: driver returned an address of 8 bytes and type of 254 bytes, starting "10.0.0.1"; the controller stores addresses and types of at most 253 bytes`},
		// With a target cluster the addresses are the node's, not stored.
		{name: "too many addresses, with a target", out: with(func(o *createOutcome) { o.Addresses = addrs(maxAddresses+1, "10.0.0.1") }), hasTarget: true},
		{name: "no node name, with a target", out: with(func(o *createOutcome) { o.NodeName = "" }), hasTarget: true,
			want: "Internal: driver returned no node name"},
		{name: "a node name that cannot be a label value", out: with(func(o *createOutcome) { o.NodeName = strings.Repeat("n", 64) }), hasTarget: true,
			want: `Internal: driver returned node name "` + strings.Repeat("n", 64) + `" for VM sim:///zone-a/vm-1, which cannot name a Node in the machine's "node" label: must be no more than 63 bytes`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			if err := checkCreated(tc.out, tc.hasTarget); err != nil {
				got = err.Error()
				if code := driver.CodeOf(err); code != driver.Internal {
					t.Errorf("code %v, want Internal: the driver's fault", code)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}
