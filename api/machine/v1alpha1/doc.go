// Package v1alpha1 holds the machine.sapcloud.io/v1alpha1 API: Machine,
// MachineClass, MachineSet and MachineDeployment.
//
// The types are wire-compatible with Gardener's machine-controller-manager
// (MCM v0.62): the same group, kinds, JSON field names, enum strings, phases,
// labels, annotations and finalizers. Objects written for MCM are read by
// mcm unchanged, and objects written by mcm are read by MCM and by the
// cluster-autoscaler's MCM provider. Fields mcm adds are optional and live
// under annotations prefixed with mcmkit.io/.
//
// The fields mean what they mean to MCM. spec.minReadySeconds of
// MachineSets and MachineDeployments, for one, is stored but does not delay
// availability, as in MCM: a machine counts as available once it is
// Running. The annotation mcmkit.io/min-ready-seconds: apply
// (MinReadySecondsAnnotation) opts in to a Kubernetes Deployment's
// behaviour instead.
//
// The package imports nothing from this module and nothing from client-go,
// so any program can depend on the types alone.
//
// # Usage
//
// Register the types on a scheme you own; the package never touches a
// global scheme:
//
//	scheme := runtime.NewScheme()
//	if err := v1alpha1.AddToScheme(scheme); err != nil {
//		return err
//	}
//
// Fill in documented defaults before acting on an object read from the API
// (the CRDs do not default, so what was written is what is stored):
//
//	md := cached.DeepCopy()
//	v1alpha1.SetMachineDeploymentDefaults(md)
//
// Admission-time checks live in the CRDs as CEL rules; the validation
// subpackage repeats them in Go for objects that were stored before the rules
// existed.
//
// +k8s:deepcopy-gen=package
// +groupName=machine.sapcloud.io
package v1alpha1
