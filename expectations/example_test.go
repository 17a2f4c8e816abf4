package expectations_test

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/expectations"
)

// Example walks through one scale-up and one scale-down of a MachineSet, as
// seen by its controller and its informer event handlers.
func Example() {
	clk := clocktesting.NewFakePassiveClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	exp := expectations.New[types.NamespacedName](expectations.Options{Clock: clk})
	ms := types.NamespacedName{Namespace: "default", Name: "workers"}

	show := func(step string) {
		c, d := exp.Pending(ms)
		fmt.Printf("%-28s satisfied=%-5v state=%-9v creations=%d deletions=%d\n",
			step, exp.Satisfied(ms), exp.State(ms), c, d)
	}

	show("initial")

	// Scale up by 3; one create call fails, so only two events will come.
	exp.ExpectCreations(ms, 3)
	exp.CreationFailed(ms)
	show("expect 3, one create failed")
	exp.CreationObserved(ms)
	exp.CreationObserved(ms)
	show("two adds observed")

	// Scale down by 2 with graceful deletion: each machine is first updated
	// with a deletionTimestamp, then deleted; each UID counts once.
	exp.ExpectDeletions(ms, "uid-a", "uid-b")
	exp.DeletionObserved(ms, "uid-a") // deletionTimestamp set
	exp.DeletionObserved(ms, "uid-a") // final delete event
	exp.DeletionObserved(ms, "uid-x") // not ours to wait for: ignored
	show("uid-a observed twice")

	// The event for uid-b is lost; after the TTL the controller moves on.
	clk.SetTime(clk.Now().Add(exp.TTL() + time.Second))
	show("after TTL")

	// Output:
	// initial                      satisfied=true  state=Fulfilled creations=0 deletions=0
	// expect 3, one create failed  satisfied=false state=Pending   creations=2 deletions=0
	// two adds observed            satisfied=true  state=Fulfilled creations=0 deletions=0
	// uid-a observed twice         satisfied=false state=Pending   creations=0 deletions=1
	// after TTL                    satisfied=true  state=Expired   creations=0 deletions=1
}

// ExampleWrites shows a sync that waits until the informer cache holds its
// own last write.
func ExampleWrites() {
	clk := clocktesting.NewFakePassiveClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	writes := expectations.NewWrites[string](expectations.Options{Clock: clk})

	// The controller patched machine default/m-1; the server answered with
	// resourceVersion 120.
	writes.Wrote("default/m-1", "120")

	// The next sync still reads version 118 from the cache: wait.
	fmt.Println("cache at 118:", writes.Observed("default/m-1", "118"))
	// The watch delivered the patch.
	fmt.Println("cache at 120:", writes.Observed("default/m-1", "120"))

	// A lost event holds the object back for the TTL at most.
	writes.Wrote("default/m-2", "300")
	clk.SetTime(clk.Now().Add(writes.TTL() + time.Second))
	fmt.Println("after TTL:", writes.Observed("default/m-2", "290"))
	// Output:
	// cache at 118: false
	// cache at 120: true
	// after TTL: true
}
