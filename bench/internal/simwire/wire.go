// Package simwire is the wire format of the simulated cloud's socket
// (bench/compare/simcloud): the server, Handler, around the reference
// manager's "sim" driver, and an mcm driver.Driver that calls it, Dial, for
// the bench's build of the reference manager. Both managers of a comparison
// then drive the very same simulated cloud in a process of its own, and the
// managers' figures (RSS, CPU) are theirs alone. bench/mcm/provider/driver.go
// is MCM's side of the same format, in a module of its own.
//
// One POST per driver operation to /<operation> (CreateMachine,
// InitializeMachine, DeleteMachine, GetMachineStatus, ListMachines,
// GetVolumeIDs) with a JSON Request; the answer, always 200 once the
// request was understood, is a JSON Response carrying the driver error's
// code and message, if any.
//
// Usage:
//
//	http.Serve(listener, simwire.Handler(simDriver)) // the cloud's process
//	d := simwire.Dial("/tmp/simcloud.sock")         // a manager's driver
package simwire

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// Request is one operation's request. Machines, classes and secrets travel
// as their API JSON: MCM's types and mcm's are wire-compatible.
type Request struct {
	Machine      *v1alpha1.Machine              `json:"machine,omitempty"`
	MachineClass *v1alpha1.MachineClass         `json:"machineClass,omitempty"`
	Secret       *corev1.Secret                 `json:"secret,omitempty"`
	PVSpecs      []*corev1.PersistentVolumeSpec `json:"pvSpecs,omitempty"`
}

// Response is one operation's answer.
type Response struct {
	ProviderID     string               `json:"providerID,omitempty"`
	NodeName       string               `json:"nodeName,omitempty"`
	LastKnownState string               `json:"lastKnownState,omitempty"`
	Addresses      []corev1.NodeAddress `json:"addresses,omitempty"`
	Machines       map[string]string    `json:"machines,omitempty"`
	VolumeIDs      []string             `json:"volumeIDs,omitempty"`
	// Code is the driver error's code (mcm's codes have MCM's numbers);
	// zero when the operation succeeded.
	Code    driver.Code `json:"code,omitempty"`
	Message string      `json:"message,omitempty"`
}
