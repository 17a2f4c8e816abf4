package sim

import (
	"cmp"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// VMState is the lifecycle state of a simulated VM.
type VMState string

// The states a VM goes through. A VM created by CreateMachine is
// Provisioning until its boot delay has passed, then Running. DeleteMachine
// makes it Terminating until its deletion delay has passed; then it is gone
// and no longer listed anywhere.
const (
	// VMProvisioning: the VM exists but has not finished booting.
	VMProvisioning VMState = "Provisioning"
	// VMRunning: the VM is up; a kubelet on it would be running.
	VMRunning VMState = "Running"
	// VMStopped: the VM exists but is powered off (Cloud.StopVM), as after a
	// crash. The driver still reports it: it is not deleted.
	VMStopped VMState = "Stopped"
	// VMTerminating: deletion was requested; the driver no longer reports
	// the VM, but it still counts against quotas until it is gone.
	VMTerminating VMState = "Terminating"
)

// VM is a snapshot of a simulated VM. It is a copy: changing it changes
// nothing in the Cloud.
type VM struct {
	// ProviderID is sim:///<zone>/<Name>. IDs are never reused within a Cloud.
	ProviderID string
	// Name is the VM's name in the cloud, also its node name: the machine
	// name, with a numeric suffix if an earlier VM of that name in that zone
	// still existed when this one was created, cut to 63 characters (a
	// label value, like the node's kubernetes.io/hostname label).
	Name string
	// MachineName is the machine the VM was created for (its "tag"). This is
	// what the driver matches machines by.
	MachineName string
	// Class holds the tags of the class the VM was created with, by which
	// ListMachines tells the class's VMs from others. Zero for a VM added
	// without tags, which no class lists.
	Class ClassTags
	// Zone and InstanceType come from the providerSpec (or VMSpec).
	Zone, InstanceType string
	// Capacity of the VM, from the providerSpec or the instance type.
	Capacity corev1.ResourceList
	// Labels from the providerSpec, for a simulated kubelet to put on its Node.
	Labels map[string]string
	// UserData is the userData the VM was created with, placeholders
	// replaced: a simulated kubelet reads its bootstrap token from here.
	UserData []byte
	// NodeName is the name a Node for this VM registers with.
	NodeName string
	// Addresses of the VM: an internal IP and the hostname.
	Addresses []corev1.NodeAddress
	// State is the state at the time of the snapshot.
	State VMState
	// StateSince is when the current state began: for a Running VM, the
	// time it has been running since.
	StateSince time.Time
	// StateUntil is when the current state ends by itself (a Provisioning VM
	// becomes Running, a Terminating one disappears), or zero if it only
	// ends through a call.
	StateUntil time.Time
	// CreatedAt is when the VM was created.
	CreatedAt time.Time
	// Initialized is false while the VM waits for InitializeMachine (the
	// providerSpec asked for requireInitialization).
	Initialized bool
	// Injected marks VMs that Cloud.AddVM created, not CreateMachine.
	Injected bool
	// KubeletVersion is what the VM's kubelet reports in its Node's
	// status.nodeInfo.kubeletVersion: the providerSpec's kubeletVersion
	// (DefaultKubeletVersion if it has none) of the class the VM was
	// created with or last updated to in place.
	KubeletVersion string
	// InPlaceUpdate is the node agent's configuration on the VM, the
	// providerSpec's inPlaceUpdate block of the class the VM was created
	// with or last updated to; nil or without Agent: no agent.
	InPlaceUpdate *InPlaceUpdate
	// UpdatedTo holds the tags of the class the agent last updated the VM
	// to in place, zero if it never did. Class keeps the tags of the class
	// the VM was created with, which ListMachines goes by, as the
	// machine's spec.class keeps naming it after an in-place update.
	UpdatedTo ClassTags
	// UpdatedAt is when the agent last updated the VM in place.
	UpdatedAt time.Time
}

// VMSpec describes a VM to create behind the driver's back with Cloud.AddVM.
type VMSpec struct {
	// MachineName the VM is tagged with. Required. Use the name of a machine
	// that does not exist to get an orphan, or of one that has a VM to get a
	// duplicate.
	MachineName string
	// Zone of the VM. Required.
	Zone string
	// InstanceType of the VM. Required.
	InstanceType string
	// Capacity of the VM; defaults to the instance type's in Options.
	Capacity corev1.ResourceList
	// Labels of the VM.
	Labels map[string]string
	// Class the VM is tagged with, so that ListMachines of that class
	// reports it; VMSpecFor fills it in from a MachineClass. Zero tags
	// make a VM that no class lists, as one started by hand in a console.
	Class ClassTags
}

// vm is the Cloud's record of a VM. Its state is derived from timestamps and
// the clock, so that boots and deletions complete without any goroutine.
type vm struct {
	id, name, machineName   string
	class                   ClassTags
	zone, instanceType      string
	capacity                corev1.ResourceList
	labels                  map[string]string
	userData                []byte
	addresses               []corev1.NodeAddress
	createdAt               time.Time
	bootStartedAt, bootedAt time.Time // last (re)start, and when it completes
	stopped                 bool
	stoppedAt               time.Time
	deleteDelay             time.Duration // base delay, before jitter
	deleting                bool
	deleteRequestedAt       time.Time
	goneAt                  time.Time
	requireInit             bool
	initialized             bool
	injected                bool
	kubeletVersion          string         // empty: DefaultKubeletVersion
	inPlace                 *InPlaceUpdate // never modified: replaced whole
	updatedTo               ClassTags
	updatedAt               time.Time
}

// live reports whether the driver sees the VM: it exists and is not being
// deleted.
func (v *vm) live() bool { return !v.deleting }

func (v *vm) state(now time.Time) (state VMState, since, until time.Time) {
	switch {
	case v.deleting:
		return VMTerminating, v.deleteRequestedAt, v.goneAt
	case v.stopped:
		return VMStopped, v.stoppedAt, time.Time{}
	case now.Before(v.bootedAt):
		return VMProvisioning, v.bootStartedAt, v.bootedAt
	default:
		return VMRunning, v.bootedAt, time.Time{}
	}
}

func (v *vm) snapshot(now time.Time) VM {
	s := v.sharedSnapshot(now)
	s.Capacity = s.Capacity.DeepCopy()
	s.Labels = maps.Clone(s.Labels)
	s.Addresses = slices.Clone(s.Addresses)
	s.UserData = slices.Clone(v.userData)
	s.InPlaceUpdate = s.InPlaceUpdate.deepCopy()
	return s
}

// sharedSnapshot is snapshot without copies of the VM's maps and slices and
// without UserData; see Cloud.sharedVMs.
func (v *vm) sharedSnapshot(now time.Time) VM {
	state, since, until := v.state(now)
	return VM{
		ProviderID:   v.id,
		Name:         v.name,
		MachineName:  v.machineName,
		Class:        v.class,
		Zone:         v.zone,
		InstanceType: v.instanceType,
		Capacity:     v.capacity,
		Labels:       v.labels,
		NodeName:     v.name,
		Addresses:    v.addresses,
		State:        state,
		StateSince:   since,
		StateUntil:   until,
		CreatedAt:    v.createdAt,
		Initialized:  !v.requireInit || v.initialized,
		Injected:     v.injected,
		// The agent replaces the VM's version and block on an update; it
		// never modifies them, so sharing the block is safe.
		KubeletVersion: cmp.Or(v.kubeletVersion, DefaultKubeletVersion),
		InPlaceUpdate:  v.inPlace,
		UpdatedTo:      v.updatedTo,
		UpdatedAt:      v.updatedAt,
	}
}
