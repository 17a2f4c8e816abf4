package promreg

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
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

// constCollector is a scrape-time collector with one gauge of a fixed value.
type constCollector struct {
	desc  *prometheus.Desc
	value float64
}

func (c *constCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c *constCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, c.value)
}

// TestReplaceTakesOver: the latest collector's series are the ones
// scraped; one whose descriptors conflict with another's is refused.
func TestReplaceTakesOver(t *testing.T) {
	reg := prometheus.NewRegistry()
	desc := prometheus.NewDesc("items_total", "Items.", nil, nil)
	for _, v := range []float64{1, 2} {
		if err := Replace(reg, &constCollector{desc: desc, value: v}); err != nil {
			t.Fatalf("collector %v: %v", v, err)
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP items_total Items.
# TYPE items_total gauge
items_total 2
`)); err != nil {
		t.Error(err)
	}
	if err := Replace(reg, &constCollector{desc: prometheus.NewDesc("items_total", "Other help.", nil, nil)}); err == nil {
		t.Error("a collector conflicting with the registered one was accepted")
	}
}

// TestScrapeFailures: controllers of one binary share the family's
// counter, each with its kind; the binaries' series stand side by side;
// every series exists at zero before its first failure.
func TestScrapeFailures(t *testing.T) {
	reg := prometheus.NewRegistry()
	sets, err := ScrapeFailures(reg, BinaryMCM, "Machineset-count")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ScrapeFailures(reg, BinaryMCM, "Machinedeployment-count"); err != nil {
		t.Fatalf("second controller of the binary: %v", err)
	}
	if _, err := ScrapeFailures(reg, BinaryProvider, "Machine-count"); err != nil {
		t.Fatalf("the other binary: %v", err)
	}
	again, err := ScrapeFailures(reg, BinaryMCM, "Machineset-count")
	if err != nil {
		t.Fatalf("a restarted controller: %v", err)
	}
	sets.Inc()
	again.Inc()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcm_misc_scrape_failure_total Scrapes whose collector could not list its objects from the informer cache, by kind.
# TYPE mcm_misc_scrape_failure_total counter
mcm_misc_scrape_failure_total{binary="machine-controller-manager",kind="Machinedeployment-count"} 0
mcm_misc_scrape_failure_total{binary="machine-controller-manager",kind="Machineset-count"} 2
mcm_misc_scrape_failure_total{binary="machine-controller-manager-provider",kind="Machine-count"} 0
`)); err != nil {
		t.Error(err)
	}
	unregistered, err := ScrapeFailures(nil, BinaryMCM, "Machineset-count")
	if err != nil || unregistered == nil {
		t.Errorf("without a registry: %v, %v; want a counter", unregistered, err)
	}
}

func TestConditionValue(t *testing.T) {
	got := []float64{
		ConditionValue(corev1.ConditionTrue), ConditionValue(corev1.ConditionFalse), ConditionValue(corev1.ConditionUnknown),
		ConditionValue(v1alpha1.ConditionTrue), ConditionValue(v1alpha1.ConditionFalse), ConditionValue(v1alpha1.ConditionUnknown),
		ConditionValue(""), ConditionValue("Maybe"),
	}
	if diff := cmp.Diff([]float64{1, 0, 2, 1, 0, 2, 0, 0}, got); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
}
