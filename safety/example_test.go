package safety_test

import (
	"context"
	"fmt"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/safety"
)

// ExampleGateFunc adapts an embedder's own freeze, a nightly maintenance
// window of the cloud from 02:00 to 04:00 UTC in which no machine may be
// created, to safety.Gate. The fake clock stands in for the real one so
// that the output does not depend on when the example runs.
func ExampleGateFunc() {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 1, 30, 0, 0, time.UTC))
	var gate safety.Gate = safety.GateFunc(func(context.Context) bool {
		h := clk.Now().UTC().Hour()
		return h >= 2 && h < 4
	})
	// The controllers ask the gate at every sync, so the window opens and
	// closes without telling them. One value goes to all three, so that
	// they freeze and thaw together:
	//
	//	machine.Options{SafetyGate: gate}
	//	machineset.Options{SafetyGate: gate}
	//	deployment.Options{SafetyGate: gate}
	//
	// Each takes one gate: to keep the API-server outage gate too, ask both
	// in the function (outageGate.Frozen(ctx) || in the window).
	ctx := context.Background()
	for range 4 {
		fmt.Println(clk.Now().Format("15:04"), "frozen:", gate.Frozen(ctx))
		clk.Step(time.Hour)
	}
	// Output:
	// 01:30 frozen: false
	// 02:30 frozen: true
	// 03:30 frozen: true
	// 04:30 frozen: false
}
