package sim_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/drivertest"
	"github.com/mcmkit/mcm/driver/sim"
)

// restart returns a world on the same state file as w, with its clock at
// now, as a process started again would have.
func (w *world) restart(now time.Time, opts sim.Options) *world {
	w.t.Helper()
	clk := clocktesting.NewFakeClock(now)
	opts.Clock = clk
	cloud, err := sim.New(opts)
	if err != nil {
		w.t.Fatalf("sim.New after the restart: %v", err)
	}
	return &world{t: w.t, clock: clk, cloud: cloud, d: cloud.Driver(), class: w.class, secret: w.secret}
}

// TestStateSurvivesARestart builds a cloud with a VM in every state, one
// booting and one being deleted among them, restarts it from its file and
// checks that the restarted cloud has exactly the same VMs, whose boot and
// deletion then complete when they were due.
func TestStateSurvivesARestart(t *testing.T) {
	opts := sim.Options{
		BootDelay:   time.Minute,
		DeleteDelay: time.Minute,
		StateFile:   filepath.Join(t.TempDir(), "cloud.json"),
	}
	w := newWorld(t, opts)
	w.class = simClass(sim.ProviderSpec{Zone: "zone-a", InstanceType: "small", Labels: map[string]string{"pool": "a"}, Cluster: "c1"})
	running := w.mustCreate("running")
	deleting := w.mustCreate("deleting")
	stopped := w.mustCreate("stopped")
	removed := w.mustCreate("removed")
	w.clock.Step(2 * time.Minute) // all four are Running now
	mustSucceed(t, w.delete(machine("deleting")))
	mustSucceed(t, w.cloud.StopVM(stopped))
	if !w.cloud.RemoveVM(removed) {
		t.Fatal("RemoveVM found no VM")
	}
	orphan, err := w.cloud.AddVM(w.vmSpec("orphan"))
	mustSucceed(t, err)
	w.clock.Step(20 * time.Second)
	booting := w.mustCreate("booting")

	before := w.cloud.VMs()
	wantStates := map[string]sim.VMState{
		running: sim.VMRunning, deleting: sim.VMTerminating, stopped: sim.VMStopped,
		orphan.ProviderID: sim.VMRunning, booting: sim.VMProvisioning,
	}
	if diff := cmp.Diff(wantStates, w.states()); diff != "" {
		t.Fatalf("states before the restart (-want +got):\n%s", diff)
	}
	listed, err := w.list()
	mustSucceed(t, err)

	// The process dies here; another starts on the file, with other
	// options (a new process may be configured differently).
	restarted := w.restart(w.clock.Now(), sim.Options{StateFile: opts.StateFile, Seed: 99})
	if diff := cmp.Diff(before, restarted.cloud.VMs()); diff != "" {
		t.Errorf("VMs after the restart (-before +after):\n%s", diff)
	}
	if got, want := restarted.cloud.ID(), w.cloud.ID(); got != want {
		t.Errorf("cloud ID after the restart = %s, want %s", got, want)
	}
	relisted, err := restarted.list()
	mustSucceed(t, err)
	if diff := cmp.Diff(listed, relisted); diff != "" {
		t.Errorf("ListMachines after the restart (-before +after):\n%s", diff)
	}
	if resp, err := restarted.status("running"); err != nil || resp.ProviderID != running {
		t.Errorf("status of running after the restart = %+v, %v; want %s", resp, err, running)
	}

	// The boot and the deletion in flight complete when they were due:
	// the deletion 60s after it began (20s ago), the boot 60s after it
	// began (now).
	restarted.clock.Step(40 * time.Second)
	wantStates = map[string]sim.VMState{running: sim.VMRunning, stopped: sim.VMStopped, orphan.ProviderID: sim.VMRunning, booting: sim.VMProvisioning}
	if diff := cmp.Diff(wantStates, restarted.states()); diff != "" {
		t.Errorf("40s after the restart (-want +got):\n%s", diff)
	}
	restarted.clock.Step(20 * time.Second)
	wantStates[booting] = sim.VMRunning
	if diff := cmp.Diff(wantStates, restarted.states()); diff != "" {
		t.Errorf("60s after the restart (-want +got):\n%s", diff)
	}

	// Provider IDs and addresses handed out before the restart are not
	// handed out again, not even those of VMs that are gone.
	again := restarted.mustCreate("removed")
	if again == removed {
		t.Errorf("provider ID %s of a removed VM was reused after the restart", removed)
	}
	vm, _ := restarted.cloud.VM(again)
	for _, old := range before {
		if old.Addresses[0].Address == vm.Addresses[0].Address {
			t.Errorf("address %s of %s was reused after the restart", vm.Addresses[0].Address, old.ProviderID)
		}
	}
}

// A process restarted long after the last one died finds every boot and
// deletion complete that was due meanwhile.
func TestStateRestartAfterTransitionsWereDue(t *testing.T) {
	opts := sim.Options{BootDelay: time.Minute, DeleteDelay: time.Minute, StateFile: filepath.Join(t.TempDir(), "cloud.json")}
	w := newWorld(t, opts)
	kept := w.mustCreate("kept")
	w.mustCreate("gone")
	mustSucceed(t, w.delete(machine("gone")))

	restarted := w.restart(epoch.Add(time.Hour), sim.Options{StateFile: opts.StateFile})
	if diff := cmp.Diff(map[string]sim.VMState{kept: sim.VMRunning}, restarted.states()); diff != "" {
		t.Errorf("an hour later (-want +got):\n%s", diff)
	}
	vm, _ := restarted.cloud.VM(kept)
	if !vm.StateSince.Equal(epoch.Add(time.Minute)) {
		t.Errorf("Running since %v, want the end of its boot at %v", vm.StateSince, epoch.Add(time.Minute))
	}
}

func TestAbsentStateFileIsAnEmptyCloudAndIsCreated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cloud.json")
	w := newWorld(t, sim.Options{StateFile: path})
	if n := len(w.cloud.VMs()); n != 0 {
		t.Errorf("%d VMs in a new cloud", n)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("New did not create the state file: %v", err)
	}
	restarted := w.restart(epoch, sim.Options{StateFile: path})
	if got, want := restarted.cloud.ID(), w.cloud.ID(); got != want {
		t.Errorf("cloud ID after a restart without VMs = %s, want %s", got, want)
	}
}

func TestStateFileInAMissingDirectoryFailsNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-dir", "cloud.json")
	if _, err := sim.New(sim.Options{StateFile: path}); err == nil {
		t.Error("New succeeded with a state file it cannot create")
	}
}

// validState returns the content of a state file with one VM.
func validState(t *testing.T) map[string]any {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cloud.json")
	w := newWorld(t, sim.Options{StateFile: path})
	w.mustCreate("m1")
	data, err := os.ReadFile(path)
	mustSucceed(t, err)
	var state map[string]any
	mustSucceed(t, json.Unmarshal(data, &state))
	return state
}

// TestCorruptStateFileFailsNew checks that New refuses a file that does not
// hold a sim cloud's state, naming the file and the problem, rather than
// start an empty cloud in which every machine's VM would look gone.
func TestCorruptStateFileFailsNew(t *testing.T) {
	edit := func(change func(state map[string]any)) string {
		state := validState(t)
		change(state)
		data, err := json.Marshal(state)
		mustSucceed(t, err)
		return string(data)
	}
	firstVM := func(state map[string]any) map[string]any { return state["vms"].([]any)[0].(map[string]any) }
	tests := []struct {
		name    string
		content string
		want    string // in the error
	}{
		{"empty", "", "empty"},
		{"blank", " \n", "empty"},
		{"truncated", edit(func(map[string]any) {})[:40], "unexpected EOF"},
		{"not JSON", "VMs: none", "invalid character"},
		{"null", "null", "version 0"},
		{"trailing data", edit(func(map[string]any) {}) + "{}", "data after the state"},
		{"unknown field", edit(func(s map[string]any) { s["machines"] = []any{} }), `unknown field "machines"`},
		{"other version", edit(func(s map[string]any) { s["version"] = 2 }), "version 2"},
		{"no cloud ID", edit(func(s map[string]any) { delete(s, "cloud") }), "no cloud ID"},
		{"bad address", edit(func(s map[string]any) { s["lastAddress"] = "ten" }), "lastAddress"},
		{"provider ID not of its zone and name", edit(func(s map[string]any) { firstVM(s)["zone"] = "zone-b" }), "want \"sim:///zone-b/m1\""},
		{"VM without machine", edit(func(s map[string]any) { delete(firstVM(s), "machineName") }), "needs machineName"},
		{"bad delete delay", edit(func(s map[string]any) { firstVM(s)["deleteDelay"] = "soon" }), "deleteDelay"},
		{"deleting without end", edit(func(s map[string]any) { firstVM(s)["deleting"] = true }), "no goneAt"},
		{"VM twice", edit(func(s map[string]any) { s["vms"] = append(s["vms"].([]any), firstVM(s)) }), "appears twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cloud.json")
			mustSucceed(t, os.WriteFile(path, []byte(tt.content), 0o600))
			cloud, err := sim.New(sim.Options{StateFile: path})
			if err == nil {
				t.Fatalf("New succeeded with %d VMs", len(cloud.VMs()))
			}
			for _, want := range []string{path, tt.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if data, _ := os.ReadFile(path); string(data) != tt.content {
				t.Error("New changed the corrupt file")
			}
		})
	}
}

// A change that cannot be saved fails the call with Unavailable, stays
// made, and is saved by the retry, which finds it.
func TestFailedSaveIsUnavailableAndRetried(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	mustSucceed(t, os.Mkdir(dir, 0o700))
	path := filepath.Join(dir, "cloud.json")
	w := newWorld(t, sim.Options{StateFile: path})

	mustSucceed(t, os.RemoveAll(dir)) // the disk goes away
	_, err := w.create("m1")
	if code := driver.CodeOf(err); code != driver.Unavailable {
		t.Fatalf("create with an unwritable state file: code %s (%v), want Unavailable", code, err)
	}
	if _, err := w.status("m1"); driver.CodeOf(err) != driver.Unavailable {
		t.Errorf("status with an unsaved change: %v, want Unavailable", err)
	}

	mustSucceed(t, os.Mkdir(dir, 0o700)) // and comes back
	id := w.mustCreate("m1")
	restarted := w.restart(epoch, sim.Options{StateFile: path})
	if _, ok := restarted.cloud.VM(id); !ok {
		t.Errorf("VM %s of the retried create is not in the state file", id)
	}
}

// Saving leaves no temporary files behind.
func TestStateFileSavesLeaveNoTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, sim.Options{StateFile: filepath.Join(dir, "cloud.json")})
	for _, name := range []string{"a", "b", "c"} {
		w.mustCreate(name)
	}
	mustSucceed(t, w.delete(machine("b")))
	entries, err := os.ReadDir(dir)
	mustSucceed(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"cloud.json"}, names); diff != "" {
		t.Errorf("files in the state directory (-want +got):\n%s", diff)
	}
}

// TestConformanceWithStateFile runs the contract against a cloud that
// saves every change, concurrent creates included.
func TestConformanceWithStateFile(t *testing.T) {
	drivertest.Run(t, func(t drivertest.TB) (driver.Driver, drivertest.Fixture) {
		clk := clocktesting.NewFakeClock(epoch)
		dir, err := os.MkdirTemp("", "sim-state-")
		if err != nil {
			t.Fatalf("temporary directory: %v", err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		cloud, err := sim.New(sim.Options{
			Clock: clk, BootDelay: time.Minute, DeleteDelay: 30 * time.Second,
			StateFile: filepath.Join(dir, "cloud.json"),
		})
		if err != nil {
			t.Fatalf("sim.New: %v", err)
		}
		return cloud.Driver(), drivertest.Fixture{
			MachineClass:        simClass(sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}),
			Secret:              simSecret(),
			InvalidProviderSpec: &runtime.RawExtension{Raw: []byte(`{"zone":"zone-a"}`)},
			Eventually:          steppingClock(clk, 10*time.Second, 20),
		}
	}, drivertest.Options{SupportsInitializeMachine: true, SupportsListMachines: true, SupportsGetVolumeIDs: true})
}

// The state file is what an operator debugging a demo reads: plain JSON
// with the VMs' states' timestamps.
func TestStateFileIsReadableJSON(t *testing.T) {
	state := validState(t)
	vm := state["vms"].([]any)[0].(map[string]any)
	got := map[string]any{"providerID": vm["providerID"], "machineName": vm["machineName"], "class": vm["class"], "version": state["version"]}
	want := map[string]any{
		"providerID": "sim:///zone-a/m1", "machineName": "m1", "version": float64(1),
		"class": map[string]any{"cluster": "shoot", "namespace": "shoot", "name": "small"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
