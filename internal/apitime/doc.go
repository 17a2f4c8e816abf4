// Package apitime turns a clock's time into a time as the API server
// stores it: metav1.Time in UTC, in whole seconds. The controllers stamp
// conditions, lastOperation and lastUpdateTime with it, so that what they
// write compares equal to what they read back; a time with nanoseconds,
// or in a local zone, would differ from its stored self at every sync and
// make every sync write the status again.
//
// # Usage
//
//	cond.LastTransitionTime = apitime.Of(c.clock.Now())
package apitime
