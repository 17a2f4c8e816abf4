package mcmdriver_test

import (
	"context"
	"encoding/json"
	"testing"

	mcmv1 "github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	mcm "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/mcmdriver"
)

// recorder is an MCM driver that records its last requests and answers
// with the responses it holds; mutate, if set, runs on every request first,
// as a driver that writes to its request.
type recorder struct {
	create  *mcm.CreateMachineRequest
	list    *mcm.ListMachinesRequest
	volumes *mcm.GetVolumeIDsRequest
	mutate  func(m *mcmv1.Machine, c *mcmv1.MachineClass, s *corev1.Secret)

	createResp *mcm.CreateMachineResponse
	listResp   *mcm.ListMachinesResponse
}

func (r *recorder) CreateMachine(_ context.Context, req *mcm.CreateMachineRequest) (*mcm.CreateMachineResponse, error) {
	r.create = req
	if r.mutate != nil {
		r.mutate(req.Machine, req.MachineClass, req.Secret)
	}
	return r.createResp, nil
}

func (r *recorder) InitializeMachine(context.Context, *mcm.InitializeMachineRequest) (*mcm.InitializeMachineResponse, error) {
	return &mcm.InitializeMachineResponse{}, nil
}

func (r *recorder) DeleteMachine(context.Context, *mcm.DeleteMachineRequest) (*mcm.DeleteMachineResponse, error) {
	return &mcm.DeleteMachineResponse{}, nil
}

func (r *recorder) GetMachineStatus(context.Context, *mcm.GetMachineStatusRequest) (*mcm.GetMachineStatusResponse, error) {
	return &mcm.GetMachineStatusResponse{}, nil
}

func (r *recorder) ListMachines(_ context.Context, req *mcm.ListMachinesRequest) (*mcm.ListMachinesResponse, error) {
	r.list = req
	return r.listResp, nil
}

func (r *recorder) GetVolumeIDs(_ context.Context, req *mcm.GetVolumeIDsRequest) (*mcm.GetVolumeIDsResponse, error) {
	r.volumes = req
	for _, s := range req.PVSpecs {
		s.CSI.VolumeHandle = "changed by the driver"
	}
	return &mcm.GetVolumeIDsResponse{VolumeIDs: []string{"vol-1"}}, nil
}

// wire is an object's JSON as a generic value, for comparing objects of
// the two APIs.
func wire(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRequestConvertsEveryField sends a Machine and a MachineClass with
// every field set through the adapter: MCM's driver receives all of them,
// on the wire the same, and the way back (ToMCM) restores our objects.
func TestRequestConvertsEveryField(t *testing.T) {
	machine, class, secret := filled[v1alpha1.Machine](), filled[v1alpha1.MachineClass](), filled[corev1.Secret]()
	rec := &recorder{createResp: &mcm.CreateMachineResponse{ProviderID: "p"}}
	if _, err := mcmdriver.New(rec).CreateMachine(t.Context(), &driver.CreateMachineRequest{Machine: machine, MachineClass: class, Secret: secret}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what       string
		ours, mcms any
	}{{"Machine", machine, rec.create.Machine}, {"MachineClass", class, rec.create.MachineClass}, {"Secret", secret, rec.create.Secret}} {
		if diff := cmp.Diff(wire(t, c.ours), wire(t, c.mcms)); diff != "" {
			t.Errorf("%s on the wire, ours (-) and MCM's driver's (+):\n%s", c.what, diff)
		}
	}

	var back *driver.CreateMachineRequest
	ours := &driverFunc{create: func(req *driver.CreateMachineRequest) { back = req }}
	if _, err := mcmdriver.New(mcmdriver.ToMCM(ours)).CreateMachine(t.Context(), &driver.CreateMachineRequest{Machine: machine, MachineClass: class, Secret: secret}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&driver.CreateMachineRequest{Machine: machine, MachineClass: class, Secret: secret}, back); diff != "" {
		t.Errorf("request after New(ToMCM(d)) (-sent +received):\n%s", diff)
	}
}

// driverFunc is one of our drivers that records CreateMachine's request.
type driverFunc struct {
	driver.UnimplementedOptional
	create func(*driver.CreateMachineRequest)
}

func (d *driverFunc) CreateMachine(_ context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	d.create(req)
	return &driver.CreateMachineResponse{ProviderID: "p"}, nil
}

func (d *driverFunc) DeleteMachine(context.Context, *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	return &driver.DeleteMachineResponse{}, nil
}

func (d *driverFunc) GetMachineStatus(context.Context, *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	return nil, driver.NewError(driver.NotFound, "none")
}

// TestDriverCannotReachTheCache lets the MCM driver write to every map,
// slice and byte of its request: our objects, which stand for the
// informer cache's, stay as they were.
func TestDriverCannotReachTheCache(t *testing.T) {
	machine, class, secret := filled[v1alpha1.Machine](), filled[v1alpha1.MachineClass](), filled[corev1.Secret]()
	before := []any{machine.DeepCopy(), class.DeepCopy(), secret.DeepCopy()}
	rec := &recorder{
		createResp: &mcm.CreateMachineResponse{ProviderID: "p"},
		mutate: func(m *mcmv1.Machine, c *mcmv1.MachineClass, s *corev1.Secret) {
			for k := range m.Labels {
				m.Labels[k] = "changed"
			}
			m.Finalizers[0] = "changed"
			m.Spec.NodeTemplateSpec.Spec.Taints[0].Key = "changed"
			m.Status.Addresses[0].Address = "changed"
			c.ProviderSpec.Raw[0] = ' '
			for k := range c.NodeTemplate.Capacity {
				c.NodeTemplate.Capacity[k] = c.NodeTemplate.Capacity[k].DeepCopy()
				delete(c.NodeTemplate.Capacity, k)
			}
			for _, v := range s.Data {
				v[0] = 'X'
			}
		},
	}
	if _, err := mcmdriver.New(rec).CreateMachine(t.Context(), &driver.CreateMachineRequest{Machine: machine, MachineClass: class, Secret: secret}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, []any{machine, class, secret}); diff != "" {
		t.Errorf("the MCM driver changed our objects (-before +after):\n%s", diff)
	}

	pv := &corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "vol-1"}}}
	resp, err := mcmdriver.New(rec).GetVolumeIDs(t.Context(), &driver.GetVolumeIDsRequest{PVSpecs: []*corev1.PersistentVolumeSpec{pv}})
	if err != nil {
		t.Fatal(err)
	}
	if pv.CSI.VolumeHandle != "vol-1" || !cmp.Equal(resp.VolumeIDs, []string{"vol-1"}) {
		t.Errorf("GetVolumeIDs: our spec's handle is %q, IDs %q; want vol-1 and [vol-1]", pv.CSI.VolumeHandle, resp.VolumeIDs)
	}
}

// TestResponsesAreKept checks that everything of MCM's responses that ours
// has a place for arrives, and that ListMachines' map is ours to keep.
func TestResponsesAreKept(t *testing.T) {
	addresses := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}, {Type: corev1.NodeHostName, Address: "vm-7"}}
	rec := &recorder{
		createResp: &mcm.CreateMachineResponse{ProviderID: "aws:///eu-1a/i-7", NodeName: "ip-10-0-0-7", LastKnownState: "state-7", Addresses: addresses},
		listResp:   &mcm.ListMachinesResponse{MachineList: map[string]string{"aws:///eu-1a/i-7": "m-7"}},
	}
	d := mcmdriver.New(rec)
	class := testClass("c", 0)
	created, err := d.CreateMachine(t.Context(), &driver.CreateMachineRequest{Machine: &v1alpha1.Machine{}, MachineClass: class, Secret: testSecret()})
	if err != nil {
		t.Fatal(err)
	}
	want := &driver.CreateMachineResponse{ProviderID: "aws:///eu-1a/i-7", NodeName: "ip-10-0-0-7", LastKnownState: "state-7", Addresses: addresses}
	if diff := cmp.Diff(want, created); diff != "" {
		t.Errorf("CreateMachine response (-want +got):\n%s", diff)
	}
	listed, err := d.ListMachines(t.Context(), &driver.ListMachinesRequest{MachineClass: class, Secret: testSecret()})
	if err != nil {
		t.Fatal(err)
	}
	listed.Machines["other"] = "m-8"
	if diff := cmp.Diff(map[string]string{"aws:///eu-1a/i-7": "m-7"}, rec.listResp.MachineList); diff != "" {
		t.Errorf("writing to our list changed the MCM driver's (-want +got):\n%s", diff)
	}
	if rec.list.MachineClass.Name != "c" || string(rec.list.Secret.Data["token"]) != "t0ken" {
		t.Errorf("ListMachines request: class %q, token %q", rec.list.MachineClass.Name, rec.list.Secret.Data["token"])
	}
}
