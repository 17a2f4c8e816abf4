package manager

import (
	"testing"

	"k8s.io/client-go/rest"
)

// TestEachGroupHasItsOwnClients: withOwnClients builds new clients, and
// with them new rate limiters, each time it is called (once per controller
// group); clients given without configurations (fakes) are kept.
func TestEachGroupHasItsOwnClients(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1", QPS: 5, Burst: 5}
	cc := ControllerContext{Config: DefaultConfig(), controlCfg: cfg, targetCfg: cfg}
	a, err := cc.withOwnClients()
	if err != nil {
		t.Fatal(err)
	}
	b, err := cc.withOwnClients()
	if err != nil {
		t.Fatal(err)
	}
	if a.Machines == nil || a.ControlCore == nil || a.TargetCore == nil {
		t.Fatalf("clients missing: %+v", a)
	}
	if a.Machines == b.Machines || a.ControlCore == b.ControlCore || a.TargetCore == b.TargetCore {
		t.Error("two groups share a client, and so its rate limit")
	}
	kept, err := ControllerContext{Machines: a.Machines}.withOwnClients()
	if err != nil || kept.Machines != a.Machines {
		t.Errorf("clients given without configurations were replaced (%v)", err)
	}
}
