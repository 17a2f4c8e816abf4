// Package inplace holds no code: its tests show in-place updates end to
// end — the machine, MachineSet and MachineDeployment controllers on a real
// control plane with the simulated cloud, kubelet and node agent, rolling
// an InPlaceUpdate deployment to a new class without replacing a VM.
//
// # Usage
//
// The tests need the control-plane binaries that make test installs:
//
//	make test
//	go test -run Integration ./e2e/inplace/
package inplace
