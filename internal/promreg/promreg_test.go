package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterReusesEqualCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	newCounter := func() *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"l"})
	}
	first, err := Register(reg, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	second, err := Register(reg, newCounter())
	if err != nil {
		t.Fatalf("registering an equal collector again: %v", err)
	}
	if first != second {
		t.Error("the second registration did not return the registered collector")
	}
	// Same name, other labels: a real conflict.
	if _, err := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"other"})); err == nil {
		t.Error("a conflicting collector was accepted")
	}
}
