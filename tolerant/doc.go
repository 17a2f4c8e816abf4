// Package tolerant builds the informers of the machine.sapcloud.io kinds so
// that one stored object a typed client cannot decode does not blind a
// controller to every other object of its kind.
//
// A typed LIST fails as a whole when one item does not decode, and a typed
// WATCH ends at the first such event. An object stored before the CRDs'
// admission rules existed, or by an older controller, can be like that: a
// Machine with drainTimeout "2 hours", or a creationTimeout that overflows
// a Go duration. With the generated informers such an object keeps every
// informer of its kind from syncing, so nothing in the namespace is
// reconciled. The informers of this package read the same API, list and
// watch requests as the generated ones, decode each object on its own, and
// leave out the ones that do not decode. Each of those is reported once per
// version: a log line and a Warning event (reason UndecodableObject) that
// name it and the decoding error, and the gauge mcm_undecodable_objects
// (labels kind, namespace, name) while it is stored that way. Fix or
// delete the object and it is cached like any other.
//
// # Usage
//
// Use NewSharedInformerFactory wherever the generated factory would be used;
// every informer it hands out for Machines, MachineSets, MachineDeployments
// and MachineClasses is tolerant, and everything else about it is the
// generated factory:
//
//	factory, err := tolerant.NewSharedInformerFactory(client, namespace, 0, tolerant.Options{
//		Recorder: recorder, Registerer: registry, Logger: logger,
//	})
//	if err != nil { ... }
//	machines := factory.Machine().V1alpha1().Machines()
//	factory.Start(ctx.Done())
//
// The client must talk to an API server: a fake clientset has no REST
// client, and with one the factory is the generated one.
package tolerant
