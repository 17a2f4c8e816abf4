package sim

import (
	"cmp"
	"fmt"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// ClassTags are the tags a VM carries for the MachineClass it was created
// with, as a real provider tags its VMs with the cluster and pool they
// belong to. ListMachines of a class returns exactly the VMs whose tags
// equal the class's: orphan collection deletes every listed VM that no
// Machine claims, so a VM of another class, namespace or cluster sharing
// the cloud must never be listed.
//
// The tags are values the class holds (its providerSpec's cluster, its
// namespace and name), not its UID, for the reason a real cloud uses tags:
// a class deleted and created again under its name (a backup restored, a
// control plane migrated to another cluster, a manager that recreates its
// classes) still finds its VMs. The cluster tells apart classes of the same
// namespace and name in control clusters that share one cloud account,
// which the namespace alone cannot.
type ClassTags struct {
	// Cluster is the providerSpec's cluster, by default the class's
	// namespace.
	Cluster string
	// Namespace and Name of the class.
	Namespace, Name string
}

// IsZero reports whether the tags are empty, as on a VM someone started
// without tags: no class lists it.
func (t ClassTags) IsZero() bool { return t == ClassTags{} }

// String returns cluster/namespace/name, for messages.
func (t ClassTags) String() string { return t.Cluster + "/" + t.Namespace + "/" + t.Name }

// ClassTagsOf returns the tags the sim puts on the VMs it creates with
// class. It fails if the class's providerSpec is not a valid sim
// providerSpec.
func ClassTagsOf(class *v1alpha1.MachineClass) (ClassTags, error) {
	if class == nil {
		return ClassTags{}, fmt.Errorf("sim: no MachineClass")
	}
	spec, errs := decodeProviderSpec(class.ProviderSpec)
	if len(errs) > 0 {
		return ClassTags{}, fmt.Errorf("sim: MachineClass %s/%s: %w", class.Namespace, class.Name, errs.ToAggregate())
	}
	return tagsOf(class, spec), nil
}

// tagsOf returns the tags of a class whose providerSpec decoded as spec.
func tagsOf(class *v1alpha1.MachineClass, spec ProviderSpec) ClassTags {
	return ClassTags{
		Cluster:   cmp.Or(spec.Cluster, class.Namespace),
		Namespace: class.Namespace,
		Name:      class.Name,
	}
}

// VMSpecFor returns the VMSpec of the VM that CreateMachine would create
// for the machine named machineName with class: same zone, instance type,
// capacity, labels and class tags. Hand it to Cloud.AddVM to make, behind
// the driver's back, an orphan of the class (a machine name no Machine
// has) or a duplicate (the name of a machine that has a VM), which
// ListMachines of the class then reports.
func VMSpecFor(class *v1alpha1.MachineClass, machineName string) (VMSpec, error) {
	if class == nil {
		return VMSpec{}, fmt.Errorf("sim: no MachineClass")
	}
	spec, errs := decodeProviderSpec(class.ProviderSpec)
	if len(errs) > 0 {
		return VMSpec{}, fmt.Errorf("sim: MachineClass %s/%s: %w", class.Namespace, class.Name, errs.ToAggregate())
	}
	return VMSpec{
		MachineName:  machineName,
		Zone:         spec.Zone,
		InstanceType: spec.InstanceType,
		Capacity:     spec.Capacity,
		Labels:       spec.Labels,
		Class:        tagsOf(class, spec),
	}, nil
}
