// Package preservation holds no code: its tests show machine preservation end
// to end — the machine, MachineSet and MachineDeployment controllers on a real
// control plane with the simulated cloud and kubelet, driven as an operator
// drives MCM v0.62.1 (the preserve annotation on a Node,
// autoPreserveFailedMachineMax on a deployment, a scale-down, a switch from
// MCM).
//
// # Usage
//
// The tests need the control-plane binaries that make test installs:
//
//	make test
//	go test -run Integration ./e2e/preservation/
package preservation
