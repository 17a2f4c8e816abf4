// Package provider is the provider-specific part of MCM's integration suite
// for mcm's simulated cloud: the resources tracker that tells the suite
// whether the test left VMs behind.
package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"strings"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	"github.com/gardener/machine-controller-manager/pkg/test/integration/common/helpers"
)

const (
	// StateFileEnv names the simulated cloud's state file. The Makefile's
	// start target passes the same variable to the machine-controller
	// process as --sim-state-file.
	StateFileEnv = "SIM_STATE_FILE"
	// DefaultStateFile is the Makefile's default, relative to the test
	// package, which the suite runs from: the Makefile is three levels up,
	// where the suite runs `make --directory=../../.. start`.
	DefaultStateFile = "../../../dev/sim-cloud.json"
)

// simStateVersion is the version of driver/sim's state file format this
// tracker reads (stateVersion in driver/sim/state.go).
const simStateVersion = 1

// simState is the part of the sim cloud's state file the tracker reads.
// The file is the cloud itself, not a report of it: the machine-controller
// process writes every change to it before the driver call that made the
// change returns.
type simState struct {
	Version int     `json:"version"`
	VMs     []simVM `json:"vms"`
}

type simVM struct {
	ProviderID  string `json:"providerID"`
	MachineName string `json:"machineName"`
	Class       struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"class"`
	Deleting bool      `json:"deleting"`
	GoneAt   time.Time `json:"goneAt"`
}

// ResourcesTrackerImpl tracks the VMs of the simulated cloud that the
// machine-controller process runs. The cloud belongs to the test alone, so
// every VM in it counts: the suite ends with none left, as a provider's
// tracker expects none of the VMs tagged for the test.
type ResourcesTrackerImpl struct {
	// StateFile is the cloud's state file.
	StateFile string

	machineClass *v1alpha1.MachineClass
}

var _ helpers.ResourcesTrackerInterface = &ResourcesTrackerImpl{}

// NewResourcesTracker returns a tracker of the state file that
// SIM_STATE_FILE names, or of DefaultStateFile.
func NewResourcesTracker() *ResourcesTrackerImpl {
	path := os.Getenv(StateFileEnv)
	if path == "" {
		path = DefaultStateFile
	}
	return &ResourcesTrackerImpl{StateFile: path}
}

// InitializeResourcesTracker fails if the cloud holds VMs before the test
// starts: they would be taken for the test's orphans at the end. The
// secret's data and the cluster name select nothing in a cloud of the
// test's own.
func (r *ResourcesTrackerImpl) InitializeResourcesTracker(machineClass *v1alpha1.MachineClass, _ map[string][]byte, _ string) error {
	r.machineClass = machineClass
	vms, err := r.probeVMs(true)
	if err != nil {
		return err
	}
	if len(vms) != 0 {
		return fmt.Errorf("the simulated cloud holds VMs before the test; start with an empty cloud (remove %s): %s", r.StateFile, describe(vms))
	}
	return nil
}

// IsOrphanedResourcesAvailable reports whether any VM is left in the cloud,
// logging which. A state file that cannot be read counts as orphans: the
// check cannot tell there are none.
func (r *ResourcesTrackerImpl) IsOrphanedResourcesAvailable() bool {
	vms, err := r.probeVMs(false)
	if err != nil {
		log.Printf("probing the simulated cloud for orphaned VMs: %v", err)
		return true
	}
	if len(vms) != 0 {
		log.Printf("orphaned VMs in the simulated cloud (machine class %s): %s", r.className(), describe(vms))
		return true
	}
	return false
}

// probeVMs returns the VMs of the cloud that exist now: a VM whose
// deletion completed (goneAt passed) is gone, although the cloud forgets
// it only at its next change. An absent state file is an empty cloud, as
// driver/sim defines it, but only before the test: once machines were
// created, the machine-controller process must have written it.
func (r *ResourcesTrackerImpl) probeVMs(absentIsEmpty bool) ([]simVM, error) {
	data, err := os.ReadFile(r.StateFile)
	if errors.Is(err, fs.ErrNotExist) && absentIsEmpty {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the simulated cloud's state: %w", err)
	}
	var state simState
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&state); err != nil {
		return nil, fmt.Errorf("decoding the simulated cloud's state %s: %w", r.StateFile, err)
	}
	if state.Version != simStateVersion {
		return nil, fmt.Errorf("the simulated cloud's state %s has version %d; this tracker reads version %d", r.StateFile, state.Version, simStateVersion)
	}
	now := time.Now()
	var live []simVM
	for _, vm := range state.VMs {
		if vm.Deleting && !now.Before(vm.GoneAt) {
			continue
		}
		live = append(live, vm)
	}
	return live, nil
}

func (r *ResourcesTrackerImpl) className() string {
	if r.machineClass == nil {
		return "unknown"
	}
	return r.machineClass.Namespace + "/" + r.machineClass.Name
}

func describe(vms []simVM) string {
	var parts []string
	for _, vm := range vms {
		s := fmt.Sprintf("%s (machine %s, class %s/%s", vm.ProviderID, vm.MachineName, vm.Class.Namespace, vm.Class.Name)
		if vm.Deleting {
			s += ", deleting until " + vm.GoneAt.Format(time.RFC3339)
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, ", ")
}
