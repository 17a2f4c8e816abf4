// Package promreg holds what the controllers' metrics have in common, once:
// registration on a caller-given Prometheus registry that lets a component
// be built twice on one registry (a controller restarted after losing
// leadership, two drainers in one process) and continue the same series
// instead of failing (Register); the takeover of a scrape-time collector
// by the latest controller (Replace); MCM's scrape-failure counter
// (ScrapeFailures); and the numbers MCM's gauges give a condition status
// and a flag (ConditionValue, BoolValue).
//
// # Usage
//
//	failures, err := promreg.ScrapeFailures(reg, promreg.BinaryMCM, "Machineset-count")
//	if err != nil {
//		return err
//	}
//	col := &setCollector{sets: lister, scrapeFailures: failures}
//	if err := promreg.Replace(reg, col); err != nil {
//		return err
//	}
//	stale, err := promreg.Register(reg, prometheus.NewCounter(opts))
package promreg
