package outage_test

import (
	"context"
	"fmt"
	"time"

	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/safety/outage"
)

// ExampleNew builds the gate on fake clientsets of the control and the
// target cluster and runs its check against them. The fakes answer every
// probe, as API servers that are up do, so the gate never freezes.
// Against clusters, pass real clientsets, and the same gate to the
// machine, MachineSet and MachineDeployment controllers as their
// SafetyGate.
func ExampleNew() {
	control, target := fake.NewSimpleClientset(), k8sfake.NewSimpleClientset()
	gate, err := outage.New(control, target, outage.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Without its check, the gate knows nothing of the servers, and a gate
	// that froze on no evidence would stop every creation.
	fmt.Println("frozen before its check runs:", gate.Frozen(ctx))

	done := make(chan error, 1)
	go func() { done <- gate.Run(ctx) }()
	// The target is probed after the control cluster: once the fake saw a
	// node read, the check has reached both servers.
	for ctx.Err() == nil && len(target.Actions()) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("frozen while it runs, servers up:", gate.Frozen(ctx))
	fmt.Println("an outage has ended:", !gate.LastOutageEnd().IsZero())
	cancel()
	fmt.Println("Run returned:", <-done)
	// Output:
	// frozen before its check runs: false
	// frozen while it runs, servers up: false
	// an outage has ended: false
	// Run returned: <nil>
}
