package promreg

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// The values of the scrape-failure counter's binary label: MCM runs the
// machine controller in its provider binary and the MachineSet and
// MachineDeployment controllers in its own, and dashboards tell them apart
// by it.
const (
	BinaryMCM      = "machine-controller-manager"
	BinaryProvider = "machine-controller-manager-provider"
)

// scrapeFailuresHelp is the help text of every series of the family: a
// metric family has one help text, whichever controller registers it.
const scrapeFailuresHelp = "Scrapes whose collector could not list its objects from the informer cache, by kind."

// ScrapeFailures returns the series of MCM's counter
// mcm_misc_scrape_failure_total{binary, kind}, the scrapes of a
// controller's collector that could not list its objects from the
// informer cache. It is registered on reg, or is the equal one registered
// there (see Register); a nil reg gives a counter no one reads. The series
// exists at zero from here on, so that alerts see it before the first
// failure.
func ScrapeFailures(reg prometheus.Registerer, binary, kind string) (prometheus.Counter, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcm_misc_scrape_failure_total", Help: scrapeFailuresHelp,
		ConstLabels: prometheus.Labels{"binary": binary},
	}, []string{"kind"})
	if reg != nil {
		var err error
		if vec, err = Register(reg, vec); err != nil {
			return nil, fmt.Errorf("registering metric: %w", err)
		}
	}
	return vec.WithLabelValues(kind), nil
}
